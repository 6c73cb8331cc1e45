//go:build linux

package main

// The report: markdown tables on stdout.

import (
	"fmt"
	"math"
	"os"
	"slices"
	"sort"
	"strings"
	"syscall"
	"time"
)

type report struct {
	o         options
	pin       string
	base, end nodeSample
	samples   []nodeSample
	gcPeak    gcHeap
	cpu       map[string]int64 // clock ticks of this process and the abusers' at each phase's last sample
	abuse     abuseResult
	fds       map[string]int // the most descriptors each process held: node, self, abusers
	honest    map[string][]sample
	standing  []*standing
	lost      map[string]string
	warnings  map[string]int // the node log's warnings and errors
}

var phases = []string{"unloaded", "abuse", "after"}

// pct is the nearest-rank percentile p of v (sorted); +Inf stands for a failure.
func pct(v []float64, p float64) float64 {
	if len(v) == 0 {
		return math.NaN()
	}
	i := int(math.Ceil(p*float64(len(v)))) - 1
	return v[max(0, min(i, len(v)-1))]
}

func ms(v float64) string {
	switch {
	case math.IsNaN(v):
		return "–"
	case math.IsInf(v, 1):
		return "failed"
	case v >= 100:
		return fmt.Sprintf("%.0f", v)
	default:
		return fmt.Sprintf("%.1f", v)
	}
}

// stat is one stream's numbers in one phase.
type stat struct {
	n, failed        int
	p50, p99, max    float64 // ms over every try, a failure as +Inf
	okP99            float64 // ms over the tries that worked
	openP50, openP99 float64
	why              map[string]int
}

func statOf(ss []sample, phase string) stat {
	var all, ok, open []float64
	st := stat{why: map[string]int{}}
	for _, s := range ss {
		if s.phase != phase {
			continue
		}
		st.n++
		d := float64(s.took.Microseconds()) / 1000
		if s.err != "" {
			st.failed++
			st.why[s.err]++
			if strings.HasPrefix(s.err, "launch:") || strings.HasPrefix(s.err, "login:") {
				all = append(all, math.Inf(1))
				continue
			}
		}
		all = append(all, d)
		ok = append(ok, d)
		if s.open > 0 && s.err == "" {
			open = append(open, float64(s.open.Microseconds())/1000)
		}
	}
	slices.Sort(all)
	slices.Sort(ok)
	slices.Sort(open)
	st.p50, st.p99, st.okP99 = pct(all, 0.5), pct(all, 0.99), pct(ok, 0.99)
	if len(all) > 0 {
		st.max = all[len(all)-1]
	}
	st.openP50, st.openP99 = pct(open, 0.5), pct(open, 0.99)
	return st
}

func ratio(a, b float64) string {
	switch {
	case math.IsNaN(a) || math.IsNaN(b) || b == 0:
		return "–"
	case math.IsInf(a, 1):
		return "∞ (failures)"
	}
	return fmt.Sprintf("%.2f×", a/b)
}

func whyOf(m map[string]int) string {
	var out []string
	for k, v := range m {
		out = append(out, fmt.Sprintf("%d %s", v, k))
	}
	sort.Strings(out)
	return strings.Join(out, "; ")
}

func (r report) print() {
	o, a := r.o, r.abuse
	procs := r.gcPeak.procs
	if procs == 0 {
		procs = r.end.heapMB.procs
	}
	fmt.Printf("node: one frontdoor serve process (bolt, secure gateway on its own address), %s, GOMAXPROCS %d (from its GC trace); the lab's agents and the honest clients in this process, the abusers in its child: CPUs %s\n\n", r.pin, procs, cpusAllowed())
	fmt.Printf("honest clients: fresh (new TCP+TLS connection per launch, client.Launch's timeouts: connect 2 s, TLS 3 s, 10 s in all) from %s; kept (two keep-alive connections) from %s; a launch of each arrives every %s whatever the node answers (open loop, %d users each: at most that many under way), opens the session's 8443/tcp channel through the gateway, reads the desktop's VNC greeting and name on a viewer's stream, and logs off. cold: a login of a user not seen before (bcrypt cost 10) every second from %s. %d standing sessions echo 256 B every second\n\n",
		freshIP, keptIP, o.interval, o.pool, coldIP, o.standing)
	fmt.Printf("abuse: %d wrong passwords at %d/s over %d keep-alive connections from 127.0.1.1-%d (half of them naming real users: the honest ones and 10 victims); %d slow-header connections from 127.0.2.1-%d, all held; %d stalled handshakes from 127.0.3.1-%d, %d held at once; %d bodyless launches (headers with an insider's right password, never the body) from 127.0.4.1-%d, %d held at once; new connections at %d/s a kind; limit %s\n\n",
		o.abuse.Wrong, o.abuse.WrongRate, o.abuse.Workers, o.abuse.Sources, o.abuse.Slow, o.abuse.Sources, o.abuse.Handshakes, o.abuse.Sources, o.abuse.HSAtOnce,
		o.abuse.Bodyless, o.abuse.BodylessSources, o.abuse.BodylessAtOnce, o.abuse.OpenRate, o.abuse.Limit)

	fmt.Println("### The honest clients (ms; a failed launch or login counts as infinitely slow)")
	fmt.Println()
	fmt.Println("| client | phase | tries | failed | p50 | p99 | max | p99 of those that worked | channel open+greeting p50 / p99 | what failed |")
	fmt.Println("|---|---|---:|---:|---:|---:|---:|---:|---|---|")
	for _, stream := range []string{"fresh", "kept", "cold"} {
		for _, ph := range phases {
			s := statOf(r.honest[stream], ph)
			open := "–"
			if stream != "cold" {
				open = ms(s.openP50) + " / " + ms(s.openP99)
			}
			fmt.Printf("| %s | %s | %d | %d | %s | %s | %s | %s | %s | %s |\n", stream, ph, s.n, s.failed, ms(s.p50), ms(s.p99), ms(s.max), ms(s.okP99), open, whyOf(s.why))
		}
	}
	fmt.Println()
	fmt.Println("### p99 ÷ unloaded p99 (goal: ≤ 2× under abuse)")
	fmt.Println()
	fmt.Println("| client | unloaded p99 | abuse p99 | abuse ÷ unloaded | abuse p50 ÷ unloaded p50 | after p99 | after ÷ unloaded |")
	fmt.Println("|---|---:|---:|---:|---:|---:|---:|")
	for _, stream := range []string{"fresh", "kept", "cold"} {
		u, b, c := statOf(r.honest[stream], "unloaded"), statOf(r.honest[stream], "abuse"), statOf(r.honest[stream], "after")
		fmt.Printf("| %s | %s | %s | %s | %s | %s | %s |\n", stream, ms(u.p99), ms(b.p99), ratio(b.p99, u.p99), ratio(b.p50, u.p50), ms(c.p99), ratio(c.p99, u.p99))
	}

	fmt.Println()
	fmt.Printf("### How the abusers were answered (%.1f s of abuse; at most %d abusive connections open at once: %d slow, %d handshakes, %d bodyless)\n\n", a.Seconds, a.Peak, a.Slow.Peak, a.HS.Peak, a.Body.Peak)
	var st []string
	for k, v := range a.Wrong.Status {
		st = append(st, fmt.Sprintf("%s: %d", k, v))
	}
	sort.Strings(st)
	fmt.Println("| abuse | sent | answers |")
	fmt.Println("|---|---:|---|")
	fmt.Printf("| wrong password | %d in %.1f s | %s; no answer (connection failed or cut): %d |\n", a.Wrong.Sent, a.Wrong.Seconds, strings.Join(st, ", "), a.Wrong.Cut)
	for _, k := range []struct {
		name string
		c    connStats
		wait string
	}{{"slow headers", a.Slow, "dial to TLS done"}, {"stalled handshakes", a.HS, "dial to connected"}, {"bodyless requests", a.Body, "dial to TLS done"}} {
		fmt.Printf("| %s | %d | cut by the node %d (after %.1f s median, %.1f s max, from %s); answered first %d; failed to connect %d (%s); open at the time limit %d; %s p50 %.2f s, max %.1f s |\n",
			k.name, k.c.Started, k.c.CutByServer, k.c.HoldP50, k.c.HoldMax, strings.SplitN(k.wait, " to ", 2)[1], k.c.Answered, k.c.Failed, strings.Join(k.c.FailReasons, ", "), k.c.OpenAtEnd, k.wait, k.c.WaitP50, k.c.WaitMax)
	}
	for _, n := range a.Notes {
		fmt.Println("\nnote:", n)
	}

	fmt.Println()
	fmt.Println("### The node process")
	fmt.Println()
	fmt.Println("| phase | RSS at its end (MB) | RSS peak in it (MB) | live heap after the last GC (MB) | largest heap at a GC start (MB) | goroutine stacks (MB) | descriptors at end / peak | threads | CPU (cores) |")
	fmt.Println("|---|---:|---:|---:|---:|---:|---|---:|---:|")
	fmt.Printf("| before the load | %.1f | – | %d | – | %d | %d | %d | – |\n", mb(r.base.rssKB), r.base.heapMB.live, r.base.heapMB.stacks, r.base.fds, r.base.threads)
	for _, ph := range phases {
		var last nodeSample
		var first *nodeSample
		var peakRSS int64
		var peakFD, peakHeap, peakStacks int
		for i := range r.samples {
			s := r.samples[i]
			if s.phase != ph {
				continue
			}
			if first == nil {
				first = &r.samples[i]
			}
			last = s
			peakRSS, peakFD = max(peakRSS, s.rssKB), max(peakFD, s.fds)
			peakHeap, peakStacks = max(peakHeap, s.heapMB.start), max(peakStacks, s.heapMB.stacks)
		}
		if first == nil {
			continue
		}
		cores := 0.0
		if d := (last.at - first.at).Seconds(); d > 0 {
			cores = float64(last.cpuTicks-first.cpuTicks) / 100 / d
		}
		fmt.Printf("| %s | %.1f | %.1f | %d | %d | %d | %d / %d | %d | %.2f |\n", ph, mb(last.rssKB), mb(peakRSS), last.heapMB.live, peakHeap, peakStacks, last.fds, peakFD, last.threads, cores)
	}
	fmt.Printf("| at the end | %.1f | %.1f (VmHWM: the run's) | %d | – | %d | %d | %d | – |\n", mb(r.end.rssKB), mb(r.end.hwmKB), r.end.heapMB.live, r.end.heapMB.stacks, r.end.fds, r.end.threads)
	fmt.Printf("\nthis process (agents, honest clients) and the abusers' process, CPU over the abuse: %s\n", r.loadCPU())
	fmt.Printf("\ndescriptors held at most (sampled every 0.5 s; the limit is %s a process): node %d, this process %d, the abusers' process %d\n", fileLimit(), r.fds["node"], r.fds["self"], r.fds["abusers"])

	fmt.Println()
	fmt.Println("### Standing sessions")
	fmt.Println()
	var echoes, cuts int64
	fails := map[string]int{}
	for _, s := range r.standing {
		echoes += s.echoes.Load()
		cuts += s.cuts.Load()
		s.mu.Lock()
		for k, v := range s.echoFail {
			fails[k] += v
		}
		s.mu.Unlock()
	}
	fmt.Printf("%d sessions opened before the abuse; %d echoes through them, failed: %s; channel cuts: %d; lost (down, not echoing, or gone from the node at the end): %d\n",
		len(r.standing), echoes, whyOf(fails), cuts, len(r.lost))
	for id, why := range r.lost {
		fmt.Printf("- %s: %s\n", id, why)
	}
	if len(r.warnings) > 0 {
		fmt.Println("\nthe node's log, warnings and errors over the run:")
		var ks []string
		for k := range r.warnings {
			ks = append(ks, k)
		}
		sort.Slice(ks, func(i, j int) bool { return r.warnings[ks[i]] > r.warnings[ks[j]] })
		for _, k := range ks[:min(len(ks), 12)] {
			fmt.Printf("- %d× %s\n", r.warnings[k], k)
		}
	}
	r.timeline()
}

func mb(kb int64) float64 { return float64(kb) / 1024 }

// loadCPU is the cores this process and the abusers' used in the abuse phase.
func (r report) loadCPU() string {
	var first, last *nodeSample
	for i := range r.samples {
		if r.samples[i].phase == "abuse" {
			if first == nil {
				first = &r.samples[i]
			}
			last = &r.samples[i]
		}
	}
	if first == nil || last == first {
		return "–"
	}
	// r.cpu holds each phase's last reading: the unloaded one is the abuse's start.
	d := (last.at - first.at).Seconds()
	self := float64(r.cpu["self abuse"]-r.cpu["self unloaded"]) / 100 / d
	child := float64(r.cpu["child abuse"]) / 100 / d
	return fmt.Sprintf("this process %.2f cores, abusers %.2f cores", self, child)
}

// timeline prints, every 2 s from the abuse's start, the node's descriptors and RSS and
// the honest tries that began then.
func (r report) timeline() {
	var start time.Duration = -1
	for _, s := range r.samples {
		if s.phase == "abuse" {
			start = s.at
			break
		}
	}
	if start < 0 {
		return
	}
	const step = 2 * time.Second
	fmt.Println()
	fmt.Println("### Timeline from the abuse's start (every 2 s: node at the step's end; honest tries begun in it: how many, the slowest whole try in ms (launch, channel, logoff), how many failed)")
	fmt.Println()
	fmt.Println("| t (s) | phase | node descriptors | node RSS (MB) | live heap (MB) | fresh n / slowest / failed | kept n / slowest / failed | cold n / slowest / failed |")
	fmt.Println("|---:|---|---:|---:|---:|---|---|---|")
	for t := start - 4*time.Second; ; t += step {
		var last *nodeSample
		for i := range r.samples {
			if r.samples[i].at >= t && r.samples[i].at < t+step {
				last = &r.samples[i]
			}
		}
		if last == nil {
			if t > start {
				break
			}
			continue
		}
		cell := func(stream string) string {
			n, failed, slowest := 0, 0, 0.0
			for _, s := range r.honest[stream] {
				if s.at >= t && s.at < t+step {
					n++
					if s.err != "" {
						failed++
					}
					slowest = max(slowest, float64(s.total.Microseconds())/1000)
				}
			}
			return fmt.Sprintf("%d / %s / %d", n, ms(slowest), failed)
		}
		fmt.Printf("| %.0f | %s | %d | %.0f | %d | %s | %s | %s |\n", (t - start).Seconds(), last.phase, last.fds, mb(last.rssKB), last.heapMB.live, cell("fresh"), cell("kept"), cell("cold"))
	}
	_ = os.Stdout.Sync()
}

// cpusAllowed is this process's Cpus_allowed_list (its child's too).
func cpusAllowed() string {
	b, _ := os.ReadFile("/proc/self/status")
	for _, line := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(line, "Cpus_allowed_list:"); ok {
			return strings.TrimSpace(v)
		}
	}
	return "?"
}

// fileLimit is this process's open-files limit.
func fileLimit() string {
	var l syscall.Rlimit
	if err := syscall.Getrlimit(syscall.RLIMIT_NOFILE, &l); err != nil {
		return "?"
	}
	return fmt.Sprint(l.Cur)
}
