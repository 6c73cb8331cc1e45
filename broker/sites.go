package broker

import (
	"cmp"
	"fmt"
	"slices"
	"strconv"
	"strings"
)

// siteLoad is the load of a federation site for a resource, in percent: the mean load index of
// the site's machines of the resource's groups (load_index), or their sessions over their
// capacity (session_count). Machines in maintenance or down count as full. ok is false when the
// site has no such machine.
func (l *launch) siteLoad(s *site, groups []*group, policy string) (pct int, ok bool) {
	var sumLoad, n, sessions, capacity int
	for _, g := range groups {
		for _, z := range s.zones {
			if b := g.buckets[z]; b != nil {
				sumLoad += b.sumLoad
				n += b.all
				sessions += b.sessions
				capacity += b.capacity
			}
		}
	}
	if n == 0 {
		return 100, false
	}
	if policy == "session_count" {
		return sessions * 100 / capacity, true
	}
	return sumLoad / n / 100, true
}

type siteStep struct {
	s   *site
	why string
}

// siteOrder is the Horizon Cloud Pod Architecture search order (seed 002): the connecting
// site, the user's home site, the connecting site's preferred sites (when the resource uses
// them) skipping those above the load threshold, then the remaining sites by the load
// distribution policy or at random.
func (l *launch) siteOrder(groups []*group) []siteStep {
	m, rc := l.b.m, l.r.cfg
	policy := rc.LoadDistribution
	threshold := 98
	if rc.LoadThreshold != nil {
		threshold = *rc.LoadThreshold
	}
	var order []siteStep
	in := map[*site]bool{}
	add := func(s *site, why string) {
		if s != nil && !in[s] {
			in[s] = true
			order = append(order, siteStep{s, why})
		}
	}
	conn := m.siteByName[l.req.Site]
	switch {
	case l.req.Site != "" && conn == nil:
		l.tracef("site search: connecting site %q is not a site of the federation: ignored", l.req.Site)
	case conn == nil && l.req.LocationZone != "":
		conn = m.siteOfZone[l.req.LocationZone]
	}
	add(conn, "connecting site")
	add(m.siteByName[l.u.homeSite], "home site")
	switch {
	case !rc.UsePreferredSites:
		l.tracef("site search: use_preferred_sites off: connecting site, home site, then the others")
	case conn == nil:
		l.tracef("site search: no connecting site, so no preferred sites")
	default:
		for i, name := range conn.preferred {
			ps := m.siteByName[name]
			if ps == nil || in[ps] {
				continue
			}
			if policy == "" {
				add(ps, fmt.Sprintf("preferred site %d", i+1))
				continue
			}
			load, ok := l.siteLoad(ps, groups, policy)
			if ok && load > threshold {
				l.tracef("site search: preferred site %s skipped: load %d%% (%s) is above load_threshold %d%%", ps.name, load, policy, threshold)
				continue
			}
			add(ps, fmt.Sprintf("preferred site %d, load %d%%", i+1, load))
		}
		if policy == "" {
			l.tracef("site search: load_threshold needs load_distribution load_index or session_count: not applied")
		}
	}
	var rest []*site
	for _, s := range m.sites {
		if !in[s] {
			rest = append(rest, s)
		}
	}
	if policy != "" {
		loads := map[*site]int{}
		for _, s := range rest {
			loads[s], _ = l.siteLoad(s, groups, policy)
		}
		slices.SortStableFunc(rest, func(a, b *site) int { return cmp.Compare(loads[a], loads[b]) })
		for _, s := range rest {
			add(s, fmt.Sprintf("remaining, load %d%% (%s)", loads[s], policy))
		}
	} else {
		// "At random": a shuffle keyed by the user, the site and the injected clock, so a
		// decision can be replayed.
		seed := l.u.name + "|" + strconv.FormatInt(l.b.now().UnixNano(), 10) + "|"
		slices.SortStableFunc(rest, func(a, b *site) int { return cmp.Compare(tieHash(seed+a.name), tieHash(seed+b.name)) })
		for _, s := range rest {
			add(s, "remaining, random order")
		}
	}
	parts := make([]string, len(order))
	for i, st := range order {
		parts[i] = fmt.Sprintf("%s (%s)", st.s.name, st.why)
	}
	l.tracef("site search order: %s", strings.Join(parts, ", "))
	return order
}

// global serves a global resource: reconnect anywhere, else search the sites in order.
func (l *launch) global(groups []*group) choice {
	if len(groups) == 0 {
		return choice{deny: ErrNoMachines, reason: fmt.Sprintf("resource %q has no machines for user %q", l.r.name, l.u.name)}
	}
	l.tracef("global resource: site search instead of zone preference")
	m := l.b.m
	for _, g := range groups {
		label := "group " + g.name
		if s := l.findSession(g, label, "", anyLive); s != nil {
			c := l.reconnect(g, s, 0, label, prefZone{})
			if st := m.siteOfZone[s.Zone]; st != nil {
				c.site = st.name
			}
			return c
		}
	}
	total := 0
	for _, g := range groups {
		total += g.machines
	}
	if total == 0 {
		return choice{deny: ErrNoMachines, reason: fmt.Sprintf("resource %q has no machines", l.r.name)}
	}
	for _, st := range l.siteOrder(groups) {
		for _, g := range groups {
			label := fmt.Sprintf("site %s, group %s", st.s.name, g.name)
			desc := "zones " + strings.Join(st.s.zones, ", ")
			if mx := l.findMachineIn(g, label, "", desc, st.s.zones); mx != nil {
				return choice{m: mx, g: g, label: label, site: st.s.name}
			}
		}
	}
	return choice{deny: ErrNoCapacity, reason: fmt.Sprintf("no session to reconnect and no site has an available machine for %q", l.r.name)}
}
