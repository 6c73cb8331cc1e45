//go:build linux

package main

// The site: one front door node, the gateway of its sessions on the same address, over
// bolt, run by the lab as its own `frontdoor serve` process (pinned to -node-cpu through a
// taskset wrapper, GODEBUG=gctrace=1 so that its log tells its heap); the machines' agents
// and display simulators run in this process. And what is read of the node process while
// the bench runs: /proc (RSS, descriptors, CPU) and its GC trace.

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"time"

	"github.com/frontdoor-vdi/frontdoor/bench/internal/kernel"
	"github.com/frontdoor-vdi/frontdoor/lab"
	"golang.org/x/crypto/bcrypt"
)

// The site's addresses (127.74/16: clear of the lab's 127.1-3 and bench/launch's 127.71-73).
const (
	launchAddr = "127.74.0.11:9443"
	adminAddr  = "127.74.0.11:9090" // /metrics, read by the bench's admin at phase ends
	adminUser  = "benchadmin"
	labHash    = "$2a$10$hmIm37EQl2GI6WzyFg.kUe2OoNhztKxrxmbZEcRHkzoi.ekBqG9n2" // "lab", bcrypt cost 10, as in configs/lab.yaml
	password   = "lab"
)

// siteUsers are the site's users: the pools of the honest streams and the standing
// sessions' users (bcrypt cost 4: each signs in once, before the measured windows, and is
// then held by the node), the cold logins' (cost 10, each signs in once during the run) and
// the victims (cost 10: real users whose names the abusers guess and no honest client uses).
type siteUsers struct {
	fresh, kept []string
	standing    []string
	cold        []string
	victims     []string
	// insiders are the abusers' own accounts: their bodyless requests pass the login.
	insiders []string
}

func newSiteUsers(pool, standing, cold int) siteUsers {
	var u siteUsers
	add := func(to *[]string, n int, name string) {
		for i := 0; i < n; i++ {
			*to = append(*to, fmt.Sprintf("%s-%d", name, i))
		}
	}
	add(&u.fresh, pool, "fresh")
	add(&u.kept, pool, "kept")
	add(&u.standing, standing, "standing")
	add(&u.cold, cold, "cold")
	add(&u.victims, 10, "victim")
	add(&u.insiders, 1, "insider")
	return u
}

// siteSource is the YAML of the one-node site: secure gateway on, machines of 50 sessions
// each with one display port (8443/tcp), every user's password "lab".
func siteSource(users siteUsers, machines int) ([]byte, error) {
	quick, err := bcrypt.GenerateFromPassword([]byte(password), 4)
	if err != nil {
		return nil, err
	}
	var b strings.Builder
	b.WriteString(`site: {name: abuse, default_zone: hq, secure_gateway: true, auth: {min_password_cost: 4}}
zones: [{name: hq, primary: true, ranges: [127.0.0.0/8]}]
nodes:
  - name: fd-1
    zone: hq
    listeners: [{kind: launch, address: "` + launchAddr + `"}, {kind: admin, address: "` + adminAddr + `"}]
gateways:
  - {name: gw-1, zone: hq, node: fd-1, address: 127.74.0.11, ports: [{port: 10443, check: {kind: https}}, {port: 8443, check: {kind: tls}}]}
groups: [{name: bench, kind: shared, load: {max_logons: 0}}]
resources: [{name: benchdesk, kind: desktop, groups: [{group: bench}], entitled: {everyone: true}}]
machines:
`)
	for i := 0; i < machines; i++ {
		fmt.Fprintf(&b, "  - {name: bm-%d, address: 127.74.4.%d, zone: hq, group: bench, max_sessions: 50, display_ports: [8443/tcp]}\n", i, i+1)
	}
	b.WriteString("users:\n")
	fmt.Fprintf(&b, "  - {name: %s, admin: true, password_hash: %q}\n", adminUser, quick)
	for _, g := range []struct {
		names []string
		hash  string
	}{{users.fresh, string(quick)}, {users.kept, string(quick)}, {users.standing, string(quick)}, {users.cold, labHash}, {users.victims, labHash}, {users.insiders, string(quick)}} {
		for _, n := range g.names {
			fmt.Fprintf(&b, "  - {name: %s, password_hash: %q}\n", n, g.hash)
		}
	}
	return []byte(b.String()), nil
}

// startSite starts the lab: the node process through a wrapper that pins it to cpu (when
// taskset is there and cpu ≥ 0), with env added.
func startSite(ctx context.Context, dir, bin string, src []byte, cpu int, env []string) (*lab.Lab, string, error) {
	pin := "not pinned"
	if ts, err := exec.LookPath("taskset"); err == nil && cpu >= 0 {
		w := filepath.Join(dir, "frontdoor-pinned")
		script := fmt.Sprintf("#!/bin/sh\nexec %s -c %d %s \"$@\"\n", ts, cpu, bin)
		if err := os.WriteFile(w, []byte(script), 0o755); err != nil {
			return nil, "", err
		}
		bin, pin = w, fmt.Sprintf("CPU %d", cpu)
	}
	quiet := slog.New(slog.NewTextHandler(io.Discard, nil))
	l, err := lab.New(ctx, lab.Options{Logger: quiet, HeartbeatInterval: 2 * time.Second, Processes: true, Source: src,
		Binary: bin, Env: append([]string{"GODEBUG=gctrace=1"}, env...)})
	return l, pin, err
}

// nodeSample is what is read of the node process at one moment.
type nodeSample struct {
	at       time.Duration // since the run's start
	phase    string
	rssKB    int64
	hwmKB    int64 // peak RSS so far
	fds      int
	threads  int
	cpuTicks int64
	heapMB   gcHeap // of the last GC so far
}

// gcHeap is one gctrace line's heap: at the GC's start, its end, and live; plus stacks.
type gcHeap struct {
	start, end, live, stacks int
	procs                    int // GOMAXPROCS
	n                        int // the GC's number
}

var gcLine = regexp.MustCompile(`^gc (\d+) @.* (\d+)->(\d+)->(\d+) MB, \d+ MB goal, (\d+) MB stacks, .* (\d+) P`)

// gcTrace reads the node log's gctrace lines as they are written.
type gcTrace struct {
	path string
	off  int64
	last gcHeap
	peak gcHeap // the largest heap at a GC's start, and the others of that line
}

func (g *gcTrace) read() gcHeap {
	f, err := os.Open(g.path)
	if err != nil {
		return g.last
	}
	defer f.Close()
	if _, err := f.Seek(g.off, io.SeekStart); err != nil {
		return g.last
	}
	b, _ := io.ReadAll(f)
	if i := bytes.LastIndexByte(b, '\n'); i >= 0 {
		b = b[:i+1]
	} else {
		b = nil
	}
	g.off += int64(len(b))
	sc := bufio.NewScanner(bytes.NewReader(b))
	sc.Buffer(make([]byte, 1<<16), 1<<20)
	for sc.Scan() {
		m := gcLine.FindStringSubmatch(sc.Text())
		if m == nil {
			continue
		}
		v := func(i int) int { n, _ := strconv.Atoi(m[i]); return n }
		g.last = gcHeap{n: v(1), start: v(2), end: v(3), live: v(4), stacks: v(5), procs: v(6)}
		if g.last.start > g.peak.start {
			g.peak = g.last
		}
	}
	return g.last
}

// sampleNode reads /proc of pid and the GC trace.
func sampleNode(pid int, g *gcTrace) nodeSample {
	var s nodeSample
	b, _ := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	for _, line := range strings.Split(string(b), "\n") {
		f := strings.Fields(line)
		if len(f) < 2 {
			continue
		}
		n, _ := strconv.ParseInt(f[1], 10, 64)
		switch f[0] {
		case "VmRSS:":
			s.rssKB = n
		case "VmHWM:":
			s.hwmKB = n
		case "Threads:":
			s.threads = int(n)
		}
	}
	s.fds = countFDs(strconv.Itoa(pid))
	s.cpuTicks = cpuTicks(strconv.Itoa(pid))
	s.heapMB = g.read()
	return s
}

// cpuTicks is utime+stime of /proc/PID/stat, in clock ticks (10 ms); 0 when it cannot be
// read.
func cpuTicks(pid string) int64 {
	_, u, s, _ := kernel.ProcCPU(pid)
	return u + s
}

var (
	logLevel  = regexp.MustCompile(`level=(WARN|ERROR)`)
	logMsg    = regexp.MustCompile(`msg=("(?:[^"\\]|\\.)*"|\S+)`)
	logErr    = regexp.MustCompile(`err=("(?:[^"\\]|\\.)*"|\S+)`)
	sessionID = regexp.MustCompile(`[0-9a-f]{32}`)
)

// nodeWarnings counts the node log's warnings and errors by level, message and error.
func nodeWarnings(path string) map[string]int {
	out := map[string]int{}
	f, err := os.Open(path)
	if err != nil {
		return out
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 1<<16), 1<<20)
	for sc.Scan() {
		line := sc.Text()
		lv := logLevel.FindStringSubmatch(line)
		if lv == nil {
			continue
		}
		k := lv[1]
		if m := logMsg.FindStringSubmatch(line); m != nil {
			k += " " + m[1]
		}
		if e := logErr.FindStringSubmatch(line); e != nil {
			k += " err=" + e[1]
		}
		k = sessionID.ReplaceAllString(k, "ID")
		if len(k) > 160 {
			k = k[:160] + "…"
		}
		out[k]++
	}
	return out
}

// countFDs counts the open descriptors of /proc/PID.
func countFDs(pid string) int {
	ents, _ := os.ReadDir("/proc/" + pid + "/fd")
	return len(ents)
}
