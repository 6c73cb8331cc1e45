package node

import (
	"context"
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
	r := startRuntime(t, cfg, Options{})
	serveRuntime(t, r)

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
	flows := func() int64 { _, f := r.Proxy.Active(); return f }
	for i := 0; !echoes("hello"); i++ {
		if i == 20 {
			t.Fatal("no echo through the proxy")
		}
	}
	if flows() != 1 {
		t.Fatalf("%d flows, want 1", flows())
	}
	if err := r.Health.SetOverride("gw", health.OverrideDrain); err != nil {
		t.Fatal(err)
	}
	waitVerdict(t, r, "gw", health.StateDraining)
	if !echoes("while draining") || flows() != 1 {
		t.Fatalf("the flow to the draining gateway ended (%d flows)", flows())
	}
	if err := r.Health.SetOverride("gw", health.OverrideDown); err != nil {
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

// serveRuntime runs r until the test ends.
func serveRuntime(t *testing.T, r *Runtime) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	served := make(chan error, 1)
	go func() { served <- r.Serve(ctx) }()
	t.Cleanup(func() { cancel(); <-served })
}

func waitVerdict(t *testing.T, r *Runtime, name string, want health.State) {
	t.Helper()
	for i := 0; ; i++ {
		if v, _ := r.Health.Verdict(name); v == want {
			return
		}
		if i == 500 {
			v, _ := r.Health.Verdict(name)
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
		r := startRuntime(t, cfg, Options{})
		serveRuntime(t, r)
		waitVerdict(t, r, "gw", health.StateDraining)
		if extra.port != "" {
			for i := 0; ; i++ {
				st, _ := r.Health.Status("gw")
				if len(st.Ports) == 2 && st.Ports[1].State == health.StateDown {
					break
				}
				if i == 500 {
					t.Fatalf("the udp port is not down: %+v", st.Ports)
				}
				time.Sleep(10 * time.Millisecond)
			}
		}
		h := gslbHealth{c: r.Health}
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
	r := startRuntime(t, cfg, Options{})
	if _, err := r.override("fd", "gw-nowhere", "drain"); !errors.Is(err, api.ErrUnknownGateway) {
		t.Fatalf("override of an unknown gateway: %v", err)
	}
	if _, err := r.override("fd", "gw", "drain"); err != nil {
		t.Fatal(err)
	}
	if v, _ := r.Health.Verdict("gw"); v != health.StateDraining {
		t.Fatalf("verdict after drain: %v", v)
	}
	r.reloadMu.Lock()
	r.stopping = true
	r.reloadMu.Unlock()
	if _, err := r.override("fd", "gw", "auto"); !errors.Is(err, api.ErrRefused) {
		t.Fatalf("override while stopping: %v, want refused", err)
	}
}

// Only the admin API of the node that hosts a gateway puts it in drain mode (down too; up
// lifts it), and only if it has an https health port to say so; otherwise the answer notes
// that only the verdict here changed.
func TestOverrideDrainModeFollowsTheHostingNode(t *testing.T) {
	hp, cp := freeTCPPort(t), freeTCPPort(t)
	body := fmt.Sprintf(`
site: {name: drain-test}
zones: [{name: hq, primary: true, ranges: [127.0.0.0/8]}]
nodes: [{name: fd, zone: hq}, {name: fd2, zone: hq}]
gateways:
  - {name: gw-a, zone: hq, node: fd, address: 127.0.99.10, ports: [{port: %d, check: {kind: https}}, {port: %d}]}
  - {name: gw-b, zone: hq, node: fd, address: 127.0.99.11, ports: [{port: %d}]}
`, hp, cp, cp)
	cfg, err := configs.Load("site.yaml", []byte(body))
	if err != nil {
		t.Fatal(err)
	}
	r := startRuntime(t, cfg, Options{})
	serveRuntime(t, r)
	hc := &http.Client{Timeout: 5 * time.Second, Transport: &http.Transport{TLSClientConfig: r.TLSClientConfig(), DisableKeepAlives: true}}
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
	override := func(node, gw, o string) string {
		t.Helper()
		note, err := r.override(node, gw, o)
		if err != nil {
			t.Fatalf("%s: %s %s: %v", node, o, gw, err)
		}
		return note
	}
	if note := override("fd2", "gw-a", "drain"); !strings.Contains(note, "hosted by node fd") || status() != http.StatusOK {
		t.Fatalf("another node's drain of gw-a: note %q, health %d; want a note and 200", note, status())
	}
	if !strings.Contains(r.healthSummary()["gw-a"], "admin override drain") {
		t.Fatalf("status lacks the override: %q", r.healthSummary()["gw-a"])
	}
	if note := override("fd", "gw-a", "down"); note != "" || status() != http.StatusServiceUnavailable {
		t.Fatalf("the hosting node's down: note %q, health %d; want none and 503", note, status())
	}
	if override("fd", "gw-a", "up"); status() != http.StatusOK {
		t.Fatalf("health after up: %d, want 200", status())
	}
	if note := override("fd", "gw-b", "drain"); !strings.Contains(note, "no https health port") {
		t.Fatalf("drain of a gateway without a health port: note %q", note)
	}
}
