package health

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"net/netip"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/frontdoor-vdi/frontdoor/internal/testkit"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
)

func TestMain(m *testing.M) { testkit.Main(m) }

// behaviour is how a simulated port answers.
type behaviour int

const (
	answer    behaviour = iota // up
	refuse                     // RST or ICMP: fails at once
	blackhole                  // silence: fails at the timeout
	drain                      // HTTP 503
)

// fakeNet answers probes from a table; latency says how long a probe takes in simulated time.
type fakeNet struct {
	clk     fakeClock
	timeout time.Duration
	mu      sync.Mutex // guards ports and calls
	ports   map[netip.AddrPort]behaviour
	calls   int
}

func (f *fakeNet) set(ap netip.AddrPort, b behaviour) {
	f.mu.Lock()
	f.ports[ap] = b
	f.mu.Unlock()
}

func (f *fakeNet) probe(ctx context.Context, ap netip.AddrPort, c *Check) error {
	err, _ := f.result(ap)
	return err
}

func (f *fakeNet) result(ap netip.AddrPort) (error, time.Duration) {
	f.mu.Lock()
	b := f.ports[ap]
	f.calls++
	f.mu.Unlock()
	switch b {
	case refuse:
		return fmt.Errorf("connecting to %s: connection refused", ap), 100 * time.Microsecond
	case blackhole:
		return fmt.Errorf("connecting to %s: %w", ap, ErrTimeout), f.timeout
	case drain:
		return fmt.Errorf("503: %w", ErrDraining), time.Millisecond
	}
	return nil, 100 * time.Microsecond
}

// pending is a simulated probe in flight.
type pending struct {
	tg  *target
	ps  *portState
	seq uint64
	err error
	lat time.Duration
	end time.Time
}

// sim drives a Checker with inline probes on a fake clock.
type sim struct {
	t        *testing.T
	clk      fakeClock
	net      *fakeNet
	c        *Checker
	events   []Event
	inflight []pending
}

func newSim(t *testing.T, seed uint64, targets ...Target) *sim {
	t.Helper()
	clk := newFakeClock()
	fn := &fakeNet{clk: clk, timeout: DefaultMonitor().Timeout, ports: map[netip.AddrPort]behaviour{}}
	r := rand.New(rand.NewPCG(seed, seed))
	c, err := New(targets, Deps{Clock: clk, Probe: fn.probe, Rand: r.Float64, Registry: prometheus.NewRegistry()})
	if err != nil {
		t.Fatal(err)
	}
	s := &sim{t: t, clk: clk, net: fn, c: c}
	c.inline = func(tg *target, ps *portState, seq uint64, start time.Time) {
		err, lat := fn.result(netip.AddrPortFrom(tg.t.Addr, ps.port.ID.Port))
		s.inflight = append(s.inflight, pending{tg, ps, seq, err, lat, start.Add(lat)})
	}
	c.Subscribe(func(e Event) { s.events = append(s.events, e) })
	return s
}

// runUntil steps the schedule until the clock reaches end or stop returns true.
func (s *sim) runUntil(end time.Time, stop func() bool) {
	s.t.Helper()
	for i := 0; s.clk.Now().Before(end); i++ {
		if i > 1_000_000 {
			s.t.Fatal("simulation does not advance")
		}
		now := s.clk.Now()
		next := s.c.step(context.Background(), now)
		// Complete the probes that are done by now, in order; the earliest still in flight
		// bounds the next step.
		slices.SortFunc(s.inflight, func(a, b pending) int { return a.end.Compare(b.end) })
		for len(s.inflight) > 0 && !s.inflight[0].end.After(now) {
			p := s.inflight[0]
			s.inflight = s.inflight[1:]
			s.c.record(p.tg, p.ps, p.seq, p.err, p.lat, p.end)
		}
		if len(s.inflight) > 0 && s.inflight[0].end.Before(next) {
			next = s.inflight[0].end
		}
		s.c.flush()
		if stop != nil && stop() {
			return
		}
		if next.After(end) {
			next = end
		}
		s.clk.Set(next)
	}
}

// verdictEvent returns the first event after since that changed target's verdict to want.
func (s *sim) verdictEvent(target string, want State, since time.Time) (Event, bool) {
	for _, e := range s.events {
		if e.Target == target && e.VerdictChanged() && e.To == want && !e.Time.Before(since) {
			return e, true
		}
	}
	return Event{}, false
}

var gwAddr = netip.MustParseAddr("127.1.0.11")

func gateway(name string, addr netip.Addr, m Monitor) Target {
	return Target{Name: name, Kind: "gateway", Addr: addr, Monitor: m, Ports: []Port{
		{ID: TCP(443), Check: Check{Kind: KindHTTPS}},
		{ID: TCP(4172)},
		{ID: UDP(4172)},
	}}
}

// TestDetectionTimeMatchesPackageDoc runs many failures at random instants and random phases
// and checks the bounds the package doc derives for the defaults.
func TestDetectionTimeMatchesPackageDoc(t *testing.T) {
	tests := []struct {
		name     string
		fault    behaviour
		min, max time.Duration
	}{
		{"a powered-off gateway is down within F·I+T = 1s", blackhole, 750 * time.Millisecond, time.Second},
		{"a killed gateway is down within F·I = 750ms", refuse, 500 * time.Millisecond, 750 * time.Millisecond},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var lo, hi time.Duration = time.Hour, 0
			for seed := range uint64(200) {
				s := newSim(t, seed, gateway("gw", gwAddr, DefaultMonitor()))
				start := s.clk.Now()
				r := rand.New(rand.NewPCG(seed, 99))
				t0 := start.Add(2*time.Second + time.Duration(r.Int64N(int64(time.Second))))
				s.runUntil(t0, nil)
				if !s.c.Eligible("gw") {
					t.Fatalf("seed %d: gateway not eligible before the fault", seed)
				}
				s.net.set(netip.AddrPortFrom(gwAddr, 4172), tt.fault)
				s.net.set(netip.AddrPortFrom(gwAddr, 443), tt.fault)
				t0 = s.clk.Now()
				var ev Event
				s.runUntil(t0.Add(5*time.Second), func() bool {
					var ok bool
					ev, ok = s.verdictEvent("gw", StateDown, t0)
					return ok
				})
				d := ev.Time.Sub(t0)
				if ev.Target == "" || d < tt.min || d > tt.max {
					t.Fatalf("seed %d: detected after %v (event %+v), want %v..%v", seed, d, ev, tt.min, tt.max)
				}
				if ev.Err == nil || ev.Port.Port == 0 {
					t.Fatalf("seed %d: event without a port and an error: %+v", seed, ev)
				}
				lo, hi = min(lo, d), max(hi, d)
			}
			t.Logf("detection over 200 runs: min %v, max %v", lo, hi)
		})
	}
}

// TestFailureJustAfterAProbeStarted puts the failure at the worst instant for the bounds
// of the package doc: just after a probe of the only port started (and saw the port up), so
// that every probe that can see the failure starts later. A probe that started before its
// slot (the early-only jitter this schedule had) made that instant up to J·I earlier than
// the slot it stood for, and detection up to F·I+J·I+T.
func TestFailureJustAfterAProbeStarted(t *testing.T) {
	tests := []struct {
		name  string
		fault behaviour
		max   time.Duration
	}{
		{"a port that goes silent is down within F·I+T", blackhole, time.Second},
		{"a port that refuses is down within F·I", refuse, 750*time.Millisecond + time.Millisecond},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var hi time.Duration
			for seed := range uint64(100) {
				tg := Target{Name: "m", Addr: gwAddr, Monitor: DefaultMonitor(), Ports: []Port{{ID: TCP(4172)}}}
				s := newSim(t, seed, tg)
				r := rand.New(rand.NewPCG(seed, 7))
				s.runUntil(s.clk.Now().Add(time.Second+time.Duration(r.Int64N(int64(time.Second)))), nil)
				calls := s.net.calls
				s.runUntil(s.clk.Now().Add(time.Second), func() bool { return s.net.calls > calls })
				if s.net.calls != calls+1 {
					t.Fatalf("seed %d: %d probes started in one step, want 1", seed, s.net.calls-calls)
				}
				// The probe that just started saw the port up; the fault comes right after.
				s.clk.Set(s.clk.Now().Add(time.Nanosecond))
				s.net.set(netip.AddrPortFrom(gwAddr, 4172), tt.fault)
				t0 := s.clk.Now()
				var ev Event
				s.runUntil(t0.Add(5*time.Second), func() bool {
					var ok bool
					ev, ok = s.verdictEvent("m", StateDown, t0)
					return ok
				})
				d := ev.Time.Sub(t0)
				if ev.Target == "" || d > tt.max {
					t.Fatalf("seed %d: detected after %v (event %+v), want at most %v", seed, d, ev, tt.max)
				}
				hi = max(hi, d)
			}
			t.Logf("worst detection over 100 runs: %v", hi)
		})
	}
}

func TestOnePortClosedMakesTheGatewayIneligible(t *testing.T) {
	s := newSim(t, 1, gateway("gw", gwAddr, DefaultMonitor()))
	s.runUntil(s.clk.Now().Add(2*time.Second), nil)
	// 443 down, 4172 still up: the seed's black screen.
	s.net.set(netip.AddrPortFrom(gwAddr, 443), refuse)
	t0 := s.clk.Now()
	s.runUntil(t0.Add(2*time.Second), func() bool { return !s.c.Eligible("gw") })
	ev, ok := s.verdictEvent("gw", StateDown, t0)
	if !ok || ev.Port != TCP(443) || ev.PortTo != StateDown || ev.Reason != "probe" {
		t.Fatalf("got event %+v (found %v), want gw down because of 443/tcp", ev, ok)
	}
	if d := ev.Time.Sub(t0); d > 750*time.Millisecond {
		t.Errorf("detected after %v, want at most 750ms", d)
	}
	st, _ := s.c.Status("gw")
	want := map[PortID]State{TCP(443): StateDown, TCP(4172): StateUp, UDP(4172): StateUp}
	for _, p := range st.Ports {
		if p.State != want[p.ID] {
			t.Errorf("port %v: %v, want %v", p.ID, p.State, want[p.ID])
		}
	}
	// Back: rise successes, at most R·I after the port answers again.
	s.net.set(netip.AddrPortFrom(gwAddr, 443), answer)
	t1 := s.clk.Now()
	s.runUntil(t1.Add(2*time.Second), func() bool { return s.c.Eligible("gw") })
	if ev, ok := s.verdictEvent("gw", StateUp, t1); !ok || ev.Time.Sub(t1) > 500*time.Millisecond {
		t.Fatalf("back up event %+v (found %v), want within 500ms", ev, ok)
	}
}

func TestAnyOfModeAndOptionalPorts(t *testing.T) {
	m := DefaultMonitor()
	m.Mode = ModeAny
	g := gateway("gw", gwAddr, m)
	opt := gateway("opt", netip.MustParseAddr("127.1.0.12"), DefaultMonitor())
	opt.Ports[2].Optional = true // 4172/udp
	s := newSim(t, 2, g, opt)
	s.net.set(netip.AddrPortFrom(gwAddr, 443), refuse)
	s.net.set(netip.AddrPortFrom(opt.Addr, 4172), refuse) // tcp and udp share the fake
	s.runUntil(s.clk.Now().Add(3*time.Second), nil)
	if !s.c.Eligible("gw") {
		t.Error("any-of gateway with 4172 up is not eligible")
	}
	if s.c.Eligible("opt") {
		t.Error("gateway with required 4172/tcp down is eligible")
	}
}

func TestDrainingFromHTTP503(t *testing.T) {
	s := newSim(t, 3, gateway("gw", gwAddr, DefaultMonitor()))
	s.net.set(netip.AddrPortFrom(gwAddr, 443), drain)
	s.runUntil(s.clk.Now().Add(time.Second), nil)
	if v, _ := s.c.Verdict("gw"); v != StateDraining || s.c.Eligible("gw") {
		t.Fatalf("verdict %v, eligible %v; want draining and not eligible", v, s.c.Eligible("gw"))
	}
}

func TestPassiveReportsMarkDownBeforeTheNextProbe(t *testing.T) {
	s := newSim(t, 4, gateway("gw", gwAddr, DefaultMonitor()))
	s.runUntil(s.clk.Now().Add(time.Second), nil)
	calls := s.net.calls
	reset := errors.New("connection reset by peer")
	for range 3 {
		if err := s.c.ReportFailure("gw", TCP(4172), reset); err != nil {
			t.Fatal(err)
		}
	}
	s.c.flush()
	if s.c.Eligible("gw") || s.net.calls != calls {
		t.Fatalf("eligible %v after 3 reports and %d probes; want down with no probe", s.c.Eligible("gw"), s.net.calls-calls)
	}
	ev := s.events[len(s.events)-1]
	if ev.Reason != "passive" || !errors.Is(ev.Err, reset) || ev.Port != TCP(4172) {
		t.Errorf("event %+v, want a passive event on 4172/tcp with the reported error", ev)
	}
	// Probes (the port answers) bring it back.
	t0 := s.clk.Now()
	s.runUntil(t0.Add(2*time.Second), func() bool { return s.c.Eligible("gw") })
	if !s.c.Eligible("gw") || s.clk.Now().Sub(t0) > 500*time.Millisecond {
		t.Errorf("eligible %v after %v; want back within R·I", s.c.Eligible("gw"), s.clk.Now().Sub(t0))
	}
	if err := s.c.ReportFailure("nope", TCP(1), reset); !errors.Is(err, ErrUnknownTarget) {
		t.Errorf("unknown target: %v", err)
	}
	if err := s.c.ReportFailure("gw", TCP(1), reset); !errors.Is(err, ErrUnknownPort) {
		t.Errorf("unknown port: %v", err)
	}
}

func TestAdminOverrides(t *testing.T) {
	s := newSim(t, 5, gateway("gw", gwAddr, DefaultMonitor()))
	s.runUntil(s.clk.Now().Add(time.Second), nil)
	steps := []struct {
		o    Override
		down bool // the probes see the gateway down
		want State
	}{
		{OverrideDown, false, StateDown},
		{OverrideDrain, false, StateDraining},
		{OverrideNone, false, StateUp},
		{OverrideUp, true, StateUp},
		{OverrideDrain, true, StateDown},
		{OverrideNone, true, StateDown},
	}
	for i, st := range steps {
		b := answer
		if st.down {
			b = refuse
		}
		s.net.set(netip.AddrPortFrom(gwAddr, 443), b)
		if err := s.c.SetOverride("gw", st.o); err != nil {
			t.Fatal(err)
		}
		s.runUntil(s.clk.Now().Add(time.Second), nil)
		if v, _ := s.c.Verdict("gw"); v != st.want {
			t.Fatalf("step %d: override %v, probes down %v: verdict %v, want %v", i, st.o, st.down, v, st.want)
		}
	}
	if err := s.c.SetOverride("nope", OverrideUp); !errors.Is(err, ErrUnknownTarget) {
		t.Errorf("unknown target: %v", err)
	}
	var admin int
	for _, e := range s.events {
		if e.Reason == "admin" {
			admin++
		}
	}
	if admin != len(steps) {
		t.Errorf("%d admin events, want %d", admin, len(steps))
	}
}

func TestInitialDownNeedsRise(t *testing.T) {
	m := DefaultMonitor()
	m.InitialDown = true
	s := newSim(t, 6, gateway("gw", gwAddr, m))
	if s.c.Eligible("gw") {
		t.Fatal("eligible before any probe with initial down")
	}
	s.runUntil(s.clk.Now().Add(time.Second), nil)
	if !s.c.Eligible("gw") {
		t.Fatal("not eligible after a second of good probes")
	}
}

// TestProbesAreSpreadOverTheInterval loads many targets at once and checks that their first
// probes do not come in a storm.
func TestProbesAreSpreadOverTheInterval(t *testing.T) {
	var targets []Target
	for i := range 1000 {
		targets = append(targets, Target{Name: fmt.Sprint("m", i), Addr: gwAddr, Ports: []Port{{ID: TCP(uint16(1000 + i))}}, Monitor: DefaultMonitor()})
	}
	s := newSim(t, 7, targets...)
	start := s.clk.Now()
	buckets := make([]int, 10) // 25ms buckets of the first interval
	var prev int
	s.runUntil(start.Add(250*time.Millisecond), func() bool {
		b := int(s.clk.Now().Sub(start) / (25 * time.Millisecond))
		if b < len(buckets) {
			buckets[b] += s.net.calls - prev
		}
		prev = s.net.calls
		return false
	})
	for i, n := range buckets {
		if n > 200 {
			t.Errorf("bucket %d holds %d of 1000 first probes: %v", i, n, buckets)
		}
	}
}

// TestProbesStartInBatches checks that many ports with the same interval start their probes
// at a few shared instants (their phases are multiples of quantum), which is what keeps the
// wake-ups of a large Checker down, and that the probes of a port start Interval apart.
func TestProbesStartInBatches(t *testing.T) {
	m := DefaultMonitor()
	m.Interval = time.Second
	s, starts := simStarts(t, 1000, m)
	begin := s.clk.Now()
	instants := map[time.Time]bool{}
	s.runUntil(begin.Add(5*time.Second), func() bool {
		instants[s.clk.Now()] = true
		return false
	})
	if n := len(instants); n > 5*int(time.Second/quantum)+1 {
		t.Errorf("3000 ports at 1s woke the Checker %d times in 5s, want at most %d", n, 5*int(time.Second/quantum)+1)
	}
	for ps, ts := range starts {
		for i := 1; i < len(ts); i++ {
			if d := ts[i].Sub(ts[i-1]); d != m.Interval {
				t.Fatalf("port %v: probes %d and %d started %v apart, want %v", ps.port.ID, i-1, i, d, m.Interval)
			}
		}
		if len(ts) != 5 {
			t.Fatalf("port %v: %d probes in 5s, want 5", ps.port.ID, len(ts))
		}
	}
}

func TestMetricsFollowTransitions(t *testing.T) {
	reg := prometheus.NewRegistry()
	clk := newFakeClock()
	fn := &fakeNet{clk: clk, timeout: 250 * time.Millisecond, ports: map[netip.AddrPort]behaviour{}}
	c, err := New([]Target{gateway("gw", gwAddr, DefaultMonitor())}, Deps{Clock: clk, Probe: fn.probe, Registry: reg})
	if err != nil {
		t.Fatal(err)
	}
	c.inline = func(tg *target, ps *portState, seq uint64, start time.Time) {
		err, lat := fn.result(netip.AddrPortFrom(tg.t.Addr, ps.port.ID.Port))
		c.record(tg, ps, seq, err, lat, start)
	}
	fn.set(netip.AddrPortFrom(gwAddr, 443), refuse)
	for range 40 {
		clk.Set(c.step(context.Background(), clk.Now()))
	}
	if got := testutil.ToFloat64(c.met.targetState.WithLabelValues("gw")); got != float64(StateDown) {
		t.Errorf("target state gauge %v, want %v", got, float64(StateDown))
	}
	if got := testutil.ToFloat64(c.met.transitions.WithLabelValues("gw", "down")); got != 1 {
		t.Errorf("down transitions %v, want 1", got)
	}
	if n := testutil.CollectAndCount(c.met.latency); n == 0 {
		t.Error("no latency histogram series")
	}
	if _, err := New(nil, Deps{Registry: reg}); err == nil {
		t.Error("registering twice on one registry did not fail")
	}
}

func TestNewRejectsBadTargets(t *testing.T) {
	tests := []struct {
		name string
		tg   []Target
	}{
		{"a target without a name", []Target{{Addr: gwAddr, Ports: []Port{{ID: TCP(1)}}}}},
		{"a target without an address", []Target{{Name: "a", Ports: []Port{{ID: TCP(1)}}}}},
		{"a target without ports", []Target{{Name: "a", Addr: gwAddr}}},
		{"a tls check on a udp port", []Target{{Name: "a", Addr: gwAddr, Ports: []Port{{ID: UDP(1), Check: Check{Kind: KindTLS}}}}}},
		{"a port listed twice", []Target{{Name: "a", Addr: gwAddr, Ports: []Port{{ID: TCP(1)}, {ID: TCP(1)}}}}},
		{"two targets with one name", []Target{{Name: "a", Addr: gwAddr, Ports: []Port{{ID: TCP(1)}}}, {Name: "a", Addr: gwAddr, Ports: []Port{{ID: TCP(2)}}}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if _, err := New(tt.tg, Deps{}); !errors.Is(err, ErrInvalidTarget) {
				t.Errorf("New = %v, want ErrInvalidTarget", err)
			}
		})
	}
}

func TestRunLifecycle(t *testing.T) {
	clk := newFakeClock()
	c, err := New([]Target{gateway("gw", gwAddr, DefaultMonitor())}, Deps{Clock: clk, Probe: func(context.Context, netip.AddrPort, *Check) error { return nil }})
	if err != nil {
		t.Fatal(err)
	}
	errc := make(chan error, 1)
	started := make(chan struct{})
	go func() {
		close(started)
		errc <- c.Run(context.Background())
	}()
	<-started
	// A second Run either finds the first running or, if it won the race, the first finds it.
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if err := c.Run(ctx); err != nil && !errors.Is(err, ErrRunning) {
		t.Fatalf("second Run = %v", err)
	}
	c.Close()
	if err := <-errc; err != nil && !errors.Is(err, ErrRunning) {
		t.Fatalf("Run after Close = %v, want nil", err)
	}
	if err := c.Run(context.Background()); !errors.Is(err, ErrClosed) {
		t.Fatalf("Run after Close = %v, want ErrClosed", err)
	}
}

// TestJitterStartsProbesEarly: with Jitter set, each probe starts within Jitter×Interval
// before its slot, and not all of them at it; slots stay Interval apart.
func TestJitterStartsProbesEarly(t *testing.T) {
	m := DefaultMonitor()
	m.Interval, m.Jitter = time.Second, 0.2
	s, starts := simStarts(t, 50, m)
	s.runUntil(s.clk.Now().Add(6*time.Second), func() bool { return false })
	early := 0
	for ps, ts := range starts {
		for i := 1; i < len(ts); i++ {
			// Consecutive starts: Interval apart, give or take the two probes' jitter.
			d := ts[i].Sub(ts[i-1])
			if d < m.Interval-time.Duration(m.Jitter*float64(m.Interval)) || d > m.Interval+time.Duration(m.Jitter*float64(m.Interval)) {
				t.Fatalf("port %v: probes %d and %d started %v apart, want %v ± %v×", ps.port.ID, i-1, i, d, m.Interval, m.Jitter)
			}
			if d != m.Interval {
				early++
			}
		}
	}
	if early == 0 {
		t.Fatal("with jitter 0.2 every probe started exactly at its slot")
	}
}

// simStarts builds a simulation of n gateways monitored with m whose probes only record
// their start times, by port.
func simStarts(t *testing.T, n int, m Monitor) (*sim, map[*portState][]time.Time) {
	t.Helper()
	var targets []Target
	for i := range n {
		targets = append(targets, gateway(fmt.Sprint("gw", i), gwAddr, m))
	}
	s := newSim(t, 8, targets...)
	starts := map[*portState][]time.Time{}
	s.c.inline = func(tg *target, ps *portState, seq uint64, start time.Time) {
		starts[ps] = append(starts[ps], start)
	}
	return s, starts
}

// TestDefiniteOnceEveryRequiredPortAnswered: a gateway's verdict is not definite before its
// ports were probed, is once each answered, and stays so; an override is always definite.
func TestDefiniteOnceEveryRequiredPortAnswered(t *testing.T) {
	up := gateway("up", gwAddr, DefaultMonitor())
	down := gateway("down", netip.MustParseAddr("127.1.0.12"), DefaultMonitor())
	forced := gateway("forced", netip.MustParseAddr("127.1.0.13"), DefaultMonitor())
	s := newSim(t, 4, up, down, forced)
	s.net.set(netip.AddrPortFrom(down.Addr, 443), refuse)
	for _, name := range []string{"up", "down"} {
		if _, ok := s.c.Definite(name); ok {
			t.Fatalf("%s is definite before any probe", name)
		}
	}
	if err := s.c.SetOverride("forced", OverrideDown); err != nil {
		t.Fatal(err)
	}
	if v, ok := s.c.Definite("forced"); !ok || v != StateDown {
		t.Fatalf("an overridden gateway: %v %v, want down and definite", v, ok)
	}
	s.runUntil(s.clk.Now().Add(3*time.Second), nil)
	if v, ok := s.c.Definite("up"); !ok || v != StateUp {
		t.Fatalf("up after its probes: %v %v, want up and definite", v, ok)
	}
	if v, ok := s.c.Definite("down"); !ok || v != StateDown {
		t.Fatalf("down after its probes: %v %v, want down and definite", v, ok)
	}
	if _, ok := s.c.Definite("nope"); ok {
		t.Fatal("an unknown target is definite")
	}
}
