// Command gateway-relay benchmarks frontdoor's secure gateway relay against its peers on
// loopback, side by side in one run (bench/gateway-relay.sh starts every process and runs it):
//
//   - UDP, one flow echoed with a fixed window in flight, 64 and 1200-byte payloads:
//     frontdoor's encrypted path (a client carrying the channel in QUIC DATAGRAM frames to a
//     gateway.QUIC, which relays it on its own QUIC connection to the machine's agent.Display,
//     which echoes), frontdoor's plain UDP path (a gateway.Gateway UDP port with PlainUDP; its
//     leg to the machine is QUIC too), and nginx's stream module forwarding plain UDP to a
//     plain echo; datagrams/s and the relay process's CPU µs per datagram;
//   - TCP, bulk streams into a sink: frontdoor's TLS channel (gateway.Gateway TCP port: TLS
//     and the ticket frame, then TLS 1.3 mutual to the machine) and HAProxy terminating TLS in
//     mode tcp to a plain sink (and re-encrypting to a TLS sink); MB/s and the relay's CPU per
//     GB.
//
// Roles (-role): site writes the site directory; gateway, machine and backend are the
// servers the script starts by hand and stops by PID; run (pinned to the load CPU) runs the
// rounds and prints markdown tables.
package main

import (
	"flag"
	"fmt"
	"os"
	"os/exec"
	"runtime"
	"strconv"
	"strings"
	"time"
)

func main() {
	role := flag.String("role", "", "site | gateway | machine | backend | run")
	dir := flag.String("dir", "", "site directory")
	pprofAddr := flag.String("pprof", "", "gateway: serve net/http/pprof on this address")
	udpAddr := flag.String("udp", "127.0.0.1:19173", "backend: plain UDP echo address")
	tcpAddr := flag.String("tcp", "127.0.0.1:19172", "backend: plain TCP sink address")
	tlsAddr := flag.String("tls", "127.0.0.1:19443", "backend: TLS sink address")
	fdPID := flag.Int("fd-pid", 0, "run: PID of frontdoor's gateway process")
	nginxPID := flag.Int("nginx-pid", 0, "run: PID of nginx (one process: master_process off)")
	haproxyPID := flag.Int("haproxy-pid", 0, "run: PID of HAProxy")
	nginx := flag.String("nginx", "127.0.0.1:18173", "run: nginx's UDP listener")
	haproxy := flag.String("haproxy", "127.0.0.1:17443", "run: HAProxy's TLS listener to the plain sink")
	haproxy2 := flag.String("haproxy-tls2", "127.0.0.1:17444", "run: HAProxy's TLS listener to the TLS sink")
	rounds := flag.Int("rounds", 2, "run: rounds; the target order rotates each round")
	dur := flag.Duration("dur", 5*time.Second, "run: measured time per row")
	warm := flag.Duration("warm", 500*time.Millisecond, "run: unmeasured load before each row's window")
	win := flag.Int("window", 64, "run: UDP datagrams in flight")
	sizes := flag.String("sizes", "64,1200", "run: UDP payload bytes")
	streams := flag.String("streams", "1,4", "run: TCP streams per row")
	udpTargets := flag.String("udp-targets", "fd-quic,fd-quic-raw,fd-plain,nginx", "run: UDP targets")
	tcpTargets := flag.String("tcp-targets", "fd-tls,haproxy,haproxy-tls2", "run: TCP targets")
	pprofURL := flag.String("pprof-url", "", "run: the gateway's pprof (http://ADDR) to profile its round-1 rows")
	profDir := flag.String("profile-dir", "", "run: where the gateway's profiles go")
	relayCPU := flag.Int("relay-cpu", 0, "run: the relays' CPU (for the report)")
	loadCPU := flag.Int("load-cpu", 1, "run: the load's CPU (for the report)")
	flag.Parse()

	switch *role {
	case "site":
		fatal(writeSite(*dir))
	case "gateway":
		fatal(runGateway(*dir, *pprofAddr))
	case "machine":
		fatal(runMachine(*dir))
	case "backend":
		fatal(runBackend(*dir, *udpAddr, *tcpAddr, *tlsAddr))
	case "run":
		time.AfterFunc(25*time.Minute, func() { fmt.Fprintln(os.Stderr, "gateway-relay: 25 minutes, giving up"); os.Exit(2) })
		s, err := loadSite(*dir)
		fatal(err)
		o := &config{site: s, pids: map[string]int{}, nginx: *nginx, haproxy: *haproxy, haproxy2: *haproxy2,
			rounds: *rounds, window: *win, dur: *dur, warm: *warm, udpTargets: split(*udpTargets), tcpTargets: split(*tcpTargets),
			pprofURL: *pprofURL, profDir: *profDir, tck: clockTicks(), relayCPU: *relayCPU, loadCPU: *loadCPU}
		for name, pid := range map[string]int{"fd": *fdPID, "nginx": *nginxPID, "haproxy": *haproxyPID} {
			if pid > 0 {
				o.pids[name] = pid
			}
		}
		for _, t := range append(append([]string(nil), o.udpTargets...), o.tcpTargets...) {
			if o.pids[relayOf(t)] == 0 {
				fatal(fmt.Errorf("target %s: no PID of relay %s", t, relayOf(t)))
			}
		}
		o.sizes, err = ints(*sizes)
		fatal(err)
		o.streams, err = ints(*streams)
		fatal(err)
		fatal(o.check())
		us, ts := o.run()
		o.report(us, ts)
	default:
		fatal(fmt.Errorf("unknown role %q", *role))
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

func ints(s string) ([]int, error) {
	var out []int
	for _, f := range split(s) {
		v, err := strconv.Atoi(f)
		if err != nil {
			return nil, err
		}
		out = append(out, v)
	}
	return out, nil
}

// clockTicks is CLK_TCK, the unit of /proc/PID/stat's utime and stime.
func clockTicks() float64 {
	if out, err := exec.Command("getconf", "CLK_TCK").Output(); err == nil {
		if v, err := strconv.ParseFloat(strings.TrimSpace(string(out)), 64); err == nil && v > 0 {
			return v
		}
	}
	return 100
}

func gomaxprocs() int { return runtime.GOMAXPROCS(0) }
