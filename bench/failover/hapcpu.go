//go:build linux

package main

import (
	"fmt"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/frontdoor-vdi/frontdoor/bench/internal/kernel"
)

// procCPU returns a process's user and system CPU time from /proc/<pid>/stat.
func procCPU(pid int) (user, sys time.Duration, err error) {
	state, ut, st, err := kernel.ProcCPU(strconv.Itoa(pid))
	if err != nil {
		return 0, 0, err
	}
	if state == "Z" {
		return 0, 0, fmt.Errorf("process %d exited", pid)
	}
	const tick = 10 * time.Millisecond // USER_HZ is 100 on Linux
	return time.Duration(ut) * tick, time.Duration(st) * tick, nil
}

// runHAPCPU runs HAProxy with one server per listed port of host (TCP connect checks on the
// tcp ports, check-ssl on the tls ports) at the given interval, and prints its CPU time.
func runHAPCPU(bin, cpu, portsFile string, host netip.Addr, kinds []string, interval, dur time.Duration) error {
	ps, err := readPorts(portsFile)
	if err != nil {
		return err
	}
	var b strings.Builder
	fmt.Fprintf(&b, "global\n\tmaxconn 4000\ndefaults\n\tmode tcp\n\ttimeout connect 250ms\n\ttimeout check 250ms\n\ttimeout client 5s\n\ttimeout server 5s\n")
	servers := map[string]*strings.Builder{}
	for _, k := range kinds {
		servers[k] = &strings.Builder{}
	}
	n := len(ps)
	for i, p := range ps {
		for _, k := range kinds {
			switch k {
			case "tcp":
				fmt.Fprintf(servers[k], "\tserver s%d %v check inter %dms\n", i, netip.AddrPortFrom(host, p.tcp), interval.Milliseconds())
			case "tls":
				fmt.Fprintf(servers[k], "\tserver s%d %v check check-ssl verify none inter %dms\n", i, netip.AddrPortFrom(host, p.tls), interval.Milliseconds())
			default:
				return fmt.Errorf("HAProxy cannot run %s checks", k)
			}
		}
	}
	front, err := freePort()
	if err != nil {
		return err
	}
	// HAProxy refuses to run without a listener.
	fmt.Fprintf(&b, "frontend fe\n\tbind 127.0.0.1:%d\n\tdefault_backend be_%s\n", front, kinds[0])
	for _, k := range kinds {
		fmt.Fprintf(&b, "backend be_%s\n%s", k, servers[k].String())
	}
	dir, err := os.MkdirTemp("", "hapcpu")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	cfg := filepath.Join(dir, "haproxy.cfg")
	if err := os.WriteFile(cfg, []byte(b.String()), 0o644); err != nil {
		return err
	}
	cmd := exec.Command("taskset", "-c", cpu, bin, "-f", cfg, "-db")
	var out strings.Builder
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Start(); err != nil {
		return err
	}
	defer func() { cmd.Process.Kill(); cmd.Wait() }()
	time.Sleep(2 * interval)
	pid := cmd.Process.Pid // taskset execs HAProxy in place
	u0, s0, err := procCPU(pid)
	if err != nil {
		return fmt.Errorf("%w (haproxy said: %s)", err, out.String())
	}
	w0 := time.Now()
	time.Sleep(dur)
	u1, s1, err := procCPU(pid)
	if err != nil {
		return err
	}
	wall := time.Since(w0)
	pct := func(d time.Duration) float64 { return 100 * d.Seconds() / wall.Seconds() }
	checks := float64(n*len(kinds)) / interval.Seconds()
	fmt.Printf("| HAProxy: %d × [%s] | %v / 250ms | %.0f | n/a | %.2f%% (user %.2f%%, sys %.2f%%) | %.1f | n/a |\n", n, strings.Join(kinds, ","),
		interval, checks, pct(u1-u0+s1-s0), pct(u1-u0), pct(s1-s0), float64((u1-u0+s1-s0).Microseconds())/(checks*wall.Seconds()))
	return nil
}
