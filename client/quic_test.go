package client

import (
	"context"
	"errors"
	"net"
	"net/netip"
	"strconv"
	"testing"
	"time"

	"github.com/frontdoor-vdi/frontdoor/gateway"
	"github.com/frontdoor-vdi/frontdoor/gateway/gatewaytest"
)

// startQUICGateways runs a QUIC gateway on each ip at one common port and returns the port and
// a stop function per ip.
func (s *site) startQUICGateways(ips ...string) (uint16, map[string]func()) {
	t := s.t
	t.Helper()
	for try := 0; try < 20; try++ {
		port := "0"
		var gs []*gateway.QUIC
		for _, ip := range ips {
			g, err := gateway.ListenQUIC(gateway.QUICOptions{Address: net.JoinHostPort(ip, port), TLS: s.tls, Verifier: s.gwVer, Logger: quiet, MachineTLS: machineTLS("gw-quic"),
				Machine: func(n string) (netip.Addr, bool) { return netip.MustParseAddr(machineIP), n == "vda-1" }})
			if err != nil {
				break
			}
			gs = append(gs, g)
			s.quic[ip] = g
			port = strconv.Itoa(g.Addr().(*net.UDPAddr).Port)
		}
		if len(gs) < len(ips) {
			for _, g := range gs {
				g.Close()
			}
			continue
		}
		stops := map[string]func(){}
		for i, g := range gs {
			stops[ips[i]] = gatewaytest.ServeQUIC(t, g)
		}
		p, _ := strconv.Atoi(port)
		return uint16(p), stops
	}
	t.Fatal("no free QUIC port")
	return 0, nil
}

func TestQUICCarriesTheChannelsAndSurvivesAnAddressChange(t *testing.T) {
	s := newSite(t)
	port, _ := s.startQUICGateways(gwA)
	g := s.quic[gwA]
	ev := newEvents()
	sess, err := Open(ctxT(t), Options{Descriptor: s.descriptor("s-q", ModeGateway, "gw-a"), RootCAs: s.pool, Channels: s.channels(),
		QUIC: &QUICOptions{Port: port, LocalAddr: "127.0.76.1:0"}, OnEvent: ev.on, Logger: quiet, KeepaliveTimeout: 5 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	defer sess.Close()
	ev.wait(t, EventUp)
	ctx := ctxT(t)
	if _, err := sess.CheckDesktop(ctx); err != nil {
		t.Fatal(err)
	}
	if err := sess.EchoUDP(ctx, s.port, 20, 800); err != nil {
		t.Fatal(err)
	}
	waitClient(t, g, "127.0.76.1")
	if err := sess.MigrateQUIC(ctx, "127.0.76.2:0"); err != nil {
		t.Fatal(err)
	}
	if m := ev.wait(t, EventMigrated); m.Session != "s-q" {
		t.Fatalf("migrated event %+v", m)
	}
	// The old address is silent now; everything flows from the new one.
	if _, err := sess.CheckDesktop(ctx); err != nil {
		t.Fatal(err)
	}
	if err := sess.EchoUDP(ctx, s.port, 20, 800); err != nil {
		t.Fatal(err)
	}
	waitClient(t, g, "127.0.76.2")
	for _, e := range sess.Timeline() {
		if e.Kind == EventCut {
			t.Fatalf("the session was cut: %s", e)
		}
	}
}

func TestQUICGatewayClosedMeansTheNextWithTheReconnectTicket(t *testing.T) {
	s := newSite(t)
	port, stops := s.startQUICGateways(gwA, gwB)
	ev := newEvents()
	sess, err := Open(ctxT(t), Options{Descriptor: s.descriptor("s-q2", ModeGateway, "gw-a", "gw-b"), RootCAs: s.pool,
		Channels: s.channels(), QUIC: &QUICOptions{Port: port}, OnEvent: ev.on, Logger: quiet, KeepaliveTimeout: 5 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	defer sess.Close()
	ev.wait(t, EventUp)
	stops[gwA]()
	ev.wait(t, EventCut)
	back := ev.wait(t, EventBack)
	if back.Via != "gw-b" || !back.SameSession || back.Ticket != "reconnect" {
		t.Fatalf("back event %+v, want the same session via gw-b with the reconnect ticket", back)
	}
	ctx := ctxT(t)
	if _, err := sess.CheckDesktop(ctx); err != nil {
		t.Fatal(err)
	}
	if err := sess.EchoUDP(ctx, s.port, 5, 100); err != nil {
		t.Fatal(err)
	}
}

func TestQUICGatewayDeniesAForgedTicket(t *testing.T) {
	s := newSite(t)
	port, _ := s.startQUICGateways(gwA)
	d := s.descriptor("s-q3", ModeGateway, "gw-a")
	d.LaunchTicket, d.ReconnectTicket = "forged", ""
	_, err := Open(ctxT(t), Options{Descriptor: d, RootCAs: s.pool, Channels: s.channels(), QUIC: &QUICOptions{Port: port}, Logger: quiet})
	if !errors.Is(err, ErrTicketDenied) {
		t.Fatalf("Open with a forged ticket over QUIC: %v, want ErrTicketDenied", err)
	}
}

// waitClient waits until the gateway's only client comes from ip.
func waitClient(t *testing.T, g *gateway.QUIC, ip string) {
	t.Helper()
	var got []netip.AddrPort
	for i := 0; i < 200; i++ {
		if got = g.Clients(); len(got) == 1 && got[0].Addr().String() == ip {
			return
		}
		time.Sleep(25 * time.Millisecond)
	}
	t.Fatalf("gateway clients %v, want one from %s", got, ip)
}

func TestQUICGatewayShutdownKeepsConnectedClientsAndRefusesNewOnes(t *testing.T) {
	s := newSite(t)
	port, _ := s.startQUICGateways(gwA)
	g := s.quic[gwA]
	sess, err := Open(ctxT(t), Options{Descriptor: s.descriptor("s-qd", ModeGateway, "gw-a"), RootCAs: s.pool,
		Channels: s.channels(), QUIC: &QUICOptions{Port: port}, Logger: quiet, KeepaliveTimeout: 5 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	defer sess.Close()
	waitClient(t, g, "127.0.0.1")
	done := make(chan error, 1)
	go func() { done <- g.Shutdown(context.Background()) }()
	// A new client is refused, the connected one carries on with new channels.
	octx, cancel := context.WithTimeout(ctxT(t), 3*time.Second)
	defer cancel()
	for {
		other, err := Open(octx, Options{Descriptor: s.descriptor("s-qd2", ModeGateway, "gw-a"), RootCAs: s.pool,
			Channels: s.channels(), QUIC: &QUICOptions{Port: port}, Logger: quiet})
		if err != nil {
			break
		}
		other.Close()
		if octx.Err() != nil {
			t.Fatal("a new client opened a session through a draining QUIC gateway")
		}
		time.Sleep(20 * time.Millisecond)
	}
	ctx := ctxT(t)
	if _, err := sess.CheckDesktop(ctx); err != nil {
		t.Fatalf("connected client while draining: %v", err)
	}
	if err := sess.EchoUDP(ctx, s.port, 5, 100); err != nil {
		t.Fatalf("connected client while draining: %v", err)
	}
	select {
	case err := <-done:
		t.Fatalf("Shutdown returned %v with a client connected", err)
	default:
	}
	sess.Close()
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("Shutdown: %v", err)
		}
	case <-time.After(15 * time.Second):
		t.Fatal("Shutdown did not return once the client left")
	}
}

// nullSessions counts nothing: the Tracker of a QUIC gateway in these tests.
type nullSessions struct{}

func (nullSessions) Active(string) bool                           { return true }
func (nullSessions) Connected(context.Context, string, string)    {}
func (nullSessions) Disconnected(context.Context, string, string) {}

func TestQUICGatewayDrainModeTakesNoNewSession(t *testing.T) {
	s := newSite(t)
	g, err := gateway.ListenQUIC(gateway.QUICOptions{Name: "gw-a", Address: net.JoinHostPort(gwA, "0"), TLS: s.tls, Verifier: s.gwVer,
		Logger: quiet, Track: gateway.NewTracker(nullSessions{}), MachineTLS: machineTLS("gw-a"),
		Machine: func(n string) (netip.Addr, bool) { return netip.MustParseAddr(machineIP), n == "vda-1" }})
	if err != nil {
		t.Fatal(err)
	}
	defer gatewaytest.ServeQUIC(t, g)()
	port := uint16(g.Addr().(*net.UDPAddr).Port)
	open := func(id string) (*Session, error) {
		return Open(ctxT(t), Options{Descriptor: s.descriptor(id, ModeGateway, "gw-a"), RootCAs: s.pool,
			Channels: s.channels(), QUIC: &QUICOptions{Port: port}, Logger: quiet, KeepaliveTimeout: 5 * time.Second})
	}
	carried, err := open("s-qd3")
	if err != nil {
		t.Fatal(err)
	}
	defer carried.Close()
	g.Drain(true)
	if _, err := carried.CheckDesktop(ctxT(t)); err != nil {
		t.Fatalf("the carried session in drain mode: %v", err)
	}
	if other, err := open("s-qd4"); !errors.Is(err, ErrTicketDenied) {
		if other != nil {
			other.Close()
		}
		t.Fatalf("a new session in drain mode: %v, want ErrTicketDenied", err)
	}
	g.Drain(false)
	other, err := open("s-qd5")
	if err != nil {
		t.Fatalf("a new session after the drain: %v", err)
	}
	other.Close()
}
