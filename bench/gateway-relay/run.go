package main

// The rounds: every row runs the load in this process (pinned by the script to the load
// CPU) against a relay the script started, and reads the relay process's CPU (utime+stime of
// /proc/PID/stat) and every CPU's busy time (/proc/stat) at the edges of the measured window.

import (
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/frontdoor-vdi/frontdoor/bench/internal/kernel"
)

// config is the run's.
type config struct {
	site                     *site
	pids                     map[string]int // relay process by name: fd, nginx, haproxy
	nginx, haproxy, haproxy2 string         // the peers' listening addresses
	rounds, window           int
	dur, warm                time.Duration
	sizes, streams           []int
	udpTargets, tcpTargets   []string
	pprofURL, profDir        string // the relay's pprof, and where its profiles go (round 1)
	tck                      float64
	relayCPU, loadCPU        int
}

// relayOf names the relay process of a target.
func relayOf(target string) string {
	switch {
	case strings.HasPrefix(target, "fd-"):
		return "fd"
	case strings.HasPrefix(target, "haproxy"):
		return "haproxy"
	}
	return target
}

// cpuTicks is utime+stime of process pid, in clock ticks; -1 when it cannot be read.
func cpuTicks(pid int) float64 {
	_, u, st, err := kernel.ProcCPU(strconv.Itoa(pid))
	if err != nil {
		return -1
	}
	return float64(u + st)
}

// cpuStat is each CPU's busy and total ticks (/proc/stat: busy is user, nice, system, irq and
// softirq; total adds idle, iowait and steal).
type cpuStat struct{ busy, total []float64 }

func readCPUStat() cpuStat {
	var c cpuStat
	b, err := os.ReadFile("/proc/stat")
	if err != nil {
		return c
	}
	for _, l := range strings.Split(string(b), "\n") {
		f := strings.Fields(l)
		if len(f) < 9 || !strings.HasPrefix(f[0], "cpu") || f[0] == "cpu" {
			continue
		}
		var v [8]float64
		for i := range v {
			v[i], _ = strconv.ParseFloat(f[i+1], 64)
		}
		c.busy = append(c.busy, v[0]+v[1]+v[2]+v[5]+v[6])
		c.total = append(c.total, v[0]+v[1]+v[2]+v[3]+v[4]+v[5]+v[6]+v[7])
	}
	return c
}

// busySince is each CPU's busy fraction since a.
func busySince(a, b cpuStat) []float64 {
	var out []float64
	for i := range min(len(a.busy), len(b.busy)) {
		t := b.total[i] - a.total[i]
		if t <= 0 {
			out = append(out, 0)
			continue
		}
		out = append(out, (b.busy[i]-a.busy[i])/t)
	}
	return out
}

// ctxSwitches is the context switches of process pid so far, voluntary and not, summed over
// its threads (/proc/PID/task/*/status); -1 when they cannot be read.
func ctxSwitches(pid int) int64 {
	tasks, err := os.ReadDir(fmt.Sprintf("/proc/%d/task", pid))
	if err != nil {
		return -1
	}
	var n int64
	for _, t := range tasks {
		lines, err := kernel.ReadLines(fmt.Sprintf("/proc/%d/task/%s/status", pid, t.Name()))
		if err != nil {
			continue // a thread that just ended
		}
		for _, l := range lines {
			if strings.HasSuffix(strings.SplitN(l, ":", 2)[0], "ctxt_switches") {
				v, _ := strconv.ParseInt(strings.TrimSpace(strings.SplitN(l, ":", 2)[1]), 10, 64)
				n += v
			}
		}
	}
	return n
}

// window is what a row reads at the edges of its measured window.
type window struct {
	pid      int
	c0       float64
	x0, u0   int64
	s0       cpuStat
	cpu      float64   // the relay's CPU seconds in the window
	busy     []float64 // each CPU's busy fraction in the window
	switches int64     // the relay's context switches in the window
	udpIn    int64     // UDP datagrams the host received in the window (/proc/net/snmp)
	wall     float64
	at       time.Time
	profile  chan error
	profPath string
}

func (o *config) newWindow(pid int) *window { return &window{pid: pid} }

func (w *window) start() {
	w.x0, w.u0 = ctxSwitches(w.pid), kernel.UDPCounter("InDatagrams")
	w.s0, w.c0, w.at = readCPUStat(), cpuTicks(w.pid), time.Now()
}

func (w *window) end(tck float64) {
	c1, s1 := cpuTicks(w.pid), readCPUStat()
	w.wall = time.Since(w.at).Seconds()
	w.switches, w.udpIn = ctxSwitches(w.pid)-w.x0, kernel.UDPCounter("InDatagrams")-w.u0
	if w.c0 < 0 || c1 < 0 {
		w.cpu = -1
	} else {
		w.cpu = (c1 - w.c0) / tck
	}
	w.busy = busySince(w.s0, s1)
}

// udpRow is one UDP measurement.
type udpRow struct {
	round, size int
	target, via string
	r           echoResult
	w           *window
}

// tcpRow is one TCP measurement.
type tcpRow struct {
	round, streams int
	target         string
	r              bulkResult
	w              *window
}

// profileDuring fetches a CPU profile of the relay for dur into path, from the relay's pprof.
func (o *config) profileDuring(dur time.Duration, path string) chan error {
	done := make(chan error, 1)
	go func() {
		cl := &http.Client{Timeout: dur + 15*time.Second}
		resp, err := cl.Get(fmt.Sprintf("%s/debug/pprof/profile?seconds=%d", o.pprofURL, max(1, int(dur.Seconds()))))
		if err != nil {
			done <- err
			return
		}
		defer resp.Body.Close()
		f, err := os.Create(path)
		if err != nil {
			done <- err
			return
		}
		_, err = io.Copy(f, resp.Body)
		f.Close()
		done <- err
	}()
	return done
}

func (o *config) wantProfile(round int, target string) bool {
	return o.pprofURL != "" && o.profDir != "" && round == 1 && relayOf(target) == "fd"
}

func (o *config) openUDP(target string) (link, string, error) {
	switch target {
	case "fd-quic":
		return openSession(o.site, true)
	case "fd-plain":
		return openSession(o.site, false)
	case "fd-quic-raw":
		return openQUIC(o.site)
	case "nginx":
		return openUDP(o.nginx)
	}
	return nil, "", fmt.Errorf("unknown UDP target %q", target)
}

func (o *config) udp(round, size int, target string) udpRow {
	row := udpRow{round: round, size: size, target: target, w: o.newWindow(o.pids[relayOf(target)])}
	l, via, err := o.openUDP(target)
	if err != nil {
		row.r.Err = err.Error()
		return row
	}
	row.via = via
	start := func() {
		if o.wantProfile(round, target) {
			row.w.profPath = filepath.Join(o.profDir, fmt.Sprintf("%s-udp-%d.pprof", target, size))
			row.w.profile = o.profileDuring(o.dur, row.w.profPath)
		}
		row.w.start()
	}
	row.r = runEcho(l, size, o.window, o.warm, o.dur, start, func() { row.w.end(o.tck) })
	if row.w.profile != nil {
		if err := <-row.w.profile; err != nil {
			fmt.Fprintln(os.Stderr, "profile:", err)
		}
	}
	return row
}

func (o *config) dialTCP(target string) (func() (*tlsConn, error), error) {
	switch target {
	case "fd-tls":
		return func() (*tlsConn, error) { return dialFD(o.site) }, nil
	case "haproxy":
		return func() (*tlsConn, error) { return dialTLS(o.haproxy, "127.0.0.1", o.site) }, nil
	case "haproxy-tls2":
		return func() (*tlsConn, error) { return dialTLS(o.haproxy2, "127.0.0.1", o.site) }, nil
	}
	return nil, fmt.Errorf("unknown TCP target %q", target)
}

func (o *config) tcp(round, streams int, target string) tcpRow {
	row := tcpRow{round: round, streams: streams, target: target, w: o.newWindow(o.pids[relayOf(target)])}
	dial, err := o.dialTCP(target)
	if err != nil {
		row.r.Err = err.Error()
		return row
	}
	var conns []*tlsConn
	for range streams {
		c, err := dial()
		if err != nil {
			for _, c := range conns {
				c.Close()
			}
			row.r.Err = err.Error()
			return row
		}
		conns = append(conns, c)
	}
	start := func() {
		if o.wantProfile(round, target) {
			row.w.profPath = filepath.Join(o.profDir, fmt.Sprintf("%s-tcp-%d.pprof", target, streams))
			row.w.profile = o.profileDuring(o.dur, row.w.profPath)
		}
		row.w.start()
	}
	row.r = runBulk(conns, o.warm, o.dur, start, func() { row.w.end(o.tck) })
	if row.w.profile != nil {
		if err := <-row.w.profile; err != nil {
			fmt.Fprintln(os.Stderr, "profile:", err)
		}
	}
	return row
}

// check opens every target once before the rounds: a UDP echo, a TLS stream.
func (o *config) check() error {
	for _, t := range o.udpTargets {
		l, _, err := o.openUDP(t)
		if err == nil {
			err = checkEcho(l)
			l.close()
		}
		if err != nil {
			return fmt.Errorf("%s: %w", t, err)
		}
	}
	for _, t := range o.tcpTargets {
		dial, err := o.dialTCP(t)
		if err != nil {
			return err
		}
		c, err := dial()
		if err == nil {
			_, err = c.Write(make([]byte, 1024))
			c.Close()
		}
		if err != nil {
			return fmt.Errorf("%s: %w", t, err)
		}
	}
	for name, pid := range o.pids {
		if cpuTicks(pid) < 0 {
			return fmt.Errorf("relay %s: no /proc/%d/stat", name, pid)
		}
	}
	return nil
}

// rotate returns xs rotated left by k.
func rotate(xs []string, k int) []string {
	if len(xs) == 0 {
		return xs
	}
	k %= len(xs)
	return append(slices.Clone(xs[k:]), xs[:k]...)
}

func (o *config) run() ([]udpRow, []tcpRow) {
	var us []udpRow
	var ts []tcpRow
	pause := func() { time.Sleep(500 * time.Millisecond) }
	for r := 1; r <= o.rounds; r++ {
		for _, size := range o.sizes {
			for _, t := range rotate(o.udpTargets, r-1) {
				row := o.udp(r, size, t)
				us = append(us, row)
				fmt.Fprintf(os.Stderr, "round %d udp %dB %s: %.0f/s, relay %.2fs, busy %s %s\n", r, size, t,
					float64(row.r.Echoed)/max(row.r.Seconds, 1e-9), row.w.cpu, pct(row.w.busy), row.r.Err)
				pause()
			}
		}
		for _, n := range o.streams {
			for _, t := range rotate(o.tcpTargets, r-1) {
				row := o.tcp(r, n, t)
				ts = append(ts, row)
				fmt.Fprintf(os.Stderr, "round %d tcp %d %s: %.0f MB/s, relay %.2fs, busy %s %s\n", r, n, t,
					float64(row.r.Bytes)/max(row.r.Seconds, 1e-9)/1e6, row.w.cpu, pct(row.w.busy), row.r.Err)
				pause()
			}
		}
	}
	return us, ts
}

func pct(fs []float64) string {
	var b strings.Builder
	for i, f := range fs {
		if i > 0 {
			b.WriteByte('/')
		}
		fmt.Fprintf(&b, "%.0f%%", f*100)
	}
	return b.String()
}
