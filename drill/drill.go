// Package drill runs seed 004's failure drills against a distributed lab site: an embedded
// 3-member etcd cluster is the site database and every node runs as its own `frontdoor serve`
// process, each front door behind a fault-injection wire. Clients hold live sessions that
// stream TCP and UDP, a failure is injected into the front door or gateway that carries them
// — power off (SIGKILL behind a blackhole), shut down (SIGTERM), a gateway's ports blackholed
// or stopped, one port's service down (the "black screen") — or into the site database (an
// etcd member stopped), or a node is killed while launches are in flight, in secure-gateway
// mode on and off, and the clients' own timelines say when each saw the cut, when it was back
// in its desktop and whether it was the same session.
package drill

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/netip"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/frontdoor-vdi/frontdoor/client"
	"github.com/frontdoor-vdi/frontdoor/client/admin"
	"github.com/frontdoor-vdi/frontdoor/configs"
	"github.com/frontdoor-vdi/frontdoor/internal/browser"
	"github.com/frontdoor-vdi/frontdoor/lab"
	"github.com/miekg/dns"
)

// Scenario is one failure of seed 004, or of the distributed site.
type Scenario struct {
	// Name is the short name used on the command line.
	Name string
	// Criterion is the seed's wording of the failure.
	Criterion string
	// Note says how the lab realises the failure, where that is not obvious.
	Note string
	// Modes are the secure-gateway modes the scenario runs in; nil: both.
	Modes []string
	// quiet: the failure is on no client's path, so no client may see anything, in any mode.
	quiet bool
	// expect is the expected result in gateway mode, when not ExpectGateway.
	expect string
	// etcdWires puts every zone's nodes behind a wire of the zone toward the site database
	// (run.etcdWires), which the failure may cut.
	etcdWires bool
	// browser: the first client is browserUser's desktop in Chromium, opened through the
	// portal (browser.go); the failure hits its gateway. It needs Chromium and certutil.
	browser bool
	// pick chooses the front door the failure hits instead of the first client's; when
	// it carries no client, no client may see anything (as quiet).
	pick func(ctx context.Context, r *run, first *frontDoor) (*frontDoor, error)
	// before runs just before the failure (a launch storm that gets under way).
	before func(ctx context.Context, r *run, fd *frontDoor) error
	// inject applies the failure to the front door that carries the first client and
	// returns what it hit.
	inject func(ctx context.Context, r *run, fd *frontDoor) (string, error)
	// after runs once the clients have been observed: it counts what the failure did to
	// launches and the site database.
	after func(ctx context.Context, r *run, res *Result) error
}

// Scenarios are the failures of seed 004, in the seed's order, plus the black screen, plus
// the distributed site's own: a database member down, a node killed in a launch storm.
var Scenarios = []Scenario{
	{Name: "gateway-power-off", Criterion: "Gateway / connection server power off (packets dropped, no reset)",
		Note: "every gateway port of the host is blackholed at its wire (TCP and UDP, QUIC too); the node's launch API and DNS stay up",
		inject: func(_ context.Context, r *run, fd *frontDoor) (string, error) {
			fd.wire.BlackholePorts(fd.gatewayPorts()...)
			return fd.gateway, nil
		}},
	{Name: "gateway-shutdown", Criterion: "Gateway / connection server shut down (graceful)",
		Note: "in the lab a gateway runs in its front door's process, whose SIGTERM is the front-door shut-down row; " +
			"here the gateway's service alone stops: at its wire every gateway port closes (open channels end with a FIN, " +
			"new connections are refused, UDP answers port unreachable) while the node's launch API and DNS keep running",
		inject: func(_ context.Context, r *run, fd *frontDoor) (string, error) {
			for _, p := range fd.tcp {
				fd.wire.DownPort(p)
			}
			fd.wire.StopUDP(fd.udp...)
			return fd.gateway, nil
		}},
	{Name: "browser-gateway-power-off", Criterion: "Gateway / connection server power off under a desktop in the browser",
		Note: "alice's desktop is in Chromium, opened at the portal (noVNC over a WebSocket to the gateway's HTTPS port); every port of " +
			"her gateway's host is blackholed at its wire (packets dropped, no reset) while the page types a key every 100 ms and reads " +
			"the canvas back; the page notices the silence of its pings and resumes the stream through the next gateway; " +
			"secure gateway ticked only (a browser reaches desktops through gateways)",
		Modes: []string{"gateway"}, browser: true,
		inject: func(_ context.Context, r *run, fd *frontDoor) (string, error) {
			fd.wire.BlackholePorts(fd.gatewayPorts()...)
			return fd.gateway, nil
		}},
	{Name: "frontdoor-power-off", Criterion: "Front door (load balancer) power off",
		Note: "the node's address is blackholed at its wire and its process gets SIGKILL at the same moment",
		inject: func(_ context.Context, r *run, fd *frontDoor) (string, error) {
			fd.wire.Blackhole(true)
			return fd.node, r.lab.Signal(fd.node, syscall.SIGKILL)
		}},
	{Name: "frontdoor-shutdown", Criterion: "Front door (load balancer) shut down (graceful)",
		Note: fmt.Sprintf("SIGTERM of the node's process: its DNS and APIs stop at once, its gateway drains (no new session, "+
			"health port 503) and closes what it carries after proxy.drain_timeout, which the drill site sets to %s", drainTimeout),
		inject: func(_ context.Context, r *run, fd *frontDoor) (string, error) {
			return fd.node, r.lab.Signal(fd.node, syscall.SIGTERM)
		}},
	{Name: "port-down", Criterion: "One port's service down, the others up (the black screen: 8443 down, 4172 and HTTPS up)",
		Note: "8443/tcp refuses at the gateway's wire and its open connections are cut; every other port answers",
		inject: func(_ context.Context, r *run, fd *frontDoor) (string, error) {
			fd.wire.DownPort(8443)
			return fd.gateway + " 8443/tcp", nil
		}},
	{Name: "etcd-member-down", Criterion: "One site database member down (etcd, 3 members)",
		Note: fmt.Sprintf("the raft leader of the lab's 3-member etcd is stopped (etcd's own stop: it hands its leadership to a follower first); "+
			"%d launches follow at once through every front door; secure gateway ticked only, the mode in which the site database "+
			"is on the clients' path (the site-wide ticket ledger admits every new channel)", etcdLaunches),
		Modes: []string{"gateway"}, quiet: true,
		expect: "Nothing seen by any client; launches go on",
		inject: func(ctx context.Context, r *run, _ *frontDoor) (string, error) {
			name, err := r.stopEtcdLeader(ctx)
			if err != nil {
				return "", err
			}
			r.storm = r.startStorm(ctx, etcdLaunches, 3, "")
			return "etcd " + name + " (leader)", nil
		},
		after: func(ctx context.Context, r *run, res *Result) error { return r.finishStorm(ctx, res) }},
	{Name: "zone-leader-killed", Criterion: "The zone leader (its data collector) killed",
		Note: "SIGKILL of the process of the node that leads the first client's zone (it alone probes the zone's gateways and machines " +
			"and publishes the verdicts); measured: until the zone's other node leads, and until the killed node's gateway reads down " +
			"at the admin node of another zone (the new leader's probes); the clients on the killed node come back as in the power-off row",
		expect: ExpectGateway + "; a new zone leader within 2 s, its probes' verdicts site-wide within 3 s",
		pick:   pickZoneLeader,
		inject: func(_ context.Context, r *run, fd *frontDoor) (string, error) {
			r.leaderWatch = r.watchLeader(fd)
			return fd.node + " (leader of zone " + r.zoneOf(fd.node) + ")", r.lab.Signal(fd.node, syscall.SIGKILL)
		},
		after: func(ctx context.Context, r *run, res *Result) error { return r.finishLeader(ctx, res) }},
	{Name: "etcd-quorum-lost", Criterion: "The site database's quorum lost (2 of 3 etcd members stopped), then back",
		Note: fmt.Sprintf("two of the lab's three etcd members are stopped at once: every node goes into outage mode and brokers its "+
			"share of its zone's machines from its local host cache; %d launches follow through every front door; the members are "+
			"started again after the observation and the outage's changes are written back; secure gateway ticked only (the mode "+
			"whose tickets the site database checks)", etcdLaunches),
		Modes: []string{"gateway"}, quiet: true,
		expect: "Nothing seen by any client; launches succeed in their zones; back: 0 sessions lost, no machine over max_sessions, no ticket admitted twice",
		inject: func(ctx context.Context, r *run, _ *frontDoor) (string, error) {
			names, err := r.stopEtcdQuorum()
			if err != nil {
				return "", err
			}
			r.storm = r.startStorm(ctx, etcdLaunches, 3, "")
			return "etcd " + strings.Join(names, ", "), nil
		},
		after: func(ctx context.Context, r *run, res *Result) error { return r.finishQuorum(ctx, res) }},
	{Name: "satellite-cut-off", Criterion: "A satellite zone cut off from the site database (its WAN to the primary zone down), then back",
		Note: fmt.Sprintf("every node reaches etcd through a wire of its zone; the first client's zone's wire is blackholed (packets dropped, "+
			"as a WAN that fails): its nodes go into outage mode and broker their shares of the zone's machines from their local host "+
			"cache, the rest of the site leaves those machines alone; %d launches go to that zone's front doors; after the observation "+
			"the wire is back and the outage is written back; secure gateway ticked only", etcdLaunches),
		Modes: []string{"gateway"}, quiet: true, etcdWires: true,
		expect: "Nothing seen by any client; the zone's launches succeed on its own machines (or are denied by their own limits: the lab's " +
			"one app host of a zone takes 2 logons at once); back: 0 sessions lost, no machine over max_sessions, no ticket admitted twice",
		inject: func(ctx context.Context, r *run, fd *frontDoor) (string, error) {
			zone, err := r.cutZone(ctx, fd)
			if err != nil {
				return "", err
			}
			r.storm = r.startStormIn(ctx, etcdLaunches, 3, "", zone)
			return "zone " + zone + "'s link to the site database", nil
		},
		after: func(ctx context.Context, r *run, res *Result) error { return r.finishCut(ctx, res) }},
	{Name: "node-killed-mid-launch", Criterion: "A front door node killed while launches are in flight",
		Note: "SIGKILL of the process of the node that carries the first client, once a quarter of the launches have answered " +
			"(no blackhole: the host stays up and refuses); every launch goes to a front door in turn, and to the next one if that fails, " +
			"as a client does; each launch ticket is presented at once at the descriptor's first two gateways, which are on two nodes; " +
			"secure gateway ticked only, the mode in which gateways admit launch tickets",
		Modes:  []string{"gateway"},
		expect: ExpectGateway + "; no machine over max_sessions, no launch ticket admitted twice, no session lost",
		before: func(ctx context.Context, r *run, fd *frontDoor) error {
			r.storm = r.startStorm(ctx, r.o.Launches, 16, fd.node)
			return r.storm.waitAnswered(ctx, r.o.Launches/4)
		},
		inject: func(_ context.Context, r *run, fd *frontDoor) (string, error) {
			r.storm.killed(fd.node)
			return fd.node, r.lab.Signal(fd.node, syscall.SIGKILL)
		},
		after: func(ctx context.Context, r *run, res *Result) error { return r.finishStorm(ctx, res) }},
}

// The drill site's settings that differ from the lab's.
const (
	// drainTimeout is the drill site's proxy.drain_timeout: how long a node told to stop
	// lets its gateways carry their sessions (the lab's is 30 s, past the observation).
	drainTimeout = 2 * time.Second
	// etcdLaunches is how many launches follow an etcd member's stop.
	etcdLaunches = 12
	// adminUser, password are the lab site's admin and every lab user's password.
	adminUser, password = "admin", "lab"
)

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
	// Launches is the size of the node-killed-mid-launch scenario's launch storm. Default: 200.
	Launches int
	// Base is the first of three loopback /16 blocks the drill site uses (one per zone).
	// Default: 61 (127.61-63.x.x).
	Base int
	// Binary is the frontdoor executable the node processes run. Default: this process's.
	Binary string
	// Env is added to the node processes' environment. Default: none.
	Env []string
	// DataDir, when set, keeps each site's data — the node processes' logs, etcd's data —
	// in DataDir/<scenario>-<mode>. Default: a temporary directory per site, removed.
	DataDir string
	// Logger receives the lab's logs (the node processes log to files in the lab's data dir).
	// Default: discard.
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
	// The user's viewer on the desktop: whether its connection stayed open, the longest
	// time the picture stood still from the failure on, the times its typed keys showed
	// one lost, doubled or reordered (must be 0), and whether the desktop drew the same
	// session at the end.
	ViewerKept     bool          `json:"viewer_kept"`
	LongestStall   time.Duration `json:"longest_stall_ns"`
	KeysOutOfOrder int           `json:"keys_out_of_order"`
	SameDrawn      bool          `json:"same_session_drawn"`
	DrawnPath      string        `json:"drawn_path"`
}

// Result is one scenario in one mode.
type Result struct {
	Scenario  string         `json:"scenario"`
	Mode      string         `json:"mode"`
	Criterion string         `json:"criterion"`
	Note      string         `json:"note,omitempty"`
	Expected  string         `json:"expected"`
	Actual    string         `json:"actual"`
	Pass      bool           `json:"pass"`
	Quiet     bool           `json:"quiet,omitempty"`
	Target    string         `json:"target"`
	Start     time.Time      `json:"start"`
	SiteUp    time.Duration  `json:"site_up_ns"`
	ClientsUp time.Duration  `json:"clients_up_ns"`
	Stopped   time.Duration  `json:"stopped_ns"`
	FaultAt   time.Time      `json:"fault_at"`
	End       time.Time      `json:"end"`
	Clients   []ClientResult `json:"clients"`
	Launches  *LaunchCounts  `json:"launches,omitempty"`
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

// Run runs the selected scenarios in the selected modes, one fresh distributed site each.
func Run(ctx context.Context, o Options) (Report, error) {
	if o.Clients == 0 {
		o.Clients = 4
	}
	if o.Observe == 0 {
		o.Observe = 6 * time.Second
	}
	if o.Launches == 0 {
		o.Launches = 200
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
			on := onOff(m)
			if s.Modes != nil && !slices.Contains(s.Modes, m) {
				var only []string
				for _, sm := range s.Modes {
					only = append(only, onOff(sm))
				}
				fmt.Fprintf(o.Progress, "drill %s, secure gateway %s: not run (it runs with the secure gateway %s only)\n", s.Name, on, strings.Join(only, ", "))
				continue
			}
			if s.browser {
				if err := browser.Available(); err != nil {
					fmt.Fprintf(o.Progress, "drill %s, secure gateway %s: not run (%v)\n", s.Name, on, err)
					continue
				}
			}
			fmt.Fprintf(o.Progress, "drill %s, secure gateway %s ...\n", s.Name, on)
			res := runOne(ctx, o, s, m)
			fmt.Fprintf(o.Progress, "  %s (site up in %.1f s, clients in %.1f s, site stopped in %.1f s, %.1f s in all): %s\n", passWord(res.Pass),
				res.SiteUp.Seconds(), res.ClientsUp.Seconds(), res.Stopped.Seconds(), res.End.Sub(res.Start).Seconds(), res.Actual)
			rep.Results = append(rep.Results, res)
		}
	}
	if len(rep.Results) == 0 {
		return rep, fmt.Errorf("no scenario of %v runs in mode %v", o.Scenarios, modes)
	}
	return rep, nil
}

// onOff names a mode by the secure gateway's switch.
func onOff(mode string) string { return map[string]string{"gateway": "on", "direct": "off"}[mode] }

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

// frontDoor is one front door host of the drill site behind its wire: a node and the gateway
// it hosts, on one address.
type frontDoor struct {
	node, gateway string
	public        netip.Addr
	wire          *Wire
	tcp, udp      []uint16 // the gateway's ports (QUIC's with udp)
}

// gatewayPorts returns every port number of the gateway.
func (fd *frontDoor) gatewayPorts() []uint16 {
	var ps []uint16
	for _, p := range append(slices.Clone(fd.tcp), fd.udp...) {
		if !slices.Contains(ps, p) {
			ps = append(ps, p)
		}
	}
	return ps
}

// run is one scenario in one mode.
type run struct {
	o     Options
	mode  string
	cfg   *configs.Config
	lab   *lab.Lab
	doors map[string]*frontDoor // by gateway name
	dns   []string              // the DNS listeners
	admin string                // the admin listener
	api   *admin.Client         // the admin API at admin, as the lab's admin
	storm *storm
	// leaderWatch is told what the zone-leader-killed row measures.
	leaderWatch <-chan leaderTimes
	// stopped are the etcd members etcd-quorum-lost stopped.
	stopped []int
	// etcdWires stand between each zone's nodes and the site database (Scenario.etcdWires);
	// cut is the zone satellite-cut-off cut off.
	etcdWires map[string]*Wire
	cut       string
}

// inner is the address a front door really listens on, behind its wire.
func inner(a netip.Addr) netip.Addr {
	b := a.As4()
	b[3] += 100
	return netip.AddrFrom4(b)
}

func runOne(ctx context.Context, o Options, s Scenario, mode string) Result {
	res := Result{Scenario: s.Name, Mode: mode, Criterion: s.Criterion, Note: s.Note, Quiet: s.quiet, Start: time.Now()}
	res.Expected = ExpectGateway
	switch {
	case mode == "gateway" && s.expect != "":
		res.Expected = s.expect
	case mode == "direct":
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

// drillSource is the lab site moved to o.Base, with the drill's changes: a short drain, and
// the users of the launch storms (passwords hashed at bcrypt's lowest cost, which the drill
// site allows with site.auth.min_password_cost: a storm measures the site, not bcrypt).
func drillSource(o Options) ([]byte, error) {
	users, err := stormUsers(max(o.Launches, etcdLaunches))
	if err != nil {
		return nil, err
	}
	return lab.MovedSource(o.Base, func(s string) string {
		s = strings.Replace(s, "\nsite:\n", "\nsite:\n  auth: {min_password_cost: 4}\n", 1)
		s = strings.Replace(s, "\nusers:\n", "\nusers:\n"+users, 1)
		return s + fmt.Sprintf("\n# The drill: a node told to stop drains for %s.\nproxy:\n  drain_timeout: %s\n", drainTimeout, drainTimeout)
	})
}

func runScenario(ctx context.Context, o Options, s Scenario, mode string, res *Result) (err error) {
	var stopping time.Time
	defer func() {
		if !stopping.IsZero() {
			res.Stopped = time.Since(stopping)
		}
	}()
	src, err := drillSource(o)
	if err != nil {
		return err
	}
	cfg, err := configs.Load("drill site", src)
	if err != nil {
		return err
	}
	r := &run{o: o, mode: mode, cfg: cfg, doors: map[string]*frontDoor{}}
	public := map[netip.Addr]bool{}
	for _, g := range cfg.Gateways {
		public[g.Address] = true
	}
	// The wires come up first, on the public addresses; the node processes bind the inner ones.
	for _, g := range cfg.Gateways {
		a := g.Address
		fd := &frontDoor{node: g.Node, gateway: g.Name, public: a}
		if g.QUICPort != 0 {
			fd.udp = append(fd.udp, uint16(g.QUICPort))
		}
		for _, p := range g.Ports {
			if p.Protocol == "udp" {
				fd.udp = append(fd.udp, uint16(p.Port))
			} else {
				fd.tcp = append(fd.tcp, uint16(p.Port))
			}
		}
		tcp := slices.Clone(fd.tcp)
		for _, n := range cfg.Nodes {
			for _, l := range n.Listeners {
				if l.Address.Addr() == a && n.Name == g.Node {
					tcp = append(tcp, l.Address.Port())
				}
			}
		}
		w, err := NewWire(a, inner(a), tcp, fd.udp)
		if err != nil {
			r.closeWires()
			return fmt.Errorf("wire for %s: %w", g.Name, err)
		}
		fd.wire = w
		r.doors[g.Name] = fd
	}
	defer r.closeWires()
	for _, n := range cfg.Nodes {
		for _, li := range n.Listeners {
			switch li.Kind {
			case "dns":
				r.dns = append(r.dns, li.Address.String())
			case "admin":
				if r.admin == "" {
					r.admin = li.Address.String()
				}
			}
		}
	}
	if len(r.dns) == 0 || r.admin == "" {
		return errors.New("the drill site needs a DNS and an admin listener")
	}

	sctx, cancel := context.WithCancel(ctx)
	defer cancel()
	dataDir := ""
	if o.DataDir != "" {
		dataDir = filepath.Join(o.DataDir, s.Name+"-"+mode)
		if err := os.RemoveAll(dataDir); err != nil {
			return err
		}
	}
	lo := lab.Options{Processes: true, Source: src, Binary: o.Binary, Env: o.Env, Logger: o.Logger, DataDir: dataDir,
		HeartbeatInterval: 500 * time.Millisecond,
		Rebind: func(a netip.Addr) netip.Addr {
			if public[a] {
				return inner(a)
			}
			return a
		}}
	if s.etcdWires {
		lo.StoreEndpoints = r.storeEndpoints
	}
	l, err := lab.New(sctx, lo)
	if err != nil {
		return err
	}
	r.lab, r.cfg = l, l.Config
	r.api = &admin.Client{URL: "https://" + r.admin, User: adminUser, Password: password, TLS: l.TLSClientConfig(), Timeout: 5 * time.Second}
	served := make(chan error, 1)
	go func() { served <- l.Serve(sctx) }()
	defer func() { cancel(); <-served }()
	if err := r.waitGateways(ctx, 20*time.Second); err != nil {
		return err
	}
	if mode == "direct" {
		if err := r.secureGateway(ctx, false); err != nil {
			return err
		}
	}
	res.SiteUp = time.Since(res.Start)

	// Clients launch through DNS and hold their sessions, streaming.
	users := []string{"alice", "bob", "carol", "dave"}
	if o.Clients < len(users) {
		users = users[:o.Clients]
	}
	var browser *browserClient
	if s.browser {
		// The browser's user first; the native clients are the others.
		users = slices.DeleteFunc(users, func(u string) bool { return u == browserUser })
		if browser, err = r.openBrowser(sctx, browserUser); err != nil {
			return fmt.Errorf("%s's desktop in the browser: %w", browserUser, err)
		}
		defer browser.close()
	}
	var sessions []*held
	defer func() {
		stopping = time.Now()
		for _, h := range sessions {
			h.stop()
		}
	}()
	held0 := time.Now()
	for _, u := range users {
		h, err := r.hold(sctx, u)
		if err != nil {
			return fmt.Errorf("client %s: %w", u, err)
		}
		sessions = append(sessions, h)
	}
	res.ClientsUp = time.Since(held0)
	time.Sleep(500 * time.Millisecond) // let traffic flow before the failure

	// The failure hits the front door that carries the first client (in direct mode, the
	// front door of the first client's zone); in a browser row, the browser's gateway's.
	var target *frontDoor
	switch {
	case browser != nil:
		target = r.doors[browser.via]
	case len(sessions) > 0:
		target = r.doorFor(sessions[0])
	}
	if target == nil {
		return errors.New("no front door carries the first client")
	}
	quiet := s.quiet
	if s.pick != nil {
		if target, err = s.pick(sctx, r, target); err != nil {
			return fmt.Errorf("picking the front door for %s: %w", s.Name, err)
		}
		carries := false
		for _, h := range sessions {
			if via, _ := h.s.Via(); via == target.gateway || r.doorFor(h) == target {
				carries = true
			}
		}
		quiet = quiet || !carries
		res.Quiet = quiet
	}
	if s.before != nil {
		if err := s.before(sctx, r, target); err != nil {
			return fmt.Errorf("before %s: %w", s.Name, err)
		}
	}
	before := map[*held]string{}
	for _, h := range sessions {
		before[h], _ = h.s.Via()
	}
	for _, h := range sessions {
		h.w.ResetStall() // the stall the failure causes, not the viewers' start
	}
	var watched sync.WaitGroup
	wctx, stopWatching := context.WithCancel(sctx)
	defer stopWatching()
	if browser != nil {
		watched.Go(func() { browser.watch(wctx) })
		time.Sleep(time.Second) // the page's keys flow before the failure
		browser.resetStall()
	}
	res.FaultAt = time.Now()
	if res.Target, err = s.inject(sctx, r, target); err != nil {
		return fmt.Errorf("injecting %s: %w", s.Name, err)
	}
	r.observe(ctx, sessions, before, target, quiet, res)
	if browser != nil {
		// The page's row: watched the whole window, or until it is back and has stayed so
		// for two seconds.
		for end := res.FaultAt.Add(r.o.Observe); time.Now().Before(end); time.Sleep(100 * time.Millisecond) {
			if cr := browser.result(res.FaultAt, target); cr.Back && time.Since(res.FaultAt.Add(cr.BackAfter)) > 2*time.Second {
				break
			}
		}
		stopWatching()
		watched.Wait()
		res.Clients = append([]ClientResult{browser.result(res.FaultAt, target)}, res.Clients...)
	}
	judge(res, mode)
	if s.after != nil {
		if err := s.after(sctx, r, res); err != nil {
			return fmt.Errorf("after %s: %w", s.Name, err)
		}
	}
	return nil
}

// closeWires closes every wire.
func (r *run) closeWires() {
	for _, fd := range r.doors {
		if fd.wire != nil {
			fd.wire.Close()
		}
	}
	for _, w := range r.etcdWires {
		w.Close()
	}
}

// adminStatus is what the drill reads of GET /v1/admin/status.
type adminStatus struct {
	SecureGateway map[string]bool   `json:"secure_gateway"`
	Gateways      map[string]string `json:"gateways"`
}

// secureGateway switches the secure gateway site-wide through the admin API, as an operator
// does, and waits until the admin status shows it.
func (r *run) secureGateway(ctx context.Context, on bool) error {
	if err := r.api.SecureGateway(ctx, "", on); err != nil {
		return fmt.Errorf("switching the secure gateway: %w", err)
	}
	for deadline := time.Now().Add(5 * time.Second); ; {
		var st adminStatus
		if err := r.api.Get(ctx, "/v1/admin/status", &st); err != nil {
			return err
		}
		done := len(st.SecureGateway) > 0
		for _, v := range st.SecureGateway {
			done = done && v == on
		}
		if done {
			// The other nodes follow the switch through their watch of the site database:
			// a round trip of it, which the clients' launches check (hold).
			time.Sleep(300 * time.Millisecond)
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("the admin status shows secure gateway %v 5 s after switching it %v", st.SecureGateway, on)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// waitGateways waits until the site shows every gateway up where an operator and a user
// look: the admin status lists each one up, and every DNS server answers the GSLB name, for
// a client of each zone, with that zone's gateways.
func (r *run) waitGateways(ctx context.Context, d time.Duration) error {
	deadline := time.Now().Add(d)
	want := r.dnsWant()
	for {
		why := r.gatewaysUp(ctx, want)
		if why == "" {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("gateways not up after %s: %s", d, why)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(100 * time.Millisecond):
		}
	}
}

// dnsWant maps each zone's first client range to the addresses the GSLB name answers there
// when all is well: the zone's site's gateways.
func (r *run) dnsWant() map[netip.Prefix][]netip.Addr {
	addr := map[string]netip.Addr{}
	for _, g := range r.cfg.Gateways {
		addr[g.Name] = g.Address
	}
	want := map[netip.Prefix][]netip.Addr{}
	if len(r.cfg.GSLB.Names) == 0 {
		return want
	}
	for _, z := range r.cfg.Zones {
		if len(z.Ranges) == 0 {
			continue
		}
		p := z.Ranges[0]
		for _, site := range r.cfg.GSLB.Names[0].Sites {
			if site.Zone == z.Name {
				for _, g := range site.Gateways {
					want[p] = append(want[p], addr[g])
				}
			}
		}
	}
	return want
}

// gatewaysUp returns "" when every gateway shows up, else what does not.
func (r *run) gatewaysUp(ctx context.Context, want map[netip.Prefix][]netip.Addr) string {
	var st adminStatus
	if err := r.api.Get(ctx, "/v1/admin/status", &st); err != nil {
		return "admin status: " + err.Error()
	}
	for _, g := range r.cfg.Gateways {
		if v := st.Gateways[g.Name]; !strings.HasPrefix(v, "up") {
			return fmt.Sprintf("admin status: %s %q", g.Name, v)
		}
	}
	name := r.cfg.GSLB.Names[0].Name
	for _, server := range r.dns {
		for p, addrs := range want {
			got, err := resolveAs(ctx, name, server, p)
			if err != nil {
				return err.Error()
			}
			for _, a := range addrs {
				if !slices.Contains(got, a) {
					return fmt.Sprintf("%s at %s for %s: %v, want %v", name, server, p, got, addrs)
				}
			}
		}
	}
	return ""
}

// resolveAs asks server for name's A records as a client of subnet (EDNS Client Subnet).
func resolveAs(ctx context.Context, name, server string, subnet netip.Prefix) ([]netip.Addr, error) {
	m := new(dns.Msg)
	m.SetQuestion(dns.Fqdn(name), dns.TypeA)
	m.SetEdns0(1232, false)
	e := &dns.EDNS0_SUBNET{Code: dns.EDNS0SUBNET, Family: 1, SourceNetmask: uint8(subnet.Bits()), Address: subnet.Addr().AsSlice()}
	m.IsEdns0().Option = append(m.IsEdns0().Option, e)
	c := &dns.Client{Timeout: time.Second}
	resp, _, err := c.ExchangeContext(ctx, m, server)
	if err != nil {
		return nil, fmt.Errorf("asking %s for %s: %w", server, name, err)
	}
	var out []netip.Addr
	for _, rr := range resp.Answer {
		if a, ok := rr.(*dns.A); ok {
			if ip, ok := netip.AddrFromSlice(a.A.To4()); ok {
				out = append(out, ip)
			}
		}
	}
	return out, nil
}

// stopEtcdLeader stops the raft leader of the lab's etcd cluster and returns its name.
func (r *run) stopEtcdLeader(ctx context.Context) (string, error) {
	sctx, cancel := context.WithTimeout(ctx, 3*time.Second)
	defer cancel()
	st := r.lab.Site().Status(sctx)
	for _, m := range st.Members {
		if !m.Leader {
			continue
		}
		for i := range len(r.lab.Etcd.Endpoints()) {
			if r.lab.Etcd.Member(i) == m.Name {
				return m.Name, r.lab.Etcd.StopMember(i)
			}
		}
	}
	return "", fmt.Errorf("no leader among the etcd members %+v", st.Members)
}

// doorFor returns the front door a client's traffic goes through (gateway mode), or the
// first front door of its machine's zone (direct mode).
func (r *run) doorFor(h *held) *frontDoor {
	via, _ := h.s.Via()
	if fd := r.doors[via]; fd != nil {
		return fd
	}
	zone := h.s.Descriptor().Zone
	for _, g := range r.cfg.Gateways {
		if g.Zone == zone {
			return r.doors[g.Name]
		}
	}
	var names []string
	for name := range r.doors {
		names = append(names, name)
	}
	sort.Strings(names)
	return r.doors[names[0]]
}

// held is a client session kept busy with traffic.
type held struct {
	user   string
	s      *client.Session
	w      *client.Watcher // the user's viewer on the desktop
	cancel context.CancelFunc
	wg     sync.WaitGroup
}

func (h *held) stop() {
	h.cancel()
	h.w.Close()
	h.s.Close()
	h.wg.Wait()
}

// hold launches a desktop for user through DNS, as a client does, opens its channels and
// watches the desktop as a user does — a VNC viewer that asks for every update and types a
// key every 100ms (client.Watcher) — with a little UDP traffic beside. In gateway mode it launches again (the same session) until the
// descriptor offers every gateway of the site: each node's health sees the gateways come up
// by itself.
func (r *run) hold(ctx context.Context, user string) (*held, error) {
	pool := r.lab.CA().Pool()
	name := strings.TrimSuffix(r.cfg.GSLB.Names[0].Name, ".")
	ln := &client.Launcher{Name: name, DNSServer: r.dns[0], User: user, Password: password, Resource: "desktop",
		Endpoint: user + "-laptop", RootCAs: pool}
	lctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	var d *client.Descriptor
	retried := false
	for {
		var err error
		d, _, err = ln.Launch(lctx)
		var denied *client.DeniedError
		if errors.As(err, &denied) && lctx.Err() == nil {
			// A site that has just come up may still be taking in its machines' first
			// health verdicts and load reports: a user tries again.
			if time.Until(deadline(lctx)) < time.Second {
				return nil, fmt.Errorf("%w; trace: %s", err, strings.Join(denied.Trace, "; "))
			}
			if !retried {
				retried = true
				fmt.Fprintf(r.o.Progress, "  client %s: %v; trying again (trace: %s)\n", user, err, strings.Join(denied.Trace, "; "))
			}
			time.Sleep(200 * time.Millisecond)
			continue
		}
		if err != nil {
			return nil, err
		}
		if d.Mode != r.mode {
			return nil, fmt.Errorf("launched in %s mode, not %s: a front door did not follow the switch", d.Mode, r.mode)
		}
		if d.Mode != "gateway" || len(d.Gateways) == len(r.cfg.Gateways) {
			break
		}
		select {
		case <-lctx.Done():
			return nil, fmt.Errorf("the descriptor offers %d of %d gateways after 10 s", len(d.Gateways), len(r.cfg.Gateways))
		case <-time.After(200 * time.Millisecond):
		}
	}
	s, err := client.Open(ctx, client.Options{Descriptor: d, RootCAs: pool, Relaunch: ln.Relaunch, Logger: r.o.Logger})
	if err != nil {
		return nil, err
	}
	if err := s.WaitUp(lctx); err != nil {
		s.Close()
		return nil, err
	}
	w, err := s.Watch(lctx, 100*time.Millisecond)
	if err != nil {
		s.Close()
		return nil, fmt.Errorf("watching the desktop: %w", err)
	}
	hctx, hcancel := context.WithCancel(ctx)
	h := &held{user: user, s: s, w: w, cancel: hcancel}
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
				s.EchoUDP(ectx, 4172, 1, 64)
				c()
			}
		}
	}()
	return h, nil
}

// deadline returns ctx's deadline.
func deadline(ctx context.Context) time.Time {
	d, _ := ctx.Deadline()
	return d
}

// observe watches until every affected client is back and steady, or Observe runs out.
func (r *run) observe(ctx context.Context, hs []*held, before map[*held]string, target *frontDoor, quiet bool, res *Result) {
	deadline := res.FaultAt.Add(r.o.Observe)
	settle := time.Time{}
	for time.Now().Before(deadline) && ctx.Err() == nil {
		res.Clients = res.Clients[:0]
		allBack := true
		for _, h := range hs {
			cr := summarize(h, before[h], target, r.mode, quiet, res.FaultAt)
			res.Clients = append(res.Clients, cr)
			if cr.Cut && !cr.Back {
				allBack = false
			}
		}
		// In gateway mode wait until the affected clients are back and have stayed up for a
		// second (a loop would cut again); in direct mode and when no client may see the
		// failure, watch the whole window.
		if r.mode == "gateway" && !quiet && allBack && hasCut(res.Clients) {
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
		res.Clients = append(res.Clients, summarize(h, before[h], target, r.mode, quiet, res.FaultAt))
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

func summarize(h *held, via string, target *frontDoor, mode string, quiet bool, fault time.Time) ClientResult {
	d := h.s.Descriptor()
	cr := ClientResult{User: h.user, Session: d.SessionID, Machine: d.Machine, ViaBefore: via}
	cr.ViaAfter, _ = h.s.Via()
	ws := h.w.Stats()
	cr.ViewerKept, cr.LongestStall, cr.KeysOutOfOrder = ws.Err == nil, ws.LongestStall, ws.KeysOutOfOrder
	cr.SameDrawn, cr.DrawnPath = ws.Line("session ") == d.SessionID, ws.Line("path ")
	cr.Affected = quiet || via == target.gateway || (mode == "direct" && d.Zone == zoneOf(target))
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
	if mode == "direct" || res.Quiet {
		cut := 0
		for _, c := range res.Clients {
			if c.Cut {
				cut++
			}
		}
		switch {
		case cut > 0:
			res.Actual = fmt.Sprintf("%d of %d clients were cut", cut, len(res.Clients))
		case res.Quiet:
			res.Actual, res.Pass = fmt.Sprintf("Nothing seen by any client (%d clients, none cut)", len(res.Clients)), true
		default:
			res.Actual, res.Pass = fmt.Sprintf("Desktop remained connected (%d of %d clients on the failed front door's zone, none cut)", len(affected), len(res.Clients)), true
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
