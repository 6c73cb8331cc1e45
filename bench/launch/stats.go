//go:build linux

package main

import (
	"crypto/tls"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"runtime/pprof"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/frontdoor-vdi/frontdoor/bench/internal/kernel"
	"github.com/frontdoor-vdi/frontdoor/bench/internal/rig"
	"github.com/frontdoor-vdi/frontdoor/lab"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
)

// profile is a CPU profile of this process and of the node processes, if any, under way.
type profile struct {
	prefix string
	f      *os.File
	procs  []*lab.Proc
}

// startProfile starts profiling this process into prefix-bench.pprof and each node process
// (started with FRONTDOOR_CPUPROFILE=prefix-node) into prefix-node.PID.
func startProfile(prefix string, procs []*lab.Proc) *profile {
	p := &profile{prefix: prefix, procs: procs}
	f, err := os.Create(prefix + "-bench.pprof")
	if err == nil {
		if err = pprof.StartCPUProfile(f); err != nil {
			f.Close()
		}
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "launch: cpu profile:", err)
	} else {
		p.f = f
	}
	for _, pr := range procs {
		syscall.Kill(pr.PID, syscall.SIGUSR1)
	}
	return p
}

// stop ends the profiles and names each node's after the node: prefix-NODE.pprof.
func (p *profile) stop() error {
	if p.f != nil {
		pprof.StopCPUProfile()
		p.f.Close()
	}
	for _, pr := range p.procs {
		syscall.Kill(pr.PID, syscall.SIGUSR2)
	}
	time.Sleep(500 * time.Millisecond) // the nodes write their profiles
	for _, pr := range p.procs {
		if err := os.Rename(fmt.Sprintf("%s-node.%d", p.prefix, pr.PID), p.prefix+"-"+pr.Name+".pprof"); err != nil {
			return fmt.Errorf("the profile of node %s: %w", pr.Name, err)
		}
	}
	return nil
}

// cpuPerLaunch is the CPU time a launch took in the window, in this process and in the node
// processes.
func cpuPerLaunch(r result) string {
	n := r.rate * r.window.Seconds()
	if n == 0 || r.cpuBench == 0 {
		return "?"
	}
	per := func(d time.Duration) string { return fmt.Sprintf("%.2f ms", float64(d.Microseconds())/1000/n) }
	if r.cpuNodes == 0 {
		return per(r.cpuBench)
	}
	return per(r.cpuBench) + " + " + per(r.cpuNodes) + " = " + per(r.cpuBench+r.cpuNodes)
}

// cpuTimes returns the CPU time (user and system) this process and the node processes have
// taken so far, from /proc (zero where it cannot be read).
func cpuTimes(procs []*lab.Proc) [2]time.Duration {
	var out [2]time.Duration
	out[0] = procCPU("self")
	for _, p := range procs {
		out[1] += procCPU(strconv.Itoa(p.PID))
	}
	return out
}

// procCPU is the user and system CPU time of process pid ("self": this one); 0 when it
// cannot be read.
func procCPU(pid string) time.Duration {
	_, u, s, err := kernel.ProcCPU(pid)
	if err != nil {
		return 0
	}
	return time.Duration(u+s) * 10 * time.Millisecond
}

// counters reads the counters, histogram counts and sums of etcd's metrics in this process
// (the three members' added up) and of the store metrics of the first node with an admin
// listener (prefixed "node ").
func counters(tc *tls.Config, l *lab.Lab) map[string]float64 {
	out := map[string]float64{}
	rec := httptest.NewRecorder()
	promhttp.HandlerFor(prometheus.DefaultGatherer, promhttp.HandlerOpts{}).ServeHTTP(rec, httptest.NewRequest("GET", "/metrics", nil))
	rig.ParseMetrics(rec.Body.String(), "", out)
	for _, n := range l.Config.Nodes {
		for _, li := range n.Listeners {
			if li.Kind != "admin" {
				continue
			}
			hc := &http.Client{Timeout: 5 * time.Second, Transport: &http.Transport{TLSClientConfig: tc}}
			req, _ := http.NewRequest(http.MethodGet, "https://"+li.Address.String()+"/metrics", nil)
			req.SetBasicAuth("admin", "lab") // the lab's admin
			resp, err := hc.Do(req)
			if err != nil {
				fmt.Fprintln(os.Stderr, "launch: node metrics:", err)
				return out
			}
			b, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			rig.ParseMetrics(string(b), "node "+n.Name+" ", out)
			return out
		}
	}
	return out
}

// printStats prints, per launch of the window, how much each counter of statsOf grew.
func printStats(before, after map[string]float64, launches int) {
	var keys []string
	for k, v := range after {
		if v == before[k] {
			continue
		}
		for _, p := range statsOf {
			if strings.HasPrefix(k, p) && (p != "node " || strings.Contains(k, "frontdoor_store")) {
				keys = append(keys, k)
				break
			}
		}
	}
	slices.Sort(keys)
	fmt.Printf("\n%d launches in the window; per launch (etcd's counters are its members' added up):\n", launches)
	for _, k := range keys {
		fmt.Printf("  %10.3f  %s\n", (after[k]-before[k])/float64(launches), k)
	}
	fmt.Println()
}
