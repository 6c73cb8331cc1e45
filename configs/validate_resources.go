package configs

import (
	"fmt"
	"time"
)

func (k *checker) validateUsers(zones map[string]int) (users, ugroups map[string]int) {
	c := k.c
	names := make([]string, len(c.Users))
	for i, u := range c.Users {
		names[i] = u.Name
	}
	users = k.names("user", "users", names)
	sites := map[string]int{}
	for i, s := range c.Sites {
		sites[s.Name] = i
	}
	subjects := map[string]string{} // oidc_subject -> user
	for i, u := range c.Users {
		p := fmt.Sprintf("users[%d]", i)
		if u.HomeZone != "" {
			k.ref(p+".home_zone", "zone", u.HomeZone, zones)
		}
		if u.HomeSite != "" {
			k.ref(p+".home_site", "site", u.HomeSite, sites)
		}
		switch {
		case u.PasswordHash == PasswordPlaceholder:
			k.errf(p+".password_hash", "password_hash is the reference's placeholder: make a hash with `frontdoor hash-password`")
		case u.PasswordHash != "":
			k.passwordCost(p+".password_hash", u.PasswordHash)
		}
		switch {
		case u.OIDCSubject == "":
		case !c.Site.Auth.OIDC.Enabled():
			k.errf(p+".oidc_subject", "no single sign-on can reach it: set site.auth.oidc")
		case subjects[u.OIDCSubject] != "":
			k.errf(p+".oidc_subject", "%q is also %s's: a subject is one identity", u.OIDCSubject, subjects[u.OIDCSubject])
		default:
			subjects[u.OIDCSubject] = u.Name
		}
	}
	names = make([]string, len(c.UserGroups))
	for i, g := range c.UserGroups {
		names[i] = g.Name
	}
	ugroups = k.names("user group", "user_groups", names)
	for i, g := range c.UserGroups {
		p := fmt.Sprintf("user_groups[%d]", i)
		if g.HomeZone != "" {
			k.ref(p+".home_zone", "zone", g.HomeZone, zones)
		}
		for j, m := range g.Members {
			k.ref(fmt.Sprintf("%s.members[%d]", p, j), "user", m, users)
		}
	}
	k.validateSites(zones, sites)
	return users, ugroups
}

func (k *checker) validateSites(zones, sites map[string]int) {
	c := k.c
	names := make([]string, len(c.Sites))
	for i, s := range c.Sites {
		names[i] = s.Name
	}
	k.names("site", "sites", names)
	owner := map[string]string{}
	for i, s := range c.Sites {
		p := fmt.Sprintf("sites[%d]", i)
		if len(s.Zones) == 0 {
			k.errf(p+".zones", "site %q has no zones", s.Name)
		}
		for j, z := range s.Zones {
			zp := fmt.Sprintf("%s.zones[%d]", p, j)
			k.ref(zp, "zone", z, zones)
			if o, dup := owner[z]; dup {
				k.errf(zp, "zone %q is in two sites: %q and %q", z, o, s.Name)
			}
			owner[z] = s.Name
		}
		for j, ps := range s.PreferredSites {
			pp := fmt.Sprintf("%s.preferred_sites[%d]", p, j)
			k.ref(pp, "site", ps, sites)
			if ps == s.Name {
				k.errf(pp, "site %q lists itself as a preferred site", s.Name)
			}
		}
	}
}

func (k *checker) validateGroups() map[string]int {
	c := k.c
	names := make([]string, len(c.Groups))
	for i, g := range c.Groups {
		names[i] = g.Name
	}
	groups := k.names("group", "groups", names)
	for i, g := range c.Groups {
		p := fmt.Sprintf("groups[%d]", i)
		k.oneOf(p+".kind", g.Kind, "shared", "assigned")
		seen := map[string]bool{}
		for j, zp := range g.ZonePrefs() {
			pp := fmt.Sprintf("%s.zone_preferences[%d]", p, j)
			k.oneOf(pp, zp, ApplicationHome, UserHome, UserHomeOnly, UserLocation)
			if seen[zp] {
				k.errf(pp, "%s is listed twice", zp)
			}
			seen[zp] = true
		}
		if seen[UserHome] && seen[UserHomeOnly] {
			k.errf(p+".zone_preferences", "UserHome and UserHomeOnly are both listed; only one may be")
		}
		k.oneOf(p+".session_reconnection", g.SessionReconnection, "always", "disconnected_only", "same_endpoint_only")
		k.oneOf(p+".load.policy", g.Load.Policy, "horizontal", "vertical")
		if g.Load.MaxLogons != nil && *g.Load.MaxLogons < 0 {
			k.errf(p+".load.max_logons", "max_logons must not be negative")
		}
		k.validateDesktop(p+".desktop", g.Desktop, nil)
	}
	return groups
}

func (k *checker) validateMachines(zones, groups, users map[string]int) {
	c := k.c
	names := make([]string, len(c.Machines))
	for i, m := range c.Machines {
		names[i] = m.Name
	}
	k.names("machine", "machines", names)
	for i, m := range c.Machines {
		p := fmt.Sprintf("machines[%d]", i)
		k.addr(p+".address", m.Address)
		k.ref(p+".zone", "zone", m.Zone, zones)
		k.ref(p+".group", "group", m.Group, groups)
		seen := map[string]bool{}
		for j, dp := range m.DisplayPorts {
			if _, _, err := ParsePortSpec(dp); err != nil {
				k.errf(fmt.Sprintf("%s.display_ports[%d]", p, j), "%v", err)
			} else if seen[dp] {
				k.errf(fmt.Sprintf("%s.display_ports[%d]", p, j), "%s is listed twice", dp)
			}
			seen[dp] = true
		}
		if m.MaxSessions < 1 {
			k.errf(p+".max_sessions", "max_sessions must be at least 1")
		}
		if m.Desktop != nil {
			k.validateDesktop(p+".desktop", *m.Desktop, m.DisplayPorts)
		} else if gi, ok := groups[m.Group]; ok {
			if d := c.Groups[gi].Desktop; d.Channel != "" && firstTCP(m.DisplayPorts) != "" {
				if n, proto, err := ParsePortSpec(d.Channel); err == nil && !hasPort(m.DisplayPorts, n, proto) {
					k.errf(p+".display_ports", "the group's desktop rides %s, which is not one of these", d.Channel)
				}
			}
		}
		gi, ok := groups[m.Group]
		if m.AssignedUser != "" {
			k.ref(p+".assigned_user", "user", m.AssignedUser, users)
			if ok && c.Groups[gi].Kind != "assigned" {
				k.errf(p+".assigned_user", "machine %q has an assigned user but group %q is shared", m.Name, m.Group)
			}
		}
	}
}

func (k *checker) validateResources(zones, groups, users, ugroups map[string]int) {
	c := k.c
	names := make([]string, len(c.Resources))
	for i, r := range c.Resources {
		names[i] = r.Name
	}
	k.names("resource", "resources", names)
	for i, r := range c.Resources {
		p := fmt.Sprintf("resources[%d]", i)
		k.oneOf(p+".kind", r.Kind, "app", "desktop")
		if len(r.Groups) == 0 {
			k.errf(p+".groups", "resource %q is published from no group", r.Name)
		}
		seen := map[string]bool{}
		for j, rg := range r.Groups {
			gp := fmt.Sprintf("%s.groups[%d]", p, j)
			k.ref(gp+".group", "group", rg.Group, groups)
			if seen[rg.Group] {
				k.errf(gp+".group", "group %q is listed twice", rg.Group)
			}
			seen[rg.Group] = true
			if rg.Prio() < 0 {
				k.errf(gp+".priority", "priority must not be negative")
			}
			if gi, ok := groups[rg.Group]; ok && c.Groups[gi].Kind == "assigned" && r.Kind == "app" {
				k.errf(gp+".group", "application %q is published from assigned group %q (assigned groups hold private desktops)", r.Name, rg.Group)
			}
		}
		if r.HomeZone != "" {
			if r.Kind != "app" {
				k.errf(p+".home_zone", "home_zone is for applications; %q is a desktop", r.Name)
			}
			k.ref(p+".home_zone", "zone", r.HomeZone, zones)
		}
		if r.HomeZoneOnly && r.HomeZone == "" {
			k.errf(p+".home_zone_only", "home_zone_only needs a home_zone")
		}
		if r.IgnoreUserHomeZone {
			if r.HomeZone != "" {
				k.errf(p+".ignore_user_home_zone", "ignore_user_home_zone is only valid for an application without a home zone, and %q has home zone %q", r.Name, r.HomeZone)
			}
			if r.Kind != "app" {
				k.errf(p+".ignore_user_home_zone", "ignore_user_home_zone is for applications; %q is a desktop", r.Name)
			}
		}
		k.percent(p+".load_threshold", r.LoadThreshold)
		k.oneOf(p+".load_distribution", r.LoadDistribution, "", "load_index", "session_count")
		if r.UsePreferredSites && !r.Global {
			k.errf(p+".use_preferred_sites", "use_preferred_sites needs global: true")
		}
		e := r.Entitled
		if !e.Everyone && len(e.Users) == 0 && len(e.UserGroups) == 0 {
			k.errf(p+".entitled", "resource %q entitles nobody (set users, user_groups or everyone: true)", r.Name)
		}
		for j, u := range e.Users {
			k.ref(fmt.Sprintf("%s.entitled.users[%d]", p, j), "user", u, users)
		}
		for j, g := range e.UserGroups {
			k.ref(fmt.Sprintf("%s.entitled.user_groups[%d]", p, j), "user group", g, ugroups)
		}
	}
}

func (k *checker) validateAccessRules(zones, users, ugroups map[string]int) {
	c := k.c
	names := make([]string, len(c.AccessRules))
	for i, r := range c.AccessRules {
		names[i] = r.Name
	}
	k.names("access rule", "access_rules", names)
	resources := map[string]int{}
	for i, r := range c.Resources {
		resources[r.Name] = i
	}
	for i, r := range c.AccessRules {
		p := fmt.Sprintf("access_rules[%d]", i)
		k.oneOf(p+".action", r.Action, "allow", "deny")
		if !r.Everyone && len(r.Users) == 0 && len(r.UserGroups) == 0 {
			k.errf(p, "access rule %q is for nobody: set everyone, users or user_groups", r.Name)
		}
		for j, u := range r.Users {
			k.ref(fmt.Sprintf("%s.users[%d]", p, j), "user", u, users)
		}
		for j, g := range r.UserGroups {
			k.ref(fmt.Sprintf("%s.user_groups[%d]", p, j), "user group", g, ugroups)
		}
		for j, res := range r.Resources {
			k.ref(fmt.Sprintf("%s.resources[%d]", p, j), "resource", res, resources)
		}
		for j, z := range r.Zones {
			k.ref(fmt.Sprintf("%s.zones[%d]", p, j), "zone", z, zones)
		}
		for j, cr := range r.ClientRanges {
			k.cidr(fmt.Sprintf("%s.client_ranges[%d]", p, j), cr)
		}
		if _, err := ParseDays(r.Days); err != nil {
			k.errf(p+".days", "%v", err)
		}
		if _, err := ParseHours(r.Hours); err != nil {
			k.errf(p+".hours", "%v", err)
		}
		if _, err := time.LoadLocation(r.TimeZone); err != nil {
			k.errf(p+".time_zone", "%q is not a time zone (an IANA name such as Europe/Berlin): %v", r.TimeZone, err)
		}
		k.factors(p, r)
	}
}
