package main

import (
	"bufio"
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/netip"
	"os"
	"os/signal"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/frontdoor-vdi/frontdoor/configs"
	"github.com/frontdoor-vdi/frontdoor/internal/testbuf"
	"github.com/frontdoor-vdi/frontdoor/internal/testkit"
	"github.com/frontdoor-vdi/frontdoor/node"
)

// proxySiteConfig is a one-node site whose proxy listener LBPORT forwards to BACKEND, with
// zone east on RANGE and drain_timeout DRAIN; the node is gateway gw-hq too, with its health
// port HPORT and a channel port CPORT.
const proxySiteConfig = `
site: {name: t, default_zone: hq}
zones:
  - {name: hq, primary: true, ranges: [127.0.0.0/8]}
  - {name: east, ranges: [RANGE]}
nodes:
  - name: fd-1
    zone: hq
    listeners:
      - {kind: dns, address: "127.0.0.1:DNSPORT", protocols: [udp]}
gateways:
  - name: gw-hq
    zone: hq
    address: 127.1.0.11
    node: fd-1
    ports: [{port: HPORT, check: {kind: https}}, {port: CPORT}]
proxy:
  drain_timeout: DRAIN
  listeners:
    - {name: lb, node: fd-1, address: "127.0.0.1:LBPORT", protocol: tcp, pool: p}
  pools:
    - name: p
      backends: [{address: "BACKEND"}]
`

func readFile(t *testing.T, name string) string {
	t.Helper()
	b, err := os.ReadFile(name)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// namedBackend accepts TCP connections that each get "name\n" and then an echo of what
// they send.
func namedBackend(t *testing.T, name string) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	testkit.Serve(t, ln, func(c net.Conn) {
		c.Write([]byte(name + "\n"))
		io.Copy(c, c)
	})
	return ln.Addr().String()
}

// proxySite writes the config and returns its file and a writer that rewrites it.
func proxySite(t *testing.T, backend, zoneRange, drain string) (file string, rewrite func(backend, zoneRange, extra string)) {
	t.Helper()
	ports := map[string]bool{}
	port := func() string {
		p := freePort(t)
		for ports[p] {
			p = freePort(t)
		}
		ports[p] = true
		return p
	}
	dnsPort, lbPort, hPort, cPort := port(), port(), port(), port()
	file = filepath.Join(t.TempDir(), "site.yaml")
	rewrite = func(backend, zoneRange, extra string) {
		body := strings.NewReplacer("DNSPORT", dnsPort, "LBPORT", lbPort, "BACKEND", backend,
			"RANGE", zoneRange, "DRAIN", drain, "HPORT", hPort, "CPORT", cPort).Replace(proxySiteConfig) + extra
		// Written whole, then renamed: a reload never reads half a file.
		tmp := file + ".tmp"
		if err := os.WriteFile(tmp, []byte(body), 0o600); err != nil {
			t.Fatal(err)
		}
		if err := os.Rename(tmp, file); err != nil {
			t.Fatal(err)
		}
	}
	rewrite(backend, zoneRange, "")
	return file, rewrite
}

// served is a running "frontdoor serve": done is closed when it has returned err.
type served struct {
	rt   *node.Node
	data string // its data dir
	log  *testbuf.Buffer
	stop func() // asks it to stop, as SIGTERM does
	done chan struct{}
	err  error
}

// startServe runs "frontdoor serve" on file until the test ends.
func startServe(t *testing.T, file string) *served {
	t.Helper()
	return startServeIn(t, file, t.TempDir())
}

// startServeIn runs "frontdoor serve" on file with the data dir data until the test ends.
func startServeIn(t *testing.T, file, data string) *served {
	t.Helper()
	ready := make(chan *node.Node, 1)
	cmd := newServeCmdWith(func(s *node.Node) { ready <- s })
	sv := &served{data: data, log: &testbuf.Buffer{}, done: make(chan struct{})}
	cmd.SetErr(sv.log)
	cmd.SetArgs([]string{"--config", file, "--data", sv.data})
	ctx, cancel := context.WithCancel(context.Background())
	sv.stop = cancel
	go func() {
		sv.err = cmd.ExecuteContext(ctx)
		close(sv.done)
	}()
	t.Cleanup(func() {
		cancel()
		select {
		case <-sv.done:
		case <-time.After(60 * time.Second):
			t.Error("serve did not stop")
		}
	})
	select {
	case sv.rt = <-ready:
	case <-sv.done:
		t.Fatalf("serve stopped before listening: %v\n%s", sv.err, sv.log.String())
	}
	return sv
}

// addr returns the bound address of the node's endpoint of kind and name.
func (sv *served) addr(t *testing.T, kind, name string) netip.AddrPort {
	t.Helper()
	for _, e := range sv.rt.Endpoints() {
		if e.Kind == kind && e.Name == name {
			return netip.MustParseAddrPort(e.Address)
		}
	}
	t.Fatalf("serve has no %s endpoint %q: %+v", kind, name, sv.rt.Endpoints())
	return netip.AddrPort{}
}

// caPool returns a pool of the site CA that serve wrote to its data dir (empty when there is
// none: the handshakes then fail, naming the unknown authority).
func (sv *served) caPool() *x509.CertPool {
	p := x509.NewCertPool()
	b, _ := os.ReadFile(filepath.Join(sv.data, "ca.pem"))
	p.AppendCertsFromPEM(b)
	return p
}

// wait waits up to d for serve to return, and returns its error.
func (sv *served) wait(t *testing.T, d time.Duration) error {
	t.Helper()
	select {
	case <-sv.done:
		return sv.err
	case <-time.After(d):
		t.Fatalf("serve still running after %v", d)
		return nil
	}
}

// greet connects to the proxy listener and returns the connection and the backend's name.
func greet(t *testing.T, addr netip.AddrPort) (net.Conn, *bufio.Reader, string) {
	t.Helper()
	c, err := net.DialTimeout("tcp", addr.String(), 2*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	c.SetDeadline(time.Now().Add(10 * time.Second))
	r := bufio.NewReader(c)
	name, err := r.ReadString('\n')
	if err != nil {
		t.Fatalf("reading the backend's name: %v", err)
	}
	return c, r, strings.TrimSpace(name)
}

// echoes checks that a connection through the proxy still carries bytes both ways.
func echoes(t *testing.T, c net.Conn, r *bufio.Reader, msg string) {
	t.Helper()
	if _, err := c.Write([]byte(msg + "\n")); err != nil {
		t.Fatalf("write: %v", err)
	}
	got, err := r.ReadString('\n')
	if err != nil || strings.TrimSpace(got) != msg {
		t.Fatalf("echo: got %q, %v; want %q", got, err, msg)
	}
}

func TestServeReloadsTheConfigOnSIGHUP(t *testing.T) {
	// Held for the whole test, so that a SIGHUP the command is not (or no longer) watching
	// cannot end the test process.
	guard := make(chan os.Signal, 1)
	signal.Notify(guard, syscall.SIGHUP)
	defer signal.Stop(guard)

	a, b := namedBackend(t, "a"), namedBackend(t, "b")
	file, rewrite := proxySite(t, a, "10.2.0.0/16", "30s")
	sv := startServe(t, file)
	log := sv.log
	lb := sv.addr(t, "proxy", "lb")
	old, oldR, name := greet(t, lb)
	if name != "a" {
		t.Fatalf("before the reload: reached %q, want a", name)
	}

	rewrite(b, "10.9.0.0/16", "")
	sendHUP(t)
	waitFor(t, log, "msg=reloaded")
	if _, _, name := greet(t, lb); name != "b" {
		t.Fatalf("after the reload: reached %q, want b", name)
	}
	echoes(t, old, oldR, "still-here") // established before the reload, still on a

	// A change outside what a reload applies is refused whole: the pool stays on b.
	rewrite(a, "10.9.0.0/16", "machines: [{name: m1, zone: hq, address: 127.3.0.1, group: g}]\ngroups: [{name: g}]\n")
	sendHUP(t)
	waitFor(t, log, "reload failed")
	if !strings.Contains(log.String(), "machines, groups changed, which takes a restart") {
		t.Fatalf("the refusal does not name what changed:\n%s", log.String())
	}
	if _, _, name := greet(t, lb); name != "b" {
		t.Fatalf("after a refused reload: reached %q, want b", name)
	}

	// So is a file that does not load.
	if err := os.WriteFile(file, []byte("proxy: [unclosed\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	before := strings.Count(log.String(), "reload failed")
	sendHUP(t)
	for i := 0; i < 400 && strings.Count(log.String(), "reload failed") == before; i++ {
		time.Sleep(25 * time.Millisecond)
	}
	if strings.Count(log.String(), "reload failed") == before {
		t.Fatalf("a broken file was not reported:\n%s", log.String())
	}
	if _, _, name := greet(t, lb); name != "b" {
		t.Fatalf("after a broken file: reached %q, want b", name)
	}
}

// refuses waits until nothing accepts TCP connections on addr any more.
func refuses(t *testing.T, addr string) {
	t.Helper()
	for i := 0; i < 100; i++ {
		nc, err := net.DialTimeout("tcp", addr, time.Second)
		if err != nil {
			return
		}
		nc.Close()
		time.Sleep(20 * time.Millisecond)
	}
	t.Fatalf("%s still accepts connections while draining", addr)
}

// gatewayHealth returns the status of HEAD /favicon.ico on the gateway's health port, or
// the error of a request that got none.
func gatewayHealth(sv *served, addr string) (int, error) {
	hc := &http.Client{Timeout: 5 * time.Second, Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: sv.caPool()}, DisableKeepAlives: true}}
	req, _ := http.NewRequest(http.MethodHead, "https://"+addr+"/favicon.ico", nil)
	resp, err := hc.Do(req)
	if err != nil {
		return 0, err
	}
	resp.Body.Close()
	return resp.StatusCode, nil
}

func TestServeDrainsTheProxyAndTheGatewaysOnStop(t *testing.T) {
	file, _ := proxySite(t, namedBackend(t, "a"), "10.2.0.0/16", "30s")
	sv := startServe(t, file)
	log := sv.log
	lb := sv.addr(t, "proxy", "lb")
	c, r, _ := greet(t, lb)
	cfg, err := configs.Load(file, []byte(readFile(t, file)))
	if err != nil {
		t.Fatal(err)
	}
	gw := cfg.Gateways[0]
	health := net.JoinHostPort(gw.Address.String(), fmt.Sprint(gw.Ports[0].Port))
	channels := net.JoinHostPort(gw.Address.String(), fmt.Sprint(gw.Ports[1].Port))
	if st, err := gatewayHealth(sv, health); st != http.StatusOK {
		t.Fatalf("gateway health before the drain: %d, %v", st, err)
	}

	sv.stop()
	waitFor(t, log, "draining: no new")
	if !strings.Contains(log.String(), "connections=1") {
		t.Fatalf("the drain line does not count the open connection:\n%s", log.String())
	}
	// New connections and channels are refused, the gateway no longer says it is up (it
	// answers 503 while it has channels; without any it has drained and closed), and the
	// established connection carries on.
	refuses(t, lb.String())
	refuses(t, channels)
	if st, err := gatewayHealth(sv, health); st == http.StatusOK {
		t.Fatal("gateway health says 200 while the node drains")
	} else if st != http.StatusServiceUnavailable && !strings.Contains(fmt.Sprint(err), "refused") {
		t.Fatalf("gateway health while draining: %d, %v; want 503 or refused", st, err)
	}
	echoes(t, c, r, "during-the-drain")
	select {
	case <-sv.done:
		t.Fatalf("serve returned (%v) while a connection was open", sv.err)
	case <-time.After(200 * time.Millisecond):
	}
	c.Close()
	if err := sv.wait(t, 20*time.Second); err != nil {
		t.Fatalf("serve after the drain: %v", err)
	}
	if !strings.Contains(log.String(), "drained the proxy") {
		t.Fatalf("no drained line:\n%s", log.String())
	}
}

// The drain timeout is the one last reloaded: 30s at start, 300ms after a SIGHUP.
func TestServeClosesWhatIsLeftAtTheDrainTimeout(t *testing.T) {
	guard := make(chan os.Signal, 1)
	signal.Notify(guard, syscall.SIGHUP)
	defer signal.Stop(guard)
	backend := namedBackend(t, "a")
	file, rewrite := proxySite(t, backend, "10.2.0.0/16", "30s")
	sv := startServe(t, file)
	log := sv.log
	c, r, _ := greet(t, sv.addr(t, "proxy", "lb"))
	rewrite(backend, "10.2.0.0/16", "")
	os.WriteFile(file, []byte(strings.Replace(readFile(t, file), "drain_timeout: 30s", "drain_timeout: 300ms", 1)), 0o600)
	sendHUP(t)
	waitFor(t, log, "msg=reloaded")
	sv.stop()
	if err := sv.wait(t, 20*time.Second); err != nil {
		t.Fatalf("serve after the drain timeout: %v", err)
	}
	if !strings.Contains(log.String(), "drain timed out: the proxy") || !strings.Contains(log.String(), "closed 1 connections") {
		t.Fatalf("no timeout line counting the connection closed:\n%s", log.String())
	}
	c.SetReadDeadline(time.Now().Add(5 * time.Second))
	if _, err := r.ReadByte(); err == nil || errors.Is(err, os.ErrDeadlineExceeded) {
		t.Fatalf("the connection left at the timeout is still open: %v", err)
	}
}
