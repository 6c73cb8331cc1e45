//go:build linux

// Command abuse measures whether an honest client keeps working while a front door node is
// abused, on loopback. The node (one `frontdoor serve` process over bolt, the gateway of
// its sessions on the same address, pinned to -node-cpu) is started by the lab, whose
// machine agents run in this process. Honest clients, each from its own loopback address,
// launch at a fixed rate whatever the node answers, and open each session's channel
// through the gateway (honest.go); standing sessions stay open and echo throughout. After a warm-up and an unloaded window,
// a child process of this program (-role abuse, abusers.go) abuses the node's launch
// listener, from addresses of its own (127.0.1-3.x, -sources per kind):
//
//   - -wrong launches with a wrong password (HTTP Basic, over keep-alive connections, paced
//     at -wrong-rate), half of them naming real users, half unknown names;
//   - -slow connections that finish TLS and start a request's headers, then send a byte of
//     them a second and never end them, all held at once;
//   - -handshakes TCP connections that send the start of a ClientHello and stall,
//     -hs-at-once held at once (a new one as one is closed).
//
// Everything is bounded: counts, connections held at once (the process may hold 20,000
// descriptors) and time (-limit for the abuse; the whole run takes about two minutes).
// Then an after window. It prints, per phase: the honest launches' p50 and p99 (a failed
// launch counts as infinitely slow) and failures, p99 under abuse ÷ unloaded p99 (goal
// ≤ 2×); how the abusers were answered; the node's RSS, heap (its GC trace), descriptors
// and CPU; and whether the standing sessions came through. bench/abuse.sh runs it.
package main

import (
	"bufio"
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net/netip"
	"os"
	"os/exec"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"
)

type options struct {
	bin                   string
	nodeCPU               int
	warm, unloaded, after time.Duration
	interval              time.Duration
	standing, machines    int
	pool                  int
	abuse                 abuseConfig
	profile               string
	hog                   int // busy threads beside the node through the abuse (hog.go)
}

func main() {
	var o options
	role := flag.String("role", "", "abuse or hog (internal: the abusers' and the CPU hog's processes); empty: run the bench")
	abuseJSON := flag.String("abuse", "", "the abusers' configuration (internal, JSON)")
	flag.StringVar(&o.bin, "frontdoor", "", "the frontdoor binary the node runs (required)")
	flag.IntVar(&o.nodeCPU, "node-cpu", 0, "CPU the node process is pinned to (taskset; -1: not pinned)")
	flag.DurationVar(&o.warm, "warm", 3*time.Second, "honest load before the unloaded window (not measured)")
	flag.DurationVar(&o.unloaded, "unloaded", 20*time.Second, "unloaded window")
	flag.DurationVar(&o.after, "after", 15*time.Second, "window after the abuse")
	flag.DurationVar(&o.interval, "interval", 50*time.Millisecond, "each honest stream starts a launch this often, whatever the node answers")
	flag.IntVar(&o.pool, "pool", 100, "users of each honest stream: its tries under way at most")
	flag.IntVar(&o.standing, "standing", 8, "standing sessions, open through the whole run")
	flag.IntVar(&o.machines, "machines", 6, "machines (50 sessions each)")
	flag.IntVar(&o.abuse.Wrong, "wrong", 10000, "wrong-password launch requests")
	flag.IntVar(&o.abuse.WrongRate, "wrong-rate", 400, "wrong-password requests per second")
	flag.IntVar(&o.abuse.Workers, "workers", 32, "wrong-password connections")
	flag.IntVar(&o.abuse.Slow, "slow", 5000, "slow-header connections (all held at once)")
	flag.IntVar(&o.abuse.Handshakes, "handshakes", 10000, "stalled TLS handshakes")
	flag.IntVar(&o.abuse.HSAtOnce, "hs-at-once", 3000, "stalled handshakes held at once")
	flag.IntVar(&o.abuse.OpenRate, "open-rate", 2000, "new slow or stalled connections per second, each kind")
	flag.IntVar(&o.abuse.Sources, "sources", 8, "source addresses per kind of abuse (but bodyless requests)")
	flag.IntVar(&o.abuse.Bodyless, "bodyless", 20000, "bodyless requests (a launch's headers with a right password, never its body)")
	flag.IntVar(&o.abuse.BodylessAtOnce, "bodyless-at-once", 4096, "bodyless requests held at once")
	flag.IntVar(&o.abuse.BodylessSources, "bodyless-sources", 64, "source addresses of the bodyless requests")
	flag.DurationVar(&o.abuse.Limit, "limit", 100*time.Second, "the abuse stops after this at the latest")
	flag.StringVar(&o.profile, "cpuprofile", "", "write the node's CPU profile of the abuse window to FILE")
	flag.IntVar(&o.hog, "hog", 0, "busy threads pinned to the node's CPU through the abuse (a CPU hog beside the node); 0: none")
	flag.Parse()

	time.AfterFunc(10*time.Minute, func() { fmt.Fprintln(os.Stderr, "abuse: 10 minutes, giving up"); os.Exit(2) })
	switch *role {
	case "abuse":
		cfg, err := parseAbuseConfig(*abuseJSON)
		fatal(err)
		printLine("RESULT", runAbuse(cfg))
	case "hog":
		runHog(o.hog, o.abuse.Limit)
	case "":
		if o.bin == "" {
			fatal(fmt.Errorf("-frontdoor is required"))
		}
		fatal(run(o))
	default:
		fatal(fmt.Errorf("unknown role %q", *role))
	}
}

func fatal(err error) {
	if err != nil {
		fmt.Fprintln(os.Stderr, "abuse:", err)
		os.Exit(1)
	}
}

// printLine prints "PREFIX {json}" for the orchestrator.
func printLine(prefix string, v any) {
	b, _ := json.Marshal(v)
	fmt.Printf("%s %s\n", prefix, b)
}

func progress(format string, a ...any) { fmt.Fprintf(os.Stderr, "abuse: "+format+"\n", a...) }

// run is the whole bench: the site, the honest load, the phases, the report.
func run(o options) error {
	ctx, cancel := context.WithTimeout(context.Background(), 8*time.Minute)
	defer cancel()
	dir, err := os.MkdirTemp("", "abuse-bench-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	users := newSiteUsers(o.pool, o.standing, 300)
	src, err := siteSource(users, o.machines)
	if err != nil {
		return err
	}
	var env []string
	if o.profile != "" {
		env = append(env, "FRONTDOOR_CPUPROFILE="+o.profile)
	}
	progress("starting the site")
	l, pin, err := startSite(ctx, dir, o.bin, src, o.nodeCPU, env)
	if err != nil {
		return err
	}
	sctx, stop := context.WithCancel(ctx)
	served := make(chan error, 1)
	go func() { served <- l.Serve(sctx) }()
	defer func() { stop(); <-served }()
	if err := l.WaitReady(ctx); err != nil {
		return err
	}
	node := l.Procs[0]
	gc := &gcTrace{path: node.Log}
	base := sampleNode(node.PID, gc)

	var phase atomic.Pointer[string]
	setPhase := func(p string) { phase.Store(&p); progress("phase %s", p) }
	setPhase("warm")
	h := &honest{url: "https://" + launchAddr, pool: l.CA().Pool(), users: users, phase: &phase, t0: time.Now(),
		quiet: slog.New(slog.NewTextHandler(io.Discard, nil)), samples: map[string][]sample{}}
	fresh, kept, cold := apiClient(freshIP, h.pool, true), apiClient(keptIP, h.pool, false), apiClient(coldIP, h.pool, true)
	if err := h.signIn(ctx, kept, append(slices.Clone(users.kept), users.standing...)...); err != nil {
		return err
	}
	if err := h.signIn(ctx, fresh, users.fresh...); err != nil {
		return err
	}
	sts, err := h.openStanding(ctx, kept, users.standing)
	if err != nil {
		return err
	}

	lctx, stopLoad := context.WithCancel(ctx)
	var wg sync.WaitGroup
	wg.Go(func() { h.arrivals(lctx, "fresh", fresh, users.fresh, o.interval) })
	wg.Go(func() { h.arrivals(lctx, "kept", kept, users.kept, o.interval) })
	wg.Go(func() { h.coldLogins(lctx, cold, users.cold, time.Second) })
	for _, st := range sts {
		wg.Go(func() { h.keepEchoing(lctx, st, time.Second) })
	}
	var (
		smu     sync.Mutex // guards samples and childPID
		samples []nodeSample
		selfCPU = map[string]int64{}
		child   int
		fds     = map[string]int{} // the most descriptors each process held
	)
	wg.Go(func() {
		tick := time.NewTicker(500 * time.Millisecond)
		defer tick.Stop()
		for {
			select {
			case <-lctx.Done():
				return
			case <-tick.C:
			}
			s := sampleNode(node.PID, gc)
			s.at, s.phase = time.Since(h.t0), *phase.Load()
			smu.Lock()
			samples = append(samples, s)
			selfCPU["self "+s.phase] = cpuTicks("self")
			fds["node"], fds["self"] = max(fds["node"], s.fds), max(fds["self"], countFDs("self"))
			if child != 0 {
				selfCPU["child "+s.phase] = cpuTicks(fmt.Sprint(child))
				fds["abusers"] = max(fds["abusers"], countFDs(fmt.Sprint(child)))
			}
			smu.Unlock()
		}
	})

	time.Sleep(o.warm)
	hp := []healthPhase{{phase: "unloaded", start: scrapeHealth(h.pool)}}
	setPhase("unloaded")
	time.Sleep(o.unloaded)
	hp[0].end = scrapeHealth(h.pool)
	hp = append(hp, healthPhase{phase: "abuse", start: hp[0].end})
	setPhase("abuse")
	if o.profile != "" {
		syscall.Kill(node.PID, syscall.SIGUSR1)
	}
	cfg := o.abuse
	cfg.Target = netip.MustParseAddrPort(launchAddr)
	cfg.Users = append(append(slices.Clone(users.fresh), users.kept...), users.victims...)
	cfg.Insider = users.insiders[0]
	stopHog, err := startHog(ctx, o.hog, o.nodeCPU, cfg.Limit+30*time.Second)
	if err != nil {
		stopLoad()
		wg.Wait()
		return err
	}
	res, err := runChild(ctx, cfg, func(pid int) { smu.Lock(); child = pid; smu.Unlock() })
	stopHog()
	if o.profile != "" {
		syscall.Kill(node.PID, syscall.SIGUSR2)
	}
	if err != nil {
		stopLoad()
		wg.Wait()
		return err
	}
	hp[1].end = scrapeHealth(h.pool)
	hp = append(hp, healthPhase{phase: "after", start: hp[1].end})
	setPhase("after")
	time.Sleep(o.after)
	hp[2].end = scrapeHealth(h.pool)
	stopLoad()
	wg.Wait()
	end := sampleNode(node.PID, gc)
	warnings := nodeWarnings(node.Log)

	lost := map[string]string{}
	for _, st := range sts {
		if err := h.check(ctx, kept, st); err != nil {
			lost[st.id] = err.Error()
		}
	}
	if o.profile != "" {
		time.Sleep(500 * time.Millisecond) // the node writes its profile
		if err := os.Rename(fmt.Sprintf("%s.%d", o.profile, node.PID), o.profile); err != nil {
			progress("profile: %v", err)
		}
	}
	r := report{o: o, pin: pin, base: base, end: end, samples: samples, gcPeak: gc.peak, cpu: selfCPU, abuse: res, fds: fds,
		honest: h.samples, standing: sts, lost: lost, warnings: warnings}
	r.print()
	printHealth(hp, node.Log)
	return nil
}

// runChild runs the abusers' process (this program, -role abuse) until it reports, and
// returns its result; its HELD lines go to the progress log.
func runChild(ctx context.Context, cfg abuseConfig, started func(pid int)) (abuseResult, error) {
	var res abuseResult
	self, err := os.Executable()
	if err != nil {
		return res, err
	}
	b, _ := json.Marshal(cfg)
	cctx, cancel := context.WithTimeout(ctx, cfg.Limit+30*time.Second)
	defer cancel()
	cmd := exec.CommandContext(cctx, self, "-role", "abuse", "-abuse", string(b))
	cmd.Stderr = os.Stderr
	out, err := cmd.StdoutPipe()
	if err != nil {
		return res, err
	}
	if err := cmd.Start(); err != nil {
		return res, err
	}
	started(cmd.Process.Pid)
	got := false
	sc := bufio.NewScanner(out)
	sc.Buffer(make([]byte, 1<<16), 1<<22)
	for sc.Scan() {
		kind, body, _ := strings.Cut(sc.Text(), " ")
		switch kind {
		case "HELD":
			var m map[string]int64
			if json.Unmarshal([]byte(body), &m) == nil {
				progress("abusive connections open: slow %d, handshakes %d", m["slow"], m["hs"])
			}
		case "RESULT":
			if err := json.Unmarshal([]byte(body), &res); err != nil {
				return res, fmt.Errorf("the abusers' result: %w", err)
			}
			got = true
		}
	}
	werr := cmd.Wait()
	if !got {
		return res, fmt.Errorf("the abusers' process reported nothing: %v", werr)
	}
	return res, nil
}
