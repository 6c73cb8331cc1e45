//go:build linux

// Command failover measures the health prober: detection time against HAProxy on the same
// loopback listeners (detect), and the CPU cost of probing many targets (serve + cpu, and
// hapcpu for HAProxy) on loopback or on another address, such as the far end of a veth pair
// in a network namespace (reach checks that it answers). It is run by bench/failover.sh.
package main

import (
	"flag"
	"fmt"
	"net/netip"
	"os"
	"runtime/pprof"
	"strings"
	"time"
)

var (
	verbose    = flag.Bool("v", false, "print HAProxy's log lines and frontdoor's down events")
	cpuProfile = flag.String("cpuprofile", "", "write a CPU profile of this process to the file")
	only       = flag.String("only", "", "detect: run only the scenarios whose target contains this")
)

func main() {
	var (
		runs     = flag.Int("runs", 15, "detect: failures injected per scenario")
		hapBin   = flag.String("haproxy", "haproxy", "detect, hapcpu: the HAProxy binary")
		hapCPU   = flag.String("haproxy-cpu", "1", "detect, hapcpu: the CPU HAProxy is pinned to")
		inter    = flag.Duration("interval", 250*time.Millisecond, "probe interval (detect and cpu)")
		timeout  = flag.Duration("timeout", 250*time.Millisecond, "detect and cpu: probe timeout")
		fall     = flag.Int("fall", 3, "detect: fall")
		rise     = flag.Int("rise", 2, "detect: rise")
		n        = flag.Int("n", 1000, "serve: number of targets")
		ports    = flag.String("ports", "", "serve: file to write the ports to; cpu, hapcpu, reach: file to read them from")
		kinds    = flag.String("kinds", "tls,tcp,udp", "cpu: the checks of each target")
		duration = flag.Duration("duration", 30*time.Second, "cpu: measuring window")
		addrFlag = flag.String("addr", "127.0.0.1", "serve: the address to listen on; cpu, hapcpu, reach: the address of the services")
	)
	flag.Parse()
	addr, err := netip.ParseAddr(*addrFlag)
	if err != nil {
		fmt.Fprintln(os.Stderr, "failover: -addr:", err)
		os.Exit(2)
	}
	if *cpuProfile != "" {
		f, err := os.Create(*cpuProfile)
		if err == nil {
			pprof.StartCPUProfile(f)
			defer pprof.StopCPUProfile()
		}
	}
	switch flag.Arg(0) {
	case "detect":
		err = runDetect(*hapBin, *hapCPU, *runs, *inter, *timeout, *fall, *rise)
	case "serve":
		err = runServe(*n, *ports, addr)
	case "cpu":
		err = runCPU(*ports, addr, strings.Split(*kinds, ","), *inter, *timeout, *duration)
	case "hapcpu":
		err = runHAPCPU(*hapBin, *hapCPU, *ports, addr, strings.Split(*kinds, ","), *inter, *duration)
	case "reach":
		err = runReach(*ports, addr)
	default:
		err = fmt.Errorf("usage: failover [flags] detect|serve|cpu|hapcpu|reach")
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "failover:", err)
		pprof.StopCPUProfile()
		os.Exit(1)
	}
}
