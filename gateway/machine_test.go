package gateway

import (
	"bytes"
	"context"
	"crypto/rand"
	"crypto/tls"
	"encoding/hex"
	"errors"
	"io"
	"log/slog"
	"net"
	"net/netip"
	"sync"
	"testing"
	"time"

	"github.com/frontdoor-vdi/frontdoor/internal/siteid"
	"github.com/frontdoor-vdi/frontdoor/ticket"
	"github.com/quic-go/quic-go"
)

// recorder is a TCP relay from its own address to a machine's port that keeps every byte it
// carries, both ways: what someone on the gateway→machine leg would read.
type recorder struct {
	ln   net.Listener
	mu   sync.Mutex // guards seen
	seen bytes.Buffer
	wg   sync.WaitGroup
}

func record(t *testing.T, listen, target string) *recorder {
	t.Helper()
	ln, err := net.Listen("tcp", listen)
	if err != nil {
		t.Fatal(err)
	}
	r := &recorder{ln: ln}
	r.wg.Go(func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			up, err := net.Dial("tcp", target)
			if err != nil {
				c.Close()
				continue
			}
			copyRec := func(dst, src net.Conn) {
				buf := make([]byte, 32<<10)
				for {
					n, err := src.Read(buf)
					if n > 0 {
						r.mu.Lock()
						r.seen.Write(buf[:n])
						r.mu.Unlock()
						dst.Write(buf[:n])
					}
					if err != nil {
						dst.Close()
						src.Close()
						return
					}
				}
			}
			r.wg.Go(func() { copyRec(up, c) })
			r.wg.Go(func() { copyRec(c, up) })
		}
	})
	t.Cleanup(func() { ln.Close(); r.wg.Wait() })
	return r
}

func (r *recorder) bytes() []byte {
	r.mu.Lock()
	defer r.mu.Unlock()
	return bytes.Clone(r.seen.Bytes())
}

// The gateway→machine leg is TLS: a relay on it sees neither the channel's ticket nor a byte
// the user sent through the tunnel, while the session's data gets through.
func TestMachineLegCarriesNoTicketOrUserByteInTheClear(t *testing.T) {
	signer, v, pub := keys(t)
	port, stop := machineAt(t, pub, "vda-1", "127.0.62.1", "127.0.62.2")
	t.Cleanup(stop)
	rec := record(t, netip.AddrPortFrom(netip.MustParseAddr("127.0.62.2"), port).String(),
		netip.AddrPortFrom(netip.MustParseAddr("127.0.62.1"), port).String())
	r := startFor(t, "127.0.62.2", "gw-1", "127.0.50.1", port, 0, newSessions("s-1"), signer, v, nil)

	tok := r.issue(t, ticket.Launch, "s-1", "vda-1")
	c, st := r.dialTCP(t, tok)
	if st != ticket.StatusOK {
		t.Fatalf("launch ticket: status %d, want OK", st)
	}
	secret := make([]byte, 32)
	rand.Read(secret)
	payload := []byte("user-bytes-" + hex.EncodeToString(secret))
	if _, err := c.Write(payload); err != nil {
		t.Fatal(err)
	}
	got := make([]byte, len(payload))
	c.SetReadDeadline(time.Now().Add(5 * time.Second))
	if _, err := io.ReadFull(c, got); err != nil || !bytes.Equal(got, payload) {
		t.Fatalf("echo through the gateway: %q, %v", got, err)
	}
	c.Close()
	seen := rec.bytes()
	if len(seen) == 0 {
		t.Fatal("the relay carried nothing: the test would prove nothing")
	}
	for what, b := range map[string][]byte{"the ticket": []byte(tok), "the ticket's frame tag": []byte("FDT1"), "the user's bytes": payload, "a piece of them": secret[:8]} {
		if bytes.Contains(seen, b) {
			t.Errorf("%s crossed the gateway→machine leg in the clear", what)
		}
	}
}

// A machine address whose certificate does not name the ticket's machine is told nothing:
// the gateway ends the handshake before it sends the ticket, and denies the channel.
func TestGatewayTellsAnImpostorMachineNothing(t *testing.T) {
	signer, v, _ := keys(t)
	cert, err := siteCA().PartyCertificate(siteid.RoleMachine, "vda-2", []netip.Addr{netip.MustParseAddr("127.0.63.1")})
	if err != nil {
		t.Fatal(err)
	}
	ln, err := tls.Listen("tcp", "127.0.63.1:0", &tls.Config{Certificates: []tls.Certificate{*cert}})
	if err != nil {
		t.Fatal(err)
	}
	got := make(chan []byte, 4)
	var wg sync.WaitGroup
	wg.Go(func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			c.SetDeadline(time.Now().Add(5 * time.Second))
			b, _ := io.ReadAll(c)
			c.Close()
			got <- b
		}
	})
	defer func() { ln.Close(); wg.Wait() }()
	port := uint16(ln.Addr().(*net.TCPAddr).Port)
	r := startFor(t, "127.0.63.1", "gw-1", "127.0.50.1", port, 0, newSessions("s-1"), signer, v, nil)
	if c, st := r.dialTCP(t, r.issue(t, ticket.Launch, "s-1", "vda-1")); st != ticket.StatusDenied {
		c.Close()
		t.Fatalf("a channel to an impostor machine: status %d, want denied", st)
	}
	select {
	case b := <-got:
		if len(b) > 0 {
			t.Fatalf("the impostor read %d bytes after the handshake, want none", len(b))
		}
	case <-time.After(5 * time.Second):
		t.Fatal("the gateway never reached the impostor: the test would prove nothing")
	}
}

// A machine takes a gateway-mode channel only from a gateway of the site; a direct-mode one
// from any client that has the ticket.
func TestMachineTakesGatewayModeChannelsOnlyFromGateways(t *testing.T) {
	signer, _, pub := keys(t)
	port, stop := machineAt(t, pub, "vda-1", "127.0.64.1")
	t.Cleanup(stop)
	addr := netip.AddrPortFrom(netip.MustParseAddr("127.0.64.1"), port).String()
	machineCert, err := siteCA().PartyCertificate(siteid.RoleMachine, "vda-9", []netip.Addr{netip.MustParseAddr("127.0.64.9")})
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		name string
		mode string
		tc   *tls.Config
		want byte
	}{
		{"a gateway-mode ticket from a gateway", ticket.ModeGateway, machineTLS("gw-1", "127.0.50.1")(), ticket.StatusOK},
		{"a gateway-mode ticket without a certificate", ticket.ModeGateway, &tls.Config{RootCAs: siteCA().Pool()}, ticket.StatusDenied},
		{"a gateway-mode ticket from another machine", ticket.ModeGateway, &tls.Config{RootCAs: siteCA().Pool(), Certificates: []tls.Certificate{*machineCert}}, ticket.StatusDenied},
		{"a direct-mode ticket from a client", ticket.ModeDirect, &tls.Config{RootCAs: siteCA().Pool()}, ticket.StatusOK},
	} {
		t.Run(c.name, func(t *testing.T) {
			tok, _, err := signer.Issue(ticket.Claims{Kind: ticket.Launch, Session: "s-" + c.name, Machine: "vda-1", Mode: c.mode,
				Channels: []ticket.Channel{{Port: port, Proto: "tcp"}}}, time.Minute)
			if err != nil {
				t.Fatal(err)
			}
			tc := c.tc.Clone()
			tc.ServerName = "127.0.64.1"
			conn, err := tls.Dial("tcp", addr, tc)
			if err != nil {
				t.Fatal(err)
			}
			defer conn.Close()
			conn.SetDeadline(time.Now().Add(5 * time.Second))
			if err := ticket.WriteFrame(conn, tok); err != nil {
				t.Fatal(err)
			}
			st := []byte{ticket.StatusDenied}
			io.ReadFull(conn, st)
			if st[0] != c.want {
				t.Fatalf("status %d, want %d", st[0], c.want)
			}
		})
	}
}

// A machine's UDP port speaks QUIC and takes a UDP channel of a gateway-mode ticket only from
// a gateway's certificate; a direct-mode one from any client that has the ticket; and it
// echoes a probe datagram beside its connections.
func TestMachineTakesGatewayModeUDPChannelsOnlyFromGateways(t *testing.T) {
	signer, _, pub := keys(t)
	port, stop := machineAt(t, pub, "vda-1", "127.0.64.2")
	t.Cleanup(stop)
	addr := netip.AddrPortFrom(netip.MustParseAddr("127.0.64.2"), port)
	machineCert, err := siteCA().PartyCertificate(siteid.RoleMachine, "vda-9", []netip.Addr{netip.MustParseAddr("127.0.64.9")})
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		name string
		mode string
		tc   *tls.Config
		want byte
	}{
		{"a gateway-mode ticket from a gateway", ticket.ModeGateway, machineTLS("gw-1", "127.0.50.1")(), ticket.StatusOK},
		{"a gateway-mode ticket without a certificate", ticket.ModeGateway, &tls.Config{RootCAs: siteCA().Pool()}, ticket.StatusDenied},
		{"a gateway-mode ticket from another machine", ticket.ModeGateway, &tls.Config{RootCAs: siteCA().Pool(), Certificates: []tls.Certificate{*machineCert}}, ticket.StatusDenied},
		{"a direct-mode ticket from a client", ticket.ModeDirect, &tls.Config{RootCAs: siteCA().Pool()}, ticket.StatusOK},
	} {
		t.Run(c.name, func(t *testing.T) {
			tok, _, err := signer.Issue(ticket.Claims{Kind: ticket.Launch, Session: "s-" + c.name, Machine: "vda-1", Mode: c.mode,
				Channels: []ticket.Channel{{Port: port, Proto: "udp"}}}, time.Minute)
			if err != nil {
				t.Fatal(err)
			}
			tc := c.tc.Clone()
			tc.ServerName, tc.NextProtos = "127.0.64.2", []string{ticket.QUICALPN}
			ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			defer cancel()
			conn, err := quic.DialAddr(ctx, addr.String(), tc, &quic.Config{EnableDatagrams: true})
			if err != nil {
				t.Fatal(err)
			}
			defer conn.CloseWithError(0, "")
			st, err := conn.OpenStreamSync(ctx)
			if err != nil {
				t.Fatal(err)
			}
			st.SetDeadline(time.Now().Add(5 * time.Second))
			st.Write([]byte{ticket.QUICKindUDP, byte(port >> 8), byte(port)})
			if err := ticket.WriteFrame(st, tok); err != nil {
				t.Fatal(err)
			}
			status := []byte{0xff}
			io.ReadFull(st, status)
			if status[0] != c.want {
				t.Fatalf("status %d, want %d", status[0], c.want)
			}
			if c.want != ticket.StatusOK {
				return
			}
			msg := append([]byte{byte(port >> 8), byte(port)}, "a datagram"...)
			if err := conn.SendDatagram(msg); err != nil {
				t.Fatal(err)
			}
			if got, err := conn.ReceiveDatagram(ctx); err != nil || !bytes.Equal(got, msg) {
				t.Fatalf("echo %q, %v", got, err)
			}
		})
	}
	probe, err := net.DialUDP("udp", nil, net.UDPAddrFromAddrPort(addr))
	if err != nil {
		t.Fatal(err)
	}
	defer probe.Close()
	probe.Write([]byte(ticket.ProbePayload))
	probe.SetReadDeadline(time.Now().Add(2 * time.Second))
	buf := make([]byte, 64)
	if n, err := probe.Read(buf); err != nil || string(buf[:n]) != ticket.ProbePayload {
		t.Fatalf("probe: %q, %v", buf[:n], err)
	}
}

// Without PlainUDP a gateway's UDP port answers probes and takes no flow: a valid ticket
// datagram gets no answer and opens nothing.
func TestPlainUDPIsOffByDefault(t *testing.T) {
	signer, v, pub := keys(t)
	port, stop := machine(t, pub)
	t.Cleanup(stop)
	tlsc, _ := selfSigned(t)
	s := newSessions("s-1")
	g := serveGateway(t, Options{Name: "gw-1", Address: netip.MustParseAddr("127.0.50.3"), UDPPorts: []uint16{port},
		TLS: tlsc, MachineTLS: machineTLS("gw-1", "127.0.50.3"), Verifier: v, Sessions: s,
		Machine: func(n string) (netip.Addr, bool) { return netip.MustParseAddr("127.0.60.1"), n == "vda-1" }, Logger: slog.New(slog.NewTextHandler(io.Discard, nil))}, nil)
	r := &rig{gw: g, signer: signer, v: v, port: port, s: s}
	c, err := net.DialUDP("udp", nil, &net.UDPAddr{IP: net.ParseIP("127.0.50.3"), Port: int(port)})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	buf := make([]byte, 2048)
	c.Write([]byte(ticket.ProbePayload))
	c.SetReadDeadline(time.Now().Add(2 * time.Second))
	if n, err := c.Read(buf); err != nil || string(buf[:n]) != ticket.ProbePayload {
		t.Fatalf("probe: %q, %v", buf[:n], err)
	}
	c.Write(ticket.Datagram(r.issue(t, ticket.Launch, "s-1", "vda-1")))
	c.SetReadDeadline(time.Now().Add(500 * time.Millisecond))
	if n, err := c.Read(buf); err == nil {
		t.Fatalf("a plain flow was answered: %q", buf[:n])
	}
	if g.Flows() != 0 || g.Channels() != 0 {
		t.Fatalf("%d flows, %d channels, want none", g.Flows(), g.Channels())
	}
}

// The machine TLS config's own VerifyConnection (a node's check of revoked machine
// certificates) runs on every leg to a machine: when it refuses, TCP channels and UDP flows
// are denied.
func TestAMachineTheBaseConfigRefusesIsNotReached(t *testing.T) {
	signer, v, pub := keys(t)
	port, stop := machine(t, pub)
	t.Cleanup(stop)
	tlsc, pool := selfSigned(t)
	refused := make(chan string, 4)
	base := siteCA().Party(siteid.RoleGateway, "gw-1", []netip.Addr{netip.MustParseAddr("127.0.50.2")}).ClientTLS(func(st tls.ConnectionState) error {
		refused <- st.PeerCertificates[0].Subject.CommonName
		return errors.New("revoked")
	})
	s := newSessions("s-1")
	g := serveGateway(t, Options{Name: "gw-1", Address: netip.MustParseAddr("127.0.50.2"), TCPPorts: []uint16{port}, UDPPorts: []uint16{port}, PlainUDP: true,
		TLS: tlsc, MachineTLS: base, Verifier: v, Sessions: s,
		Machine: func(n string) (netip.Addr, bool) { return netip.MustParseAddr("127.0.60.1"), n == "vda-1" }, Logger: slog.New(slog.NewTextHandler(io.Discard, nil))}, nil)
	r := &rig{gw: g, signer: signer, v: v, pool: pool, port: port, s: s, addr: "127.0.50.2"}
	if c, st := r.dialTCP(t, r.issue(t, ticket.Launch, "s-1", "vda-1")); st != ticket.StatusDenied {
		c.Close()
		t.Fatalf("a TCP channel to a refused machine: status %d, want denied", st)
	}
	u, err := net.DialUDP("udp", nil, &net.UDPAddr{IP: net.ParseIP("127.0.50.2"), Port: int(port)})
	if err != nil {
		t.Fatal(err)
	}
	defer u.Close()
	u.Write(ticket.Datagram(r.issue(t, ticket.Launch, "s-1", "vda-1")))
	u.SetReadDeadline(time.Now().Add(time.Second))
	if n, err := u.Read(make([]byte, 2048)); err == nil {
		t.Fatalf("a UDP flow to a refused machine was answered (%d bytes)", n)
	}
	for range 2 {
		select {
		case <-refused:
		case <-time.After(5 * time.Second):
			t.Fatal("the base config's check did not run on both legs")
		}
	}
}

// A machine takes at most 32 open channels of one session; the next is denied.
func TestAMachineCapsASessionsChannels(t *testing.T) {
	signer, _, pub := keys(t)
	port, stop := machineAt(t, pub, "vda-1", "127.0.64.3")
	t.Cleanup(stop)
	tok, _, err := signer.Issue(ticket.Claims{Kind: ticket.Reconnect, Session: "s-cap", Machine: "vda-1", Mode: ticket.ModeDirect}, time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	dial := func() (*tls.Conn, byte) {
		t.Helper()
		c, err := tls.Dial("tcp", netip.AddrPortFrom(netip.MustParseAddr("127.0.64.3"), port).String(), &tls.Config{RootCAs: siteCA().Pool(), ServerName: "127.0.64.3"})
		if err != nil {
			t.Fatal(err)
		}
		c.SetDeadline(time.Now().Add(5 * time.Second))
		ticket.WriteFrame(c, tok)
		st := []byte{ticket.StatusDenied}
		io.ReadFull(c, st)
		if st[0] == ticket.StatusOK {
			if _, err := openStream(c); err != nil { // a stream makes the channel count
				st[0] = ticket.StatusDenied
			}
		}
		c.SetDeadline(time.Time{})
		return c, st[0]
	}
	for i := range 32 {
		c, st := dial()
		defer c.Close()
		if st != ticket.StatusOK {
			t.Fatalf("channel %d of the session: status %d", i+1, st)
		}
	}
	// The machine counts a channel once its handler has registered it: give it a moment.
	for deadline := time.Now().Add(5 * time.Second); ; time.Sleep(10 * time.Millisecond) {
		c, st := dial()
		c.Close()
		if st == ticket.StatusDenied {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the machine took a channel past the session's cap")
		}
	}
}
