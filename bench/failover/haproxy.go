//go:build linux

package main

import (
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"time"
)

// hapEvent is one server state change logged by HAProxy.
type hapEvent struct {
	at     time.Time
	server string // backend/server
	up     bool
}

// haproxy runs one HAProxy process, pinned with taskset, and timestamps the state changes it
// logs to our syslog socket.
type haproxy struct {
	cmd    *exec.Cmd
	log    net.PacketConn
	mu     sync.Mutex // guards subs
	subs   []chan hapEvent
	output strings.Builder
}

// hapBackend is one frontend/backend pair of the HAProxy configuration.
type hapBackend struct {
	name       string
	front      int    // port HAProxy listens on
	victim     int    // the primary server's traffic port
	checkPort  int    // 0: check the traffic port
	checkSSL   bool   // TLS handshake check
	spare      int    // the backup server
	serverOpts string // extra server options
}

var stateRE = regexp.MustCompile(`Server (\S+) is (UP|DOWN)`)

func startHAProxy(bin, cpu, dir string, inter, timeout time.Duration, fall, rise int, bes []hapBackend) (*haproxy, error) {
	pc, err := net.ListenPacket("udp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	h := &haproxy{log: pc}
	go h.readLog()
	var b strings.Builder
	fmt.Fprintf(&b, `global
	log %s local0
	maxconn 4096
defaults
	mode tcp
	log global
	option log-health-checks
	timeout connect %dms
	timeout check %dms
	timeout client 5s
	timeout server 5s
	retries 0
	default-server inter %dms fastinter %dms downinter %dms fall %d rise %d
`, pc.LocalAddr(), timeout.Milliseconds(), timeout.Milliseconds(), inter.Milliseconds(), inter.Milliseconds(), inter.Milliseconds(), fall, rise)
	for _, be := range bes {
		check := "check"
		if be.checkPort != 0 {
			check += fmt.Sprintf(" port %d", be.checkPort)
		}
		if be.checkSSL {
			check += " check-ssl verify none"
		}
		fmt.Fprintf(&b, `frontend fe_%s
	bind 127.0.0.1:%d
	default_backend be_%s
backend be_%s
	server victim 127.0.0.1:%d %s %s
	server spare 127.0.0.1:%d backup
`, be.name, be.front, be.name, be.name, be.victim, check, be.serverOpts, be.spare)
	}
	cfg := filepath.Join(dir, "haproxy.cfg")
	if err := os.WriteFile(cfg, []byte(b.String()), 0o644); err != nil {
		return nil, err
	}
	h.cmd = exec.Command("taskset", "-c", cpu, bin, "-f", cfg, "-db")
	h.cmd.Stdout, h.cmd.Stderr = &h.output, &h.output
	if err := h.cmd.Start(); err != nil {
		return nil, err
	}
	return h, nil
}

func (h *haproxy) readLog() {
	buf := make([]byte, 4096)
	for {
		n, _, err := h.log.ReadFrom(buf)
		if err != nil {
			return
		}
		at := time.Now()
		line := string(buf[:n])
		if *verbose {
			fmt.Fprintln(os.Stderr, "haproxy:", strings.TrimSpace(line))
		}
		m := stateRE.FindStringSubmatch(line)
		if m == nil {
			continue
		}
		ev := hapEvent{at: at, server: m[1], up: m[2] == "UP"}
		h.mu.Lock()
		for _, c := range h.subs {
			select {
			case c <- ev:
			default:
			}
		}
		h.mu.Unlock()
	}
}

func (h *haproxy) subscribe() chan hapEvent {
	c := make(chan hapEvent, 256)
	h.mu.Lock()
	h.subs = append(h.subs, c)
	h.mu.Unlock()
	return c
}

// stop ends HAProxy by its PID.
func (h *haproxy) stop() {
	if h.cmd.Process != nil {
		h.cmd.Process.Kill()
		h.cmd.Wait()
	}
	h.log.Close()
}

// wait reads c until server reaches the wanted state or the deadline passes.
func waitHAP(c chan hapEvent, server string, up bool, d time.Duration) (time.Time, bool) {
	t := time.NewTimer(d)
	defer t.Stop()
	for {
		select {
		case ev := <-c:
			if ev.server == server && ev.up == up {
				return ev.at, true
			}
		case <-t.C:
			return time.Time{}, false
		}
	}
}

// freePort returns a loopback TCP port nothing listens on right now.
func freePort() (int, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer ln.Close()
	return ln.Addr().(*net.TCPAddr).Port, nil
}
