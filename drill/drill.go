// Package drill runs seed 004's failure drills against a lab site: clients hold live sessions
// that stream TCP and UDP, a failure is injected into the front door or gateway that carries
// them — power off (blackhole), shut down, one port's service down (the "black screen") — in
// secure-gateway mode on and off, and the clients' own timelines say when each saw the cut, when
// it was back in its desktop and whether it was the same session.
package drill

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/netip"
	"slices"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/frontdoor-vdi/frontdoor/client"
	"github.com/frontdoor-vdi/frontdoor/lab"
)

// Scenario is one failure of seed 004.
type Scenario struct {
	// Name is the short name used on the command line.
	Name string
	// Criterion is the seed's wording of the failure.
	Criterion string
	// inject applies the failure to the front door that carries the first client.
	inject func(r *run, fd *frontDoor) error
}

// Scenarios are the failures of seed 004, in the seed's order, plus the black screen.
var Scenarios = []Scenario{
	{Name: "gateway-power-off", Criterion: "Gateway / connection server power off (packets dropped, no reset)",
		inject: func(r *run, fd *frontDoor) error { fd.wire.BlackholePorts(fd.gatewayPorts...); return nil }},
	{Name: "gateway-shutdown", Criterion: "Gateway / connection server shut down (graceful)",
		inject: func(r *run, fd *frontDoor) error { return r.lab.Runtime.Gateways[fd.gateway].Close() }},
	{Name: "frontdoor-power-off", Criterion: "Front door (load balancer) power off",
		inject: func(r *run, fd *frontDoor) error { fd.wire.Blackhole(true); return nil }},
	{Name: "frontdoor-shutdown", Criterion: "Front door (load balancer) shut down (graceful)",
		inject: func(r *run, fd *frontDoor) error { return r.lab.Runtime.StopNode(fd.node) }},
	{Name: "port-down", Criterion: "One port's service down, the others up (the black screen: 8443 down, 4172 and HTTPS up)",
		inject: func(r *run, fd *frontDoor) error { fd.wire.DownPort(8443); return nil }},
}

// Options configure a drill run.
type Options struct {
	// Scenarios are the names to run; empty runs all.
	Scenarios []string
	// Modes are "gateway" and/or "direct"; empty runs both.
	Modes []string
	// Clients is the number of clients holding sessions. Default: 4 (alice, bob, carol, dave).
	Clients int
	// Observe is how long to watch after the failure. Default: 6s.
	Observe time.Duration
	// Base is the first of three loopback /16 blocks the drill site uses (one per zone).
	// Default: 61 (127.61-63.x.x).
	Base int
	// Logger receives the site's logs. Default: discard.
	Logger *slog.Logger
	// Progress receives a line per step. Default: none.
	Progress io.Writer
}

// ClientResult is what one client saw.
type ClientResult struct {
	User        string         `json:"user"`
	Session     string         `json:"session"`
	Machine     string         `json:"machine"`
	ViaBefore   string         `json:"via_before"`
	ViaAfter    string         `json:"via_after"`
	Affected    bool           `json:"affected"`
	Cut         bool           `json:"cut"`
	CutAfter    time.Duration  `json:"cut_after_ns"`
	Back        bool           `json:"back"`
	BackAfter   time.Duration  `json:"back_after_ns"`
	Gap         time.Duration  `json:"gap_ns"`
	SameSession bool           `json:"same_session"`
	Relaunched  bool           `json:"relaunched"`
	Cuts        int            `json:"cuts"`
	Events      []client.Event `json:"events"`
}

// Result is one scenario in one mode.
type Result struct {
	Scenario  string         `json:"scenario"`
	Mode      string         `json:"mode"`
	Criterion string         `json:"criterion"`
	Expected  string         `json:"expected"`
	Actual    string         `json:"actual"`
	Pass      bool           `json:"pass"`
	Target    string         `json:"target"`
	Start     time.Time      `json:"start"`
	FaultAt   time.Time      `json:"fault_at"`
	End       time.Time      `json:"end"`
	Clients   []ClientResult `json:"clients"`
	Error     string         `json:"error,omitempty"`
}

// Report is a whole drill.
type Report struct {
	Started time.Time `json:"started"`
	Results []Result  `json:"results"`
}

// Passed reports whether every result passed.
func (r Report) Passed() bool {
	for _, x := range r.Results {
		if !x.Pass {
			return false
		}
	}
	return len(r.Results) > 0
}

// Expected results (our promise against the seed's 20–60 s manual reconnects).
const (
	ExpectDirect  = "Desktop remains connected"
	ExpectGateway = "Back in the same session automatically within 3 s"
	MaxBack       = 3 * time.Second
)

// Run runs the selected scenarios in the selected modes, one fresh site each.
func Run(ctx context.Context, o Options) (Report, error) {
	if o.Clients == 0 {
		o.Clients = 4
	}
	if o.Observe == 0 {
		o.Observe = 6 * time.Second
	}
	if o.Base == 0 {
		o.Base = 61
	}
	if o.Logger == nil {
		o.Logger = slog.New(slog.NewTextHandler(io.Discard, nil))
	}
	if o.Progress == nil {
		o.Progress = io.Discard
	}
	modes := o.Modes
	if len(modes) == 0 {
		modes = []string{"gateway", "direct"}
	}
	var scen []Scenario
	for _, s := range Scenarios {
		if len(o.Scenarios) == 0 || slices.Contains(o.Scenarios, s.Name) {
			scen = append(scen, s)
		}
	}
	if len(scen) < max(1, len(o.Scenarios)) {
		return Report{}, fmt.Errorf("unknown scenario in %v (known: %s)", o.Scenarios, strings.Join(Names(), ", "))
	}
	for _, m := range modes {
		if m != "gateway" && m != "direct" {
			return Report{}, fmt.Errorf("mode %q is not gateway or direct", m)
		}
	}
	rep := Report{Started: time.Now()}
	for _, s := range scen {
		for _, m := range modes {
			if ctx.Err() != nil {
				return rep, ctx.Err()
			}
			fmt.Fprintf(o.Progress, "drill %s, secure gateway %s ...\n", s.Name, map[string]string{"gateway": "on", "direct": "off"}[m])
			res := runOne(ctx, o, s, m)
			fmt.Fprintf(o.Progress, "  %s: %s\n", passWord(res.Pass), res.Actual)
			rep.Results = append(rep.Results, res)
		}
	}
	return rep, nil
}

// Names lists the scenario names.
func Names() []string {
	var n []string
	for _, s := range Scenarios {
		n = append(n, s.Name)
	}
	return n
}

func passWord(p bool) string {
	if p {
		return "PASS"
	}
	return "MISS"
}

// frontDoor is one front door host of the drill site behind its wire.
type frontDoor struct {
	node, gateway string
	public        netip.Addr
	wire          *Wire
	gatewayPorts  []uint16
}

// run is one scenario in one mode.
type run struct {
	o     Options
	lab   *lab.Lab
	doors map[string]*frontDoor // by gateway name
	dns   string
}

// inner is the address a front door really listens on, behind its wire.
func inner(a netip.Addr) netip.Addr {
	b := a.As4()
	b[3] += 100
	return netip.AddrFrom4(b)
}

func runOne(ctx context.Context, o Options, s Scenario, mode string) Result {
	res := Result{Scenario: s.Name, Mode: mode, Criterion: s.Criterion, Start: time.Now()}
	res.Expected = ExpectGateway
	if mode == "direct" {
		res.Expected = ExpectDirect
	}
	err := runScenario(ctx, o, s, mode, &res)
	res.End = time.Now()
	if err != nil {
		res.Error = err.Error()
		res.Actual = "drill error: " + err.Error()
		res.Pass = false
	}
	return res
}

func runScenario(ctx context.Context, o Options, s Scenario, mode string, res *Result) error {
	cfg, err := lab.MovedSite(o.Base, nil)
	if err != nil {
		return err
	}
	r := &run{o: o, doors: map[string]*frontDoor{}}
	public := map[netip.Addr]bool{}
	for _, g := range cfg.Gateways {
		a, _ := netip.ParseAddr(g.Address)
		public[a] = true
	}
	// The wires come up first, on the public addresses; the site binds the inner ones.
	for _, g := range cfg.Gateways {
		a, _ := netip.ParseAddr(g.Address)
		fd := &frontDoor{node: g.Node, gateway: g.Name, public: a}
		var tcp, udp []uint16
		if g.QUICPort != 0 {
			udp = append(udp, uint16(g.QUICPort))
		}
		for _, p := range g.Ports {
			if p.Protocol == "udp" {
				udp = append(udp, uint16(p.Port))
			} else {
				tcp = append(tcp, uint16(p.Port))
			}
			fd.gatewayPorts = append(fd.gatewayPorts, uint16(p.Port))
		}
		for _, n := range cfg.Nodes {
			for _, l := range n.Listeners {
				if ap, err := netip.ParseAddrPort(l.Address); err == nil && ap.Addr() == a && n.Name == g.Node {
					tcp = append(tcp, ap.Port())
				}
			}
		}
		w, err := NewWire(a, inner(a), tcp, udp)
		if err != nil {
			r.closeWires()
			return fmt.Errorf("wire for %s: %w", g.Name, err)
		}
		fd.wire = w
		r.doors[g.Name] = fd
	}
	defer r.closeWires()

	sctx, cancel := context.WithCancel(ctx)
	defer cancel()
	l, err := lab.New(sctx, lab.Options{Config: cfg, Logger: o.Logger, HeartbeatInterval: 500 * time.Millisecond,
		Rebind: func(a netip.Addr) netip.Addr {
			if public[a] {
				return inner(a)
			}
			return a
		}})
	if err != nil {
		return err
	}
	r.lab = l
	served := make(chan error, 1)
	go func() { served <- l.Serve(sctx) }()
	defer func() { cancel(); <-served }()
	for _, n := range cfg.Nodes {
		for _, li := range n.Listeners {
			if li.Kind == "dns" && r.dns == "" {
				r.dns = li.Address
			}
		}
	}
	if err := r.waitGateways(ctx, 15*time.Second); err != nil {
		return err
	}
	if mode == "direct" {
		for _, g := range cfg.Groups {
			l.Runtime.Broker.SetSecureGateway(g.Name, false)
		}
	}

	// Clients launch through DNS and hold their sessions, streaming.
	users := []string{"alice", "bob", "carol", "dave"}
	if o.Clients < len(users) {
		users = users[:o.Clients]
	}
	var sessions []*held
	defer func() {
		for _, h := range sessions {
			h.stop()
		}
	}()
	for _, u := range users {
		h, err := r.hold(sctx, u)
		if err != nil {
			return fmt.Errorf("client %s: %w", u, err)
		}
		sessions = append(sessions, h)
	}
	time.Sleep(500 * time.Millisecond) // let traffic flow before the failure

	// The failure hits the front door that carries the first client (in direct mode, the
	// front door of the first client's zone).
	first := sessions[0]
	target := r.doorFor(first)
	if target == nil {
		return errors.New("no front door carries the first client")
	}
	res.Target = target.gateway
	before := map[*held]string{}
	for _, h := range sessions {
		before[h], _ = h.s.Via()
	}
	res.FaultAt = time.Now()
	if err := s.inject(r, target); err != nil {
		return fmt.Errorf("injecting %s: %w", s.Name, err)
	}
	r.observe(ctx, sessions, before, target, mode, res)
	judge(res, mode)
	return nil
}

// closeWires closes every wire.
func (r *run) closeWires() {
	for _, fd := range r.doors {
		if fd.wire != nil {
			fd.wire.Close()
		}
	}
}

func (r *run) waitGateways(ctx context.Context, d time.Duration) error {
	deadline := time.Now().Add(d)
	for {
		up := 0
		for name := range r.doors {
			if r.lab.Runtime.Health.Eligible(name) {
				up++
			}
		}
		if up == len(r.doors) {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("only %d of %d gateways up after %s", up, len(r.doors), d)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(50 * time.Millisecond):
		}
	}
}

// doorFor returns the front door a client's traffic goes through (gateway mode), or the
// first front door of its machine's zone (direct mode).
func (r *run) doorFor(h *held) *frontDoor {
	via, _ := h.s.Via()
	if fd := r.doors[via]; fd != nil {
		return fd
	}
	zone := h.s.Descriptor().Zone
	var names []string
	for name := range r.doors {
		names = append(names, name)
	}
	sort.Strings(names)
	for _, g := range r.lab.Config.Gateways {
		if g.Zone == zone {
			return r.doors[g.Name]
		}
	}
	return r.doors[names[0]]
}

// held is a client session kept busy with traffic.
type held struct {
	user   string
	s      *client.Session
	cancel context.CancelFunc
	wg     sync.WaitGroup
}

func (h *held) stop() {
	h.cancel()
	h.s.Close()
	h.wg.Wait()
}

func (r *run) hold(ctx context.Context, user string) (*held, error) {
	pool := r.lab.Runtime.CA.Pool()
	name := strings.TrimSuffix(r.lab.Config.GSLB.Names[0].Name, ".")
	ln := &client.Launcher{Name: name, DNSServer: r.dns, User: user, Password: "lab", Resource: "desktop",
		Endpoint: user + "-laptop", RootCAs: pool}
	lctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	d, _, err := ln.Launch(lctx)
	if err != nil {
		return nil, err
	}
	s, err := client.Open(ctx, client.Options{Descriptor: d, RootCAs: pool, Relaunch: ln.Relaunch, Logger: r.o.Logger})
	if err != nil {
		return nil, err
	}
	if err := s.WaitUp(lctx); err != nil {
		s.Close()
		return nil, err
	}
	hctx, hcancel := context.WithCancel(ctx)
	h := &held{user: user, s: s, cancel: hcancel}
	h.wg.Add(1)
	go func() {
		defer h.wg.Done()
		t := time.NewTicker(100 * time.Millisecond)
		defer t.Stop()
		for {
			select {
			case <-hctx.Done():
				return
			case <-t.C:
			}
			if s.Up() {
				ectx, c := context.WithTimeout(hctx, 500*time.Millisecond)
				s.EchoTCP(ectx, 8443, 512)
				c()
			}
		}
	}()
	return h, nil
}

// observe watches until every affected client is back and steady, or Observe runs out.
func (r *run) observe(ctx context.Context, hs []*held, before map[*held]string, target *frontDoor, mode string, res *Result) {
	deadline := res.FaultAt.Add(r.o.Observe)
	settle := time.Time{}
	for time.Now().Before(deadline) && ctx.Err() == nil {
		res.Clients = res.Clients[:0]
		allBack := true
		for _, h := range hs {
			cr := summarize(h, before[h], target, mode, res.FaultAt)
			res.Clients = append(res.Clients, cr)
			if cr.Cut && !cr.Back {
				allBack = false
			}
		}
		// In gateway mode wait until the affected clients are back and have stayed up for a
		// second (a loop would cut again); in direct mode watch the whole window.
		if mode == "gateway" && allBack && hasCut(res.Clients) {
			if settle.IsZero() {
				settle = time.Now().Add(time.Second)
			} else if time.Now().After(settle) {
				break
			}
		}
		time.Sleep(50 * time.Millisecond)
	}
	res.Clients = res.Clients[:0]
	for _, h := range hs {
		res.Clients = append(res.Clients, summarize(h, before[h], target, mode, res.FaultAt))
	}
}

func hasCut(cs []ClientResult) bool {
	for _, c := range cs {
		if c.Cut {
			return true
		}
	}
	return false
}

func summarize(h *held, via string, target *frontDoor, mode string, fault time.Time) ClientResult {
	d := h.s.Descriptor()
	cr := ClientResult{User: h.user, Session: d.SessionID, Machine: d.Machine, ViaBefore: via}
	cr.ViaAfter, _ = h.s.Via()
	cr.Affected = via == target.gateway || (mode == "direct" && d.Zone == zoneOf(target))
	var cutAt time.Time
	for _, ev := range h.s.Timeline() {
		cr.Events = append(cr.Events, ev)
		if ev.At.Before(fault) {
			continue
		}
		switch ev.Kind {
		case client.EventCut:
			cr.Cuts++
			if !cr.Cut {
				cr.Cut, cutAt, cr.CutAfter = true, ev.At, ev.At.Sub(fault)
			}
		case client.EventBack:
			if cr.Cut && !cr.Back {
				cr.Back, cr.BackAfter, cr.Gap = true, ev.At.Sub(fault), ev.At.Sub(cutAt)
				cr.SameSession, cr.Relaunched = ev.SameSession, ev.Relaunched
			}
		}
	}
	return cr
}

func zoneOf(fd *frontDoor) string {
	// Gateway names are gw-<zone>-<n> in the lab site.
	parts := strings.Split(fd.gateway, "-")
	if len(parts) >= 3 {
		return parts[1]
	}
	return ""
}

// judge fills in Actual and Pass from the clients' results.
func judge(res *Result, mode string) {
	var affected []ClientResult
	for _, c := range res.Clients {
		if c.Affected {
			affected = append(affected, c)
		}
	}
	if len(affected) == 0 {
		res.Actual, res.Pass = "no client was on the failed front door", false
		return
	}
	if mode == "direct" {
		cut := 0
		for _, c := range res.Clients {
			if c.Cut {
				cut++
			}
		}
		if cut == 0 {
			res.Actual, res.Pass = fmt.Sprintf("Desktop remained connected (%d of %d clients on the failed front door's zone, none cut)", len(affected), len(res.Clients)), true
		} else {
			res.Actual = fmt.Sprintf("%d of %d clients were cut", cut, len(res.Clients))
		}
		return
	}
	var worstCut, worstBack, worstGap time.Duration
	pass := true
	var notes []string
	for _, c := range affected {
		worstCut, worstBack, worstGap = max(worstCut, c.CutAfter), max(worstBack, c.BackAfter), max(worstGap, c.Gap)
		switch {
		case !c.Cut:
			notes = append(notes, c.User+" never saw a cut")
		case !c.Back:
			pass = false
			notes = append(notes, c.User+" not back")
		case !c.SameSession:
			pass = false
			notes = append(notes, c.User+" back in a NEW session")
		case c.Gap > MaxBack:
			pass = false
			notes = append(notes, fmt.Sprintf("%s back after %.2f s", c.User, c.Gap.Seconds()))
		case c.Cuts > 1:
			pass = false
			notes = append(notes, fmt.Sprintf("%s cut %d times (a loop)", c.User, c.Cuts))
		}
	}
	res.Pass = pass
	res.Actual = fmt.Sprintf("Cut seen after %.2f s, back in the same session automatically %.2f s after the failure (%.2f s after the cut; %d clients affected)",
		worstCut.Seconds(), worstBack.Seconds(), worstGap.Seconds(), len(affected))
	if len(notes) > 0 {
		res.Actual += "; " + strings.Join(notes, "; ")
	}
}
