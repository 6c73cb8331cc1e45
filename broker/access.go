package broker

import (
	"fmt"
	"net/netip"
	"slices"
	"strings"
	"time"

	"github.com/frontdoor-vdi/frontdoor/configs"
)

// Access rules (configs.AccessRule) come after the resource's entitlement, at every launch
// and reconnect: the first rule that matches decides, allow or deny, and a launch no rule
// matches is allowed. An allow rule's factors must all be among the login's
// (LaunchRequest.Factors), or the rule denies the launch. The trace names the rule and why
// it matched; a denial's reason does too, and its Err is ErrAccessDenied.

// accessRule is a compiled access_rules entry.
type accessRule struct {
	name      string
	allow     bool
	who       configs.Entitlement
	resources []string
	zones     []string
	ranges    []netip.Prefix
	days      []time.Weekday
	window    configs.Window
	hours     string
	loc       *time.Location
	factors   []string // required of the login (allow rules)
}

// newAccessRules compiles the rules of cfg; configs.Validate has checked them.
func newAccessRules(cfg *configs.Config) ([]*accessRule, error) {
	var out []*accessRule
	for _, r := range cfg.AccessRules {
		days, err := configs.ParseDays(r.Days)
		if err != nil {
			return nil, fmt.Errorf("access rule %q: %w", r.Name, err)
		}
		w, err := configs.ParseHours(r.Hours)
		if err != nil {
			return nil, fmt.Errorf("access rule %q: %w", r.Name, err)
		}
		loc, err := time.LoadLocation(r.TimeZone)
		if err != nil {
			return nil, fmt.Errorf("access rule %q: time zone: %w", r.Name, err)
		}
		ranges := make([]netip.Prefix, len(r.ClientRanges))
		for i, p := range r.ClientRanges {
			ranges[i] = configs.UnmapRange(p)
		}
		out = append(out, &accessRule{name: r.Name, allow: r.Action == "allow", who: r.Entitlement, resources: r.Resources,
			zones: r.Zones, ranges: ranges, days: days, window: w, hours: r.Hours, loc: loc, factors: r.Factors})
	}
	return out, nil
}

// match says whether the rule covers a launch of resource by u, and why, in a few words.
func (a *accessRule) match(u *user, resource string, req LaunchRequest, now time.Time) (string, bool) {
	var why []string
	switch {
	case a.who.Everyone:
		why = append(why, "everyone")
	case slices.Contains(a.who.Users, u.name):
		why = append(why, "user "+u.name)
	default:
		i := slices.IndexFunc(a.who.UserGroups, func(g string) bool { return u.groups[g] })
		if i < 0 {
			return "", false
		}
		why = append(why, "user group "+a.who.UserGroups[i])
	}
	if len(a.resources) > 0 {
		if !slices.Contains(a.resources, resource) {
			return "", false
		}
		why = append(why, "resource "+resource)
	}
	if len(a.zones) > 0 || len(a.ranges) > 0 {
		client := req.Client.Unmap()
		switch {
		case req.LocationZone != "" && slices.Contains(a.zones, req.LocationZone):
			why = append(why, "zone "+req.LocationZone)
		case client.IsValid() && slices.ContainsFunc(a.ranges, func(p netip.Prefix) bool { return p.Contains(client) }):
			why = append(why, "client "+client.String())
		default:
			return "", false
		}
	}
	if len(a.days) > 0 || !a.window.All {
		t := now.In(a.loc)
		if !a.window.Covers(t, a.days) {
			return "", false
		}
		why = append(why, t.Format("Mon 15:04 ")+a.loc.String())
	}
	return strings.Join(why, ", "), true
}

// missing returns the factors the rule requires that have lacks.
func (a *accessRule) missing(has []string) []string {
	var out []string
	for _, f := range a.factors {
		if !slices.Contains(has, f) {
			out = append(out, f)
		}
	}
	return out
}

// factorList names a login's factors for a reason: "password, totp", or "none".
func factorList(fs []string) string {
	if len(fs) == 0 {
		return "none"
	}
	return strings.Join(fs, ", ")
}

// access applies the access rules to the launch: ok false with the denial when a deny rule
// matches first.
func (l *launch) access(u *user, r *resource) (choice, bool) {
	rules := l.b.m.access
	if len(rules) == 0 {
		return choice{}, true
	}
	now := l.b.now()
	for _, a := range rules {
		why, ok := a.match(u, r.name, l.req, now)
		if !ok {
			continue
		}
		if a.allow {
			if missing := a.missing(l.req.Factors); len(missing) > 0 {
				return choice{deny: ErrAccessDenied, reason: fmt.Sprintf("access rule %q (%s) requires the login factors %s: the login has %s, lacks %s",
					a.name, why, strings.Join(a.factors, ", "), factorList(l.req.Factors), strings.Join(missing, ", "))}, false
			}
			if len(a.factors) > 0 {
				l.tracef("access: rule %s allows it (%s; the login has the factors it requires: %s)", a.name, why, strings.Join(a.factors, ", "))
				return choice{}, true
			}
			l.tracef("access: rule %s allows it (%s)", a.name, why)
			return choice{}, true
		}
		return choice{deny: ErrAccessDenied, reason: fmt.Sprintf("access rule %q denies it (%s)", a.name, why)}, false
	}
	l.tracef("access: no access rule matched: allowed")
	return choice{}, true
}
