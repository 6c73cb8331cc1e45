package health

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"net/netip"
	"sync"
	"sync/atomic"
	"time"

	"github.com/frontdoor-vdi/frontdoor/internal/starve"

	"github.com/prometheus/client_golang/prometheus"
)

// ProbeFunc probes one port once. It returns nil when the port is up, an error wrapping
// ErrDraining when it asks for no new work, and any other error when it is down. It must
// return when ctx is done. NetProber.Probe is the real one.
type ProbeFunc func(ctx context.Context, addr netip.AddrPort, c *Check) error

// StartFunc starts one probe of one port and returns at once. It calls done exactly once,
// with what a ProbeFunc would return, by deadline or soon after; done must not block.
// NetProber.Start is the real one.
type StartFunc func(addr netip.AddrPort, c *Check, deadline time.Time, done func(error))

// Deps are what a Checker gets from its owner.
type Deps struct {
	// Clock is the time source. Default: SystemClock().
	Clock Clock
	// Logger receives transitions and recovered panics. Default: discard.
	Logger *slog.Logger
	// Registry gets the metrics. Default: nil (metrics are kept but not registered).
	Registry prometheus.Registerer
	// Probe runs one probe on a goroutine of its own. Default: (&NetProber{}).Probe.
	Probe ProbeFunc
	// Start starts one probe and returns at once; when set, it is used instead of Probe.
	// Default: nil.
	Start StartFunc
	// Rand returns a number in [0,1) for the ports' phases and jitter. Default:
	// math/rand/v2.Float64.
	Rand func() float64
	// Forward receives the failures reported (ReportFailure) on remote targets, for their
	// prober (see SetProbed). Default: nil (they are recorded here, like a probed target's).
	Forward func(target string, port PortID, err error)
	// Starved says how long this process kept a runnable goroutine from a CPU since a
	// time; a timed-out probe is held when it reached a quarter of the timeout (see
	// starved.go). Default: the runtime's scheduling latencies with the system clock, and
	// never starved with another Clock.
	Starved StarvedFunc
}

// Checker probes targets, keeps their port states and verdicts, and tells subscribers when
// they change. Every method is safe for concurrent use.
type Checker struct {
	clock    Clock
	log      *slog.Logger
	probe    ProbeFunc
	start    StartFunc
	rand     func() float64
	fwd      func(string, PortID, error)
	met      *metrics
	lateness // this process's own

	mu          sync.Mutex // guards targets' states, sched, the subscribers, running, closed, cancel
	targets     map[string]*target
	order       []*target
	sched       runHeap
	subscribers // the events queued for them
	running     bool
	closed      bool
	cancel      context.CancelFunc
	done        chan struct{} // closed when Run returns

	notify chan struct{} // events are pending
	probes sync.WaitGroup
	// inline, when set, gets the probes step starts instead of goroutines; for tests that
	// simulate probes on a fake clock.
	inline func(tg *target, ps *portState, seq uint64, start time.Time)
}

// target is one Target and its live state; the Checker's mu guards every field but t.
type target struct {
	t        Target
	ports    []*portState
	byID     map[PortID]*portState
	override Override
	verdict  State // after the override
	definite bool  // the verdict has been definite once (Definite); guarded by Checker.mu
	remote   bool  // probed elsewhere: states come from Observe (SetProbed)
	hist     history
}

// lateness measures a Checker's own process: starved says how late it was to run, and mark
// (nil unless the runtime meter is used) snapshots that when probes start.
type lateness struct {
	starved StarvedFunc
	mark    func(time.Time)
}

// subscribers are the functions told of a Checker's events, and the events not yet told.
type subscribers struct {
	events  []Event
	subs    map[int]func(Event)
	nextSub int
}

// New builds a Checker for targets. Targets are copied; zero Monitor fields get the
// defaults. It returns an error wrapping ErrInvalidTarget for a target it cannot probe.
func New(targets []Target, deps Deps) (*Checker, error) {
	c := &Checker{
		clock:       deps.Clock,
		log:         deps.Logger,
		probe:       deps.Probe,
		start:       deps.Start,
		rand:        deps.Rand,
		fwd:         deps.Forward,
		lateness:    lateness{starved: deps.Starved},
		targets:     make(map[string]*target, len(targets)),
		subscribers: subscribers{subs: map[int]func(Event){}},
		notify:      make(chan struct{}, 1),
		done:        make(chan struct{}),
	}
	if c.clock == nil {
		c.clock = SystemClock()
		if m := starve.Process(); c.starved == nil && m != nil {
			c.starved, c.mark = m.Longest, m.Mark
		}
	}
	if c.log == nil {
		c.log = slog.New(slog.DiscardHandler)
	}
	if c.probe == nil && c.start == nil {
		c.probe = (&NetProber{}).Probe
	}
	if c.rand == nil {
		c.rand = rand.Float64
	}
	met, err := newMetrics(deps.Registry)
	if err != nil {
		return nil, err
	}
	c.met = met
	now := c.clock.Now()
	for _, t := range targets {
		t.Monitor = t.Monitor.withDefaults()
		t.Ports = append([]Port(nil), t.Ports...)
		if err := t.validate(); err != nil {
			return nil, err
		}
		if _, dup := c.targets[t.Name]; dup {
			return nil, fmt.Errorf("target %s listed twice: %w", t.Name, ErrInvalidTarget)
		}
		tg := &target{t: t, byID: make(map[PortID]*portState, len(t.Ports))}
		for i := range tg.t.Ports {
			ps := &portState{port: tg.t.Ports[i], state: StateUp, since: now}
			if t.Monitor.InitialDown {
				ps.state = StateDown
			}
			tg.ports = append(tg.ports, ps)
			tg.byID[ps.port.ID] = ps
			c.sched.push(c.firstRun(tg, ps, now))
			c.met.setPort(t.Name, ps)
		}
		tg.verdict = compose(tg.ports, t.Monitor.Mode)
		c.met.setTarget(t.Name, tg.verdict)
		c.targets[t.Name] = tg
		c.order = append(c.order, tg)
	}
	return c, nil
}

// Run probes until ctx is done or Close is called, then waits for probes in flight and
// delivers the last events, and returns nil. Run may be called once: later calls return
// ErrRunning, and calls after Close return ErrClosed. Events queued before Run (overrides,
// passive reports) are delivered when it starts.
func (c *Checker) Run(ctx context.Context) error {
	c.mu.Lock()
	if c.closed {
		c.mu.Unlock()
		return ErrClosed
	}
	if c.running {
		c.mu.Unlock()
		return ErrRunning
	}
	c.running = true
	ctx, c.cancel = context.WithCancel(ctx)
	c.mu.Unlock()
	defer close(c.done)
	defer c.cancel()

	var wg sync.WaitGroup
	wg.Go(func() { c.dispatch(ctx) })
	timer := c.clock.NewTimer(time.Hour)
	defer timer.Stop()
	for {
		now := c.clock.Now()
		next := c.step(ctx, now)
		timer.Reset(next.Sub(now))
		select {
		case <-ctx.Done():
			c.probes.Wait()
			wg.Wait()
			c.flush()
			return nil
		case <-timer.C():
		}
	}
}

// Close stops Run and waits for it to return, which includes probes in flight (a TCP
// connect in flight finishes within the monitor's Timeout). Later calls to Run return
// ErrClosed.
func (c *Checker) Close() error {
	c.mu.Lock()
	c.closed = true
	running, cancel := c.running, c.cancel
	c.mu.Unlock()
	if running {
		cancel()
		<-c.done
	}
	return nil
}

// step starts every probe due at now and returns when the next one is due.
func (c *Checker) step(ctx context.Context, now time.Time) time.Time {
	c.mu.Lock()
	var due []*run
	for len(c.sched) > 0 && !c.sched[0].at.After(now) {
		r := c.sched.pop()
		if !r.tgt.remote {
			r.ps.launched++
			due = append(due, &run{tgt: r.tgt, ps: r.ps, seq: r.ps.launched})
		}
		c.advance(r, now)
		c.sched.push(r)
	}
	next := now.Add(time.Hour)
	if len(c.sched) > 0 {
		next = c.sched[0].at
	}
	c.mu.Unlock()
	if len(due) > 0 && c.mark != nil {
		c.mark(now)
	}
	for _, r := range due {
		if c.inline != nil {
			c.inline(r.tgt, r.ps, r.seq, now)
			continue
		}
		c.probes.Add(1)
		if c.start != nil {
			c.startProbe(ctx, r.tgt, r.ps, r.seq)
			continue
		}
		go func() {
			defer c.probes.Done()
			c.runProbe(ctx, r.tgt, r.ps, r.seq)
		}()
	}
	return next
}

// startProbe starts one probe with c.start and records its result when it ends.
func (c *Checker) startProbe(ctx context.Context, tg *target, ps *portState, seq uint64) {
	m := &tg.t.Monitor
	ap := netip.AddrPortFrom(tg.t.Addr, ps.port.ID.Port)
	start := c.clock.Now()
	var ended atomic.Bool
	done := func(err error) {
		if ended.Swap(true) {
			return
		}
		defer c.probes.Done()
		end := c.clock.Now()
		if err != nil && errors.Is(ctx.Err(), context.Canceled) {
			return // shutting down: not a verdict on the target
		}
		c.record(tg, ps, seq, err, end.Sub(start), end)
	}
	defer func() {
		if p := recover(); p != nil {
			c.log.Error("health probe panicked", "addr", ap, "kind", ps.port.Check.Kind, "panic", p)
			done(fmt.Errorf("probe panicked: %v", p))
		}
	}()
	c.start(ap, &ps.port.Check, start.Add(m.Timeout), done)
}

// runProbe runs one probe and records its result.
func (c *Checker) runProbe(ctx context.Context, tg *target, ps *portState, seq uint64) {
	m := &tg.t.Monitor
	ctx, cancel := context.WithTimeout(ctx, m.Timeout)
	defer cancel()
	start := c.clock.Now()
	err := asTimeout(ctx, c.safeProbe(ctx, netip.AddrPortFrom(tg.t.Addr, ps.port.ID.Port), &ps.port.Check))
	end := c.clock.Now()
	if err != nil && errors.Is(ctx.Err(), context.Canceled) {
		return // shutting down: not a verdict on the target
	}
	c.record(tg, ps, seq, err, end.Sub(start), end)
}

// safeProbe calls the probe and turns a panic into a failure.
func (c *Checker) safeProbe(ctx context.Context, ap netip.AddrPort, ch *Check) (err error) {
	defer func() {
		if p := recover(); p != nil {
			c.log.Error("health probe panicked", "addr", ap, "kind", ch.Kind, "panic", p)
			err = fmt.Errorf("probe panicked: %v", p)
		}
	}()
	return c.probe(ctx, ap, ch)
}

// record applies one probe result. Results older than the newest recorded one are dropped.
func (c *Checker) record(tg *target, ps *portState, seq uint64, err error, lat time.Duration, now time.Time) {
	c.met.observeProbe(ps.port.Check.Kind, err, lat)
	c.mu.Lock()
	defer c.mu.Unlock()
	if seq <= ps.seq || tg.remote {
		return
	}
	ps.seq = seq
	if c.holdLocked(tg, ps, err, now.Add(-lat)) {
		return
	}
	from := ps.state
	if ps.observe(err, lat, now, &tg.t.Monitor) {
		c.changedLocked(tg, ps, from, "probe", now)
	}
}

// holdLocked says whether a probe result that started at start is held (counted neither
// way): a timeout while this process was starved, if fewer than Fall were held in a row.
func (c *Checker) holdLocked(tg *target, ps *portState, err error, start time.Time) bool {
	if err == nil || !errors.Is(err, ErrTimeout) || c.starved == nil {
		ps.held = 0
		return false
	}
	m := &tg.t.Monitor
	if ps.held >= m.Fall {
		return false // held enough: timeouts count until a result is not held
	}
	late := c.starved(start)
	if late < m.Timeout/4 {
		ps.held = 0
		return false
	}
	ps.held++
	ps.successes = 0 // a held timeout may have been real: it breaks a rise streak
	c.met.held(tg.t.Name)
	if ps.held == 1 {
		c.log.Info("health probe timed out while this process was starved; not counted",
			"target", tg.t.Name, "port", ps.port.ID, "waited", late.Round(time.Millisecond))
	}
	return true
}

// changedLocked recomputes the verdict after a port of tg changed from state from, updates
// the metrics and queues the event.
func (c *Checker) changedLocked(tg *target, ps *portState, from State, reason string, now time.Time) {
	ev := Event{Time: now, Target: tg.t.Name, Reason: reason, From: tg.verdict}
	if ps != nil {
		ev.Port, ev.PortFrom, ev.PortTo = ps.port.ID, from, ps.state
		ev.Err, ev.Latency = ps.lastErr, ps.latency
		c.met.setPort(tg.t.Name, ps)
	}
	tg.verdict = tg.override.apply(compose(tg.ports, tg.t.Monitor.Mode))
	ev.To = tg.verdict
	tg.hist.add(ev)
	if ev.From != ev.To {
		c.met.transition(tg.t.Name, ev.To)
		c.log.Info("health verdict changed", "target", tg.t.Name, "from", ev.From, "to", ev.To,
			"port", ev.Port, "reason", reason, "err", ev.Err, "latency", ev.Latency)
	}
	c.events = append(c.events, ev)
	select {
	case c.notify <- struct{}{}:
	default:
	}
}

// dispatch delivers events until ctx is done.
func (c *Checker) dispatch(ctx context.Context) {
	for {
		select {
		case <-ctx.Done():
			return
		case <-c.notify:
			c.flush()
		}
	}
}

// flush delivers the queued events, in order, to every subscriber.
func (c *Checker) flush() {
	c.mu.Lock()
	evs := c.events
	c.events = nil
	subs := make([]func(Event), 0, len(c.subs))
	for _, fn := range c.subs {
		subs = append(subs, fn)
	}
	c.mu.Unlock()
	for _, ev := range evs {
		for _, fn := range subs {
			c.deliver(fn, ev)
		}
	}
}

func (c *Checker) deliver(fn func(Event), ev Event) {
	defer func() {
		if p := recover(); p != nil {
			c.log.Error("health subscriber panicked", "target", ev.Target, "panic", p)
		}
	}()
	fn(ev)
}
