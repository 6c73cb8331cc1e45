package client

import (
	"bytes"
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"net"
	"net/netip"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/frontdoor-vdi/frontdoor/internal/rfb"
	"github.com/frontdoor-vdi/frontdoor/internal/testkit"
	"github.com/frontdoor-vdi/frontdoor/ticket"
)

func (s *site) open(t *testing.T, d *Descriptor, ev *events, relaunch func(context.Context) (*Descriptor, string, error)) *Session {
	t.Helper()
	// A generous keepalive timeout: a busy test machine must not look like a dead gateway.
	o := Options{Descriptor: d, RootCAs: s.pool, Channels: s.channels(), Relaunch: relaunch, Logger: quiet, KeepaliveTimeout: 5 * time.Second}
	if ev != nil {
		o.OnEvent = ev.on
	}
	sess, err := Open(ctxT(t), o)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { sess.Close() })
	return sess
}

// hasLine reports whether the desktop drew line.
func hasLine(lines []string, line string) bool { return slices.Contains(lines, line) }

func TestTheDesktopAndUDPThroughAGateway(t *testing.T) {
	s := newSite(t)
	s.startGateway("gw-a", gwA)
	ev := newEvents()
	sess := s.open(t, s.descriptor("s-1", ModeGateway, "gw-a"), ev, nil)
	if up := ev.wait(t, EventUp); up.Via != "gw-a" || up.Ticket != "launch" || up.Session != "s-1" {
		t.Fatalf("up event %+v, want via gw-a with the launch ticket", up)
	}
	ctx := ctxT(t)
	// A viewer stays connected while another one reads the desktop: each has a stream, and
	// so a handshake, of its own.
	c, err := sess.Attach(ctx, s.port)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	v, err := rfb.NewClient(c)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(v.Name(), "s-1") {
		t.Errorf("the desktop's name %q does not name the session", v.Name())
	}
	dc, err := sess.CheckDesktop(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if !hasLine(dc.Lines, "session s-1") || !hasLine(dc.Lines, "path gw-a") || !hasLine(dc.Lines, "machine vda-1") {
		t.Errorf("the desktop drew %q, want the session, the machine and the gateway", dc.Lines)
	}
	if err := sess.EchoUDP(ctx, s.port, 50, 1200); err != nil {
		t.Fatal(err)
	}
	if name, addr := sess.Via(); name != "gw-a" || addr != gwA {
		t.Fatalf("via %s %s, want gw-a %s", name, addr, gwA)
	}
	testkit.WaitFor(t, "the gateway to hold the viewer's channel and the UDP flow", func() bool { return s.gws["gw-a"].Channels() == 2 })
}

func TestDirectModeTalksToTheMachine(t *testing.T) {
	s := newSite(t)
	ev := newEvents()
	sess := s.open(t, s.descriptor("s-d", ModeDirect), ev, nil)
	if up := ev.wait(t, EventUp); up.Via != ModeDirect || up.Address != machineIP {
		t.Fatalf("up event %+v, want direct to %s", up, machineIP)
	}
	ctx := ctxT(t)
	dc, err := sess.CheckDesktop(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if !hasLine(dc.Lines, "session s-d") || !hasLine(dc.Lines, "path direct") {
		t.Errorf("the desktop drew %q, want the session and the direct path", dc.Lines)
	}
	if err := sess.EchoUDP(ctx, s.port, 20, 500); err != nil {
		t.Fatal(err)
	}
}

func TestAGatewayClosedMidSessionReconnectsThroughTheNextWithTheReconnectTicket(t *testing.T) {
	s := newSite(t)
	s.startGateway("gw-a", gwA)
	s.startGateway("gw-b", gwB)
	ev := newEvents()
	sess := s.open(t, s.descriptor("s-2", ModeGateway, "gw-a", "gw-b"), ev, nil)
	ev.wait(t, EventUp)
	ctx := ctxT(t)
	if _, err := sess.CheckDesktop(ctx); err != nil {
		t.Fatal(err)
	}

	s.stops["gw-a"]() // shut down: its channels are cut
	cut := ev.wait(t, EventCut)
	if cut.Via != "gw-a" || cut.Reason == "" {
		t.Fatalf("cut event %+v, want via gw-a with a reason", cut)
	}
	back := ev.wait(t, EventBack)
	if back.Via != "gw-b" || back.Address != gwB || !back.SameSession || back.Session != "s-2" || back.Ticket != "reconnect" || back.Relaunched {
		t.Fatalf("back event %+v, want the same session via gw-b with the reconnect ticket", back)
	}
	if back.Gap <= 0 || back.Gap != back.At.Sub(cut.At) {
		t.Fatalf("gap %v, want back.At-cut.At = %v", back.Gap, back.At.Sub(cut.At))
	}
	if err := sess.WaitUp(ctx); err != nil {
		t.Fatal(err)
	}
	if _, err := sess.CheckDesktop(ctx); err != nil {
		t.Fatal(err)
	}
	if err := sess.EchoUDP(ctx, s.port, 20, 500); err != nil {
		t.Fatal(err)
	}
	var kinds []EventKind
	for _, e := range sess.Timeline() {
		if e.Kind != EventAttempt {
			kinds = append(kinds, e.Kind)
		}
	}
	if want := []EventKind{EventUp, EventCut, EventBack}; !equalKinds(kinds, want) {
		t.Fatalf("timeline %v, want %v", kinds, want)
	}
}

func equalKinds(a, b []EventKind) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

func TestAllGatewaysGoneMeansANewLaunchThroughAnotherFrontDoor(t *testing.T) {
	s := newSite(t)
	s.startGateway("gw-a", gwA)
	s.startGateway("gw-b", gwB)
	// Front door 1 offers gw-a only; front door 2, asked after the cut, offers gw-b and finds
	// the disconnected session again (broker step 2): same session, new tickets.
	fds, port := s.startFrontDoors(func(ip string) *Descriptor {
		if ip == fd1 {
			return s.descriptor("s-3", ModeGateway, "gw-a")
		}
		return s.descriptor("s-3", ModeGateway, "gw-b")
	}, fd1, fd2)
	dnsAddr := startDNS(t, "desk.test", func() []string { return []string{fd1, fd2} })
	l := &Launcher{Name: "desk.test", DNSServer: dnsAddr, Port: port, User: "alice", Password: "secret", Resource: "desktop", RootCAs: s.pool}
	ctx := ctxT(t)
	d, via, err := l.Launch(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if via.String() != fd1 {
		t.Fatalf("first launch through %s, want %s", via, fd1)
	}
	ev := newEvents()
	sess := s.open(t, d, ev, l.Relaunch)
	ev.wait(t, EventUp)

	fds[0].srv.Close()
	s.stops["gw-a"]()
	ev.wait(t, EventCut)
	re := ev.wait(t, EventRelaunch)
	if re.FrontDoor != fd2 {
		t.Fatalf("relaunch through %q, want %s", re.FrontDoor, fd2)
	}
	back := ev.wait(t, EventBack)
	if !back.Relaunched || back.FrontDoor != fd2 || !back.SameSession || back.Via != "gw-b" || back.Ticket != "launch" {
		t.Fatalf("back event %+v, want a relaunch through %s, same session, via gw-b with its launch ticket", back, fd2)
	}
	if got := sess.Descriptor().Gateways[0].Name; got != "gw-b" {
		t.Fatalf("descriptor after relaunch offers %s, want gw-b", got)
	}
	if _, err := sess.CheckDesktop(ctx); err != nil {
		t.Fatal(err)
	}
	if fds[1].launches != 1 {
		t.Fatalf("front door 2 saw %d launches, want 1", fds[1].launches)
	}
}

func TestExposeGivesEveryViewerConnectionItsOwnHandshake(t *testing.T) {
	s := newSite(t)
	s.startGateway("gw-a", gwA)
	sess := s.open(t, s.descriptor("s-4", ModeGateway, "gw-a"), nil, nil)
	addr, err := sess.Expose("127.0.0.1:0", s.port)
	if err != nil {
		t.Fatal(err)
	}
	greet := func() net.Conn {
		t.Helper()
		c, err := net.Dial("tcp", addr.String())
		if err != nil {
			t.Fatal(err)
		}
		c.SetDeadline(time.Now().Add(20 * time.Second))
		b := make([]byte, 12)
		if _, err := io.ReadFull(c, b); err != nil || string(b) != "RFB 003.008\n" {
			t.Fatalf("a viewer connection read %q, %v; want the server's greeting", b, err)
		}
		return c
	}
	c1, c2 := greet(), greet() // two at once
	c1.Close()
	c3 := greet() // a viewer that comes back starts afresh
	c2.Close()
	c3.Close()
}

// startMuteMachine runs, on 127.0.70.9, a plain UDP gateway and machine in one that admits
// any ticket and echoes until muted.
func startMuteMachine(t *testing.T) (*net.UDPConn, func(bool)) {
	t.Helper()
	c, err := net.ListenUDP("udp", &net.UDPAddr{IP: net.ParseIP("127.0.70.9")})
	if err != nil {
		t.Fatal(err)
	}
	var muted atomic.Bool
	done := make(chan struct{})
	go func() {
		defer close(done)
		buf := make([]byte, 2048)
		for {
			n, from, err := c.ReadFromUDPAddrPort(buf)
			if err != nil {
				return
			}
			switch {
			case muted.Load():
			case bytes.HasPrefix(buf[:n], []byte("FDT1")):
				c.WriteToUDPAddrPort([]byte("FDT1OK"), from)
			default:
				c.WriteToUDPAddrPort(buf[:n], from)
			}
		}
	}()
	t.Cleanup(func() { c.Close(); <-done })
	return c, muted.Store
}

func TestASilentUDPFlowIsACutAndTheSessionComesBack(t *testing.T) {
	conn, mute := startMuteMachine(t)
	port := uint16(conn.LocalAddr().(*net.UDPAddr).Port)
	// A gateway without a QUIC port, which takes plain UDP flows.
	d := &Descriptor{SessionID: "s-5", Mode: ModeGateway, Machine: "vda-9", Gateways: []GatewayEndpoint{{Name: "gw-9", Addresses: []netip.Addr{netip.MustParseAddr("127.0.70.9")}}},
		LaunchTicket: "launch-token", ReconnectTicket: "reconnect-token"}
	ev := newEvents()
	sess, err := Open(ctxT(t), Options{Descriptor: d, Channels: []Channel{{Port: port, Proto: "udp"}}, OnEvent: ev.on, Logger: quiet})
	if err != nil {
		t.Fatal(err)
	}
	defer sess.Close()
	ev.wait(t, EventUp)
	mute(true)
	cut := ev.wait(t, EventCut)
	if want := "no keepalive echo"; !bytes.Contains([]byte(cut.Reason), []byte(want)) {
		t.Fatalf("cut reason %q, want it to say %q", cut.Reason, want)
	}
	ev.wait(t, EventAttempt) // the machine stays silent for a while
	mute(false)
	back := ev.wait(t, EventBack)
	if back.Ticket != "reconnect" || !back.SameSession {
		t.Fatalf("back event %+v, want the same session with the reconnect ticket", back)
	}
	if err := sess.EchoUDP(ctxT(t), port, 5, 100); err != nil {
		t.Fatal(err)
	}
}

func TestOpenFailsWhenNoRouteAnswers(t *testing.T) {
	s := newSite(t)
	_, err := Open(ctxT(t), Options{Descriptor: s.descriptor("s-6", ModeGateway, "gw-a", "gw-b"), RootCAs: s.pool,
		Channels: s.channels(), Logger: quiet})
	if err == nil || !bytes.Contains([]byte(err.Error()), []byte("gw-b")) {
		t.Fatalf("Open: %v, want an error naming both gateways", err)
	}
}

func TestAWrongTicketIsDenied(t *testing.T) {
	s := newSite(t)
	s.startGateway("gw-a", gwA)
	d := s.descriptor("s-7", ModeGateway, "gw-a")
	d.LaunchTicket, d.ReconnectTicket = "forged", ""
	_, err := Open(ctxT(t), Options{Descriptor: d, RootCAs: s.pool, Channels: s.channels(), Logger: quiet})
	if !errors.Is(err, ErrTicketDenied) {
		t.Fatalf("Open with a forged ticket: %v, want ErrTicketDenied", err)
	}
}

func TestResolveAsksTheGivenServer(t *testing.T) {
	dnsAddr := startDNS(t, "desk.test", func() []string { return []string{fd2, fd1} })
	ctx := ctxT(t)
	got, err := Resolve(ctx, "desk.test", dnsAddr)
	if err != nil {
		t.Fatal(err)
	}
	want := []netip.Addr{netip.MustParseAddr(fd2), netip.MustParseAddr(fd1)}
	if len(got) != 2 || got[0] != want[0] || got[1] != want[1] {
		t.Fatalf("Resolve = %v, want %v", got, want)
	}
	if _, err := Resolve(ctx, "nowhere.test", dnsAddr); err == nil {
		t.Fatal("Resolve of an unknown name succeeded")
	}
	if got, err := Resolve(ctx, "127.0.0.9", dnsAddr); err != nil || got[0] != netip.MustParseAddr("127.0.0.9") {
		t.Fatalf("Resolve of an IP literal = %v, %v", got, err)
	}
}

func TestLaunchErrorsSayWhy(t *testing.T) {
	s := newSite(t)
	_, port := s.startFrontDoors(func(string) *Descriptor { return s.descriptor("s-8", ModeGateway, "gw-a") }, fd1)
	url := "https://" + fd1 + ":" + strconv.Itoa(int(port))
	ctx := ctxT(t)
	d, err := Launch(ctx, url, "alice", "secret", "desktop", "laptop-1", s.pool)
	if err != nil || d.SessionID != "s-8" || d.Mode != ModeGateway || len(d.Gateways) != 1 || d.LaunchTicket == "" {
		t.Fatalf("Launch = %+v, %v", d, err)
	}
	if _, err := Launch(ctx, url, "alice", "wrong", "desktop", "", s.pool); !errors.Is(err, ErrUnauthorized) {
		t.Fatalf("bad password: %v, want ErrUnauthorized", err)
	}
	_, err = Launch(ctx, url, "alice", "secret", "forbidden", "", s.pool)
	var de *DeniedError
	if !errors.Is(err, ErrDenied) || !errors.As(err, &de) || de.Reason != "alice is not entitled to forbidden" || len(de.Trace) != 1 {
		t.Fatalf("denied launch: %v, want ErrDenied with the reason and trace", err)
	}
	if _, err := Launch(ctx, url, "alice", "secret", "desktop", "", nil); err == nil {
		t.Fatal("Launch trusted an unknown CA")
	}
}

func TestASessionGivesUpWhenNothingAnswers(t *testing.T) {
	s := newSite(t)
	s.startGateway("gw-a", gwA)
	ev := newEvents()
	sess, err := Open(ctxT(t), Options{Descriptor: s.descriptor("s-9", ModeGateway, "gw-a"), RootCAs: s.pool, Channels: s.channels(),
		OnEvent: ev.on, Logger: quiet, GiveUpAfter: 300 * time.Millisecond,
		Relaunch: func(context.Context) (*Descriptor, string, error) { return nil, "", errors.New("no front door") }})
	if err != nil {
		t.Fatal(err)
	}
	defer sess.Close()
	ev.wait(t, EventUp)
	s.stops["gw-a"]()
	ev.wait(t, EventCut)
	lost := ev.wait(t, EventLost)
	select {
	case <-sess.Done():
	case <-time.After(20 * time.Second):
		t.Fatal("Done not closed after the session was lost")
	}
	if !errors.Is(sess.Err(), ErrLost) || lost.Gap < 300*time.Millisecond {
		t.Fatalf("Err %v, lost after %v; want ErrLost after at least 300ms", sess.Err(), lost.Gap)
	}
	if _, err := sess.Attach(ctxT(t), s.port); !errors.Is(err, ErrLost) {
		t.Fatalf("Attach on a lost session: %v, want ErrLost", err)
	}
}

// Every channel a gateway admits rotates the session's reconnect ticket: the client comes
// back again and again, each time with the last ticket it was handed, and a ticket it has used
// opens nothing more.
func TestEveryReconnectUsesTheLastRotatedTicket(t *testing.T) {
	s := newSite(t)
	ips := map[string]string{"gw-a": gwA, "gw-b": gwB}
	s.startGateway("gw-a", gwA)
	s.startGateway("gw-b", gwB)
	d := s.descriptor("s-rot", ModeGateway, "gw-a", "gw-b")
	ev := newEvents()
	sess, err := Open(ctxT(t), Options{Descriptor: d, RootCAs: s.pool, Channels: s.channels(), OnEvent: ev.on, Logger: quiet})
	if err != nil {
		t.Fatal(err)
	}
	defer sess.Close()
	ev.wait(t, EventUp)
	held := []string{d.ReconnectTicket}
	for round := range 3 {
		cur := sess.Descriptor().ReconnectTicket
		if slices.Contains(held, cur) {
			t.Fatalf("round %d: the client holds a reconnect ticket it had before", round)
		}
		held = append(held, cur)
		via, _ := sess.Via()
		s.stops[via]()
		back := ev.wait(t, EventBack)
		if back.Ticket != "reconnect" || !back.SameSession || back.Via == via {
			t.Fatalf("round %d: back %+v, want the same session through the other gateway", round, back)
		}
		if err := sess.EchoUDP(ctxT(t), s.port, 3, 64); err != nil {
			t.Fatal(err)
		}
		s.startGateway(via, ips[via])
	}
	// A ticket the client used (the one it reconnected with first) is refused.
	c, err := tls.Dial("tcp", net.JoinHostPort(gwA, fmt.Sprint(s.port)), &tls.Config{RootCAs: s.pool, ServerName: gwA})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	c.SetDeadline(time.Now().Add(5 * time.Second))
	ticket.WriteFrame(c, held[1])
	st := []byte{ticket.StatusOK}
	io.ReadFull(c, st)
	if st[0] != ticket.StatusDenied {
		t.Fatalf("a used reconnect ticket: status %d, want denied", st[0])
	}
}
