package broker

import (
	"context"
	"errors"
	"fmt"
	"net/netip"
	"strings"
)

// LaunchRequest asks for a session of a resource.
type LaunchRequest struct {
	// User is the authenticated user name.
	User string
	// Resource is the resource to launch.
	Resource string
	// LocationZone is the user-location zone (the zonemap of the client IP); "" when unknown.
	LocationZone string
	// Endpoint identifies the client device; it decides same_endpoint_only reconnection and
	// whether step 4 steals a connected session.
	Endpoint string
	// Site is the connecting federation site for global resources; "" means the site of
	// LocationZone.
	Site string
	// Client is the client's address, for access rules' client ranges; the zero Addr is in
	// none of them.
	Client netip.Addr
	// Factors are the factors the user logged in with (configs.FactorPassword, ...), for
	// access rules' factors; none (nil) satisfies no rule that requires one.
	Factors []string
	// Groups are user groups the login vouches for beyond the configuration's memberships:
	// an identity provider's groups claim, mapped to the site's user group names. Those that
	// are user groups of the site count as the user's for entitlements, access rules and the
	// home zone; a user the configuration does not list is a user of the site for the launch
	// when at least one of them is. Default: none.
	Groups []string
}

// Outcome is what a launch decided.
type Outcome string

// Outcomes.
const (
	OutcomeNew       Outcome = "new"
	OutcomeReconnect Outcome = "reconnect"
	OutcomeDenied    Outcome = "denied"
)

// Preferred-zone sources (Decision.PreferredZoneSource).
const (
	SourceApplicationHome = "ApplicationHome"
	SourceUserHome        = "UserHome"
	SourceUserLocation    = "UserLocation"
)

// Decision is the answer to a launch, with the trace that explains it.
type Decision struct {
	// Outcome is new, reconnect or denied.
	Outcome Outcome `json:"outcome"`
	// Step is the launch step that matched, 1..5, or 0 without a preferred zone (and for
	// assigned desktops and global resources).
	Step int `json:"step"`
	// StepLabel is the step and the delivery group's rank in it, as the trace writes it:
	// "3b" is step 3 in the resource's second group. "" when Step is 0.
	StepLabel string `json:"step_label,omitempty"`
	// PreferredZone is the preferred zone of the group that matched (of the first group
	// that has one when denied); "" when none.
	PreferredZone string `json:"preferred_zone"`
	// PreferredZoneSource is ApplicationHome, UserHome, UserLocation or "".
	PreferredZoneSource string `json:"preferred_zone_source"`
	// Group is the delivery group of the machine.
	Group string `json:"group"`
	// Machine is the chosen machine.
	Machine string `json:"machine"`
	// Address is the machine's address.
	Address string `json:"address"`
	// Zone is the machine's zone.
	Zone string `json:"zone"`
	// Site is the federation site of the machine (global resources only).
	Site string `json:"site,omitempty"`
	// Session is the session id ("" for a new session in a dry run).
	Session string `json:"session"`
	// Mode is "gateway" (tunnel through a secure gateway) or "direct".
	Mode string `json:"mode"`
	// Stolen is set when step 4 moves a connected session from another endpoint.
	Stolen bool `json:"stolen,omitempty"`
	// PreviousEndpoint is the endpoint a reconnected session had when it differs from the
	// launch's: a steal, or a disconnected session resumed elsewhere. Its tickets are then
	// revoked.
	PreviousEndpoint string `json:"previous_endpoint,omitempty"`
	// Reason says why a launch was denied.
	Reason string `json:"reason"`
	// Err is the denial sentinel (ErrNotEntitled, ErrNoCapacity, ...) for errors.Is.
	Err error `json:"-"`
	// Trace explains the decision line by line.
	Trace []string `json:"trace"`
}

// choice is the result of a decision before it is committed.
type choice struct {
	m       *machine
	s       *Session // existing session for a reconnect
	g       *group
	step    int
	label   string
	pz, src string
	site    string
	steal   bool
	deny    error
	reason  string
}

// launch holds one decision in progress. All of it runs under Broker.mu.
type launch struct {
	b       *Broker
	req     LaunchRequest
	u       *user
	r       *resource
	exclude map[*machine]bool
	trace   []string
}

// loadNote says which load a machine's index used when it is not simply its own zone's:
// sessions and logons only (its CPU and memory stay in the zone it reports in), or load
// shared from another zone. The caller holds mu.
func (b *Broker) loadNote(m *machine) string {
	lz := m.loadZone
	if lz == "" {
		lz = m.zone
	}
	switch {
	case b.zone == "" || lz == b.zone || !m.reported:
		return ""
	case m.loadHidden:
		return ", from sessions and logons only: its CPU and memory stay in zone " + lz + " (share_load_across_zones is off)"
	default:
		return ", with CPU and memory shared from zone " + lz + " (share_load_across_zones)"
	}
}

func (l *launch) tracef(format string, args ...any) {
	l.trace = append(l.trace, fmt.Sprintf(format, args...))
}

// Decide returns the decision a launch would take now, without reserving or creating
// anything (a dry run; a new session has no id).
func (b *Broker) Decide(req LaunchRequest) Decision {
	b.mu.Lock()
	defer b.mu.Unlock()
	l := &launch{b: b, req: req}
	c := l.decide()
	d := l.decision(c)
	return d
}

// Launch decides where req goes and commits it: a new session is created on the chosen
// machine in one atomic store step (never over max_sessions); a reconnect updates the
// session's endpoint. A denial is a Decision with Outcome Denied and a nil error; the error is
// for store failures only.
func (b *Broker) Launch(ctx context.Context, req LaunchRequest) (Decision, error) {
	exclude := map[*machine]bool{}
	var notes []string
	for attempt := 0; ; attempt++ {
		b.mu.Lock()
		l := &launch{b: b, req: req, exclude: exclude, trace: notes}
		c := l.decide()
		d := l.decision(c)
		if d.Outcome == OutcomeDenied {
			b.mu.Unlock()
			return d, nil
		}
		now := b.now()
		if c.s == nil {
			// Reserve the slot in the index so concurrent launches here see it, then
			// let the store check capacity and create the session atomically.
			m := c.m
			m.update(func() { m.sessions++; m.pending++ })
			s := Session{ID: b.newID(), User: req.User, Resource: req.Resource, Group: c.g.name,
				Machine: m.name, Zone: m.zone, State: StatePending, Endpoint: req.Endpoint,
				Mode: d.Mode, Created: now, Changed: now,
				Expires: now.Add(b.m.pendingTimeout.D()), Rev: 1}
			b.creating[s.ID] = false
			b.mu.Unlock()
			err := b.st.CreateSession(ctx, s, m.max)
			b.mu.Lock()
			endedMeanwhile := b.creating[s.ID]
			delete(b.creating, s.ID)
			if err == nil && endedMeanwhile {
				err = fmt.Errorf("session %s ended while it was created: %w", s.ID, ErrNoSession)
			}
			if err != nil {
				m.update(func() { m.sessions--; m.pending-- })
				b.mu.Unlock()
				// Each refusal excludes its machine, so the retries end, at the latest in a
				// denial once every machine has refused (the view was behind the store's).
				if (errors.Is(err, ErrMachineFull) || errors.Is(err, ErrExists)) && attempt <= len(b.m.machines) {
					exclude[m] = true
					notes = append(l.trace, fmt.Sprintf("retry: the store refused a session on %s (%v); trying again without it", m.name, err))
					continue
				}
				return d, fmt.Errorf("creating session on %s: %w", m.name, err)
			}
			b.addLocked(&s)
			b.mu.Unlock()
			d.Session = s.ID
			return d, nil
		}
		prev := c.s.Rev
		next := *c.s
		next.Endpoint = req.Endpoint
		next.Rev = prev + 1
		if next.State == StateDisconnected {
			if e := now.Add(b.m.pendingTimeout.D()); next.Expires.Before(e) {
				next.Expires = e // room to reconnect
			}
		}
		b.mu.Unlock()
		err := b.st.UpdateSession(ctx, next, prev)
		if err != nil {
			if (errors.Is(err, ErrConflict) || errors.Is(err, ErrNoSession)) && attempt < 4 {
				if err := b.refresh(ctx, next.ID); err != nil {
					return d, err
				}
				notes = append(l.trace, fmt.Sprintf("retry: session %s changed while reconnecting (%v); trying again", next.ID, err))
				continue
			}
			return d, fmt.Errorf("reconnecting session %s: %w", next.ID, err)
		}
		b.mu.Lock()
		b.replaceLocked(next)
		b.mu.Unlock()
		return d, nil
	}
}

// decision turns a choice into a Decision.
func (l *launch) decision(c choice) Decision {
	d := Decision{Step: c.step, StepLabel: stepID(c.label), PreferredZone: c.pz, PreferredZoneSource: c.src, Site: c.site}
	if c.deny != nil {
		d.Outcome, d.Err, d.Reason = OutcomeDenied, c.deny, c.reason
		l.tracef("denied: %s", c.reason)
		d.Trace = l.trace
		return d
	}
	d.Group, d.Machine, d.Address, d.Zone = c.g.name, c.m.name, c.m.addr, c.m.zone
	at := ""
	if c.label != "" {
		at = " (" + c.label + ")"
	}
	if c.s != nil {
		d.Outcome, d.Session, d.Mode = OutcomeReconnect, c.s.ID, c.s.Mode
		if c.s.Endpoint != l.req.Endpoint {
			d.PreviousEndpoint = c.s.Endpoint // the old endpoint's tickets are to stop working
		}
		if c.steal {
			d.Stolen = true
			l.tracef("choice: reconnect %s session %s on %s in zone %s%s, moved from endpoint %q to %q", c.s.State, c.s.ID, c.m.name, c.m.zone, at, c.s.Endpoint, l.req.Endpoint)
		} else {
			l.tracef("choice: reconnect %s session %s on %s in zone %s%s", c.s.State, c.s.ID, c.m.name, c.m.zone, at)
		}
	} else {
		d.Outcome, d.Mode = OutcomeNew, modeOf(c.g)
		l.tracef("choice: new session on %s in zone %s%s, load index %d%s, mode %s", c.m.name, c.m.zone, at, c.m.load, l.b.loadNote(c.m), d.Mode)
	}
	d.Trace = l.trace
	return d
}

func modeOf(g *group) string {
	if g.secureGateway {
		return "gateway"
	}
	return "direct"
}

// decide picks a session or machine for the request.
func (l *launch) decide() choice {
	m := l.b.m
	u := m.users[l.req.User]
	if len(l.req.Groups) > 0 {
		u = m.withGroups(u, l.req.User, l.req.Groups)
	}
	if u == nil {
		return choice{deny: ErrUnknownUser, reason: fmt.Sprintf("user %q is not a user of the site", l.req.User)}
	}
	l.u = u
	if len(l.req.Groups) > 0 {
		l.tracef("user %s: user groups from the login: %s", u.name, strings.Join(l.req.Groups, ", "))
	}
	r, ok := m.resources[l.req.Resource]
	if !ok {
		return choice{deny: ErrUnknownResource, reason: fmt.Sprintf("resource %q is not published", l.req.Resource)}
	}
	l.r = r
	if u.homeZone != "" {
		l.tracef("user %s: home zone %s (%s)", u.name, u.homeZone, u.homeSource)
	} else {
		l.tracef("user %s: no home zone", u.name)
	}
	if !r.entitled(u) {
		return choice{deny: ErrNotEntitled, reason: fmt.Sprintf("user %q is not entitled to %q", u.name, r.name)}
	}
	if c, ok := l.access(u, r); !ok {
		return c
	}
	gs := make([]string, len(r.groups))
	for i, g := range r.groups {
		gs[i] = fmt.Sprintf("%s (priority %d, %s)", g.name, r.prios[i], kindOf(g))
	}
	kind := "desktop"
	if r.app {
		kind = "app"
	}
	l.tracef("resource %s (%s) from %s", r.name, kind, strings.Join(gs, ", "))

	var assigned, shared []*group
	for _, g := range r.groups {
		if g.assigned {
			assigned = append(assigned, g)
		} else {
			shared = append(shared, g)
		}
	}
	if len(assigned) > 0 {
		if c, ok := l.assigned(assigned); ok || len(shared) == 0 {
			return c
		}
	}
	if r.cfg.Global && len(m.sites) > 0 {
		return l.global(shared)
	}
	if r.cfg.Global {
		l.tracef("global resource but the config defines no sites: zone preference applies")
	}
	return l.shared(shared)
}

func kindOf(g *group) string {
	if g.assigned {
		return "assigned"
	}
	return "shared"
}

// prefZone is the preferred zone of one group for this launch.
type prefZone struct {
	zone, src string
	only      bool   // only steps 1 and 3
	why       string // the restriction, for the trace
	missing   bool   // the zone is not a zone of the site
}

// preferred picks the group's preferred zone: the first candidate of its zone_preferences
// that exists; the others are then ignored.
func (l *launch) preferred(g *group) prefZone {
	r, u := l.r, l.u
	if len(g.prefs) == 0 {
		l.tracef("group %s: zone_preferences is empty: zone preference off", g.name)
		return prefZone{}
	}
	var notes []string
	var pz prefZone
	for _, p := range g.prefs {
		switch p {
		case "ApplicationHome":
			if r.app && r.cfg.HomeZone != "" {
				pz = prefZone{zone: r.cfg.HomeZone, src: SourceApplicationHome}
				if r.cfg.HomeZoneOnly {
					pz.only, pz.why = true, "home_zone_only"
				}
			}
		case "UserHome", "UserHomeOnly":
			if r.cfg.IgnoreUserHomeZone {
				if g.defaultPrefs {
					if u.homeZone != "" {
						notes = append(notes, fmt.Sprintf("user home zone %s ignored (ignore_user_home_zone)", u.homeZone))
					}
					continue
				}
				notes = append(notes, "ignore_user_home_zone has no effect: zone_preferences is not the default order")
			}
			if u.homeZone != "" {
				pz = prefZone{zone: u.homeZone, src: SourceUserHome}
				if p == "UserHomeOnly" {
					pz.only, pz.why = true, "UserHomeOnly"
				}
			}
		case "UserLocation":
			z := l.req.LocationZone
			if z != "" && !l.b.m.zones[z] {
				notes = append(notes, fmt.Sprintf("location zone %q is not a zone of the site: ignored", z))
				continue
			}
			if z != "" {
				pz = prefZone{zone: z, src: SourceUserLocation}
			}
		}
		if pz.zone != "" {
			break
		}
	}
	line := fmt.Sprintf("group %s: zone_preferences [%s]", g.name, strings.Join(g.prefs, " "))
	if pz.zone == "" {
		line += " → no preferred zone"
	} else {
		line += fmt.Sprintf(" → preferred zone %s (%s)", pz.zone, pz.src)
		if pz.only {
			line += fmt.Sprintf("; %s: only steps 1 and 3", pz.why)
		}
		if !l.b.m.zones[pz.zone] {
			pz.missing = true
			line += fmt.Sprintf("; zone %s does not exist in the site", pz.zone)
		}
	}
	if len(notes) > 0 {
		line += "; " + strings.Join(notes, "; ")
	}
	l.trace = append(l.trace, line)
	return pz
}

// shared runs the launch order over shared groups.
func (l *launch) shared(groups []*group) choice {
	if len(groups) == 0 {
		return choice{deny: ErrNoMachines, reason: fmt.Sprintf("resource %q has no machines for user %q", l.r.name, l.u.name)}
	}
	pzs := make([]prefZone, len(groups))
	first := -1
	for i, g := range groups {
		pzs[i] = l.preferred(g)
		if pzs[i].zone != "" && first < 0 {
			first = i
		}
	}
	if first < 0 {
		l.tracef("no preferred zone: reconnect if possible, else balance over all machines")
		for i, g := range groups {
			label := stepLabel(0, i, g)
			if s := l.findSession(g, label, "", anyLive); s != nil {
				return l.reconnect(g, s, 0, label, prefZone{})
			}
		}
		for i, g := range groups {
			label := stepLabel(0, i, g)
			if m := l.findMachine(g, label, ""); m != nil {
				return choice{m: m, g: g, label: label}
			}
		}
		return l.deny(groups, pzs)
	}
	for step := 1; step <= 5; step++ {
		for i, g := range groups {
			pz := pzs[i]
			label := stepLabel(step, i, g)
			if pz.only && (step == 2 || step == 4 || step == 5) {
				l.tracef("%s: skipped: launch must stay in %s (%s)", label, pz.zone, pz.why)
				continue
			}
			if pz.zone == "" && (step == 1 || step == 3) {
				l.tracef("%s: skipped: no preferred zone in this group", label)
				continue
			}
			switch step {
			case 1:
				if s := l.findSession(g, label, pz.zone, anyLive); s != nil {
					return l.reconnect(g, s, step, label, pz)
				}
			case 2:
				if s := l.findSession(g, label, "", onlyDisconnected); s != nil {
					return l.reconnect(g, s, step, label, pz)
				}
			case 3:
				if pz.missing {
					l.tracef("%s: zone %s does not exist", label, pz.zone)
					continue
				}
				if m := l.findMachine(g, label, pz.zone); m != nil {
					return choice{m: m, g: g, step: step, label: label, pz: pz.zone, src: pz.src}
				}
			case 4:
				if s := l.findSession(g, label, "", onlyConnected); s != nil {
					return l.reconnect(g, s, step, label, pz)
				}
			case 5:
				if m := l.findMachine(g, label, ""); m != nil {
					return choice{m: m, g: g, step: step, label: label, pz: pz.zone, src: pz.src}
				}
			}
		}
	}
	c := l.deny(groups, pzs)
	c.pz, c.src = pzs[first].zone, pzs[first].src
	return c
}

func stepLabel(step, i int, g *group) string {
	if step == 0 {
		return "group " + g.name
	}
	return fmt.Sprintf("step %d%c %s", step, 'a'+rune(i%26), g.name)
}

// stepID returns the "3b" of a stepLabel's "step 3b group", or "".
func stepID(label string) string {
	id, ok := strings.CutPrefix(label, "step ")
	if !ok {
		return ""
	}
	id, _, _ = strings.Cut(id, " ")
	return id
}

// deny explains why nothing was found.
func (l *launch) deny(groups []*group, pzs []prefZone) choice {
	total := 0
	for _, g := range groups {
		total += g.machines
	}
	if total == 0 {
		return choice{deny: ErrNoMachines, reason: fmt.Sprintf("resource %q has no machines", l.r.name)}
	}
	for _, pz := range pzs {
		if pz.only && pz.missing {
			return choice{deny: ErrZoneMissing, reason: fmt.Sprintf("launch must stay in zone %s (%s) but the site has no such zone", pz.zone, pz.why)}
		}
	}
	for _, pz := range pzs {
		if pz.only {
			return choice{deny: ErrNoCapacity, reason: fmt.Sprintf("no session to reconnect and no available machine in zone %s (%s forbids other zones)", pz.zone, pz.why)}
		}
	}
	return choice{deny: ErrNoCapacity, reason: fmt.Sprintf("no session to reconnect and no available machine for %q", l.r.name)}
}

const (
	anyLive stateFilter = iota
	onlyDisconnected
	onlyConnected // connected or pending
)

// maxListed bounds the skipped machines named in a trace line.
const maxListed = 5

// assigned serves private desktops: the user's own machines, no zone preference.
func (l *launch) assigned(groups []*group) (choice, bool) {
	l.tracef("assigned desktop: zone preference does not apply")
	any := false
	for _, g := range groups {
		label := "group " + g.name
		ms := l.u.assigned[g.name]
		if len(ms) == 0 {
			l.tracef("%s: no machine is assigned to %s", label, l.u.name)
			continue
		}
		any = true
		if s := l.findSession(g, label, "", anyLive); s != nil {
			return l.reconnect(g, s, 0, label, prefZone{}), true
		}
		for _, m := range ms {
			if why := m.unavailable(); why != "" {
				l.tracef("%s: skipped %s: %s", label, m.name, why)
				continue
			}
			return choice{m: m, g: g, label: label}, true
		}
	}
	if !any {
		return choice{deny: ErrNoMachines, reason: fmt.Sprintf("no machine of %q is assigned to %q", l.r.name, l.u.name)}, false
	}
	return choice{deny: ErrNoCapacity, reason: fmt.Sprintf("the machine assigned to %q is not available", l.u.name)}, false
}
