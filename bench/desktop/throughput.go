package main

// Benchmark 2: display throughput per relay CPU. A viewer keeps two non-incremental
// full-screen requests in flight on the builtin desktop (1024×768, raw, 32 bits a pixel:
// 3 MiB an update) through frontdoor's gateway and through HAProxy terminating TLS in front
// of the same desktop code; MB/s and the relay process's CPU seconds per GB.

import (
	"context"
	"crypto/tls"
	"flag"
	"fmt"
	"net"
	"net/netip"
	"os"
	"slices"
	"time"

	"github.com/frontdoor-vdi/frontdoor/internal/rfb"
)

func throughputMain(args []string) error {
	fs := flag.NewFlagSet("throughput", flag.ExitOnError)
	e := envFlags(fs)
	dur := fs.Duration("dur", 5*time.Second, "measured time per row")
	warm := fs.Duration("warm", time.Second, "unmeasured load before each row")
	rounds := fs.Int("rounds", 3, "rounds; the target order rotates each round")
	haproxyPID := fs.Int("haproxy-pid", 0, "PID of HAProxy (0: frontdoor alone)")
	haproxy := fs.String("haproxy", "127.0.0.1:14821", "HAProxy's TLS listener to the plain desktop")
	haproxy2 := fs.String("haproxy-tls2", "127.0.0.1:14822", "HAProxy's TLS listener re-encrypting to the TLS desktop")
	fs.Parse(args)
	s, err := loadSite(e.dir)
	if err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	ag, err := spawn(e.work, "agent-tput", e.loadCPU, "agent", "-dir", e.dir, "-n", "1", "-straight")
	if err != nil {
		return err
	}
	defer ag.stop()
	gw, err := spawn(e.work, "gateway-tput", e.relayCPU, "gateway", "-dir", e.dir, "-n", "0")
	if err != nil {
		return err
	}
	defer gw.stop()
	d, err := s.descriptor("tput", 1, "builtin", 0)
	if err != nil {
		return err
	}
	sess, err := s.open(ctx, d, 0, false, netip.Addr{})
	if err != nil {
		return err
	}
	defer sess.Close()
	local, err := sess.Expose("127.0.0.1:0", displayPort)
	if err != nil {
		return err
	}
	type target struct {
		name, what string
		pid        int
		dial       func() (net.Conn, error)
	}
	targets := []target{{"frontdoor", "client → TLS 1.3 to the agent, sealed: the gateway checks the ticket on its own TLS, then splices the TCP bytes → builtin desktop (in the agent)", gw.pid(),
		func() (net.Conn, error) { return net.DialTimeout("tcp", local.String(), 5*time.Second) }}}
	if *haproxyPID > 0 {
		dialTLS := func(addr string) func() (net.Conn, error) {
			return func() (net.Conn, error) {
				return tls.DialWithDialer(&net.Dialer{Timeout: 5 * time.Second}, "tcp", addr, s.clientTLS())
			}
		}
		targets = append(targets,
			target{"haproxy", "TLS → HAProxy → plain TCP → builtin desktop (in the agent's process)", *haproxyPID, dialTLS(*haproxy)},
			target{"haproxy-tls2", "TLS → HAProxy → TLS 1.3 with a client certificate → builtin desktop", *haproxyPID, dialTLS(*haproxy2)})
	}
	type result struct{ mbps, cpuPerGB []float64 }
	res := map[string]*result{}
	for r := range *rounds {
		for i := range targets {
			t := targets[(i+r)%len(targets)]
			c, err := t.dial()
			if err != nil {
				return fmt.Errorf("%s: %w", t.name, err)
			}
			mbps, cpg, err := fullScreens(c, t.pid, *warm, *dur)
			c.Close()
			if err != nil {
				return fmt.Errorf("%s, round %d: %w", t.name, r+1, err)
			}
			if res[t.name] == nil {
				res[t.name] = &result{}
			}
			res[t.name].mbps = append(res[t.name].mbps, mbps)
			res[t.name].cpuPerGB = append(res[t.name].cpuPerGB, cpg)
			fmt.Fprintf(os.Stderr, "throughput round %d %s: %.0f MB/s, %.3f CPU s/GB\n", r+1, t.name, mbps, cpg)
		}
	}
	fmt.Printf("### 2. Display throughput per relay CPU: full-screen raw updates\n\n")
	fmt.Printf("The builtin desktop at 1024×768, raw, 32 bits a pixel (3 MiB an update), two non-incremental full-screen requests "+
		"in flight; %d rounds of %v (after %v unmeasured), the target order rotating; the relay on CPU %s, the viewer, client "+
		"session, agent and desktop on CPU %s. CPU is the relay process's utime+stime (/proc/PID/stat) over the window. "+
		"Median of the rounds (min–max).\n\n", *rounds, *dur, *warm, e.relayCPU, e.loadCPU)
	fmt.Println("| target | path | MB/s | relay CPU s/GB | frontdoor per CPU ÷ target's (≥ 1.0 better) |")
	fmt.Println("|---|---|---|---|---|")
	fd := median(res["frontdoor"].cpuPerGB)
	for _, t := range targets {
		x := res[t.name]
		ratio := median(x.cpuPerGB) / fd
		fmt.Printf("| %s | %s | %.0f (%.0f–%.0f) | %.3f (%.3f–%.3f) | %.2f |\n", t.name, t.what, median(x.mbps), minOf(x.mbps), maxOf(x.mbps),
			median(x.cpuPerGB), minOf(x.cpuPerGB), maxOf(x.cpuPerGB), ratio)
	}
	fmt.Println()
	for _, t := range targets[1:] {
		x := res[t.name]
		ratio := median(x.cpuPerGB) / fd
		e.summary("2. throughput per relay CPU vs %s | %.0f MB/s, %.3f CPU s/GB | %.0f MB/s, %.3f CPU s/GB | %.2f× per CPU (MB/s %.2f×) | ≥ 1.0× %s per CPU | %s",
			t.name, median(res["frontdoor"].mbps), fd, median(x.mbps), median(x.cpuPerGB), ratio,
			median(res["frontdoor"].mbps)/median(x.mbps), t.name, yes(ratio >= 1.0))
	}
	if len(targets) == 1 {
		e.summary("2. throughput per relay CPU | %.0f MB/s, %.3f CPU s/GB | HAProxy not run | | ≥ 1.0× HAProxy per CPU | not measured", median(res["frontdoor"].mbps), fd)
	}
	return nil
}

// fullScreens keeps two full-screen requests in flight on c for warm, then for dur, and
// returns the MB/s of the measured window and relay pid's CPU seconds per GB in it.
func fullScreens(c net.Conn, pid int, warm, dur time.Duration) (mbps, cpuPerGB float64, err error) {
	v, err := newViewerWith(c, rfb.ClientOptions{Raw: true}) // Hextile would shrink the frames twentyfold
	if err != nil {
		return 0, 0, err
	}
	for range 2 {
		if err := v.rfb.RequestAll(false); err != nil {
			return 0, 0, err
		}
	}
	var bytes int64
	var cpu0 float64
	var t0 time.Time
	start := time.Now()
	measuring := false
	for range 1 << 30 {
		now := time.Now()
		if !measuring && now.Sub(start) >= warm {
			measuring, t0, bytes = true, now, 0
			if cpu0, err = cpuSeconds(pid); err != nil {
				return 0, 0, err
			}
		}
		if measuring && now.Sub(t0) >= dur {
			break
		}
		c.SetReadDeadline(now.Add(5 * time.Second))
		m, err := v.update()
		if err != nil {
			return 0, 0, err
		}
		bytes += m.Bytes
		if err := v.rfb.RequestAll(false); err != nil {
			return 0, 0, err
		}
	}
	cpu1, err := cpuSeconds(pid)
	if err != nil {
		return 0, 0, err
	}
	el := time.Since(t0).Seconds()
	return float64(bytes) / el / 1e6, (cpu1 - cpu0) / (float64(bytes) / 1e9), nil
}

func median(xs []float64) float64 {
	s := slices.Clone(xs)
	slices.Sort(s)
	if len(s) == 0 {
		return 0
	}
	if len(s)%2 == 1 {
		return s[len(s)/2]
	}
	return (s[len(s)/2-1] + s[len(s)/2]) / 2
}

func minOf(xs []float64) float64 { return slices.Min(xs) }
func maxOf(xs []float64) float64 { return slices.Max(xs) }
