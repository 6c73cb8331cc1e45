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
	"fmt"
	"io"
	"log/slog"
	"slices"
	"strings"
	"syscall"
	"time"

	"github.com/frontdoor-vdi/frontdoor/client"
	"github.com/frontdoor-vdi/frontdoor/internal/browser"
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
