//go:build linux

// Command gateway-flood measures what a flood of forged first datagrams at a gateway port does
// to an established flow on the same port: the goal of the secure-channels issue is that 100k
// forged first datagrams a second leave the flow's p99 round trip within 2× of its unloaded
// p99. Everything is on loopback (127.0.0.0/8). Two targets (-targets):
//
//   - plain: the gateway's plain UDP channel port (gateway.Gateway with PlainUDP), flooded with
//     forged ticket datagrams;
//   - quic: the gateway's QUIC port (gateway.QUIC, as node serves it on quic_port), flooded
//     with forged QUIC Initials from spoofed sources (quic.go, initial.go).
//
// Without -role it orchestrates. For each row it starts, as separate processes of itself (or,
// for the gateway and the machine, of the -base / -quic-base binary: the same benchmark built
// against older gateway and agent code):
//
//   - the machine: vda-1's display simulator (agent.Display) on 127.0.60.1, which echoes;
//   - the gateway: plain, a real gateway.Gateway (New, Listen, Serve) on 127.0.50.1, one UDP
//     port; quic, a real gateway.QUIC (ListenQUIC, Serve) on a free port of 127.0.50.1, which
//     relays the flow to the machine's QUIC display port on a connection of its own. Both have
//     a certificate of the site CA (pki.GenerateCA/pki.NewCA) and a ticket.Verifier of the
//     site's key;
//   - the client: plain, opens the flow with a launch ticket datagram and waits for
//     ticket.UDPReady; quic, a quic-go connection from 127.0.80.1 whose stream carries 'u', the
//     port and the launch ticket's frame (answered with the status, and after
//     ticket.StatusRotated the next ticket), then DATAGRAM frames prefixed with the port. It
//     then echoes 64-byte datagrams one at a time (one every -interval at most) through the
//     gateway, recording round trips; a datagram not back within -loss is lost, the next goes;
//   - the flood (rows with a rate): plain, a real reconnect ticket with its signature's last
//     byte flipped, so that each costs the gateway a full Ed25519 verify, sent paced at the
//     rate from -sockets sockets (source ports) of 127.0.70.1; quic, QUIC Initials without a
//     token (a real quic-go client's first datagram, sealed again under a random DCID each,
//     ≥1200 bytes) through a raw socket from random sources of 127.200.0.0/16 (needs root).
//
// Configurations: "pinned" runs the gateway on -gw-cpu and the others on -client-cpu
// (taskset, when it is there); "shared" pins nothing. Per row it reports the flow's p50, p99,
// p99.9 and max round trip (a lost datagram counts as infinitely late), datagrams lost, the
// flood rate achieved, the gateway process's CPU, how many datagrams the kernel dropped at the
// gateway socket (/proc/net/udp: a full receive queue, or a socket filter) and host-wide at
// full queues (/proc/net/snmp RcvbufErrors), all over the client's measured window. Plain
// rows add how many forged tickets the gateway checked (its "flow denied" log records,
// counted by the bench's log handler); quic rows how many Retries and other datagrams
// (handshake packets) the gateway sent to the spoofed sources (counted by the flood through
// raw sockets with BPF filters), and how busy the two CPUs were (/proc/stat). With -profile-dir each row's gateway writes a CPU profile of the window.
//
// Usage: see bench/gateway-flood.sh.
package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/frontdoor-vdi/frontdoor/bench/internal/kernel"

	"github.com/frontdoor-vdi/frontdoor/ticket"
)

func main() {
	role := flag.String("role", "", "machine | gateway | client | flood | quic-gateway | quic-client | quic-flood | tickets (internal); empty: orchestrate")
	dir := flag.String("dir", "", "site directory (CA, ticket key)")
	port := flag.Uint("port", 0, "UDP channel port (machine, gateway, quic-client)")
	addr := flag.String("addr", "", "gateway address (client, flood; the QUIC port's for quic-client, quic-flood)")
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
	targets := flag.String("targets", "plain,quic", "plain (the gateway's plain UDP port) | quic (its QUIC port)")
	profile := flag.String("profile", "", "gateway: CPU profile between PROF and PROFEND to this file")
	profileDir := flag.String("profile-dir", "", "a CPU profile of the gateway over each row's window, in this directory")
	quicFloodTo := flag.String("quic-flood-to", "", "a control: the quic rows' flood goes to this address instead of the gateway's QUIC port (sink: a socket of 127.0.50.1 whose BPF filter drops everything)")
	gwCPU := flag.Int("gw-cpu", 0, "CPU of the gateway (pinned)")
	clientCPU := flag.Int("client-cpu", 1, "CPU of the machine, the client and the flood (pinned)")
	base := flag.String("base", "", "this benchmark built against older gateway code (plain rows for it too)")
	baseName := flag.String("base-name", "base", "name of the -base build")
	quicBase := flag.String("quic-base", "", "this benchmark built against older gateway code (quic rows for it too)")
	quicBaseName := flag.String("quic-base-name", "quic-base", "name of the -quic-base build")
	headName := flag.String("head-name", "head", "name of this build")
	flag.Parse()

	time.AfterFunc(30*time.Minute, func() { fmt.Fprintln(os.Stderr, "gateway-flood: 30 minutes, giving up"); os.Exit(2) })
	switch *role {
	case "machine":
		fatal(runMachine(*dir, uint16(*port)))
	case "gateway":
		fatal(runGateway(*dir, uint16(*port), *profile))
	case "quic-gateway":
		fatal(runQUICGateway(*dir, *profile))
	case "tickets":
		launch, forged, err := tickets(*dir, uint16(*port))
		fatal(err)
		fmt.Printf("TICKETS %s %s\n", launch, forged)
	case "client":
		ap, err := netip.ParseAddrPort(*addr)
		fatal(err)
		printLine("RESULT", runClient(ap, *tok, *size, *interval, *loss, *warm, *dur))
	case "flood":
		ap, err := netip.ParseAddrPort(*addr)
		fatal(err)
		printLine("RESULT", runFlood(ap, *tok, *rate, *sockets, *dur))
	case "quic-client":
		ap, err := netip.ParseAddrPort(*addr)
		fatal(err)
		runQUICClient(*dir, ap, uint16(*port), *tok, *size, *interval, *loss, *warm, *dur)
	case "quic-flood":
		ap, err := netip.ParseAddrPort(*addr)
		fatal(err)
		printLine("RESULT", runQUICFlood(ap, *rate, *dur))
	case "":
		o := &orch{gwCPU: *gwCPU, clientCPU: *clientCPU, dur: *dur, warm: *warm, interval: *interval, loss: *loss,
			size: *size, sockets: *sockets, profileDir: *profileDir, quicFloodTo: *quicFloodTo}
		builds := map[string][]build{"plain": {{*headName, ""}}, "quic": {{*headName, ""}}}
		if *base != "" {
			builds["plain"] = append(builds["plain"], build{*baseName, *base})
		}
		if *quicBase != "" {
			builds["quic"] = append(builds["quic"], build{*quicBaseName, *quicBase})
		}
		var rs []int
		for _, s := range split(*rates) {
			v, err := strconv.Atoi(s)
			fatal(err)
			rs = append(rs, v)
		}
		o.run(split(*targets), split(*configs), builds, rs, *rounds)
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

// row is one measured window.
type row struct {
	target        string // plain | quic
	config, build string
	round, rate   int
	gomaxprocs    string
	flow          flowResult
	seconds       float64 // the window, as the orchestrator saw it
	forged        int64   // forged datagrams sent in the window
	gwCPU         float64 // gateway process CPU seconds in the window
	floodCPU      float64
	benchCPU      float64   // CPU seconds of all the row's processes (gateway, machine, client, flood)
	denied        int64     // forged tickets the gateway checked in the window
	sockDrops     int64     // datagrams the gateway socket's full queue dropped in the window
	rcvbufErrors  int64     // host-wide UDP RcvbufErrors in the window
	retries       int64     // Retries the QUIC gateway sent the spoofed sources in the window (the flood counts them)
	handshake     int64     // and its other datagrams to them (handshake packets)
	flood         string    // what the flood process said of its datagrams at START
	cpus          [2]cpuUse // the host's CPUs gw-cpu and client-cpu in the window
	flows         int       // the gateway's flows (QUIC: connected clients) at the end of the window
	err           string
}

func (o *orch) row(target, config string, round int, b build, rate int) (r row) {
	r = row{target: target, config: config, build: b.name, round: round, rate: rate}
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
	ps := strconv.Itoa(int(port))
	launch, forged, err := tickets(o.dir, port)
	if b.path != "" { // in the format of the build's ticket package
		launch, forged, err = o.ticketsOf(b.path, ps)
	}
	if err != nil {
		return fail(fmt.Errorf("tickets: %w", err))
	}
	m, err := o.start(otherCPU, b.path, "-role", "machine", "-port", ps) // the build's agent, as its gateway
	if err != nil {
		return fail(err)
	}
	defer m.stop()
	if _, err := m.expect("READY ", 15*time.Second); err != nil {
		return fail(fmt.Errorf("machine: %w", err))
	}
	gwArgs := []string{"-role", "gateway", "-port", ps}
	if target == "quic" {
		gwArgs = []string{"-role", "quic-gateway"}
	}
	profile := ""
	if o.profileDir != "" {
		profile = filepath.Join(o.profileDir, fmt.Sprintf("gateway-%s-%s-%s-r%d-%d.pprof", target, config, b.name, round, rate))
		gwArgs = append(gwArgs, "-profile", profile)
	}
	g, err := o.start(gwCPU, b.path, gwArgs...)
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
	clientArgs := []string{"-role", "client", "-addr", gwAddr, "-ticket", launch, "-size", strconv.Itoa(o.size),
		"-interval", o.interval.String(), "-loss", o.loss.String(), "-warm", o.warm.String(), "-dur", o.dur.String()}
	if target == "quic" {
		clientArgs[1] = "quic-client"
		clientArgs = append(clientArgs, "-port", ps)
	}
	c, err := o.start(otherCPU, "", clientArgs...)
	if err != nil {
		return fail(err)
	}
	defer c.stop()
	if _, err := c.expect("OPEN", 15*time.Second); err != nil {
		return fail(fmt.Errorf("client: %w", err))
	}
	var fl *proc
	if rate > 0 {
		floodDur := (o.warm + o.dur + 3*time.Second).String()
		floodArgs := []string{"-role", "flood", "-addr", gwAddr, "-ticket", forged, "-rate", strconv.Itoa(rate),
			"-sockets", strconv.Itoa(o.sockets), "-dur", floodDur}
		if target == "quic" {
			to := gwAddr
			if o.quicFloodTo != "" {
				to = o.quicFloodTo
			}
			floodArgs = []string{"-role", "quic-flood", "-addr", to, "-rate", strconv.Itoa(rate), "-dur", floodDur}
		}
		fl, err = o.start(otherCPU, "", floodArgs...)
		if err != nil {
			return fail(err)
		}
		defer fl.stop()
		if r.flood, err = fl.expect("START", 30*time.Second); err != nil {
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
		bench            float64
		gs               gatewayStats
		sent, retries    int64
		handshake        int64
		sockDrops, rcvbf int64
		cpus             map[int]cpuUse
	}
	gwAP := netip.MustParseAddrPort(gwAddr)
	take := func() (sn snap, err error) {
		sn.t, sn.gw, sn.sockDrops, sn.rcvbf = time.Now(), cpu(g.pid), kernel.UDPDrops(func(a netip.AddrPort) bool { return a == gwAP }), kernel.UDPCounter("RcvbufErrors")
		sn.bench = sn.gw + cpu(m.pid) + cpu(c.pid)
		sn.cpus = cpuTimes()
		if err := g.stats(&sn.gs); err != nil {
			return sn, fmt.Errorf("gateway stats: %w", err)
		}
		if fl != nil {
			sn.flood = cpu(fl.pid)
			sn.bench += sn.flood
			var fs struct{ Sent, Retries, Handshake int64 }
			if err := fl.stats(&fs); err != nil {
				return sn, fmt.Errorf("flood stats: %w", err)
			}
			sn.sent, sn.retries, sn.handshake = fs.Sent, fs.Retries, fs.Handshake
		}
		return sn, nil
	}
	s0, err := take()
	if err != nil {
		return fail(err)
	}
	if profile != "" {
		io.WriteString(g.stdin, "PROF\n")
	}
	if _, err := c.expect("END", o.dur+o.loss+15*time.Second); err != nil {
		return fail(fmt.Errorf("client: %w", err))
	}
	if profile != "" {
		io.WriteString(g.stdin, "PROFEND\n")
		if _, err := g.expect("PROFILED", 10*time.Second); err != nil {
			return fail(fmt.Errorf("gateway profile: %w", err))
		}
	}
	s1, err := take()
	if err != nil {
		return fail(err)
	}
	r.seconds = s1.t.Sub(s0.t).Seconds()
	r.gwCPU, r.floodCPU, r.benchCPU = s1.gw-s0.gw, s1.flood-s0.flood, s1.bench-s0.bench
	r.forged, r.denied = s1.sent-s0.sent, s1.gs.Denied-s0.gs.Denied
	r.sockDrops, r.rcvbufErrors, r.flows = s1.sockDrops-s0.sockDrops, s1.rcvbf-s0.rcvbf, s1.gs.Flows
	r.retries, r.handshake = s1.retries-s0.retries, s1.handshake-s0.handshake
	for i, n := range []int{o.gwCPU, o.clientCPU} {
		a, b := s0.cpus[n], s1.cpus[n]
		r.cpus[i] = cpuUse{busy: b.busy - a.busy, softirq: b.softirq - a.softirq}
	}
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

// tickets are a launch ticket of the flow's channel port and a forged ticket (see
// site.forged), signed with the site's key.
func tickets(dir string, port uint16) (launch, forged string, err error) {
	s, err := loadSite(dir)
	if err != nil {
		return "", "", err
	}
	if launch, err = s.issue(ticket.Launch, port); err != nil {
		return "", "", err
	}
	forged, err = s.forged(port)
	return launch, forged, err
}

// ticketsOf asks the build bin for its tickets (an older build's ticket format may differ).
func (o *orch) ticketsOf(bin, port string) (launch, forged string, err error) {
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
	defer cancel()
	out, err := exec.CommandContext(ctx, bin, "-role", "tickets", "-port", port, "-dir", o.dir).Output()
	if err != nil {
		return "", "", err
	}
	f := strings.Fields(strings.TrimSpace(string(out)))
	if len(f) != 3 || f[0] != "TICKETS" {
		return "", "", fmt.Errorf("no tickets from %s: %q", bin, out)
	}
	return f[1], f[2], nil
}

func (o *orch) run(targets, configs []string, builds map[string][]build, rates []int, rounds int) {
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
	if o.profileDir != "" {
		fatal(os.MkdirAll(o.profileDir, 0o755))
	}
	if o.quicFloodTo == "sink" {
		addr, closeSink, err := dropSink()
		fatal(err)
		defer closeSink()
		o.quicFloodTo = addr
		fmt.Printf("control: the quic rows' flood goes to %s, a socket whose BPF filter drops every datagram, not to the gateway\n", addr)
	} else if o.quicFloodTo != "" {
		fmt.Printf("control: the quic rows' flood goes to %s, not to the gateway\n", o.quicFloodTo)
	}
	pin := fmt.Sprintf("pinned: gateway on CPU %d; machine, client and flood on CPU %d (taskset)", o.gwCPU, o.clientCPU)
	if o.taskset == "" {
		pin = "pinned: not pinned (no taskset)"
	}
	fmt.Printf("gateway-flood: %s; shared: nothing pinned. %v measured per row after %v of warm-up; the flow sends %d B one at a time, at most one per %v, lost after %v; the plain flood from %d source ports\n\n",
		pin, o.dur, o.warm, o.size, o.interval, o.loss, o.sockets)
	var rows []row
	for _, target := range targets {
		tb := builds[target]
		switch {
		case tb == nil:
			fatal(fmt.Errorf("unknown target %q", target))
		case target == "quic" && !quicTarget:
			fatal(errNoQUICTarget)
		}
		for _, cfg := range configs {
			for rd := 1; rd <= rounds; rd++ {
				for i := range tb {
					b := tb[(i+rd-1)%len(tb)]
					for _, rate := range rates {
						r := o.row(target, cfg, rd, b, rate)
						rows = append(rows, r)
						fmt.Fprintf(os.Stderr, "%s %s round %d %s %d/s: p50 %.0f p99 %.0f p99.9 %.0f µs, lost %d/%d, flood %.0f/s, gw CPU %.2f, checked %d, Retries %d, handshake datagrams %d, sock drops %d %s\n",
							target, cfg, rd, b.name, rate, r.flow.P50us, r.flow.P99us, r.flow.P999us, r.flow.Lost, r.flow.Sent,
							float64(r.forged)/max(r.seconds, 1e-9), r.gwCPU/max(r.seconds, 1e-9), r.denied, r.retries, r.handshake, r.sockDrops, r.err)
					}
				}
			}
		}
	}
	for i, target := range targets {
		if i > 0 {
			fmt.Println()
		}
		var trs []row
		for _, r := range rows {
			if r.target == target {
				trs = append(trs, r)
			}
		}
		if target == "quic" {
			reportQUIC(trs, rates)
		} else {
			report(trs, rates)
		}
	}
}

var errNoQUICTarget = errors.New("the quic target is not in this build (built with -tags floodbase)")

// ratios prints flood p99 / unloaded p99 of each config, round and build.
func ratios(rows []row, rates []int) {
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
