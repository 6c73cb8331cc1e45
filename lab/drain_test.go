package lab

import (
	"context"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/frontdoor-vdi/frontdoor/broker"
	"github.com/frontdoor-vdi/frontdoor/client"
	"github.com/frontdoor-vdi/frontdoor/internal/testbuf"
	"github.com/frontdoor-vdi/frontdoor/internal/testkit"
)

// TestGatewayDrainKeepsTheSessionThenHandsItOn stops the node whose gateway a session runs
// through, as SIGTERM stops `frontdoor serve`: the session's channels keep flowing while the
// gateway drains and health marks it draining, and when the drain's deadline (8s) cuts them
// the client comes back in the same session through another gateway.
func TestGatewayDrainKeepsTheSessionThenHandsItOn(t *testing.T) {
	logs := &testbuf.Buffer{}
	// The checks before the deadline take a few seconds on a loaded CI host (4s was too
	// short once): the drain lasts 8s.
	l, _, _ := startLabWith(t, Options{Drain: true, Logger: slog.New(slog.NewTextHandler(logs, nil)),
		Config: testSite(t, func(s string) string { return s + "\nproxy:\n  drain_timeout: 8s\n" })})
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	ln := &client.Launcher{Name: "desktop.vdi.lab.test", DNSServer: "127.41.0.1:5353", User: "alice", Password: "lab",
		Resource: "desktop", Endpoint: "alice-laptop", RootCAs: l.CA().Pool()}
	s, desc, _, events := openSession(ctx, t, l, ln, client.Options{})
	if desc.Mode != client.ModeGateway {
		t.Fatalf("launch mode %s, want gateway", desc.Mode)
	}
	// A user watches the desktop, typing, the whole time.
	w, err := s.Watch(ctx, 50*time.Millisecond)
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	via, _ := s.Via()
	host := nodeOf(t, l, via)
	if host == "fd-hq-1" {
		t.Fatalf("alice's session runs via %s, on the node with the admin API; want one of her zone's", via)
	}

	// The drain: health steers away from the gateway while the session carries on.
	if err := l.Signal(host, syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	// Its verdict turns draining, not down, and stays so past fall × interval (750ms).
	for v := verdict(t, l, via); v != "draining"; v = verdict(t, l, via) {
		if ctx.Err() != nil || v == "down" {
			t.Fatalf("gateway %s is %v while draining, want draining", via, v)
		}
		time.Sleep(20 * time.Millisecond)
	}
	for range 10 {
		if v := verdict(t, l, via); v != "draining" {
			t.Fatalf("gateway %s turned %v while draining", via, v)
		}
		time.Sleep(100 * time.Millisecond)
	}
	// The viewer's picture keeps moving through the draining gateway (a full frame, as
	// CheckDesktop reads, would take most of the drain under the race detector).
	for seen := w.Stats().Updates; w.Stats().Updates < seen+2; time.Sleep(20 * time.Millisecond) {
		if st := w.Stats(); st.Err != nil || ctx.Err() != nil {
			t.Fatalf("the desktop through the draining gateway: %v %v", st.Err, ctx.Err())
		}
	}
	if err := s.EchoUDP(ctx, 4172, 10, 500); err != nil {
		t.Fatalf("UDP echo through the draining gateway: %v", err)
	}
	if drainEvents(events, client.EventCut) {
		t.Fatal("the session was cut before the drain's deadline")
	}

	// The deadline cuts the channels; the client comes back through another gateway.
	back := waitEvent(t, events, client.EventBack, 20*time.Second)
	if !back.SameSession || back.Relaunched || back.Via == via {
		t.Fatalf("back: %+v; want the same session through another gateway", back)
	}
	if !strings.Contains(logs.String(), "drain timed out: gateway "+via) {
		t.Fatalf("no timeout line for %s:\n%s", via, logs.String())
	}
	if _, err := s.CheckDesktop(ctx); err != nil {
		t.Fatalf("the desktop after the hand-over: %v", err)
	}
	// The viewer never noticed but for a stall: its connection stayed, and its keys all
	// reached the desktop, which now shows the new path.
	for w.Stats().Line("path ") != back.Via {
		if ctx.Err() != nil {
			t.Fatalf("the viewer's desktop shows path %q, want %s", w.Stats().Line("path "), back.Via)
		}
		time.Sleep(20 * time.Millisecond)
	}
	if err := w.CheckKeys(ctx); err != nil {
		t.Fatal(err)
	}
	t.Logf("the viewer's longest stall: %v", w.Stats().LongestStall)
	waitState(t, l, desc.SessionID, broker.StateConnected)
}

// TestLabDrainKeepsTheSessionUntilTheDeadline stops a lab that drains, as frontdoor serve
// does on SIGTERM: the session's gateway says it drains and carries the session on, the
// gateways without a channel close at once, and the deadline (4s) cuts the rest.
func TestLabDrainKeepsTheSessionUntilTheDeadline(t *testing.T) {
	logs := &testbuf.Buffer{}
	l, stopLab, served := startLabWith(t, Options{Drain: true, Logger: slog.New(slog.NewTextHandler(logs, nil)),
		Config: testSite(t, func(s string) string { return s + "\nproxy:\n  drain_timeout: 4s\n" })})
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	ln := &client.Launcher{Name: "desktop.vdi.lab.test", DNSServer: "127.41.0.1:5353", User: "alice", Password: "lab",
		Resource: "desktop", Endpoint: "alice-laptop", RootCAs: l.CA().Pool()}
	s, _, _, events := openSession(ctx, t, l, ln, client.Options{})
	w, err := s.Watch(ctx, 0) // a viewer holds a channel on the gateway
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	via, _ := s.Via()
	status := func() int { return gatewayHealth(t, l, via) }
	if st := status(); st != http.StatusOK {
		t.Fatalf("health of %s before the drain: %d", via, st)
	}

	stopLab()
	start := time.Now()
	for !strings.Contains(logs.String(), "draining: no new") {
		if time.Since(start) > 10*time.Second {
			t.Fatalf("no drain line:\n%s", logs.String())
		}
		time.Sleep(10 * time.Millisecond)
	}
	// The drain line comes just before the gateways start to drain.
	for st := status(); st != http.StatusServiceUnavailable; st = status() {
		if st != http.StatusOK || time.Since(start) > 10*time.Second {
			t.Fatalf("health of %s while it drains: %d, want 503", via, st)
		}
		time.Sleep(10 * time.Millisecond)
	}
	for seen := w.Stats().Updates; w.Stats().Updates < seen+1; time.Sleep(20 * time.Millisecond) {
		if st := w.Stats(); st.Err != nil || ctx.Err() != nil {
			t.Fatalf("the desktop while the lab drains: %v %v", st.Err, ctx.Err())
		}
	}
	if err := s.EchoUDP(ctx, 4172, 10, 500); err != nil {
		t.Fatalf("UDP echo while the lab drains: %v", err)
	}
	if cut := drainEvents(events, client.EventCut); cut {
		t.Fatal("the session was cut before the drain's deadline")
	}
	select {
	case <-served:
	case <-time.After(20 * time.Second):
		t.Fatal("the lab still runs 20s after a 4s drain began")
	}
	if took := time.Since(start); took < 4*time.Second {
		t.Fatalf("the drain ended after %v, before its 4s deadline, with a session open", took)
	}
	if !strings.Contains(logs.String(), "drain timed out: gateway "+via) {
		t.Fatalf("no timeout line for %s:\n%s", via, logs.String())
	}
	waitEvent(t, events, client.EventCut, 10*time.Second)
}

// drainEvents empties events and reports whether one of kind was among them.
func drainEvents(events <-chan client.Event, kind client.EventKind) bool {
	seen := false
	for {
		select {
		case e := <-events:
			seen = seen || e.Kind == kind
		default:
			return seen
		}
	}
}

// An admin drains the gateway a session runs through, from the admin API as `frontdoor admin
// health GW drain` does: the gateway's health port answers 503 (every front door's probes see
// it), its verdict turns draining, the session keeps going and new launches are not sent to
// it; down keeps it in drain mode, auto lifts it. Bad requests get clear errors.
func TestAdminDrainsAGatewayAndLiftsIt(t *testing.T) {
	l, _ := startLab(t)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	launcher := func(user string) *client.Launcher {
		return &client.Launcher{Name: "desktop.vdi.lab.test", DNSServer: "127.41.0.1:5353", User: user, Password: "lab",
			Resource: "desktop", Endpoint: user + "-laptop", RootCAs: l.CA().Pool()}
	}
	s, _, _, events := openSession(ctx, t, l, launcher("alice"), client.Options{})
	via, _ := s.Via()
	override := func(user, gw, o string) int {
		t.Helper()
		return statusOf(t, adminAPI(t, l, user).Override(ctx, gw, o))
	}
	waitVerdict := func(want string) {
		t.Helper()
		for v := verdict(t, l, via); v != want; v = verdict(t, l, via) {
			if ctx.Err() != nil {
				t.Fatalf("gateway %s is %v, want %v", via, v, want)
			}
			time.Sleep(20 * time.Millisecond)
		}
	}
	for _, bad := range []struct {
		user, gw, o string
		want        int
	}{
		{"alice", via, "drain", http.StatusUnauthorized}, // not an admin
		{"admin", "gw-nowhere", "drain", http.StatusNotFound},
		{"admin", via, "sideways", http.StatusBadRequest},
	} {
		if code := override(bad.user, bad.gw, bad.o); code != bad.want {
			t.Fatalf("%s overriding %s with %s: %d, want %d", bad.user, bad.gw, bad.o, code, bad.want)
		}
	}
	if st := gatewayHealth(t, l, via); st != http.StatusOK {
		t.Fatalf("%s's health port after refused overrides: %d", via, st)
	}

	// The node that hosts the gateway sets its drain mode when the override reaches it
	// through the site database, a moment after the admin API has answered.
	waitHealth := func(what string, want int) {
		t.Helper()
		testkit.WaitFor(t, fmt.Sprintf("%s's health port %s answering %d", via, what, want), func() bool { return gatewayHealth(t, l, via) == want })
	}
	if code := override("admin", via, "drain"); code != http.StatusOK {
		t.Fatalf("drain %s: %d", via, code)
	}
	waitHealth("in drain mode", http.StatusServiceUnavailable)
	waitVerdict("draining")
	if _, err := s.CheckDesktop(ctx); err != nil {
		t.Fatalf("the desktop through the drained gateway: %v", err)
	}
	_, d2, _, _ := openSession(ctx, t, l, launcher("dave"), client.Options{})
	if len(d2.Gateways) == 0 {
		t.Fatalf("a launch during the drain got no gateways: %+v", d2)
	}
	for _, g := range d2.Gateways {
		if g.Name == via {
			t.Fatalf("a launch during the drain was offered the drained gateway %s: %+v", via, d2.Gateways)
		}
	}
	if code := override("admin", via, "down"); code != http.StatusOK {
		t.Fatalf("down %s: %d", via, code)
	}
	waitVerdict("down")
	if st := gatewayHealth(t, l, via); st != http.StatusServiceUnavailable {
		t.Fatalf("%s's health port forced down: %d, want 503 (still in drain mode)", via, st)
	}
	if code := override("admin", via, "auto"); code != http.StatusOK {
		t.Fatalf("auto %s: %d", via, code)
	}
	waitHealth("after auto", http.StatusOK)
	waitVerdict("up")
	if drainEvents(events, client.EventCut) {
		t.Fatal("the session was cut by the drain")
	}
}

// gatewayHealth returns the status of HEAD /favicon.ico on the health port of the lab's
// gateway name.
func gatewayHealth(t *testing.T, l *Lab, name string) int {
	t.Helper()
	var addr string
	for _, g := range l.Config.Gateways {
		if g.Name == name {
			addr = net.JoinHostPort(g.Address.String(), fmt.Sprint(g.Ports[0].Port))
		}
	}
	hc := &http.Client{Timeout: 5 * time.Second, Transport: &http.Transport{TLSClientConfig: l.TLSClientConfig(), DisableKeepAlives: true}}
	req, _ := http.NewRequest(http.MethodHead, "https://"+addr+"/favicon.ico", nil)
	resp, err := hc.Do(req)
	if err != nil {
		t.Fatalf("health of %s: %v", name, err)
	}
	resp.Body.Close()
	return resp.StatusCode
}
