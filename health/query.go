package health

import (
	"fmt"
	"net/netip"
	"time"
)

// PortStatus is the visible state of one port.
type PortStatus struct {
	// ID is the port.
	ID PortID
	// Kind is the probe kind.
	Kind Kind
	// Optional is true when the port does not count in an all-of verdict (a 503 on it
	// still does).
	Optional bool
	// State is the port's state after hysteresis.
	State State
	// Since is when State last changed (or when the Checker was built).
	Since time.Time
	// LastCheck is when the last probe or passive report was recorded; zero before any.
	LastCheck time.Time
	// LastErr is the last probe's error; nil when it succeeded.
	LastErr error
	// Latency is the last probe's duration.
	Latency time.Duration
	// Successes and Failures are the current runs of consecutive results.
	Successes, Failures int
}

// TargetStatus is the visible state of one target.
type TargetStatus struct {
	// Name, Kind and Zone are the target's.
	Name, Kind, Zone string
	// Addr is the probed address.
	Addr netip.Addr
	// Verdict is the state consumers act on: Probed after Override.
	Verdict State
	// Probed is the verdict composed from the port states alone.
	Probed State
	// Override is the admin override in force.
	Override Override
	// Ports are the ports in configuration order.
	Ports []PortStatus
}

// Eligible reports whether target takes new work: its verdict is up. Unknown targets are
// not eligible.
func (c *Checker) Eligible(name string) bool {
	v, ok := c.Verdict(name)
	return ok && v == StateUp
}

// Verdict returns the target's verdict and whether the target exists.
func (c *Checker) Verdict(name string) (State, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	tg, ok := c.targets[name]
	if !ok {
		return StateDown, false
	}
	return tg.verdict, true
}

// Definite returns a target's verdict and whether it is definite: a down verdict, an admin
// override, or every required port probed with an answer (up after a successful probe,
// draining or down after a probe), none up on a state its last probe failed to confirm.
// Until then a consumer keeps its own initial state (a GSLB name's initial). A target that
// was definite stays so: later probes only move it between answers. Unknown targets are
// neither up nor definite.
func (c *Checker) Definite(name string) (State, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	tg, ok := c.targets[name]
	if !ok {
		return StateDown, false
	}
	return tg.verdict, c.definiteLocked(tg)
}

// definiteLocked implements Definite; a remote target is definite once its prober said so.
func (c *Checker) definiteLocked(tg *target) bool {
	if !tg.definite && tg.override == OverrideNone && tg.verdict != StateDown {
		if tg.remote {
			return false
		}
		for _, ps := range tg.ports {
			if !ps.port.Optional && (ps.lastCheck.IsZero() || (ps.successes == 0 && ps.state == StateUp)) {
				return false
			}
		}
	}
	tg.definite = true
	return true
}

// Status returns the state of one target and its ports.
func (c *Checker) Status(name string) (TargetStatus, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	tg, ok := c.targets[name]
	if !ok {
		return TargetStatus{}, false
	}
	return tg.statusLocked(), true
}

// Snapshot returns the state of every target, in configuration order.
func (c *Checker) Snapshot() []TargetStatus {
	c.mu.Lock()
	defer c.mu.Unlock()
	out := make([]TargetStatus, 0, len(c.order))
	for _, tg := range c.order {
		out = append(out, tg.statusLocked())
	}
	return out
}

func (tg *target) statusLocked() TargetStatus {
	st := TargetStatus{
		Name: tg.t.Name, Kind: tg.t.Kind, Zone: tg.t.Zone, Addr: tg.t.Addr,
		Verdict: tg.verdict, Probed: compose(tg.ports, tg.t.Monitor.Mode), Override: tg.override,
		Ports: make([]PortStatus, 0, len(tg.ports)),
	}
	for _, ps := range tg.ports {
		st.Ports = append(st.Ports, PortStatus{
			ID: ps.port.ID, Kind: ps.port.Check.Kind, Optional: ps.port.Optional, State: ps.state,
			Since: ps.since, LastCheck: ps.lastCheck, LastErr: ps.lastErr, Latency: ps.latency,
			Successes: ps.successes, Failures: ps.failures,
		})
	}
	return st
}

// ReportFailure records a failure a consumer saw on a target's port (a refused or reset
// connection, a handshake timeout). Monitor.PassiveFailures of them within
// Monitor.PassiveWindow mark the port down before the next probe; only probes bring it back.
func (c *Checker) ReportFailure(name string, port PortID, err error) error {
	if err == nil {
		err = fmt.Errorf("failure reported on %s", port)
	}
	c.mu.Lock()
	tg, ok := c.targets[name]
	if !ok {
		c.mu.Unlock()
		return fmt.Errorf("reporting %s: %w", name, ErrUnknownTarget)
	}
	ps, ok := tg.byID[port]
	if !ok {
		c.mu.Unlock()
		return fmt.Errorf("reporting %s port %s: %w", name, port, ErrUnknownPort)
	}
	c.met.passive(name)
	if tg.remote && c.fwd != nil {
		c.mu.Unlock()
		c.fwd(name, port, err) // to the target's prober, without mu
		return nil
	}
	defer c.mu.Unlock()
	from := ps.state
	now := c.clock.Now()
	if ps.reportFailure(err, now, &tg.t.Monitor) {
		c.changedLocked(tg, ps, from, "passive", now)
	}
	return nil
}

// SetOverride sets an admin override on a target: OverrideUp, OverrideDown, OverrideDrain,
// or OverrideNone to follow the probes again.
func (c *Checker) SetOverride(name string, o Override) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	tg, ok := c.targets[name]
	if !ok {
		return fmt.Errorf("overriding %s: %w", name, ErrUnknownTarget)
	}
	if tg.override == o {
		return nil
	}
	tg.override = o
	c.changedLocked(tg, nil, 0, "admin", c.clock.Now())
	return nil
}
