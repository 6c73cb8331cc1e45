package configs

import (
	"fmt"
	"sort"
	"strings"
	"text/tabwriter"
)

// Summary describes the configuration for `frontdoor config check`: zones, ranges, nodes,
// gateways, machines per zone and group, groups, resources, sites, users, RADIUS and GSLB names.
func (c *Config) Summary() string {
	var b strings.Builder
	w := tabwriter.NewWriter(&b, 0, 0, 2, ' ', 0)
	line := func(format string, args ...any) { fmt.Fprintf(w, format+"\n", args...) }
	s := c.Site
	name := c.File
	if name == "" {
		name = "config"
	}
	line("%s: site %q, store %s, secure gateway %s by default", name, s.Name, s.Store.Backend, onOff(*s.SecureGateway))

	line("zones (%d):", len(c.Zones))
	for _, z := range c.Zones {
		role := "satellite"
		if z.Primary {
			role = "primary"
		}
		line("  %s\t%s\tranges %s", z.Name, role, listOr(strs(z.Ranges), "none"))
	}
	if s.DefaultZone != "" {
		line("  clients in no range: zone %s", s.DefaultZone)
	}

	if len(c.Nodes) > 0 {
		line("nodes (%d):", len(c.Nodes))
		for _, n := range c.Nodes {
			ls := make([]string, len(n.Listeners))
			for i, l := range n.Listeners {
				ls[i] = fmt.Sprintf("%s %s/%s", l.Kind, l.Address, strings.Join(l.Protocols, "+"))
			}
			line("  %s\tzone %s\telection %s\t%s", n.Name, n.Zone, n.ElectionPreference, listOr(ls, "no listeners"))
		}
	}

	if len(c.Gateways) > 0 {
		line("gateways (%d):", len(c.Gateways))
		for _, g := range c.Gateways {
			ps := make([]string, len(g.Ports))
			for i, p := range g.Ports {
				ps[i] = fmt.Sprintf("%d/%s %s", p.Port, p.Protocol, p.Check.Kind)
				if p.Optional {
					ps[i] += " (optional)"
				}
			}
			if g.QUICPort != 0 {
				ps = append(ps, fmt.Sprintf("%d/udp quic", g.QUICPort))
			}
			m := g.Monitor
			line("  %s\tzone %s\t%s\tports %s\t%s-of, every %s, timeout %s, rise %d, fall %d",
				g.Name, g.Zone, g.Address, strings.Join(ps, ", "), m.Mode, m.Interval, m.Timeout, m.Rise, m.Fall)
		}
	}

	if len(c.Machines) > 0 {
		line("machines (%d) by zone and group:", len(c.Machines))
		type key struct{ zone, group string }
		by := map[key][]string{}
		var keys []key
		for _, m := range c.Machines {
			k := key{m.Zone, m.Group}
			if _, ok := by[k]; !ok {
				keys = append(keys, k)
			}
			n := m.Name
			var notes []string
			if m.MaxSessions != 1 {
				notes = append(notes, fmt.Sprintf("max %d", m.MaxSessions))
			}
			if m.Maintenance {
				notes = append(notes, "maintenance")
			}
			if m.AssignedUser != "" {
				notes = append(notes, "assigned to "+m.AssignedUser)
			}
			if len(notes) > 0 {
				n += " (" + strings.Join(notes, ", ") + ")"
			}
			by[k] = append(by[k], n)
		}
		zoneOrder := c.zoneIndex()
		sort.SliceStable(keys, func(i, j int) bool {
			if keys[i].zone != keys[j].zone {
				return zoneOrder[keys[i].zone] < zoneOrder[keys[j].zone]
			}
			return keys[i].group < keys[j].group
		})
		for _, k := range keys {
			line("  zone %s\tgroup %s\t%s", k.zone, k.group, strings.Join(by[k], ", "))
		}
	}

	if len(c.Groups) > 0 {
		line("groups (%d):", len(c.Groups))
		for _, g := range c.Groups {
			zp := "off (empty)"
			if g.Kind == "assigned" {
				zp = "n/a (assigned)"
			} else if l := g.ZonePrefs(); len(l) > 0 {
				zp = strings.Join(l, " > ")
			}
			line("  %s\t%s\tzone_preferences %s\treconnection %s\tsecure_gateway %s\tload %s\tdesktop %s",
				g.Name, g.Kind, zp, g.SessionReconnection, onOff(*g.SecureGateway), g.Load.Policy, g.Desktop)
		}
	}

	if len(c.Resources) > 0 {
		line("resources (%d):", len(c.Resources))
		for _, r := range c.Resources {
			gs := make([]ResourceGroup, len(r.Groups))
			copy(gs, r.Groups)
			sort.SliceStable(gs, func(i, j int) bool { return gs[i].Prio() < gs[j].Prio() })
			names := make([]string, len(gs))
			for i, g := range gs {
				names[i] = fmt.Sprintf("%s (%d)", g.Group, g.Prio())
			}
			home := "no home zone"
			if r.HomeZone != "" {
				home = "home zone " + r.HomeZone
				if r.HomeZoneOnly {
					home += " only"
				}
			}
			var opts []string
			if r.IgnoreUserHomeZone {
				opts = append(opts, "ignores user home zone")
			}
			if r.Global {
				g := "global"
				if r.UsePreferredSites {
					g += fmt.Sprintf(", preferred sites (threshold %d%%, %s)", *r.LoadThreshold, orWord(r.LoadDistribution, "random"))
				}
				opts = append(opts, g)
			}
			line("  %s\t%s\t%s\tgroups %s\tentitled %s%s", r.Name, r.Kind, home, strings.Join(names, ", "),
				entitled(r.Entitled), prefixed("; ", strings.Join(opts, "; ")))
		}
	}

	if len(c.Sites) > 0 {
		line("federation sites (%d):", len(c.Sites))
		for _, s := range c.Sites {
			line("  %s\tzones %s\tpreferred sites %s", s.Name, strings.Join(s.Zones, ", "), listOr(s.PreferredSites, "none"))
		}
	}

	if len(c.Users) > 0 {
		line("users (%d):", len(c.Users))
		for _, u := range c.Users {
			var notes []string
			switch {
			case u.Admin:
				notes = append(notes, "admin")
			case u.Monitor:
				notes = append(notes, "monitor (read-only)")
			}
			if u.HomeSite != "" {
				notes = append(notes, "home site "+u.HomeSite)
			}
			if n := c.Site.Auth.RADIUS.userNote(c, u); n != "" {
				notes = append(notes, n)
			}
			line("  %s\t%s%s", u.Name, c.homeZoneText(u), prefixed("; ", strings.Join(notes, "; ")))
		}
	}
	if len(c.UserGroups) > 0 {
		line("user groups (%d):", len(c.UserGroups))
		for _, g := range c.UserGroups {
			line("  %s\thome zone %s\tmembers %s", g.Name, orWord(g.HomeZone, "none"), listOr(g.Members, "none"))
		}
	}
	if r := c.Site.Auth.RADIUS; r != nil {
		line("%s", r.summary())
	}

	if len(c.GSLB.Domains)+len(c.GSLB.Names) > 0 {
		line("gslb:")
		for _, d := range c.GSLB.Domains {
			line("  domain %s\tns %s\t%d static records", d.Name, strings.Join(d.NS, ", "), len(d.Records))
		}
		for _, n := range c.GSLB.Names {
			sites := make([]string, len(n.Sites))
			for i, s := range n.Sites {
				sites[i] = fmt.Sprintf("%s [%s]", s.Zone, strings.Join(s.Gateways, " "))
				if len(s.Fallback) > 0 {
					sites[i] += " then " + strings.Join(s.Fallback, ", ")
				}
			}
			line("  name %s\t%s, ttl %s, %s, initially %s\tsites %s", n.Name, n.Policy, n.TTL, n.WhenNoneHealthy, n.Initial, strings.Join(sites, "; "))
		}
	}
	if len(c.Proxy.Listeners) > 0 {
		line("proxy (%d listeners, %d pools):", len(c.Proxy.Listeners), len(c.Proxy.Pools))
		for _, l := range c.Proxy.Listeners {
			var routes []string
			for _, r := range l.Routes {
				routes = append(routes, strings.Join(r.ServerNames, ",")+" → "+r.Pool)
			}
			line("  %s\tnode %s\t%s %s\tpool %s%s", l.Name, l.Node, l.Protocol, l.Address, orWord(l.Pool, "-"), prefixed("; routes ", strings.Join(routes, "; ")))
		}
		for _, p := range c.Proxy.Pools {
			var bs []string
			for _, be := range p.Backends {
				if be.Gateway != "" {
					bs = append(bs, fmt.Sprintf("%s:%d", be.Gateway, be.Port))
				} else {
					bs = append(bs, be.Address.String())
				}
			}
			aff := ""
			if p.Affinity {
				aff = ", affinity"
			}
			line("  pool %s\t%s%s\t%s", p.Name, p.Balance, aff, strings.Join(bs, ", "))
		}
	}
	w.Flush()
	return b.String()
}

// homeZoneText says where a user's home zone comes from, as config check shows it.
func (c *Config) homeZoneText(u User) string {
	if u.HomeZone != "" {
		return "home zone " + u.HomeZone + " (account)"
	}
	var from []string
	zones := map[string]bool{}
	for _, g := range c.UserGroups {
		if g.HomeZone == "" {
			continue
		}
		for _, m := range g.Members {
			if m == u.Name {
				from = append(from, g.Name+"="+g.HomeZone)
				zones[g.HomeZone] = true
			}
		}
	}
	switch {
	case len(from) == 0:
		return "no home zone"
	case len(zones) == 1:
		for z := range zones {
			return "home zone " + z + " (group " + strings.Join(from, ", ") + ")"
		}
	}
	return "home zone from several groups: " + strings.Join(from, ", ") + " (the broker picks one, stably)"
}

func (c *Config) zoneIndex() map[string]int {
	m := make(map[string]int, len(c.Zones))
	for i, z := range c.Zones {
		m[z.Name] = i
	}
	return m
}

func entitled(e Entitlement) string {
	if e.Everyone {
		return "everyone"
	}
	var p []string
	if len(e.Users) > 0 {
		p = append(p, "users "+strings.Join(e.Users, ", "))
	}
	if len(e.UserGroups) > 0 {
		p = append(p, "groups "+strings.Join(e.UserGroups, ", "))
	}
	return strings.Join(p, "; ")
}

// String sums a desktop up: "vnc at unix:/run/vnc.sock on 8443/tcp", "builtin on 8443/tcp".
func (d Desktop) String() string {
	if d.Server == "" {
		return d.Protocol + " on " + d.Channel
	}
	return d.Protocol + " at " + d.Server + " on " + d.Channel
}

func onOff(b bool) string {
	if b {
		return "on"
	}
	return "off"
}

// strs formats each of l.
func strs[T fmt.Stringer](l []T) []string {
	s := make([]string, len(l))
	for i, v := range l {
		s[i] = v.String()
	}
	return s
}

func listOr(l []string, none string) string {
	if len(l) == 0 {
		return none
	}
	return strings.Join(l, ", ")
}

func orWord(s, none string) string {
	if s == "" {
		return none
	}
	return s
}

func prefixed(p, s string) string {
	if s == "" {
		return ""
	}
	return p + s
}
