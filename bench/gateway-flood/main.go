// Command gateway-flood measures what a flood of forged first datagrams at a gateway's UDP
// channel port does to an established flow on the same port: the goal of the secure-channels
// issue is that 100k forged first datagrams a second leave the flow's p99 round trip within 2×
// of its unloaded p99. Everything is on loopback (127.0.0.0/8).
//
// Without -role it orchestrates. For each row it starts, as separate processes of itself (or,
// for the gateway, of the -base binary: the same benchmark built against older gateway code):
//
//   - the machine: vda-1's display simulator (agent.Display) on 127.0.60.1, which echoes;
//   - the gateway: a real gateway.Gateway (New, Listen, Serve) on 127.0.50.1, one UDP port,
//     its site CA from api.GenerateCA/api.NewCA and a ticket.Verifier of the site's key;
//   - the client: opens the flow with a launch ticket datagram, waits for ticket.UDPReady,
//     then echoes 64-byte datagrams one at a time (one every -interval at most) through the
//     gateway, recording round trips; a datagram not back within -loss is lost, the next goes;
//   - the flood (rows with a rate): a real reconnect ticket with its signature's last byte
//     flipped, so that each costs the gateway a full Ed25519 verify, sent paced at the rate
//     from -sockets sockets (source ports) of 127.0.70.1.
//
// Configurations: "pinned" runs the gateway on -gw-cpu and the others on -client-cpu
// (taskset, when it is there); "shared" pins nothing. Per row it reports the flow's p50, p99,
// p99.9 and max round trip (a lost datagram counts as infinitely late), datagrams lost, the
// flood rate achieved, the gateway process's CPU, how many forged tickets the gateway checked
// (its "flow denied" log records, counted by the bench's log handler) and how many datagrams
// the kernel dropped at the gateway socket's full receive queue (/proc/net/udp) and host-wide
// (/proc/net/snmp RcvbufErrors), all over the client's measured window.
//
// Usage: see bench/gateway-flood.sh.
package main

import (
	"bufio"
	"encoding/json"
	"flag"
	"fmt"
	"github.com/frontdoor-vdi/frontdoor/bench/internal/kernel"
	"io"
	"math"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/frontdoor-vdi/frontdoor/ticket"
)

func main() {
	role := flag.String("role", "", "machine | gateway | client | flood (internal); empty: orchestrate")
	dir := flag.String("dir", "", "site directory (CA, ticket key)")
	port := flag.Uint("port", 0, "UDP channel port (machine, gateway)")
	addr := flag.String("addr", "", "gateway address (client, flood)")
	tok := flag.String("ticket", "", "launch ticket (client) or forged ticket (flood)")
	rate := flag.Int("rate", 100000, "forged datagrams per second (flood)")
	sockets := flag.Int("sockets", 256, "flood sockets, each with its own source port")
	dur := flag.Duration("dur", 5*time.Second, "measured time per row")
	warm := flag.Duration("warm", 1*time.Second, "unmeasured echo (and flood) before each measured window")
	interval := flag.Duration("interval", 500*time.Microsecond, "the flow sends one datagram at most this often")
	loss := flag.Duration("loss", 200*time.Millisecond, "a datagram not echoed within this is lost")
	size := flag.Int("size", 64, "flow datagram bytes")
	rates := flag.String("rates", "0,50000,100000", "flood rates of the rows (0: unloaded)")
	rounds := flag.Int("rounds", 1, "rounds; the build order alternates each round")
	configs := flag.String("configs", "pinned,shared", "pinned | shared")
	gwCPU := flag.Int("gw-cpu", 0, "CPU of the gateway (pinned)")
	clientCPU := flag.Int("client-cpu", 1, "CPU of the machine, the client and the flood (pinned)")
	base := flag.String("base", "", "this benchmark built against the older gateway code (rows for it too)")
	baseName := flag.String("base-name", "base", "name of the -base build")
	headName := flag.String("head-name", "head", "name of this build")
	flag.Parse()

	time.AfterFunc(30*time.Minute, func() { fmt.Fprintln(os.Stderr, "gateway-flood: 30 minutes, giving up"); os.Exit(2) })
	switch *role {
	case "machine":
		fatal(runMachine(*dir, uint16(*port)))
	case "gateway":
		fatal(runGateway(*dir, uint16(*port)))
	case "client":
		ap, err := netip.ParseAddrPort(*addr)
		fatal(err)
		printLine("RESULT", runClient(ap, *tok, *size, *interval, *loss, *warm, *dur))
	case "flood":
		ap, err := netip.ParseAddrPort(*addr)
		fatal(err)
		printLine("RESULT", runFlood(ap, *tok, *rate, *sockets, *dur))
	case "":
		o := &orch{gwCPU: *gwCPU, clientCPU: *clientCPU, dur: *dur, warm: *warm, interval: *interval, loss: *loss,
			size: *size, sockets: *sockets}
		builds := []build{{*headName, ""}}
		if *base != "" {
			builds = append(builds, build{*baseName, *base})
		}
		var rs []int
		for _, s := range split(*rates) {
			v, err := strconv.Atoi(s)
			fatal(err)
			rs = append(rs, v)
		}
		o.run(split(*configs), builds, rs, *rounds)
	default:
		fatal(fmt.Errorf("unknown role %q", *role))
	}
}

func fatal(err error) {
	if err != nil {
		fmt.Fprintln(os.Stderr, "gateway-flood:", err)
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

// build is a binary of this benchmark: path "" is this one.
type build struct{ name, path string }

type orch struct {
	gwCPU, clientCPU    int
	dur, warm, interval time.Duration
	loss                time.Duration
	size, sockets       int
	self, taskset, dir  string
}

// proc is a child process and the lines it prints.
type proc struct {
	cmd   *exec.Cmd
	stdin io.WriteCloser
	lines chan string
	pid   int
}

// start runs bin (this program when "") with args, on cpu (-1: not pinned).
func (o *orch) start(cpu int, bin string, args ...string) (*proc, error) {
	if bin == "" {
		bin = o.self
	}
	args = append(args, "-dir", o.dir)
	var cmd *exec.Cmd
	if o.taskset != "" && cpu >= 0 {
		cmd = exec.Command(o.taskset, append([]string{"-c", strconv.Itoa(cpu), bin}, args...)...)
	} else {
		cmd = exec.Command(bin, args...)
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
	err = cmd.Start()
	f.Close()
	if err != nil {
		return nil, err
	}
	p := &proc{cmd: cmd, stdin: in, lines: make(chan string, 64), pid: cmd.Process.Pid}
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
				return "", fmt.Errorf("process %d ended before %q", p.pid, prefix)
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

// stats asks the process for its STATS line and decodes it into v.
func (p *proc) stats(v any) error {
	if _, err := io.WriteString(p.stdin, "STATS\n"); err != nil {
		return err
	}
	s, err := p.expect("STATS ", 5*time.Second)
	if err != nil {
		return err
	}
	return json.Unmarshal([]byte(s), v)
}

func (p *proc) stop() {
	p.stdin.Close()
	done := make(chan struct{})
	go func() { p.cmd.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(5 * time.Second):
		p.cmd.Process.Kill()
		<-done
	}
}

// cpu is a process's CPU seconds so far: its threads' run time from /proc/PID/task/*/schedstat.
func cpu(pid int) float64 {
	tasks, err := os.ReadDir(fmt.Sprintf("/proc/%d/task", pid))
	if err != nil {
		return math.NaN()
	}
	var ns float64
	for _, t := range tasks {
		b, err := os.ReadFile(fmt.Sprintf("/proc/%d/task/%s/schedstat", pid, t.Name()))
		if err != nil {
			continue // a thread that just ended
		}
		v, _ := strconv.ParseFloat(strings.Fields(string(b))[0], 64)
		ns += v
	}
	return ns / 1e9
}

// row is one measured window.
type row struct {
	config, build string
	round, rate   int
	gomaxprocs    string
	flow          flowResult
	seconds       float64 // the window, as the orchestrator saw it
	forged        int64   // forged datagrams sent in the window
	gwCPU         float64 // gateway process CPU seconds in the window
	floodCPU      float64
	denied        int64 // forged tickets the gateway checked in the window
	sockDrops     int64 // datagrams the gateway socket's full queue dropped in the window
	rcvbufErrors  int64 // host-wide UDP RcvbufErrors in the window
	flows         int   // the gateway's flows at the end of the window
	err           string
}

func (o *orch) row(config string, round int, b build, rate int) (r row) {
	r = row{config: config, build: b.name, round: round, rate: rate}
	fail := func(err error) row {
		r.err = err.Error()
		return r
	}
	gwCPU, otherCPU := o.gwCPU, o.clientCPU
	if config == "shared" {
		gwCPU, otherCPU = -1, -1
	}
	port, err := freePort()
	if err != nil {
		return fail(err)
	}
	s, err := loadSite(o.dir)
	if err != nil {
		return fail(err)
	}
	launch, err := s.issue(ticket.Launch, port)
	if err != nil {
		return fail(err)
	}
	forged, err := s.forged(port)
	if err != nil {
		return fail(err)
	}
	ps := strconv.Itoa(int(port))
	m, err := o.start(otherCPU, "", "-role", "machine", "-port", ps)
	if err != nil {
		return fail(err)
	}
	defer m.stop()
	if _, err := m.expect("READY ", 15*time.Second); err != nil {
		return fail(fmt.Errorf("machine: %w", err))
	}
	g, err := o.start(gwCPU, b.path, "-role", "gateway", "-port", ps)
	if err != nil {
		return fail(err)
	}
	defer g.stop()
	ready, err := g.expect("READY ", 15*time.Second)
	if err != nil {
		return fail(fmt.Errorf("gateway: %w", err))
	}
	f := strings.Fields(ready)
	gwAddr := f[0]
	if len(f) > 1 {
		r.gomaxprocs = strings.TrimPrefix(f[1], "GOMAXPROCS=")
	}
	c, err := o.start(otherCPU, "", "-role", "client", "-addr", gwAddr, "-ticket", launch, "-size", strconv.Itoa(o.size),
		"-interval", o.interval.String(), "-loss", o.loss.String(), "-warm", o.warm.String(), "-dur", o.dur.String())
	if err != nil {
		return fail(err)
	}
	defer c.stop()
	if _, err := c.expect("OPEN", 15*time.Second); err != nil {
		return fail(fmt.Errorf("client: %w", err))
	}
	var fl *proc
	if rate > 0 {
		fl, err = o.start(otherCPU, "", "-role", "flood", "-addr", gwAddr, "-ticket", forged, "-rate", strconv.Itoa(rate),
			"-sockets", strconv.Itoa(o.sockets), "-dur", (o.warm + o.dur + 3*time.Second).String())
		if err != nil {
			return fail(err)
		}
		defer fl.stop()
		if _, err := fl.expect("START", 15*time.Second); err != nil {
			return fail(fmt.Errorf("flood: %w", err))
		}
	}
	if _, err := io.WriteString(c.stdin, "GO\n"); err != nil {
		return fail(err)
	}
	if _, err := c.expect("START", o.warm+15*time.Second); err != nil {
		return fail(fmt.Errorf("client: %w", err))
	}
	type snap struct {
		t                time.Time
		gw, flood        float64
		gs               gatewayStats
		sent             int64
		sockDrops, rcvbf int64
	}
	take := func() (sn snap, err error) {
		sn.t, sn.gw, sn.sockDrops, sn.rcvbf = time.Now(), cpu(g.pid), kernel.UDPDrops(func(a netip.AddrPort) bool { return a == netip.MustParseAddrPort(gwAddr) }), kernel.UDPCounter("RcvbufErrors")
		if err := g.stats(&sn.gs); err != nil {
			return sn, fmt.Errorf("gateway stats: %w", err)
		}
		if fl != nil {
			sn.flood = cpu(fl.pid)
			var fs struct{ Sent int64 }
			if err := fl.stats(&fs); err != nil {
				return sn, fmt.Errorf("flood stats: %w", err)
			}
			sn.sent = fs.Sent
		}
		return sn, nil
	}
	s0, err := take()
	if err != nil {
		return fail(err)
	}
	if _, err := c.expect("END", o.dur+o.loss+15*time.Second); err != nil {
		return fail(fmt.Errorf("client: %w", err))
	}
	s1, err := take()
	if err != nil {
		return fail(err)
	}
	r.seconds = s1.t.Sub(s0.t).Seconds()
	r.gwCPU, r.floodCPU = s1.gw-s0.gw, s1.flood-s0.flood
	r.forged, r.denied = s1.sent-s0.sent, s1.gs.Denied-s0.gs.Denied
	r.sockDrops, r.rcvbufErrors, r.flows = s1.sockDrops-s0.sockDrops, s1.rcvbf-s0.rcvbf, s1.gs.Flows
	res, err := c.expect("RESULT ", 10*time.Second)
	if err == nil {
		err = json.Unmarshal([]byte(res), &r.flow)
	}
	if err != nil {
		return fail(err)
	}
	r.err = r.flow.Err
	return r
}

func (o *orch) run(configs []string, builds []build, rates []int, rounds int) {
	var err error
	o.self, err = os.Executable()
	fatal(err)
	if p, err := exec.LookPath("taskset"); err == nil {
		o.taskset = p
	}
	o.dir, err = os.MkdirTemp("", "gateway-flood")
	fatal(err)
	defer os.RemoveAll(o.dir)
	fatal(writeSite(o.dir))
	pin := fmt.Sprintf("pinned: gateway on CPU %d; machine, client and flood on CPU %d (taskset)", o.gwCPU, o.clientCPU)
	if o.taskset == "" {
		pin = "pinned: not pinned (no taskset)"
	}
	fmt.Printf("gateway-flood: %s; shared: nothing pinned. %v measured per row after %v of warm-up; the flow sends %d B one at a time, at most one per %v, lost after %v; flood from %d source ports\n\n",
		pin, o.dur, o.warm, o.size, o.interval, o.loss, o.sockets)
	var rows []row
	for _, cfg := range configs {
		for rd := 1; rd <= rounds; rd++ {
			for i := range builds {
				b := builds[(i+rd-1)%len(builds)]
				for _, rate := range rates {
					r := o.row(cfg, rd, b, rate)
					rows = append(rows, r)
					fmt.Fprintf(os.Stderr, "%s round %d %s %d/s: p50 %.0f p99 %.0f p99.9 %.0f µs, lost %d/%d, flood %.0f/s, gw CPU %.2f, checked %d, sock drops %d %s\n",
						cfg, rd, b.name, rate, r.flow.P50us, r.flow.P99us, r.flow.P999us, r.flow.Lost, r.flow.Sent,
						float64(r.forged)/max(r.seconds, 1e-9), r.gwCPU/max(r.seconds, 1e-9), r.denied, r.sockDrops, r.err)
				}
			}
		}
	}
	report(rows, builds, rates)
}

// us formats a round trip in µs; -1 is a lost datagram's.
func us(v float64) string {
	if v < 0 {
		return "lost"
	}
	return fmt.Sprintf("%.0f", v)
}

func report(rows []row, builds []build, rates []int) {
	fmt.Println("| config | round | gateway code | GOMAXPROCS | flood target/s | flood achieved/s | flow echoed | flow lost | p50 µs | p99 µs | p99.9 µs | max µs | gateway CPU (cores) | flood CPU (cores) | forged checked/s | dropped at gateway socket | host RcvbufErrors | note |")
	fmt.Println("|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|")
	for _, r := range rows {
		sec := max(r.seconds, 1e-9)
		note := r.err
		if r.flows != 1 && r.err == "" {
			note = fmt.Sprintf("%d flows at the end", r.flows)
		}
		fmt.Printf("| %s | %d | %s | %s | %d | %.0f | %d | %d | %s | %s | %s | %s | %.2f | %.2f | %.0f | %d | %d | %s |\n",
			r.config, r.round, r.build, r.gomaxprocs, r.rate, float64(r.forged)/sec, r.flow.Echoed, r.flow.Lost,
			us(r.flow.P50us), us(r.flow.P99us), us(r.flow.P999us), us(r.flow.MaxUs), r.gwCPU/sec, r.floodCPU/sec,
			float64(r.denied)/sec, r.sockDrops, r.rcvbufErrors, note)
	}
	fmt.Println("\n### Flood p99 / unloaded p99 (same config, round and gateway code; goal ≤ 2× at 100k/s)")
	fmt.Println()
	hdr, sep := "| config | round | gateway code | unloaded p99 µs |", "|---|---|---|---|"
	for _, rt := range rates {
		if rt > 0 {
			hdr += fmt.Sprintf(" p99 at %d/s | ratio |", rt)
			sep += "---|---|"
		}
	}
	fmt.Println(hdr)
	fmt.Println(sep)
	type key struct {
		config, build string
		round         int
	}
	seen := map[key]bool{}
	for _, r := range rows {
		k := key{r.config, r.build, r.round}
		if seen[k] {
			continue
		}
		seen[k] = true
		at := map[int]row{}
		for _, x := range rows {
			if x.config == k.config && x.build == k.build && x.round == k.round {
				at[x.rate] = x
			}
		}
		u, ok := at[0]
		if !ok {
			continue
		}
		line := fmt.Sprintf("| %s | %d | %s | %s |", k.config, k.round, k.build, us(u.flow.P99us))
		for _, rt := range rates {
			if rt == 0 {
				continue
			}
			x, ok := at[rt]
			ratio := "–"
			switch {
			case !ok:
			case x.flow.P99us < 0:
				ratio = "∞ (lost)"
			case u.flow.P99us > 0:
				ratio = fmt.Sprintf("%.2f×", x.flow.P99us/u.flow.P99us)
			}
			line += fmt.Sprintf(" %s | %s |", us(x.flow.P99us), ratio)
		}
		fmt.Println(line)
	}
}
