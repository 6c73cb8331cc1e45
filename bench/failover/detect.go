//go:build linux

package main

import (
	"context"
	"fmt"
	"math/rand/v2"
	"net"
	"net/netip"
	"os"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/frontdoor-vdi/frontdoor/health"
	"github.com/frontdoor-vdi/frontdoor/proxy"
)

// scenario is one failure injected into one victim, watched by both probers.
type scenario struct {
	name      string
	target    string // frontdoor target
	hapServer string // HAProxy backend/server
	front     int    // HAProxy frontend port, for the avoidance client
	fdFront   int    // frontdoor proxy listener port, for the avoidance client
	inject    func() (time.Time, error)
	restore   func() error
}

// sample is one injected failure's timings; negative means not seen within the limit.
type sample struct {
	fd, hap, fdAvoid, hapAvoid time.Duration
}

const notSeen = -1

func runDetect(hapBin, hapCPU string, runs int, inter, timeout time.Duration, fall, rise int) error {
	dir, err := os.MkdirTemp("", "failover")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	cert, err := selfSigned("gw.bench.test")
	if err != nil {
		return err
	}
	lo := netip.MustParseAddr("127.0.0.1")
	spare, err := newLineServer("spare")
	if err != nil {
		return err
	}
	defer spare.Kill()
	killed, err := newLineServer("victim")
	if err != nil {
		return err
	}
	defer killed.Kill()
	bh, err := newBacklogServer()
	if err != nil {
		return err
	}
	defer bh.Close()
	mute, err := newTLSServer(cert, lo)
	if err != nil {
		return err
	}
	defer mute.ln.Close()
	web, err := newTLSServer(cert, lo) // the "443" of the one-port scenario, always fine
	if err != nil {
		return err
	}
	defer web.ln.Close()
	pcoip, err := newLineServer("victim") // its "4172", the port that gets closed
	if err != nil {
		return err
	}
	defer pcoip.Kill()

	fronts := make([]int, 4)
	for i := range fronts {
		if fronts[i], err = freePort(); err != nil {
			return err
		}
	}
	hap, err := startHAProxy(hapBin, hapCPU, dir, inter, timeout, fall, rise, []hapBackend{
		{name: "kill", front: fronts[0], victim: killed.Port(), spare: spare.Port()},
		{name: "blackhole", front: fronts[1], victim: bh.port, spare: spare.Port()},
		{name: "tls", front: fronts[2], victim: mute.Port(), checkSSL: true, spare: spare.Port()},
		// Like the seed's load balancer: the 443 check stands for the whole server, traffic
		// goes to 4172.
		{name: "port", front: fronts[3], victim: pcoip.Port(), checkPort: web.Port(), checkSSL: true, spare: spare.Port()},
	})
	if err != nil {
		return err
	}
	defer hap.stop()
	hapEvents := hap.subscribe()

	mon := health.Monitor{Interval: inter, Timeout: timeout, Fall: fall, Rise: rise, Jitter: 0.1}
	targets := []health.Target{
		{Name: "kill", Addr: lo, Monitor: mon, Ports: []health.Port{{ID: health.TCP(uint16(killed.Port()))}}},
		{Name: "blackhole", Addr: lo, Monitor: mon, Ports: []health.Port{{ID: health.TCP(uint16(bh.port))}}},
		{Name: "tls", Addr: lo, Monitor: mon, Ports: []health.Port{{ID: health.TCP(uint16(mute.Port())), Check: health.Check{Kind: health.KindTLS}}}},
		{Name: "port", Addr: lo, Monitor: mon, Ports: []health.Port{
			{ID: health.TCP(uint16(web.Port())), Check: health.Check{Kind: health.KindTLS}},
			{ID: health.TCP(uint16(pcoip.Port()))},
		}},
	}
	chk, err := health.New(targets, health.Deps{})
	if err != nil {
		return err
	}
	fdEvents := make(chan health.Event, 1024)
	chk.Subscribe(func(e health.Event) {
		if e.VerdictChanged() {
			fdEvents <- e
		}
	})
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go chk.Run(ctx)
	defer chk.Close()

	// frontdoor's own proxy in front of the same servers: one pool per scenario, the victim
	// (named as its health target) weighted 1000 to the spare's 1, no retries, so that only
	// the health verdict moves new connections off the victim, as with HAProxy's backup server.
	pxCfg := proxy.Config{}
	spareAP := netip.AddrPortFrom(lo, uint16(spare.Port()))
	for _, v := range []struct {
		name string
		port int
	}{{"kill", killed.Port()}, {"blackhole", bh.port}, {"tls", mute.Port()}, {"port", pcoip.Port()}} {
		pxCfg.Listeners = append(pxCfg.Listeners, proxy.Listener{Name: v.name, Address: netip.AddrPortFrom(lo, 0), Pool: v.name})
		pxCfg.Pools = append(pxCfg.Pools, proxy.Pool{Name: v.name, Balance: "weighted", Retries: 0, ConnectTimeout: timeout,
			Backends: []proxy.Backend{
				{Name: v.name, Address: netip.AddrPortFrom(lo, uint16(v.port)), Weight: 1000},
				{Name: "spare-" + v.name, Address: spareAP, Weight: 1},
			}})
	}
	px, err := proxy.New(pxCfg, proxy.Options{Health: proxy.HealthFunc(func(b string) bool {
		if strings.HasPrefix(b, "spare-") {
			return true
		}
		return chk.Eligible(b)
	})})
	if err != nil {
		return err
	}
	if err := px.Listen(); err != nil {
		return err
	}
	go px.Serve(ctx)
	defer px.Close()
	fdFront := func(name string) int { return int(px.Addr(name).Port()) }

	scenarios := []scenario{
		{name: "kill (listener closed, RST)", target: "kill", hapServer: "be_kill/victim", front: fronts[0], fdFront: fdFront("kill"),
			inject: func() (time.Time, error) { t := time.Now(); killed.Kill(); return t, nil }, restore: killed.Restart},
		{name: "blackhole (SYNs dropped)", target: "blackhole", hapServer: "be_blackhole/victim", front: fronts[1], fdFront: fdFront("blackhole"),
			inject: bh.Blackhole, restore: func() error { bh.Restore(); return nil }},
		{name: "hung TLS (accepts, never answers)", target: "tls", hapServer: "be_tls/victim", front: fronts[2], fdFront: fdFront("tls"),
			inject:  func() (time.Time, error) { t := time.Now(); mute.mute.Store(true); return t, nil },
			restore: func() error { mute.mute.Store(false); return nil }},
		{name: "one port closed (4172 down, 443 up)", target: "port", hapServer: "be_port/victim", front: fronts[3], fdFront: fdFront("port"),
			inject: func() (time.Time, error) { t := time.Now(); pcoip.Kill(); return t, nil }, restore: pcoip.Restart},
	}
	time.Sleep(2 * time.Second) // both probers settle: every victim up
	limit := time.Duration(fall+2) * (inter + timeout) * 2
	results := make([][]sample, len(scenarios))
	// Run -1 warms both probers up and is not recorded.
	for run := -1; run < runs; run++ {
		for i, sc := range scenarios {
			if *only != "" && !strings.Contains(sc.target, *only) {
				continue
			}
			s, err := oneRun(sc, chk, fdEvents, hapEvents, inter, limit)
			if err != nil {
				return fmt.Errorf("%s run %d: %w", sc.name, run, err)
			}
			if run < 0 {
				continue
			}
			results[i] = append(results[i], s)
			fmt.Fprintf(os.Stderr, "%-40s run %2d: frontdoor %v, avoid %v; haproxy %v, avoid %v\n", sc.name, run, s.fd, s.fdAvoid, s.hap, s.hapAvoid)
		}
	}
	printDetect(scenarios, results, runs, inter, timeout, fall, rise, limit)
	return nil
}

func oneRun(sc scenario, chk *health.Checker, fdEvents chan health.Event, hapEvents chan hapEvent, inter, limit time.Duration) (sample, error) {
	drain(fdEvents)
	drainHAP(hapEvents)
	// A random phase against both probers' schedules.
	time.Sleep(time.Duration(rand.Int64N(int64(inter))))
	t0, err := sc.inject()
	if err != nil {
		return sample{}, err
	}
	avoid, fdAvoid := make(chan time.Duration, 1), make(chan time.Duration, 1)
	go func() { avoid <- firstAvoiding(sc.front, t0, limit) }()
	go func() { fdAvoid <- firstAvoiding(sc.fdFront, t0, limit) }()
	s := sample{fd: notSeen, hap: notSeen, hapAvoid: notSeen, fdAvoid: notSeen}
	deadline := time.After(limit)
	var wg sync.WaitGroup
	wg.Go(func() {
		if at, ok := waitHAP(hapEvents, sc.hapServer, false, limit); ok {
			s.hap = at.Sub(t0)
		}
	})
wait:
	for {
		select {
		case e := <-fdEvents:
			if e.Target == sc.target && e.To == health.StateDown {
				s.fd = e.Time.Sub(t0)
				if *verbose {
					fmt.Fprintf(os.Stderr, "frontdoor: %s down: port %v err %v latency %v\n", e.Target, e.Port, e.Err, e.Latency)
				}
				break wait
			}
		case <-deadline:
			break wait
		}
	}
	wg.Wait()
	s.hapAvoid = <-avoid
	s.fdAvoid = <-fdAvoid
	if chk.Eligible(sc.target) {
		return s, fmt.Errorf("frontdoor still has %s eligible", sc.target)
	}
	if err := sc.restore(); err != nil {
		return s, err
	}
	// Back up in both before the next failure.
	up := time.After(limit)
	for !chk.Eligible(sc.target) {
		select {
		case <-fdEvents:
		case <-up:
			return s, fmt.Errorf("frontdoor did not bring %s back", sc.target)
		}
	}
	if s.hap != notSeen {
		if _, ok := waitHAP(hapEvents, sc.hapServer, true, limit); !ok {
			return s, fmt.Errorf("haproxy did not bring %s back", sc.hapServer)
		}
	}
	time.Sleep(inter)
	return s, nil
}

// firstAvoiding opens a new connection through front every 10ms from t0 and returns how long
// after t0 the first connection started from which on every new connection reached the spare
// server (it stops after 20 such in a row), or notSeen.
func firstAvoiding(front int, t0 time.Time, limit time.Duration) time.Duration {
	addr := fmt.Sprintf("127.0.0.1:%d", front)
	type attempt struct {
		start time.Time
		spare bool
	}
	var (
		mu       sync.Mutex // guards attempts
		attempts []*attempt
		wg       sync.WaitGroup
	)
	tick := time.NewTicker(10 * time.Millisecond)
	defer tick.Stop()
	end := time.After(limit)
	// avoided returns when the current run of spare answers started, and its length.
	avoided := func() (time.Time, int) {
		mu.Lock()
		defer mu.Unlock()
		var since time.Time
		run := 0
		for _, a := range attempts {
			if a.spare {
				if run == 0 {
					since = a.start
				}
				run++
			} else if !a.start.IsZero() {
				run = 0
			}
		}
		return since, run
	}
loop:
	for {
		select {
		case <-end:
			break loop
		case <-tick.C:
			if _, run := avoided(); run >= 20 {
				break loop
			}
			start := time.Now()
			a := &attempt{}
			mu.Lock()
			attempts = append(attempts, a)
			mu.Unlock()
			wg.Go(func() {
				ok := false
				defer func() {
					mu.Lock()
					a.start, a.spare = start, ok
					mu.Unlock()
				}()
				c, err := net.DialTimeout("tcp", addr, time.Second)
				if err != nil {
					return
				}
				defer c.Close()
				c.SetDeadline(time.Now().Add(time.Second))
				buf := make([]byte, 16)
				n, _ := c.Read(buf)
				ok = strings.HasPrefix(string(buf[:n]), "spare")
			})
		}
	}
	wg.Wait()
	since, run := avoided()
	mu.Lock()
	last := attempts[len(attempts)-1]
	mu.Unlock()
	if run == 0 || !last.spare {
		return notSeen
	}
	return since.Sub(t0)
}

func drain(c chan health.Event) {
	for {
		select {
		case <-c:
		default:
			return
		}
	}
}

func drainHAP(c chan hapEvent) {
	for {
		select {
		case <-c:
		default:
			return
		}
	}
}

// stats returns p50, p99 and max of the seen samples and how many were not seen.
func stats(ds []time.Duration) (p50, p99, mx time.Duration, missed int) {
	var seen []time.Duration
	for _, d := range ds {
		if d == notSeen {
			missed++
			continue
		}
		seen = append(seen, d)
	}
	if len(seen) == 0 {
		return notSeen, notSeen, notSeen, missed
	}
	slices.Sort(seen)
	pick := func(q float64) time.Duration { return seen[min(len(seen)-1, int(q*float64(len(seen))))] }
	return pick(0.5), pick(0.99), seen[len(seen)-1], missed
}

func ms(d time.Duration) string {
	if d == notSeen {
		return "never"
	}
	return fmt.Sprintf("%d", d.Milliseconds())
}

func printDetect(scs []scenario, res [][]sample, runs int, inter, timeout time.Duration, fall, rise int, limit time.Duration) {
	fmt.Printf("Settings for both: interval %v, timeout %v, fall %d, rise %d; %d runs per scenario; \"never\" = not within %v.\n\n",
		inter, timeout, fall, rise, runs, limit)
	fmt.Println("| failure | frontdoor verdict p50 / p99 / max (ms) | HAProxy verdict p50 / p99 / max (ms) | HAProxy/frontdoor p50 | new conns avoid it, frontdoor proxy p50 / max (ms) | new conns avoid it, HAProxy p50 / max (ms) |")
	fmt.Println("|---|---|---|---|---|---|")
	for i, sc := range scs {
		if len(res[i]) == 0 {
			continue
		}
		var fd, hp, fa, ha []time.Duration
		for _, s := range res[i] {
			fd, hp, fa, ha = append(fd, s.fd), append(hp, s.hap), append(fa, s.fdAvoid), append(ha, s.hapAvoid)
		}
		f50, f99, fmx, fmiss := stats(fd)
		h50, h99, hmx, hmiss := stats(hp)
		fa50, _, famx, famiss := stats(fa)
		ha50, _, hamx, hamiss := stats(ha)
		ratio := "n/a"
		if f50 > 0 && h50 > 0 {
			ratio = fmt.Sprintf("%.2f", float64(h50)/float64(f50))
		}
		fmt.Printf("| %s | %s / %s / %s%s | %s / %s / %s%s | %s | %s / %s%s | %s / %s%s |\n", sc.name,
			ms(f50), ms(f99), ms(fmx), missNote(fmiss), ms(h50), ms(h99), ms(hmx), missNote(hmiss), ratio,
			ms(fa50), ms(famx), missNote(famiss), ms(ha50), ms(hamx), missNote(hamiss))
	}
}

func missNote(n int) string {
	if n == 0 {
		return ""
	}
	return fmt.Sprintf(" (%d never)", n)
}
