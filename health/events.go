package health

import "time"

// Event tells that a port state or a target verdict changed, and why.
type Event struct {
	// Time is when the change was decided.
	Time time.Time
	// Target names the target.
	Target string
	// Port is the port that changed; the zero PortID for an admin override.
	Port PortID
	// PortFrom and PortTo are the port's states before and after (zero for an override).
	PortFrom, PortTo State
	// From and To are the target's verdicts before and after; equal when a port changed
	// without changing the verdict (e.g. an optional port).
	From, To State
	// Err is the probe or reported error that caused the change; nil when a port came up.
	Err error
	// Latency is the duration of the probe that caused the change (0 for passive reports
	// and overrides).
	Latency time.Duration
	// Reason is "probe", "passive" (ReportFailure), "admin" (SetOverride) or "prober"
	// (Observe: the target's prober published it).
	Reason string
}

// VerdictChanged reports whether the target's verdict changed.
func (e Event) VerdictChanged() bool { return e.From != e.To }

// Subscribe calls fn with every later event, in order, from one goroutine of Run; fn should
// return quickly (it delays later events, not probes). It may call the Checker's methods. The
// returned func unsubscribes.
func (c *Checker) Subscribe(fn func(Event)) (cancel func()) {
	c.mu.Lock()
	id := c.nextSub
	c.nextSub++
	c.subs[id] = fn
	c.mu.Unlock()
	return func() {
		c.mu.Lock()
		delete(c.subs, id)
		c.mu.Unlock()
	}
}
