package lab

import (
	"context"
	"encoding/hex"
	"net/netip"
	"os"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/frontdoor-vdi/frontdoor/client"
	"github.com/frontdoor-vdi/frontdoor/configs"
	"github.com/frontdoor-vdi/frontdoor/internal/testkit"
)

// establishedTo counts this host's established TCP connections to port at one of the
// gateways' addresses (IPv4, /proc/net/tcp).
func establishedTo(t *testing.T, l *Lab, port uint16) int {
	t.Helper()
	b, err := os.ReadFile("/proc/net/tcp")
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, line := range strings.Split(string(b), "\n")[1:] {
		f := strings.Fields(line)
		if len(f) < 4 || f[3] != "01" { // ESTABLISHED
			continue
		}
		a, p, _ := strings.Cut(f[2], ":")
		ab, err1 := hex.DecodeString(a)
		pb, err2 := hex.DecodeString(p)
		if err1 != nil || err2 != nil || len(ab) != 4 || len(pb) != 2 || uint16(pb[0])<<8|uint16(pb[1]) != port {
			continue
		}
		addr := netip.AddrFrom4([4]byte{ab[3], ab[2], ab[1], ab[0]})
		if slices.ContainsFunc(l.Config.Gateways, func(g configs.Gateway) bool { return g.Address == addr }) {
			n++
		}
	}
	return n
}

// A native client may carry its channels over WebSockets on the gateways' HTTPS port, as a
// browser does (connect --websocket): the desktop reads through it, nothing reaches the
// gateways' TLS channel port, and the session comes back through the next gateway's HTTPS
// port when its gateway's node is killed.
func TestClientChannelsOverWebSocket(t *testing.T) {
	testkit.Site(t)
	l, _ := startLab(t)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	ln := &client.Launcher{Name: "desktop.vdi.lab.test", DNSServer: "127.41.0.1:5353", User: "carol", Password: "lab",
		Resource: "desktop", Endpoint: "carol-laptop", RootCAs: l.CA().Pool()}
	s, desc, _, events := openSession(ctx, t, l, ln, client.Options{WebSocket: true})
	dc, err := s.CheckDesktop(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Contains(dc.Lines, "session "+desc.SessionID) {
		t.Fatalf("the desktop reads %q", dc.Lines)
	}
	// The site's health checks connect to the same ports now and then, for a moment: what
	// stays is the session's. Over ten looks a tenth of a second apart: none of the TLS
	// channel port's at some look, one of the HTTPS port's at some.
	tls, wss := 1<<30, 0
	for range 10 {
		tls, wss = min(tls, establishedTo(t, l, 8443)), max(wss, establishedTo(t, l, 10443))
		time.Sleep(100 * time.Millisecond)
	}
	if tls > 0 {
		t.Errorf("%d connections to the gateways' TLS channel port 8443 stay, want none: the channels ride WebSockets", tls)
	}
	if wss == 0 {
		t.Errorf("no connection to a gateway's HTTPS port 10443")
	}
	via, _ := s.Via()
	if err := l.Signal(nodeOf(t, l, via), syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	back := waitEvent(t, events, client.EventBack, 20*time.Second)
	if !back.SameSession || back.Via == via {
		t.Fatalf("back: %+v; want the same session through another gateway", back)
	}
	if dc, err := s.CheckDesktop(ctx); err != nil || !slices.Contains(dc.Lines, "session "+desc.SessionID) {
		t.Fatalf("after the gateway's loss the desktop reads %q (%v)", dc.Lines, err)
	}
}
