//go:build linux

// Command udp-ab is the A/B benchmark of the encrypted UDP display channel: plain UDP echo
// (today), DTLS 1.2 with connection IDs (pion/dtls v3) and QUIC DATAGRAM frames (quic-go), on
// loopback. Without -role it orchestrates: for each row it starts an echo server and a client
// as separate processes of itself (pinned with taskset to -server-cpu and -client-cpu when
// taskset is there), reads the server's CPU from /proc/PID/stat at the client's START and END
// marks, and prints markdown tables:
//
//   - echo: window datagrams in flight for -dur per row, 64 and 1200 bytes: datagrams/s
//     echoed, loss, p50/p99 round trip, CPU µs per datagram of the server and of the client;
//     plus ping-pong rows (one datagram in flight) for the unloaded round trip;
//   - handshakes: -hs sequential handshakes on new sockets (with the cookie exchange / Retry);
//   - flood: -flood forged first datagrams from spoofed sources: server CPU per datagram,
//     answers sent, memory.
//
// Usage: go run ./bench/udp-ab [-rounds 2] [-dur 5s] ... (see bench/udp-ab.sh). The flood
// needs root (raw sockets).
package main

import (
	"bufio"
	"encoding/json"
	"flag"
	"fmt"
	"github.com/frontdoor-vdi/frontdoor/bench/internal/kernel"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"
)

func main() {
	role := flag.String("role", "", "server | echo | hs | flood (internal), mkcerts -certs DIR; empty: orchestrate")
	proto := flag.String("proto", "plain", "plain | dtls | quic (| quic-x25519 for hs, dtls-sl for flood)")
	addr := flag.String("addr", "127.0.0.1:0", "server address")
	certDir := flag.String("certs", "", "directory of cert.pem and key.pem")
	size := flag.Int("size", 64, "datagram bytes (echo)")
	window := flag.Int("window", 64, "datagrams in flight")
	dur := flag.Duration("dur", 5*time.Second, "measured time per echo row")
	pingDur := flag.Duration("pingpong", 2*time.Second, "measured time per ping-pong row (0: none)")
	warm := flag.Duration("warm", 500*time.Millisecond, "warm-up before each measured window")
	n := flag.Int("n", 200, "handshakes (hs) or forged datagrams (flood)")
	hsN := flag.Int("hs", 200, "sequential handshakes per protocol (0: none)")
	floodN := flag.Int("flood", 100000, "forged first datagrams per server (0: none)")
	rate := flag.Int("rate", 20000, "forged datagrams per second")
	settle := flag.Duration("settle", 6*time.Second, "after the flood, time counted for the server to drop what it holds")
	hsTimeout := flag.Duration("hs-timeout", 5*time.Second, "server handshake timeout (dtls)")
	sizes := flag.String("sizes", "64,1200", "datagram sizes")
	protos := flag.String("protos", "plain,dtls,quic", "echo protocols")
	hsProtos := flag.String("hs-protos", "dtls,quic,quic-x25519", "handshake protocols")
	floodProtos := flag.String("flood-protos", "plain,dtls,dtls-sl,quic", "flood servers")
	rounds := flag.Int("rounds", 1, "rounds; the protocol order rotates each round")
	serverCPU := flag.Int("server-cpu", 0, "CPU for servers")
	clientCPU := flag.Int("client-cpu", 1, "CPU for clients and the flood")
	flag.Parse()

	var c *certs
	if *role == "mkcerts" { // for running a role by hand
		fatal(writeCerts(*certDir))
		return
	}
	if *certDir != "" {
		var err error
		if c, err = loadCerts(*certDir); err != nil {
			fatal(err)
		}
	}
	switch *role {
	case "server":
		go func() { io.Copy(io.Discard, os.Stdin); os.Exit(0) }() // ends with the orchestrator
		time.AfterFunc(30*time.Minute, func() { os.Exit(2) })
		err := serve(*proto, *addr, c, *hsTimeout, func(a string) { fmt.Printf("READY %s\n", a) })
		fatal(err)
	case "echo":
		l, err := dial(*proto, *addr, c)
		if err != nil {
			printJSON(echoResult{Err: err.Error()})
			return
		}
		printJSON(runEcho(l, *size, *window, *warm, *dur))
	case "hs":
		printJSON(runHandshakes(*proto, *addr, c, *n))
	case "flood":
		printJSON(runFlood(*proto, *addr, c, *n, *rate, *settle))
	case "":
		o := &orch{serverCPU: *serverCPU, clientCPU: *clientCPU}
		o.run(*rounds, split(*sizes), split(*protos), split(*hsProtos), split(*floodProtos),
			*window, *dur, *pingDur, *warm, *hsN, *floodN, *rate, *settle, *hsTimeout)
	default:
		fatal(fmt.Errorf("unknown role %q", *role))
	}
}

func fatal(err error) {
	if err != nil {
		fmt.Fprintln(os.Stderr, "udp-ab:", err)
		os.Exit(1)
	}
}

func split(s string) []string {
	var out []string
	for _, f := range strings.Split(s, ",") {
		if f = strings.TrimSpace(f); f != "" {
			out = append(out, f)
		}
	}
	return out
}

// orch runs the rows.
type orch struct {
	serverCPU, clientCPU int
	self, taskset, dir   string
	tck                  float64
}

// proc is a child process of this program and the lines it prints.
type proc struct {
	cmd   *exec.Cmd
	stdin io.WriteCloser
	lines chan string
	pid   int
}

func (o *orch) start(cpu int, args ...string) (*proc, error) {
	args = append(args, "-certs", o.dir)
	var cmd *exec.Cmd
	if o.taskset != "" {
		cmd = exec.Command(o.taskset, append([]string{"-c", strconv.Itoa(cpu), o.self}, args...)...)
	} else {
		cmd = exec.Command(o.self, args...)
	}
	in, err := cmd.StdinPipe()
	if err != nil {
		return nil, err
	}
	out, err := cmd.StdoutPipe()
	if err != nil {
		return nil, err
	}
	f, err := os.OpenFile(filepath.Join(o.dir, "stderr.log"), os.O_CREATE|os.O_APPEND|os.O_WRONLY, 0o600)
	if err != nil {
		return nil, err
	}
	cmd.Stderr = f
	if err := cmd.Start(); err != nil {
		return nil, err
	}
	f.Close()
	p := &proc{cmd: cmd, stdin: in, lines: make(chan string, 16), pid: cmd.Process.Pid}
	go func() {
		sc := bufio.NewScanner(out)
		sc.Buffer(make([]byte, 1<<16), 1<<20)
		for sc.Scan() {
			p.lines <- sc.Text()
		}
		close(p.lines)
	}()
	return p, nil
}

// expect waits (bounded) for a line starting with prefix and returns the rest.
func (p *proc) expect(prefix string, timeout time.Duration) (string, error) {
	t := time.After(timeout)
	for {
		select {
		case l, ok := <-p.lines:
			if !ok {
				return "", fmt.Errorf("process ended before %q", prefix)
			}
			if strings.HasPrefix(l, prefix) {
				return strings.TrimSpace(strings.TrimPrefix(l, prefix)), nil
			}
			if strings.HasPrefix(l, "RESULT ") {
				return "", fmt.Errorf("before %q: %s", prefix, l)
			}
		case <-t:
			return "", fmt.Errorf("no %q within %v", prefix, timeout)
		}
	}
}

func (p *proc) stop() {
	p.stdin.Close()
	done := make(chan struct{})
	go func() { p.cmd.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(3 * time.Second):
		p.cmd.Process.Kill()
		<-done
	}
}

// cpu is a process's CPU seconds so far: the sum of its threads' run time in
// /proc/PID/task/*/schedstat (ns), or else user+system ticks from /proc/PID/stat.
func (o *orch) cpu(pid int) float64 {
	if tasks, err := os.ReadDir(fmt.Sprintf("/proc/%d/task", pid)); err == nil {
		var ns float64
		ok := true
		for _, t := range tasks {
			b, err := os.ReadFile(fmt.Sprintf("/proc/%d/task/%s/schedstat", pid, t.Name()))
			if err != nil {
				ok = false
				break
			}
			v, err := strconv.ParseFloat(strings.Fields(string(b))[0], 64)
			if err != nil {
				ok = false
				break
			}
			ns += v
		}
		if ok {
			return ns / 1e9
		}
	}
	return o.ticksCPU(pid)
}

func (o *orch) ticksCPU(pid int) float64 {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return -1
	}
	s := string(b)
	f := strings.Fields(s[strings.LastIndexByte(s, ')')+2:])
	u, _ := strconv.ParseFloat(f[11], 64)
	st, _ := strconv.ParseFloat(f[12], 64)
	return (u + st) / o.tck
}

// statusKB is a field (VmRSS, VmHWM) of /proc/PID/status in kB.
func statusKB(pid int, field string) int64 {
	lines, _ := kernel.ReadLines(fmt.Sprintf("/proc/%d/status", pid))
	for _, l := range lines {
		if strings.HasPrefix(l, field+":") {
			v, _ := strconv.ParseInt(strings.Fields(l)[1], 10, 64)
			return v
		}
	}
	return -1
}

func (o *orch) server(proto string, hsTimeout time.Duration) (*proc, string, error) {
	s, err := o.start(o.serverCPU, "-role", "server", "-proto", proto, "-hs-timeout", hsTimeout.String())
	if err != nil {
		return nil, "", err
	}
	a, err := s.expect("READY ", 10*time.Second)
	if err != nil {
		s.stop()
		return nil, "", err
	}
	return s, a, nil
}

type echoRow struct {
	round, size, window int
	proto               string
	r                   echoResult
	serverCPU           float64
	udpIn               int64   // host-wide UDP datagrams received in the window (/proc/net/snmp)
	others              float64 // host CPU in the window not spent by this row's server or client, in cores
}

// hostBusy is the host's busy CPU seconds so far (/proc/stat: all but idle and iowait).
func (o *orch) hostBusy() float64 {
	lines, err := kernel.ReadLines("/proc/stat")
	if err != nil || len(lines) == 0 {
		return 0
	}
	f := strings.Fields(lines[0])
	var busy float64
	for i, v := range f[1:] {
		if i == 3 || i == 4 || i >= 7 { // idle, iowait, steal, guest (counted in user)
			continue
		}
		x, _ := strconv.ParseFloat(v, 64)
		busy += x
	}
	return busy / o.tck
}

// udpInDatagrams is the host's UDP InDatagrams counter (/proc/net/snmp).
func udpInDatagrams() int64 { return kernel.UDPCounter("InDatagrams") }

type hsRow struct {
	round     int
	proto     string
	r         hsResult
	serverCPU float64
}

type floodRow struct {
	round                    int
	proto                    string
	r                        floodResult
	cpuFlood, cpuAll         float64
	drops                    int64
	rss0, rssEnd, hwm, rssAf int64
}

func (o *orch) echo(round int, proto string, size, window int, dur, warm time.Duration, hsTimeout time.Duration) echoRow {
	row := echoRow{round: round, size: size, window: window, proto: proto}
	s, a, err := o.server(proto, hsTimeout)
	if err != nil {
		row.r.Err = err.Error()
		return row
	}
	defer s.stop()
	c, err := o.start(o.clientCPU, "-role", "echo", "-proto", proto, "-addr", a, "-size", strconv.Itoa(size),
		"-window", strconv.Itoa(window), "-dur", dur.String(), "-warm", warm.String())
	if err != nil {
		row.r.Err = err.Error()
		return row
	}
	defer c.stop()
	if _, err := c.expect("START", 15*time.Second); err != nil {
		row.r.Err = err.Error()
		return row
	}
	s0, u0, h0, t0 := o.cpu(s.pid), udpInDatagrams(), o.hostBusy(), time.Now()
	if _, err := c.expect("END", dur+15*time.Second); err != nil {
		row.r.Err = err.Error()
		return row
	}
	row.serverCPU = o.cpu(s.pid) - s0
	row.udpIn = udpInDatagrams() - u0
	hostCPU, wall := o.hostBusy()-h0, time.Since(t0).Seconds()
	res, err := c.expect("RESULT ", 10*time.Second)
	if err == nil {
		err = json.Unmarshal([]byte(res), &row.r)
	}
	if err != nil {
		row.r.Err = err.Error()
	}
	row.others = (hostCPU - row.serverCPU - row.r.ClientCPU) / wall
	return row
}

func (o *orch) handshakes(round int, proto string, n int, hsTimeout time.Duration) hsRow {
	row := hsRow{round: round, proto: proto}
	sp := proto
	if sp == "quic-x25519" {
		sp = "quic"
	}
	s, a, err := o.server(sp, hsTimeout)
	if err != nil {
		row.r.Err = err.Error()
		return row
	}
	defer s.stop()
	c, err := o.start(o.clientCPU, "-role", "hs", "-proto", proto, "-addr", a, "-n", strconv.Itoa(n))
	if err != nil {
		row.r.Err = err.Error()
		return row
	}
	defer c.stop()
	if _, err := c.expect("START", 15*time.Second); err != nil {
		row.r.Err = err.Error()
		return row
	}
	s0 := o.cpu(s.pid)
	if _, err := c.expect("END", time.Duration(n)*100*time.Millisecond+30*time.Second); err != nil {
		row.r.Err = err.Error()
		return row
	}
	time.Sleep(200 * time.Millisecond) // the server's side of the last close
	row.serverCPU = o.cpu(s.pid) - s0
	res, err := c.expect("RESULT ", 10*time.Second)
	if err == nil {
		err = json.Unmarshal([]byte(res), &row.r)
	}
	if err != nil {
		row.r.Err = err.Error()
	}
	return row
}

func (o *orch) flood(round int, proto string, n, rate int, settle, hsTimeout time.Duration) floodRow {
	row := floodRow{round: round, proto: proto}
	s, a, err := o.server(proto, hsTimeout)
	if err != nil {
		row.r.Err = err.Error()
		return row
	}
	defer s.stop()
	port, _ := strconv.Atoi(a[strings.LastIndexByte(a, ':')+1:])
	time.Sleep(300 * time.Millisecond)
	row.rss0 = statusKB(s.pid, "VmRSS")
	c, err := o.start(o.clientCPU, "-role", "flood", "-proto", proto, "-addr", a, "-n", strconv.Itoa(n),
		"-rate", strconv.Itoa(rate), "-settle", settle.String())
	if err != nil {
		row.r.Err = err.Error()
		return row
	}
	defer c.stop()
	if _, err := c.expect("START", 15*time.Second); err != nil {
		row.r.Err = err.Error()
		return row
	}
	s0, d0 := o.cpu(s.pid), udpDrops(port)
	if _, err := c.expect("END", time.Duration(n/rate+30)*time.Second); err != nil {
		row.r.Err = err.Error()
		return row
	}
	row.cpuFlood = o.cpu(s.pid) - s0
	row.rssEnd = statusKB(s.pid, "VmRSS")
	if _, err := c.expect("SETTLED", settle+15*time.Second); err != nil {
		row.r.Err = err.Error()
		return row
	}
	row.cpuAll = o.cpu(s.pid) - s0
	row.drops = udpDrops(port) - d0
	row.hwm = statusKB(s.pid, "VmHWM")
	row.rssAf = statusKB(s.pid, "VmRSS")
	res, err := c.expect("RESULT ", 10*time.Second)
	if err == nil {
		err = json.Unmarshal([]byte(res), &row.r)
	}
	if err != nil {
		row.r.Err = err.Error()
	}
	return row
}

// rotate returns xs rotated left by k.
func rotate(xs []string, k int) []string {
	if len(xs) == 0 {
		return xs
	}
	k %= len(xs)
	return append(slices.Clone(xs[k:]), xs[:k]...)
}

func (o *orch) run(rounds int, sizes, protos, hsProtos, floodProtos []string, window int, dur, pingDur, warm time.Duration,
	hsN, floodN, rate int, settle, hsTimeout time.Duration) {
	var err error
	if o.self, err = os.Executable(); err != nil {
		fatal(err)
	}
	if p, err := exec.LookPath("taskset"); err == nil {
		o.taskset = p
	}
	o.tck = 100
	if out, err := exec.Command("getconf", "CLK_TCK").Output(); err == nil {
		if v, err := strconv.ParseFloat(strings.TrimSpace(string(out)), 64); err == nil && v > 0 {
			o.tck = v
		}
	}
	if o.dir, err = os.MkdirTemp("", "udp-ab"); err != nil {
		fatal(err)
	}
	defer os.RemoveAll(o.dir)
	fatal(writeCerts(o.dir))
	pin := "not pinned (no taskset)"
	if o.taskset != "" {
		pin = fmt.Sprintf("servers on CPU %d, clients on CPU %d (taskset)", o.serverCPU, o.clientCPU)
	}
	fmt.Printf("udp-ab: %s, %d round(s); echo %v per row (+%v warm-up), window %d; ping-pong %v; %d handshakes; flood %d at %d/s\n\n",
		pin, rounds, dur, warm, window, pingDur, hsN, floodN, rate)
	var echoes []echoRow
	var hss []hsRow
	var floods []floodRow
	for r := 1; r <= rounds; r++ {
		for _, sz := range sizes {
			size, _ := strconv.Atoi(sz)
			for _, p := range rotate(protos, r-1) {
				row := o.echo(r, p, size, window, dur, warm, hsTimeout)
				echoes = append(echoes, row)
				progress(row)
			}
			if pingDur > 0 {
				for _, p := range rotate(protos, r-1) {
					row := o.echo(r, p, size, 1, pingDur, warm, hsTimeout)
					echoes = append(echoes, row)
					progress(row)
				}
			}
		}
		if hsN > 0 {
			for _, p := range rotate(hsProtos, r-1) {
				row := o.handshakes(r, p, hsN, hsTimeout)
				hss = append(hss, row)
				fmt.Fprintf(os.Stderr, "round %d hs %s: %+v server %.3fs\n", r, p, row.r, row.serverCPU)
			}
		}
		if floodN > 0 {
			for _, p := range rotate(floodProtos, r-1) {
				row := o.flood(r, p, floodN, rate, settle, hsTimeout)
				floods = append(floods, row)
				fmt.Fprintf(os.Stderr, "round %d flood %s: %+v cpu %.2f/%.2f drops %d rss %d→%d hwm %d after %d kB\n",
					r, p, row.r, row.cpuFlood, row.cpuAll, row.drops, row.rss0, row.rssEnd, row.hwm, row.rssAf)
			}
		}
	}
	report(echoes, hss, floods, sizes, window)
}

func progress(r echoRow) {
	fmt.Fprintf(os.Stderr, "round %d %s %dB w%d: %+v server %.3fs\n", r.round, r.proto, r.size, r.window, r.r, r.serverCPU)
}

func perDgram(cpu float64, n int64) float64 {
	if n <= 0 {
		return 0
	}
	return cpu / float64(n) * 1e6
}

func report(echoes []echoRow, hss []hsRow, floods []floodRow, sizes []string, window int) {
	fmt.Printf("### Echo (window %d in flight; ping-pong = 1 in flight)\n\n", window)
	fmt.Println("| round | bytes | in flight | transport | datagrams/s | loss | p50 RTT µs | p99 RTT µs | server µs/dgram | client µs/dgram | UDP pkts/echo | others' CPU | note |")
	fmt.Println("|---|---|---|---|---|---|---|---|---|---|---|---|---|")
	for _, e := range echoes {
		loss := 0.0
		if e.r.Sent > 0 {
			loss = float64(e.r.Lost) / float64(e.r.Sent) * 100
		}
		rate := 0.0
		if e.r.Seconds > 0 {
			rate = float64(e.r.Echoed) / e.r.Seconds
		}
		pk := 0.0
		if e.r.Echoed > 0 {
			pk = float64(e.udpIn) / float64(e.r.Echoed)
		}
		fmt.Printf("| %d | %d | %d | %s | %.0f | %.2f%% | %.0f | %.0f | %.2f | %.2f | %.2f | %.2f | %s |\n", e.round, e.size, e.window, e.proto,
			rate, loss, e.r.P50us, e.r.P99us, perDgram(e.serverCPU, e.r.Echoed), perDgram(e.r.ClientCPU, e.r.Echoed), pk, e.others, e.r.Err)
	}
	// Ratios per round, window rows only: CPU per datagram (server, client) and datagrams/s.
	fmt.Printf("\n### Ratios (window %d rows; each round's own baseline)\n\n", window)
	fmt.Println("| round | bytes | DTLS/plain server CPU | QUIC/plain server CPU | DTLS/QUIC server CPU | DTLS/plain client CPU | QUIC/plain client CPU | DTLS/QUIC client CPU | DTLS/QUIC datagrams/s |")
	fmt.Println("|---|---|---|---|---|---|---|---|---|")
	type key struct {
		round, size int
		proto       string
	}
	m := map[key]echoRow{}
	maxRound := 0
	for _, e := range echoes {
		if e.window == window {
			m[key{e.round, e.size, e.proto}] = e
			maxRound = max(maxRound, e.round)
		}
	}
	for r := 1; r <= maxRound; r++ {
		for _, sz := range sizes {
			size, _ := strconv.Atoi(sz)
			p, d, q := m[key{r, size, "plain"}], m[key{r, size, "dtls"}], m[key{r, size, "quic"}]
			sv := func(e echoRow) float64 { return perDgram(e.serverCPU, e.r.Echoed) }
			cl := func(e echoRow) float64 { return perDgram(e.r.ClientCPU, e.r.Echoed) }
			rt := func(e echoRow) float64 { return float64(e.r.Echoed) / max(e.r.Seconds, 1e-9) }
			ratio := func(a, b float64) string {
				if b == 0 {
					return "–"
				}
				return fmt.Sprintf("%.2f×", a/b)
			}
			fmt.Printf("| %d | %d | %s | %s | %s | %s | %s | %s | %s |\n", r, size,
				ratio(sv(d), sv(p)), ratio(sv(q), sv(p)), ratio(sv(d), sv(q)),
				ratio(cl(d), cl(p)), ratio(cl(q), cl(p)), ratio(cl(d), cl(q)), ratio(rt(d), rt(q)))
		}
	}
	if len(hss) > 0 {
		fmt.Println("\n### Handshakes, one after another, each on a new socket (DTLS: HelloVerifyRequest; QUIC: Retry)")
		fmt.Println()
		fmt.Println("| round | transport | handshakes | failed | ms each (wall) | server CPU ms each | client CPU ms each | note |")
		fmt.Println("|---|---|---|---|---|---|---|---|")
		for _, h := range hss {
			k := float64(max(h.r.N, 1))
			fmt.Printf("| %d | %s | %d | %d | %.2f | %.2f | %.2f | %s |\n", h.round, h.proto, h.r.N, h.r.Failed,
				h.r.Seconds/k*1e3, h.serverCPU/k*1e3, h.r.ClientCPU/k*1e3, h.r.Err)
		}
	}
	if len(floods) > 0 {
		fmt.Println("\n### Flood of forged first datagrams (each from a new spoofed source; no valid cookie / token)")
		fmt.Println()
		fmt.Println("| round | server | datagram bytes | sent | dropped at socket | answers | server CPU s (sending / + settle) | server µs per forged dgram | RSS MB before → end of flood (peak) → after settle | note |")
		fmt.Println("|---|---|---|---|---|---|---|---|---|---|")
		for _, f := range floods {
			fmt.Printf("| %d | %s | %d | %d | %d | %d | %.2f / %.2f | %.2f | %.1f → %.1f (%.1f) → %.1f | %s |\n", f.round, f.proto, f.r.Bytes,
				f.r.Sent, f.drops, f.r.Replies, f.cpuFlood, f.cpuAll, perDgram(f.cpuAll, f.r.Sent),
				float64(f.rss0)/1024, float64(f.rssEnd)/1024, float64(f.hwm)/1024, float64(f.rssAf)/1024, f.r.Err)
		}
	}
}
