package broker

import (
	"fmt"
	"strings"
)

type stateFilter int

func (f stateFilter) match(s State) bool {
	switch f {
	case onlyDisconnected:
		return s == StateDisconnected
	case onlyConnected:
		return s == StateConnected || s == StatePending
	}
	return s != StateEnded
}

// findSession returns the first session of the user for this resource in group g (in zone,
// unless ""), in the given states, that is suitable for reconnection. Disconnected sessions
// come first, then by age.
func (l *launch) findSession(g *group, label, zone string, f stateFilter) *Session {
	var found, seen int
	var best *Session
	for _, s := range l.b.byUser[l.u.name] {
		if s.Resource != l.r.name || s.Group != g.name || (zone != "" && s.Zone != zone) || !f.match(s.State) {
			continue
		}
		seen++
		if why := l.unsuitable(g, s); why != "" {
			l.tracef("%s: skipped %s session %s on %s: %s", label, s.State, s.ID, s.Machine, why)
			continue
		}
		found++
		if best == nil || (s.State == StateDisconnected && best.State != StateDisconnected) {
			best = s
		}
	}
	if best == nil {
		what := "session"
		switch f {
		case onlyDisconnected:
			what = "disconnected session"
		case onlyConnected:
			what = "connected session"
		}
		where := "in any zone"
		if zone != "" {
			where = "in " + zone
		}
		if seen == 0 {
			l.tracef("%s: no %s %s", label, what, where)
		} else {
			l.tracef("%s: no suitable %s %s", label, what, where)
		}
	}
	return best
}

// unsuitable says why session s may not be reconnected by this request, or "".
func (l *launch) unsuitable(g *group, s *Session) string {
	mx := l.b.m.machines[s.Machine]
	switch {
	case mx == nil:
		return "machine is no longer in the site"
	case mx.down:
		return "machine is down"
	}
	switch g.reconnection {
	case "disconnected_only":
		if s.State != StateDisconnected {
			return fmt.Sprintf("%s, and group %s reconnects disconnected sessions only", s.State, g.name)
		}
	case "same_endpoint_only":
		if s.Endpoint != l.req.Endpoint {
			return fmt.Sprintf("endpoint %q is not %q (same_endpoint_only)", s.Endpoint, l.req.Endpoint)
		}
	}
	return ""
}

func (l *launch) reconnect(g *group, s *Session, step int, label string, pz prefZone) choice {
	c := choice{m: l.b.m.machines[s.Machine], s: s, g: g, step: step, label: label, pz: pz.zone, src: pz.src}
	c.steal = (s.State == StateConnected || s.State == StatePending) && s.Endpoint != l.req.Endpoint
	return c
}

// findMachine returns the best available machine of g in zone ("" for any zone), tracing the
// machines it skipped.
func (l *launch) findMachine(g *group, label, zone string) *machine {
	return l.findMachineIn(g, label, zone, "", nil)
}

// findMachineIn is findMachine over one zone, a list of zones (described by zonesDesc), or
// every zone of g.
func (l *launch) findMachineIn(g *group, label, zone, zonesDesc string, zones []string) *machine {
	var best *machine
	var skipped []string
	nSkipped, total, avail := 0, 0, 0
	consider := func(b *bucket) {
		total += b.all
		avail += len(b.avail)
		if m := b.pick(g.vertical, l.exclude); m != nil && better(m, best, g.vertical) {
			best = m
		}
		for _, m := range b.unavail {
			nSkipped++
			if len(skipped) < maxListed {
				skipped = append(skipped, m.name+" ("+m.unavailable()+")")
			}
		}
	}
	where := "any zone"
	if zone != "" {
		where = "zone " + zone
		if b := g.buckets[zone]; b != nil {
			consider(b)
		}
	} else if zones != nil {
		where = zonesDesc
		for _, z := range zones {
			if b := g.buckets[z]; b != nil {
				consider(b)
			}
		}
	} else {
		for _, z := range g.zones {
			consider(g.buckets[z])
		}
	}
	if total == 0 {
		l.tracef("%s: no machines in %s", label, where)
		return nil
	}
	line := fmt.Sprintf("%s: %s: %d of %d machines available", label, where, avail, total)
	if nSkipped > 0 {
		line += "; skipped " + strings.Join(skipped, ", ")
		if nSkipped > len(skipped) {
			line += fmt.Sprintf(" and %d more", nSkipped-len(skipped))
		}
	}
	if best != nil {
		policy := "least loaded"
		if g.vertical {
			policy = "vertical: most loaded with room"
		}
		line += fmt.Sprintf("; %s: %s (load index %d%s)", policy, best.name, best.load, l.b.loadNote(best))
	}
	l.trace = append(l.trace, line)
	return best
}
