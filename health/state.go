package health

import (
	"errors"
	"fmt"
	"time"
)

// State is the health of a port or the verdict on a target. The order is meaningful:
// StateDown < StateDraining < StateUp.
type State uint8

// The states.
const (
	// StateDown: not answering, or answering wrongly. Nothing new is sent there.
	StateDown State = iota
	// StateDraining: alive but asking for no new work (HTTP 503, or an admin drain); running
	// sessions stay, reconnects are allowed, new sessions go elsewhere.
	StateDraining
	// StateUp: takes new work.
	StateUp
)

// String returns "down", "draining" or "up".
func (s State) String() string {
	switch s {
	case StateUp:
		return "up"
	case StateDraining:
		return "draining"
	default:
		return "down"
	}
}

// Override is an admin's decision that replaces or caps the probed verdict of a target.
type Override uint8

// The overrides.
const (
	// OverrideNone follows the probes.
	OverrideNone Override = iota
	// OverrideUp forces the target up whatever the probes say.
	OverrideUp
	// OverrideDown forces the target down.
	OverrideDown
	// OverrideDrain caps the target at draining: up becomes draining, down stays down.
	OverrideDrain
)

// String returns "none", "up", "down" or "drain".
func (o Override) String() string {
	switch o {
	case OverrideUp:
		return "up"
	case OverrideDown:
		return "down"
	case OverrideDrain:
		return "drain"
	default:
		return "none"
	}
}

// ParseOverride returns the override an admin names: up, down, drain, or auto (OverrideNone:
// follow the probes again).
func ParseOverride(word string) (Override, error) {
	switch word {
	case "up":
		return OverrideUp, nil
	case "down":
		return OverrideDown, nil
	case "drain":
		return OverrideDrain, nil
	case "auto":
		return OverrideNone, nil
	}
	return OverrideNone, fmt.Errorf("override %q: want up, down, drain or auto", word)
}

// apply returns the verdict after the override.
func (o Override) apply(probed State) State {
	switch o {
	case OverrideUp:
		return StateUp
	case OverrideDown:
		return StateDown
	case OverrideDrain:
		return min(probed, StateDraining)
	}
	return probed
}

// portState is the hysteresis of one port. It holds no lock: the Checker's mu guards it.
type portState struct {
	port      Port
	state     State
	successes int // consecutive successes since the last failure or drain
	failures  int // consecutive failures since the last success
	held      int // consecutive timeouts held because this process was starved
	lastErr   error
	latency   time.Duration
	lastCheck time.Time
	since     time.Time // when state last changed
	seq       uint64    // sequence number of the newest recorded probe
	launched  uint64    // sequence number of the newest started probe
	passive   []time.Time
}

// observe records one probe result (nil, ErrDraining, or a failure) taken at now with the
// given latency and reports whether the state changed.
func (s *portState) observe(err error, latency time.Duration, now time.Time, m *Monitor) (changed bool) {
	s.lastErr, s.latency, s.lastCheck = err, latency, now
	old := s.state
	switch {
	case err == nil:
		s.failures = 0
		s.successes++
		if s.state != StateUp && s.successes >= m.Rise {
			s.state = StateUp
		}
	case errors.Is(err, ErrDraining):
		// An answer that asks for no new work is taken at once: the service said so.
		s.failures, s.successes = 0, 0
		s.state = StateDraining
	default:
		s.successes = 0
		s.failures++
		if s.state != StateDown && s.failures >= m.Fall {
			s.state = StateDown
		}
	}
	if s.state != old {
		s.since = now
		return true
	}
	return false
}

// reportFailure records a passive failure at now and reports whether the port just went
// down because PassiveFailures were seen within PassiveWindow. Only probes bring it back.
func (s *portState) reportFailure(err error, now time.Time, m *Monitor) (changed bool) {
	if m.PassiveFailures <= 0 {
		return false
	}
	cut := now.Add(-m.PassiveWindow)
	keep := s.passive[:0]
	for _, t := range s.passive {
		if t.After(cut) {
			keep = append(keep, t)
		}
	}
	s.passive = append(keep, now)
	if len(s.passive) < m.PassiveFailures || s.state == StateDown {
		return false
	}
	s.passive = s.passive[:0]
	s.successes = 0
	s.failures = m.Fall
	s.lastErr = err
	s.lastCheck = now
	s.state = StateDown
	s.since = now
	return true
}

// compose combines port states into the probed verdict of a target. A port that answered
// 503 asks for no new work for the whole target, whatever the mode and whether it is
// optional or not: the verdict is then at most draining.
func compose(ports []*portState, mode Mode) State {
	v := composeStates(ports, mode)
	if v == StateUp {
		for _, p := range ports {
			if p.state == StateDraining {
				return StateDraining
			}
		}
	}
	return v
}

func composeStates(ports []*portState, mode Mode) State {
	if mode == ModeAny {
		best := StateDown
		for _, p := range ports {
			best = max(best, p.state)
		}
		return best
	}
	worst, required := StateUp, 0
	for _, p := range ports {
		if p.port.Optional {
			continue
		}
		required++
		worst = min(worst, p.state)
	}
	if required == 0 {
		// Every port is optional: all of them count.
		for _, p := range ports {
			worst = min(worst, p.state)
		}
	}
	return worst
}
