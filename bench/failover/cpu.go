//go:build linux

package main

import (
	"bufio"
	"context"
	"fmt"
	"net"
	"net/netip"
	"os"
	"os/signal"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/frontdoor-vdi/frontdoor/health"
)

// targetPorts are one target's service ports, one line "tls tcp udp" of the ports file.
type targetPorts struct {
	tls, tcp, udp uint16
}

// readPorts reads the ports file that serve writes.
func readPorts(name string) ([]targetPorts, error) {
	f, err := os.Open(name)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	var ps []targetPorts
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		var p targetPorts
		if _, err := fmt.Sscanf(sc.Text(), "%d %d %d", &p.tls, &p.tcp, &p.udp); err != nil {
			return nil, fmt.Errorf("%s line %d: %w", name, len(ps)+1, err)
		}
		ps = append(ps, p)
	}
	return ps, sc.Err()
}

// runServe starts n targets' worth of services on host (a TLS, a TCP and a UDP port each),
// writes "tls tcp udp" port lines to out, and serves until SIGTERM.
func runServe(n int, out string, host netip.Addr) error {
	cert, err := selfSigned("gw.bench.test")
	if err != nil {
		return err
	}
	var b strings.Builder
	for range n {
		t, err := newTLSServer(cert, host)
		if err != nil {
			return err
		}
		ln, err := net.Listen("tcp", netip.AddrPortFrom(host, 0).String())
		if err != nil {
			return err
		}
		go func() {
			for {
				c, err := ln.Accept()
				if err != nil {
					return
				}
				c.Close()
			}
		}()
		u, err := udpEcho(host)
		if err != nil {
			return err
		}
		fmt.Fprintf(&b, "%d %d %d\n", t.Port(), ln.Addr().(*net.TCPAddr).Port, u.LocalAddr().(*net.UDPAddr).Port)
	}
	if err := os.WriteFile(out+".tmp", []byte(b.String()), 0o644); err != nil {
		return err
	}
	if err := os.Rename(out+".tmp", out); err != nil {
		return err
	}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, os.Interrupt)
	defer stop()
	<-ctx.Done()
	return nil
}

// cpuTime returns the process's user and system CPU time.
func cpuTime() (user, sys time.Duration) {
	var ru syscall.Rusage
	syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return time.Duration(ru.Utime.Nano()), time.Duration(ru.Stime.Nano())
}

// runCPU probes the services on host listed in portsFile with the given kinds for dur after
// a warm-up and prints the prober's CPU time as a share of one core.
func runCPU(portsFile string, host netip.Addr, kinds []string, interval, timeout, dur time.Duration) error {
	ps, err := readPorts(portsFile)
	if err != nil {
		return err
	}
	mon := health.DefaultMonitor()
	mon.Interval, mon.Timeout = interval, timeout
	var targets []health.Target
	for i, p := range ps {
		t := health.Target{Name: fmt.Sprint("gw", i), Addr: host, Monitor: mon}
		for _, k := range kinds {
			switch k {
			case "tls":
				t.Ports = append(t.Ports, health.Port{ID: health.TCP(p.tls), Check: health.Check{Kind: health.KindTLS}})
			case "https":
				t.Ports = append(t.Ports, health.Port{ID: health.TCP(p.tls), Check: health.Check{Kind: health.KindHTTPS}})
			case "tcp":
				t.Ports = append(t.Ports, health.Port{ID: health.TCP(p.tcp)})
			case "udp":
				t.Ports = append(t.Ports, health.Port{ID: health.UDP(p.udp)})
			default:
				return fmt.Errorf("unknown kind %q", k)
			}
		}
		targets = append(targets, t)
	}
	var probes, failures atomic.Int64
	var errMu sync.Mutex // guards errs
	errs := map[string]int{}
	count := func(err error) {
		probes.Add(1)
		if err == nil {
			return
		}
		failures.Add(1)
		msg := err.Error()
		if i := strings.LastIndex(msg, ": "); i >= 0 {
			msg = msg[i+2:]
		}
		errMu.Lock()
		errs[msg]++
		errMu.Unlock()
	}
	// The Checker's own path: NetProber.Start, counted on the way back.
	np := &health.NetProber{}
	chk, err := health.New(targets, health.Deps{Start: func(ap netip.AddrPort, c *health.Check, deadline time.Time, done func(error)) {
		np.Start(ap, c, deadline, func(err error) { count(err); done(err) })
	}})
	if err != nil {
		return err
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	done := make(chan error, 1)
	go func() { done <- chk.Run(ctx) }()
	time.Sleep(2 * interval) // warm-up: every port probed at least once
	u0, s0 := cpuTime()
	p0, f0, w0 := probes.Load(), failures.Load(), time.Now()
	time.Sleep(dur)
	u1, s1 := cpuTime()
	p1, f1, w1 := probes.Load(), failures.Load(), time.Now()
	chk.Close()
	<-done
	wall := w1.Sub(w0)
	cpu := u1 - u0 + s1 - s0
	n := p1 - p0
	down := 0
	for _, st := range chk.Snapshot() {
		if st.Verdict != health.StateUp {
			down++
		}
	}
	for msg, n := range errs {
		fmt.Fprintf(os.Stderr, "cpu [%s] timeout %v: %d probes failed: %s\n", strings.Join(kinds, ","), timeout, n, msg)
	}
	pct := func(d time.Duration) float64 { return 100 * d.Seconds() / wall.Seconds() }
	fmt.Printf("| %d × [%s] | %v / %v | %.0f | %d | %.2f%% (user %.2f%%, sys %.2f%%) | %.1f | %d |\n", len(targets), strings.Join(kinds, ","),
		interval, timeout, float64(n)/wall.Seconds(), f1-f0, pct(cpu), pct(u1-u0), pct(s1-s0),
		float64(cpu.Microseconds())/float64(max(n, 1)), down)
	return nil
}
