package lab

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/frontdoor-vdi/frontdoor/broker"
	"github.com/frontdoor-vdi/frontdoor/client"
)

// TestGatewayDrainKeepsTheSessionThenHandsItOn drains the gateway a session runs through,
// as a node told to stop does: the session's channels keep flowing while health marks the
// gateway ineligible, and when the drain's deadline cuts them the client comes back in the
// same session through another gateway.
func TestGatewayDrainKeepsTheSessionThenHandsItOn(t *testing.T) {
	l, _ := startLab(t)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	ln := &client.Launcher{Name: "desktop.vdi.lab.test", DNSServer: "127.41.0.1:5353", User: "alice", Password: "lab",
		Resource: "desktop", Endpoint: "alice-laptop", RootCAs: l.Runtime.CA.Pool()}
	s, desc, _, events := openSession(ctx, t, l, ln, client.Options{})
	if desc.Mode != client.ModeGateway {
		t.Fatalf("launch mode %s, want gateway", desc.Mode)
	}
	via, _ := s.Via()
	gw := l.Runtime.Gateways[via]
	if gw == nil {
		t.Fatalf("session via %q, which the lab does not run", via)
	}
	if gw.Channels() == 0 {
		t.Fatalf("gateway %s counts no channel of the session", via)
	}

	// The drain: health steers away from the gateway while the session carries on.
	dctx, stop := context.WithTimeout(context.Background(), 4*time.Second)
	defer stop()
	drained := make(chan error, 1)
	go func() { drained <- gw.Shutdown(dctx) }()
	for l.Runtime.Health.Eligible(via) {
		if ctx.Err() != nil {
			t.Fatalf("gateway %s still eligible while draining", via)
		}
		time.Sleep(20 * time.Millisecond)
	}
	if err := s.EchoTCP(ctx, 8443, 64<<10); err != nil {
		t.Fatalf("TCP echo through the draining gateway: %v", err)
	}
	if err := s.EchoUDP(ctx, 4172, 10, 500); err != nil {
		t.Fatalf("UDP echo through the draining gateway: %v", err)
	}
	select {
	case e := <-events:
		if e.Kind == client.EventCut {
			t.Fatalf("the session was cut before the drain's deadline: %v", e)
		}
	default:
	}

	// The deadline cuts the channels; the client comes back through another gateway.
	if err := <-drained; err == nil || !strings.Contains(err.Error(), "cut") {
		t.Fatalf("Shutdown with the session's channels open: %v, want them cut", err)
	}
	back := waitEvent(t, events, client.EventBack, 20*time.Second)
	if !back.SameSession || back.Relaunched || back.Via == via {
		t.Fatalf("back: %+v; want the same session through another gateway", back)
	}
	if err := s.EchoTCP(ctx, 8443, 64<<10); err != nil {
		t.Fatalf("TCP echo after the hand-over: %v", err)
	}
	waitState(t, l, desc.SessionID, broker.StateConnected)
}
