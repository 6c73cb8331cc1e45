package broker

import (
	"cmp"
	"fmt"
	"hash/fnv"
	"maps"
	"slices"
	"strings"
	"time"

	"github.com/frontdoor-vdi/frontdoor/configs"
)

// machine is a VDA and its live counters. The fixed fields come from the config; the others
// are guarded by Broker.mu.
type machine struct {
	name, addr, zone string
	group            *group
	max              int
	assignedUser     string
	cfgMaintenance   bool
	tie              uint64 // stable hash of the name; breaks load ties

	// guarded by Broker.mu
	maintenance bool
	down        bool
	cpu, mem    int
	sessions    int // live sessions, reserved launches included
	pending     int // logons in flight: pending sessions
	load        int // cached load index
	inAvail     bool
	reported    bool      // has a stored MachineState
	reportedAt  time.Time // when the agent last reported CPU and memory
	loadZone    string    // the zone of the node it reports to ("": its own)
	loadHidden  bool      // its CPU and memory stay in loadZone: the load index counts sessions and logons
}

// group is a delivery group.
type group struct {
	name              string
	assigned          bool
	prefs             []string
	defaultPrefs      bool // prefs is exactly the default order
	reconnection      string
	secureGateway     bool // guarded by Broker.mu (changed at run time by SetSecureGateway)
	disconnectTimeout configs.Duration
	vertical          bool
	cpu, mem          bool
	maxLogons         int
	buckets           map[string]*bucket // by zone name
	zones             []string           // zone names with machines, sorted
	machines          int
}

// resource is a published application or desktop.
type resource struct {
	cfg    *configs.Resource
	name   string
	app    bool
	groups []*group // by priority
	prios  []int
}

// user is a user account with its resolved home zone.
type user struct {
	name       string
	homeZone   string
	homeSource string // e.g. "account", "user group west-office", "stable hash of ..."
	homeSite   string
	groups     map[string]bool
	assigned   map[string][]*machine // by group name
}

// site is a federation site.
type site struct {
	name      string
	zones     []string
	preferred []string
}

// model is the immutable part of a broker, built from a config.
type model struct {
	zones          map[string]bool
	primary        string
	machines       map[string]*machine
	groups         map[string]*group
	resources      map[string]*resource
	users          map[string]*user
	userGroups     map[string]string // user group -> its home zone ("" for none)
	sites          []*site
	siteByName     map[string]*site
	siteOfZone     map[string]*site
	pendingTimeout configs.Duration
	access         []*accessRule // in config order
}

func tieHash(s string) uint64 {
	h := fnv.New64a()
	h.Write([]byte(s))
	return h.Sum64()
}

// newModel builds the domain model from a defaulted, validated configuration.
func newModel(cfg *configs.Config) (*model, error) {
	m := &model{
		zones:          map[string]bool{},
		machines:       map[string]*machine{},
		groups:         map[string]*group{},
		resources:      map[string]*resource{},
		users:          map[string]*user{},
		userGroups:     map[string]string{},
		siteByName:     map[string]*site{},
		siteOfZone:     map[string]*site{},
		pendingTimeout: cfg.Site.Sessions.PendingTimeout,
	}
	var err error
	if m.access, err = newAccessRules(cfg); err != nil {
		return nil, err
	}
	for _, z := range cfg.Zones {
		m.zones[z.Name] = true
		if z.Primary {
			m.primary = z.Name
		}
	}
	for i := range cfg.Groups {
		gc := &cfg.Groups[i]
		g := &group{
			name:              gc.Name,
			assigned:          gc.Kind == "assigned",
			prefs:             gc.ZonePrefs(),
			reconnection:      gc.SessionReconnection,
			secureGateway:     gc.SecureGateway == nil || *gc.SecureGateway,
			disconnectTimeout: gc.DisconnectTimeout,
			vertical:          gc.Load.Policy == "vertical",
			cpu:               gc.Load.CPU == nil || *gc.Load.CPU,
			mem:               gc.Load.Memory == nil || *gc.Load.Memory,
			buckets:           map[string]*bucket{},
		}
		g.defaultPrefs = slices.Equal(g.prefs, configs.DefaultZonePreferences)
		if g.reconnection == "" {
			g.reconnection = "always"
		}
		if gc.Load.MaxLogons != nil {
			g.maxLogons = *gc.Load.MaxLogons
		}
		if g.disconnectTimeout == 0 {
			g.disconnectTimeout = cfg.Site.Sessions.DisconnectTimeout
		}
		m.groups[g.name] = g
	}
	for _, uc := range cfg.Users {
		m.users[uc.Name] = &user{name: uc.Name, homeZone: uc.HomeZone, homeSite: uc.HomeSite,
			groups: map[string]bool{}, assigned: map[string][]*machine{}}
		if uc.HomeZone != "" {
			m.users[uc.Name].homeSource = "account"
		}
	}
	groupZones := map[string]map[string]string{} // user -> user group -> zone
	for _, ug := range cfg.UserGroups {
		m.userGroups[ug.Name] = ug.HomeZone
		for _, mem := range ug.Members {
			u, ok := m.users[mem]
			if !ok {
				continue
			}
			u.groups[ug.Name] = true
			if ug.HomeZone != "" {
				if groupZones[mem] == nil {
					groupZones[mem] = map[string]string{}
				}
				groupZones[mem][ug.Name] = ug.HomeZone
			}
		}
	}
	for name, gz := range groupZones {
		u := m.users[name]
		if u.homeZone == "" {
			u.homeZone, u.homeSource = groupHomeZone(name, gz)
		}
	}
	for i := range cfg.Machines {
		mc := &cfg.Machines[i]
		g, ok := m.groups[mc.Group]
		if !ok {
			return nil, fmt.Errorf("machine %q: group %q is not defined", mc.Name, mc.Group)
		}
		if !m.zones[mc.Zone] {
			return nil, fmt.Errorf("machine %q: zone %q is not defined", mc.Name, mc.Zone)
		}
		mx := &machine{name: mc.Name, addr: mc.Address.String(), zone: mc.Zone, group: g,
			max: max(mc.MaxSessions, 1), assignedUser: mc.AssignedUser,
			cfgMaintenance: mc.Maintenance, maintenance: mc.Maintenance, tie: tieHash(mc.Name)}
		m.machines[mx.name] = mx
		b := g.buckets[mx.zone]
		if b == nil {
			b = &bucket{zone: mx.zone}
			g.buckets[mx.zone] = b
			g.zones = append(g.zones, mx.zone)
		}
		b.all++
		g.machines++
		if u := m.users[mx.assignedUser]; u != nil {
			u.assigned[g.name] = append(u.assigned[g.name], mx)
		}
	}
	for _, g := range m.groups {
		slices.Sort(g.zones)
	}
	for i := range cfg.Resources {
		rc := &cfg.Resources[i]
		r := &resource{cfg: rc, name: rc.Name, app: rc.Kind == "app"}
		rgs := slices.Clone(rc.Groups)
		slices.SortStableFunc(rgs, func(a, b configs.ResourceGroup) int { return cmp.Compare(a.Prio(), b.Prio()) })
		for _, rg := range rgs {
			g, ok := m.groups[rg.Group]
			if !ok {
				return nil, fmt.Errorf("resource %q: group %q is not defined", rc.Name, rg.Group)
			}
			r.groups = append(r.groups, g)
			r.prios = append(r.prios, rg.Prio())
		}
		m.resources[r.name] = r
	}
	for _, sc := range cfg.Sites {
		s := &site{name: sc.Name, zones: sc.Zones, preferred: sc.PreferredSites}
		m.sites = append(m.sites, s)
		m.siteByName[s.name] = s
		for _, z := range sc.Zones {
			m.siteOfZone[z] = s
		}
	}
	return m, nil
}

// groupHomeZone picks a user's home zone from the home zones of their user groups: the one
// zone if they agree, else one chosen by a hash of the user and the sorted zone set — stable
// across calls and restarts, and re-evaluated when the set changes (membership changes).
func groupHomeZone(userName string, byGroup map[string]string) (zone, source string) {
	zoneSet := map[string][]string{}
	for g, z := range byGroup {
		zoneSet[z] = append(zoneSet[z], g)
	}
	zones := make([]string, 0, len(zoneSet))
	for z, gs := range zoneSet {
		slices.Sort(gs)
		zones = append(zones, z)
	}
	slices.Sort(zones)
	if len(zones) == 1 {
		z := zones[0]
		return z, "user group " + strings.Join(zoneSet[z], ", ")
	}
	h := tieHash(userName + "|" + strings.Join(zones, ","))
	z := zones[h%uint64(len(zones))]
	parts := make([]string, len(zones))
	for i, zz := range zones {
		parts[i] = fmt.Sprintf("%s (%s)", zz, strings.Join(zoneSet[zz], ", "))
	}
	return z, fmt.Sprintf("user group %s, chosen by stable hash among %s", strings.Join(zoneSet[z], ", "), strings.Join(parts, ", "))
}

// withGroups returns the user name logged in as, also a member of the user groups the login
// vouches for (LaunchRequest.Groups): u as the configuration has it (nil when it does not
// list name) with those of groups that are configured user groups. Its home zone is the
// account's own, else one from the home zones of all its groups, as for a listed user. It
// returns nil when name is not listed and none of groups is a user group of the site.
func (m *model) withGroups(u *user, name string, groups []string) *user {
	extra := map[string]bool{}
	for _, g := range groups {
		if _, ok := m.userGroups[g]; ok && (u == nil || !u.groups[g]) {
			extra[g] = true
		}
	}
	if len(extra) == 0 {
		return u
	}
	nu := &user{name: name, groups: map[string]bool{}, assigned: map[string][]*machine{}}
	if u != nil {
		*nu = *u
		nu.groups = maps.Clone(u.groups)
	}
	for g := range extra {
		nu.groups[g] = true
	}
	if nu.homeSource == "account" {
		return nu
	}
	byGroup := map[string]string{}
	for g := range nu.groups {
		if z := m.userGroups[g]; z != "" {
			byGroup[g] = z
		}
	}
	nu.homeZone, nu.homeSource = "", ""
	if len(byGroup) > 0 {
		nu.homeZone, nu.homeSource = groupHomeZone(name, byGroup)
	}
	return nu
}

// entitled reports whether u may launch r.
func (r *resource) entitled(u *user) bool {
	e := r.cfg.Entitled
	if e.Everyone || slices.Contains(e.Users, u.name) {
		return true
	}
	for _, g := range e.UserGroups {
		if u.groups[g] {
			return true
		}
	}
	return false
}
