package node

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/frontdoor-vdi/frontdoor/api"
	"github.com/frontdoor-vdi/frontdoor/configs"
	"github.com/frontdoor-vdi/frontdoor/health"
)

// A proxy in front of a gateway keeps the UDP flows it carries there while the gateway
// drains (new ones go elsewhere), and drops them once the gateway is down.
func TestProxyKeepsFlowsToADrainingGateway(t *testing.T) {
	echo, err := net.ListenPacket("udp", "127.0.99.8:0")
	if err != nil {
		t.Fatal(err)
	}
	defer echo.Close()
	go func() {
		buf := make([]byte, 2048)
		for {
			n, from, err := echo.ReadFrom(buf)
			if err != nil {
				return
			}
			echo.WriteTo(buf[:n], from)
		}
	}()
	gwPort := echo.LocalAddr().(*net.UDPAddr).Port
	lb := freeUDPPort(t)
	body := fmt.Sprintf(`
site: {name: drain-test}
zones: [{name: hq, primary: true, ranges: [127.0.0.0/8]}]
nodes: [{name: fd, zone: hq}]
gateways:
  - {name: gw, zone: hq, address: 127.0.99.8, ports: [{port: %d, protocol: udp}]}
proxy:
  listeners:
    - {name: u, node: fd, address: "127.0.0.1:%d", protocol: udp, pool: g}
  pools: [{name: g, backends: [{gateway: gw, port: %d}]}]
`, gwPort, lb, gwPort)
	cfg, err := configs.Load("site.yaml", []byte(body))
	if err != nil {
		t.Fatal(err)
	}
	r := startNode(t, cfg, Options{})
	serveNode(t, r)

	c, err := net.Dial("udp", fmt.Sprintf("127.0.0.1:%d", lb))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	echoes := func(msg string) bool {
		c.SetReadDeadline(time.Now().Add(500 * time.Millisecond))
		c.Write([]byte(msg))
		buf := make([]byte, 64)
		n, err := c.Read(buf)
		return err == nil && string(buf[:n]) == msg
	}
	flows := func() int64 { _, f := r.proxy.Active(); return f }
	for i := 0; !echoes("hello"); i++ {
		if i == 20 {
			t.Fatal("no echo through the proxy")
		}
	}
	if flows() != 1 {
		t.Fatalf("%d flows, want 1", flows())
	}
	if err := r.health.SetOverride("gw", health.OverrideDrain); err != nil {
		t.Fatal(err)
	}
	waitVerdict(t, r, "gw", health.StateDraining)
	if !echoes("while draining") || flows() != 1 {
		t.Fatalf("the flow to the draining gateway ended (%d flows)", flows())
	}
	if err := r.health.SetOverride("gw", health.OverrideDown); err != nil {
		t.Fatal(err)
	}
	waitVerdict(t, r, "gw", health.StateDown)
	for i := 0; flows() != 0; i++ {
		if i == 200 {
			t.Fatalf("%d flows to a gateway that is down", flows())
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// serveNode runs r until the test ends.
func serveNode(t *testing.T, r *Node) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	served := make(chan error, 1)
	go func() { served <- r.Serve(ctx) }()
	t.Cleanup(func() { cancel(); <-served })
}

func waitVerdict(t *testing.T, r *Node, name string, want health.State) {
	t.Helper()
	for i := 0; ; i++ {
		if v, _ := r.health.Verdict(name); v == want {
			return
		}
		if i == 500 {
			v, _ := r.health.Verdict(name)
			t.Fatalf("verdict of %s is %v, want %v", name, v, want)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// A gateway whose health port answers 503 has a definite verdict for GSLB, draining: it is
// not handed out, and not left to the name's initial state; in mode any too, beside a port
// that is down.
func TestGSLBKnowsADrainingGateway(t *testing.T) {
	srv := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		w.WriteHeader(http.StatusServiceUnavailable)
	}))
	defer srv.Close()
	port := srv.Listener.Addr().(*net.TCPAddr).Port
	for _, extra := range []struct{ port, monitor string }{{}, {fmt.Sprintf(", {port: %d, protocol: udp}", freeUDPPort(t)), ", monitor: {mode: any}"}} {
		body := fmt.Sprintf(`
site: {name: drain-test}
zones: [{name: hq, primary: true, ranges: [127.0.0.0/8]}]
nodes: [{name: fd, zone: hq}]
gateways:
  - {name: gw, zone: hq, address: 127.0.0.1, ports: [{port: %d, check: {kind: https}}%s]%s}
`, port, extra.port, extra.monitor)
		cfg, err := configs.Load("site.yaml", []byte(body))
		if err != nil {
			t.Fatal(err)
		}
		r := startNode(t, cfg, Options{})
		serveNode(t, r)
		waitVerdict(t, r, "gw", health.StateDraining)
		if extra.port != "" {
			for i := 0; ; i++ {
				st, _ := r.health.Status("gw")
				if len(st.Ports) == 2 && st.Ports[1].State == health.StateDown {
					break
				}
				if i == 500 {
					t.Fatalf("the udp port is not down: %+v", st.Ports)
				}
				time.Sleep(10 * time.Millisecond)
			}
		}
		h := gslbHealth{c: r.health}
		if up, known := h.GatewayUp("gw"); up || !known {
			t.Fatalf("%+v: GatewayUp of a draining gateway = %v, %v; want false, true", extra, up, known)
		}
	}
}

// An admin override is refused once the node stops, and names unknown gateways.
func TestOverrideRefusedWhileStoppingAndForUnknownGateways(t *testing.T) {
	cfg, err := configs.Load("site.yaml", []byte(strings.NewReplacer("TCPPORT", fmt.Sprint(freeTCPPort(t)), "EXTRA", "").Replace(reloadSite)+
		"gateways: [{name: gw, zone: hq, address: 127.0.99.9}]\n"))
	if err != nil {
		t.Fatal(err)
	}
	r := startNode(t, cfg, Options{})
	if _, err := r.override("gw-nowhere", "drain"); !errors.Is(err, api.ErrUnknownGateway) {
		t.Fatalf("override of an unknown gateway: %v", err)
	}
	if _, err := r.override("gw", "drain"); err != nil {
		t.Fatal(err)
	}
	if v, _ := r.health.Verdict("gw"); v != health.StateDraining {
		t.Fatalf("verdict after drain: %v", v)
	}
	r.reloadMu.Lock()
	r.stopping = true
	r.reloadMu.Unlock()
	if _, err := r.override("gw", "auto"); !errors.Is(err, api.ErrRefused) {
		t.Fatalf("override while stopping: %v, want refused", err)
	}
}

// An override of a gateway the node hosts puts it in drain mode (down too; up lifts it), if
// it has an https health port to say so; otherwise the answer notes that it cannot. A
// foreign server's override changes the verdict only.
func TestOverrideDrainModeFollowsTheHostingNode(t *testing.T) {
	hp, cp := freeTCPPort(t), freeTCPPort(t)
	body := fmt.Sprintf(`
site: {name: drain-test}
zones: [{name: hq, primary: true, ranges: [127.0.0.0/8]}]
nodes: [{name: fd, zone: hq}]
gateways:
  - {name: gw-a, zone: hq, node: fd, address: 127.0.99.10, ports: [{port: %d, check: {kind: https}}, {port: %d}]}
  - {name: gw-b, zone: hq, node: fd, address: 127.0.99.11, ports: [{port: %d}]}
  - {name: gw-c, zone: hq, address: 127.0.99.12, ports: [{port: %d}]}
`, hp, cp, cp, cp)
	cfg, err := configs.Load("site.yaml", []byte(body))
	if err != nil {
		t.Fatal(err)
	}
	r := startNode(t, cfg, Options{})
	serveNode(t, r)
	hc := &http.Client{Timeout: 5 * time.Second, Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: r.ca.Pool()}, DisableKeepAlives: true}}
	status := func() int {
		t.Helper()
		req, _ := http.NewRequest(http.MethodHead, fmt.Sprintf("https://127.0.99.10:%d/favicon.ico", hp), nil)
		resp, err := hc.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		return resp.StatusCode
	}
	override := func(gw, o string) string {
		t.Helper()
		note, err := r.override(gw, o)
		if err != nil {
			t.Fatalf("%s %s: %v", o, gw, err)
		}
		return note
	}
	if note := override("gw-c", "drain"); note != "" || status() != http.StatusOK {
		t.Fatalf("drain of a foreign server: note %q, gw-a's health %d; want none and 200", note, status())
	}
	if !strings.Contains(r.healthSummary()["gw-c"], "admin override drain") {
		t.Fatalf("status lacks the override: %q", r.healthSummary()["gw-c"])
	}
	if note := override("gw-a", "down"); note != "" || status() != http.StatusServiceUnavailable {
		t.Fatalf("the hosting node's down: note %q, health %d; want none and 503", note, status())
	}
	if override("gw-a", "up"); status() != http.StatusOK {
		t.Fatalf("health after up: %d, want 200", status())
	}
	if note := override("gw-b", "drain"); !strings.Contains(note, "no https health port") {
		t.Fatalf("drain of a gateway without a health port: note %q", note)
	}
}
