package lab

import (
	"context"
	"io"
	"log/slog"
	"net/netip"
	"syscall"
	"testing"
	"time"

	"github.com/frontdoor-vdi/frontdoor/broker"
	"github.com/frontdoor-vdi/frontdoor/client"
)

// TestUserPathSurvivesGatewayLossAndToggle is the whole path a user walks: DNS → launch → TCP
// and UDP echo through the gateway with checksums → the gateway is killed → the client is back
// in the SAME session through another gateway → the operator switches the secure gateway off →
// the next launch is direct and survives its front door being stopped.
func TestUserPathSurvivesGatewayLossAndToggle(t *testing.T) {
	l, _ := startLab(t)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	pool := l.CA().Pool()
	quiet := slog.New(slog.NewTextHandler(io.Discard, nil))
	launcher := func(user string) *client.Launcher {
		return &client.Launcher{Name: "desktop.vdi.lab.test", DNSServer: "127.41.0.1:5353", User: user, Password: "lab",
			Resource: "desktop", Endpoint: user + "-laptop", RootCAs: pool}
	}

	// DNS and launch.
	s, desc, fd, events := openSession(ctx, t, l, launcher("alice"), client.Options{})
	if desc.Mode != client.ModeGateway {
		t.Fatalf("first launch mode %s, want gateway", desc.Mode)
	}
	if _, err := s.CheckDesktop(ctx); err != nil {
		t.Fatalf("TCP echo through the gateway: %v", err)
	}
	if err := s.EchoUDP(ctx, 4172, 20, 1000); err != nil {
		t.Fatalf("UDP echo through the gateway: %v", err)
	}
	via, _ := s.Via()
	t.Logf("launched %s through front door %s, session on %s via %s", desc.SessionID, fd, desc.Machine, via)

	// The gateway's front door is killed (its power off): the client comes back by itself,
	// same session, another gateway.
	if err := l.Signal(nodeOf(t, l, via), syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	back := waitEvent(t, events, client.EventBack, 20*time.Second)
	if !back.SameSession || back.Relaunched || back.Via == via {
		t.Fatalf("back: %+v; want the same session through another gateway", back)
	}
	if _, err := s.CheckDesktop(ctx); err != nil {
		t.Fatalf("TCP echo after the reconnect: %v", err)
	}
	waitState(t, l, desc.SessionID, broker.StateConnected)

	// The operator switches the secure gateway off through the admin API.
	if err := adminAPI(t, l).SecureGateway(ctx, "", false); err != nil {
		t.Fatalf("toggle: %v", err)
	}
	// Running sessions keep their mode.
	if st, _ := l.Session(ctx, desc.SessionID); st.Mode != "gateway" {
		t.Errorf("running session switched to %s mode", st.Mode)
	}

	// The next launch is direct and survives its front door being stopped.
	ln2 := launcher("dave")
	d2, fd2, err := ln2.Launch(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if d2.Mode != client.ModeDirect {
		t.Fatalf("launch after the toggle: mode %s, want direct", d2.Mode)
	}
	events2 := make(chan client.Event, 64)
	s2, err := client.Open(ctx, client.Options{Descriptor: d2, RootCAs: pool, KeepaliveTimeout: 3 * time.Second, Logger: quiet,
		OnEvent: func(e client.Event) {
			select {
			case events2 <- e:
			default:
			}
		}})
	if err != nil {
		t.Fatal(err)
	}
	defer s2.Close()
	if err := s2.WaitUp(ctx); err != nil {
		t.Fatal(err)
	}
	var node string
	for _, n := range l.Config.Nodes {
		for _, li := range n.Listeners {
			if li.Kind == "launch" && li.Address.Addr() == fd2 {
				node = n.Name
			}
		}
	}
	if node == "" {
		t.Fatalf("no node serves front door %s", fd2)
	}
	if err := l.Signal(node, syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	for i := 0; i < 5; i++ {
		if _, err := s2.CheckDesktop(ctx); err != nil {
			t.Fatalf("direct session after its front door %s stopped: %v", node, err)
		}
		time.Sleep(200 * time.Millisecond)
	}
	for {
		select {
		case e := <-events2:
			if e.Kind == client.EventCut {
				t.Fatalf("the direct session was cut when its front door stopped: %v", e)
			}
			continue
		default:
		}
		break
	}
}

// openSession launches through ln (DNS, then the launch API) and opens the session with o's
// settings, the lab's CA, ln's relaunch and a 3s keepalive timeout, and waits until it is up;
// events receives the client's events (while its buffer has room). The session closes when
// the test ends.
func openSession(ctx context.Context, t *testing.T, l *Lab, ln *client.Launcher, o client.Options) (*client.Session, *client.Descriptor, netip.Addr, <-chan client.Event) {
	t.Helper()
	desc, fd, err := ln.Launch(ctx)
	if err != nil {
		t.Fatal(err)
	}
	events := make(chan client.Event, 64)
	o.Descriptor, o.RootCAs, o.Relaunch = desc, l.CA().Pool(), ln.Relaunch
	o.Logger, o.KeepaliveTimeout = slog.New(slog.NewTextHandler(io.Discard, nil)), 3*time.Second
	o.OnEvent = func(e client.Event) {
		select {
		case events <- e:
		default:
		}
	}
	s, err := client.Open(ctx, o)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	if err := s.WaitUp(ctx); err != nil {
		t.Fatal(err)
	}
	return s, desc, fd, events
}

func waitEvent(t *testing.T, ch <-chan client.Event, kind client.EventKind, d time.Duration) client.Event {
	t.Helper()
	timeout := time.After(d)
	for {
		select {
		case e := <-ch:
			if e.Kind == kind {
				return e
			}
		case <-timeout:
			t.Fatalf("no %s event within %s", kind, d)
		}
	}
}

// TestQUICTransportThroughTheLab carries a session's channels over QUIC to the gateways'
// quic_port and checks that the broker sees the session connected.
func TestQUICTransportThroughTheLab(t *testing.T) {
	l, _ := startLab(t)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	ln := &client.Launcher{Name: "desktop.vdi.lab.test", DNSServer: "127.41.0.1:5353", User: "bob", Password: "lab",
		Resource: "desktop", Endpoint: "bob-tablet", RootCAs: l.CA().Pool()}
	s, desc, _, _ := openSession(ctx, t, l, ln, client.Options{QUIC: &client.QUICOptions{Port: 4433}})
	if _, err := s.CheckDesktop(ctx); err != nil {
		t.Fatalf("TCP channel over QUIC: %v", err)
	}
	if err := s.EchoUDP(ctx, 4172, 10, 800); err != nil {
		t.Fatalf("UDP channel over QUIC: %v", err)
	}
	waitState(t, l, desc.SessionID, broker.StateConnected)
}

// TestClosingTheClientDisconnectsTheSession: a client that closes its channels (TLS
// close_notify, QUIC's CONNECTION_CLOSE) makes its session disconnected within moments
// (waitState's 5s), in gateway mode and in direct mode, not after the 30s that an idle UDP
// flow takes to time out.
func TestClosingTheClientDisconnectsTheSession(t *testing.T) {
	l, _ := startLab(t)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	launcher := func(user string) *client.Launcher {
		return &client.Launcher{Name: "desktop.vdi.lab.test", DNSServer: "127.41.0.1:5353", User: user, Password: "lab",
			Resource: "desktop", Endpoint: user + "-laptop", RootCAs: l.CA().Pool()}
	}
	check := func(user, mode string) {
		s, desc, _, _ := openSession(ctx, t, l, launcher(user), client.Options{})
		if desc.Mode != mode {
			t.Fatalf("%s's launch: mode %s, want %s", user, desc.Mode, mode)
		}
		if err := s.EchoUDP(ctx, 4172, 3, 100); err != nil {
			t.Fatal(err)
		}
		waitState(t, l, desc.SessionID, broker.StateConnected)
		s.Close()
		waitState(t, l, desc.SessionID, broker.StateDisconnected)
	}
	check("alice", client.ModeGateway)
	if err := adminAPI(t, l).SecureGateway(ctx, "", false); err != nil {
		t.Fatalf("toggle: %v", err)
	}
	check("dave", client.ModeDirect)
}
