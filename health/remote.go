package health

import (
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"
)

// Remote targets. In a site of several nodes each target is probed by one node only, its
// zone's leader, which publishes what it sees; every other node's Checker holds the target
// as remote: it does not probe it, takes its port states from the published Reports
// (Observe), and hands the failures its consumers report on it to Deps.Forward, so that they
// reach the prober's verdict. Overrides stay each Checker's own (every node applies the
// site's overrides itself), and verdicts, events and Definite work the same for both.

// PortReport is one port's state as its prober publishes it.
type PortReport struct {
	// Port is the port, as PortID.String formats it: "4172/udp".
	Port string `json:"port"`
	// State is the port's state after hysteresis.
	State State `json:"state"`
	// Since is when State last changed at the prober.
	Since time.Time `json:"since"`
	// LastCheck is when the prober last recorded a result; zero before any.
	LastCheck time.Time `json:"last_check,omitzero"`
	// Err is the last probe's error; empty when it succeeded.
	Err string `json:"err,omitempty"`
	// Latency is the last probe's duration.
	Latency time.Duration `json:"latency,omitempty"`
	// Successes and Failures are the current runs of consecutive results.
	Successes int `json:"successes,omitempty"`
	Failures  int `json:"failures,omitempty"`
}

// Report is a target's port states as its prober publishes them for the other nodes.
type Report struct {
	// Target names the target.
	Target string `json:"target"`
	// Definite is true once the prober's verdict is definite (Checker.Definite).
	Definite bool `json:"definite"`
	// Ports are the target's ports, in configuration order.
	Ports []PortReport `json:"ports"`
}

// Same reports whether r and o tell the same states: the same ports in the same states since
// the same instants, and the same definiteness. The time, error and latency of the last
// check are left out: a prober publishes when a state changes, not after every probe.
func (r Report) Same(o Report) bool {
	if r.Target != o.Target || r.Definite != o.Definite || len(r.Ports) != len(o.Ports) {
		return false
	}
	for i, p := range r.Ports {
		q := o.Ports[i]
		if p.Port != q.Port || p.State != q.State || !p.Since.Equal(q.Since) {
			return false
		}
	}
	return true
}

// ParsePortID parses "4172/udp" (PortID.String).
func ParsePortID(s string) (PortID, error) {
	n, proto, ok := strings.Cut(s, "/")
	p, err := strconv.ParseUint(n, 10, 16)
	if !ok || err != nil || (proto != "tcp" && proto != "udp") {
		return PortID{}, fmt.Errorf("port %q: want <number>/tcp or <number>/udp", s)
	}
	return PortID{Port: uint16(p), Protocol: proto}, nil
}

// MarshalText implements encoding.TextMarshaler: "up", "draining" or "down".
func (s State) MarshalText() ([]byte, error) { return []byte(s.String()), nil }

// UnmarshalText implements encoding.TextUnmarshaler.
func (s *State) UnmarshalText(b []byte) error {
	switch string(b) {
	case "up":
		*s = StateUp
	case "draining":
		*s = StateDraining
	case "down":
		*s = StateDown
	default:
		return fmt.Errorf("health state %q: want up, draining or down", b)
	}
	return nil
}

// SetProbed sets which targets this Checker probes: those for which probe returns true; nil
// probes every target (the default). The others become remote. A target that becomes probed
// again goes on from the states last observed; a probe in flight on a target that became
// remote is dropped. It returns the names of the targets whose role changed.
func (c *Checker) SetProbed(probe func(Target) bool) (changed []string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, tg := range c.order {
		remote := probe != nil && !probe(tg.t)
		if remote != tg.remote {
			tg.remote = remote
			changed = append(changed, tg.t.Name)
		}
	}
	return changed
}

// Probed reports whether this Checker probes the named target (false for an unknown one).
func (c *Checker) Probed(name string) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	tg, ok := c.targets[name]
	return ok && !tg.remote
}

// Report returns what a prober publishes of the named target.
func (c *Checker) Report(name string) (Report, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	tg, ok := c.targets[name]
	if !ok {
		return Report{}, false
	}
	r := Report{Target: name, Definite: c.definiteLocked(tg), Ports: make([]PortReport, 0, len(tg.ports))}
	for _, ps := range tg.ports {
		p := PortReport{Port: ps.port.ID.String(), State: ps.state, Since: ps.since, LastCheck: ps.lastCheck,
			Latency: ps.latency, Successes: ps.successes, Failures: ps.failures}
		if ps.lastErr != nil {
			p.Err = ps.lastErr.Error()
		}
		r.Ports = append(r.Ports, p)
	}
	return r, true
}

// ErrProbedHere is returned by Observe for a target this Checker probes itself.
var ErrProbedHere = errors.New("the target is probed here")

// Observe installs the port states its prober published for a remote target. Changes are
// events with Reason "prober". Ports the report names that the target lacks (a node on
// another configuration) are skipped.
func (c *Checker) Observe(r Report) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	tg, ok := c.targets[r.Target]
	if !ok {
		return fmt.Errorf("observing %s: %w", r.Target, ErrUnknownTarget)
	}
	if !tg.remote {
		return fmt.Errorf("observing %s: %w", r.Target, ErrProbedHere)
	}
	now := c.clock.Now()
	for _, p := range r.Ports {
		id, err := ParsePortID(p.Port)
		if err != nil {
			continue
		}
		ps, ok := tg.byID[id]
		if !ok {
			continue
		}
		from := ps.state
		ps.state, ps.since, ps.lastCheck = p.State, p.Since, p.LastCheck
		ps.latency, ps.successes, ps.failures = p.Latency, p.Successes, p.Failures
		ps.lastErr = nil
		if p.Err != "" {
			ps.lastErr = errors.New(p.Err)
		}
		if ps.state != from {
			c.changedLocked(tg, ps, from, "prober", now)
		}
	}
	if r.Definite {
		tg.definite = true
	}
	return nil
}
