package gateway

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/netip"
	"sync/atomic"
	"testing"
	"time"

	"github.com/frontdoor-vdi/frontdoor/ticket"
	"github.com/quic-go/quic-go"
)

// One session opens at most maxPerSession channels on a gateway; the next is denied, and
// one more opens once a channel closes.
func TestASessionsChannelsBeyondItsCapAreRefused(t *testing.T) {
	r, _ := startOne(t)
	tok := r.issue(t, ticket.Reconnect, "s-1", "vda-1")
	var open []*chanConn
	defer func() {
		for _, c := range open {
			c.Close()
		}
	}()
	for range maxPerSession {
		c, st := r.dialTCP(t, tok)
		if st != ticket.StatusOK {
			t.Fatalf("channel %d of the session: status %d", len(open)+1, st)
		}
		open = append(open, c)
	}
	if c, st := r.dialTCP(t, tok); st != ticket.StatusDenied {
		c.Close()
		t.Fatalf("a channel past the session's cap: status %d, want denied", st)
	}
	if c, st := r.dialTCP(t, r.issue(t, ticket.Reconnect, "s-2", "vda-1")); st != ticket.StatusOK {
		t.Fatal("another session was refused")
	} else {
		c.Close()
	}
	open[0].Close()
	open = open[1:]
	for deadline := time.Now().Add(5 * time.Second); ; time.Sleep(10 * time.Millisecond) {
		c, st := r.dialTCP(t, tok)
		if st == ticket.StatusOK {
			c.Close()
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the session could not open a channel after one of its channels closed")
		}
	}
}

// startQUICBeside runs a QUIC end gw-1 on r's address in front of vda-1, edited by edit
// (nil: none) before it serves, until the test ends; it returns the pool that trusts it and
// a context that ends with the test.
func startQUICBeside(t *testing.T, r *rig, edit func(*QUIC)) (*QUIC, *x509.CertPool, context.Context) {
	t.Helper()
	tlsc, pool := selfSigned(t)
	q, err := ListenQUIC(QUICOptions{Name: "gw-1", Address: net.JoinHostPort(r.addr, "0"), TLS: tlsc, Verifier: r.v,
		MachineTLS: machineTLS("gw-1", r.addr), Logger: slog.New(slog.NewTextHandler(io.Discard, nil)),
		Machine: func(n string) (netip.Addr, bool) { return netip.MustParseAddr("127.0.60.1"), n == "vda-1" }})
	if err != nil {
		t.Fatal(err)
	}
	if edit != nil {
		edit(q)
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	served := make(chan error, 1)
	go func() { served <- q.Serve(ctx) }()
	t.Cleanup(func() { cancel(); <-served; q.Close() })
	return q, pool, ctx
}

// A session holds at most maxQUICPerSession QUIC connections on a gateway's QUIC end.
func TestASessionsQUICConnectionsBeyondItsCapAreRefused(t *testing.T) {
	r, _ := startOne(t)
	q, pool, ctx := startQUICBeside(t, r, nil)
	tok := r.issue(t, ticket.Reconnect, "s-1", "vda-1")
	channel := func() (byte, *quic.Conn) {
		t.Helper()
		qc, err := quic.DialAddr(ctx, q.Addr().String(), &tls.Config{RootCAs: pool, NextProtos: []string{ticket.QUICALPN}}, &quic.Config{EnableDatagrams: true})
		if err != nil {
			t.Fatal(err)
		}
		st, err := qc.OpenStreamSync(ctx)
		if err != nil {
			t.Fatal(err)
		}
		st.Write([]byte{ticket.QUICKindTCP, byte(r.port >> 8), byte(r.port)})
		ticket.WriteFrame(st, tok)
		st.SetReadDeadline(time.Now().Add(5 * time.Second))
		b := []byte{ticket.StatusDenied}
		io.ReadFull(st, b)
		return b[0], qc
	}
	for i := range maxQUICPerSession {
		st, qc := channel()
		defer qc.CloseWithError(0, "")
		if st != ticket.StatusOK {
			t.Fatalf("connection %d of the session: status %d", i+1, st)
		}
	}
	st, qc := channel()
	defer qc.CloseWithError(0, "")
	if st != ticket.StatusDenied {
		t.Fatalf("a connection past the session's cap: status %d, want denied", st)
	}
}

// A client address gets newPerSourceBurst new channels at once, then newPerSource a second;
// other addresses are not held back by it.
func TestNewChannelsArePacedPerSource(t *testing.T) {
	var s sourceLimits
	a, b := netip.MustParseAddr("127.0.0.1"), netip.MustParseAddr("127.0.0.2")
	n := 0
	for s.allow(a) {
		n++
		if n > 10*newPerSourceBurst {
			t.Fatal("a source is never held back")
		}
	}
	if n < newPerSourceBurst || n > newPerSourceBurst+newPerSource {
		t.Fatalf("a source got %d new channels at once, want about %d", n, newPerSourceBurst)
	}
	if !s.allow(b) {
		t.Fatal("another source was held back")
	}
	time.Sleep(50 * time.Millisecond) // newPerSource/20 more
	if !s.allow(a) {
		t.Fatal("the source is held back for good")
	}
}

// A reconnect ticket used already is refused while its session is connected (its client holds
// the next one), and taken again once the session is not (a client whose answer was lost).
func TestAUsedReconnectTicketIsRefusedWhileItsSessionIsConnected(t *testing.T) {
	signer, v, pub := keys(t)
	port, stop := machine(t, pub)
	t.Cleanup(stop)
	tlsc, pool := selfSigned(t)
	s := newSessions("s-1")
	var connected atomic.Bool
	g := serveGateway(t, Options{Name: "gw-1", Address: netip.MustParseAddr("127.0.50.1"), TCPPorts: []uint16{port},
		TLS: tlsc, MachineTLS: machineTLS("gw-1", "127.0.50.1"), Verifier: v, Sessions: s,
		Carried: func(string) bool { return connected.Load() },
		Machine: func(n string) (netip.Addr, bool) { return netip.MustParseAddr("127.0.60.1"), n == "vda-1" },
		Logger:  slog.New(slog.NewTextHandler(io.Discard, nil))}, nil)
	r := &rig{gw: g, signer: signer, v: v, pool: pool, port: port, s: s, addr: "127.0.50.1"}
	tok := r.issue(t, ticket.Reconnect, "s-1", "vda-1")
	c, st := r.dialTCP(t, tok)
	if st != ticket.StatusOK {
		t.Fatalf("the ticket's first use: status %d", st)
	}
	c.Close()
	connected.Store(true)
	for deadline := time.Now().Add(5 * time.Second); ; time.Sleep(10 * time.Millisecond) {
		c, st := r.dialTCP(t, tok)
		c.Close()
		if st == ticket.StatusDenied {
			break // the ledger has the ticket's use (written apart from the check)
		}
		if time.Now().After(deadline) {
			t.Fatal("a used reconnect ticket opened a channel while its session was connected")
		}
	}
	connected.Store(false)
	if c, st := r.dialTCP(t, tok); st != ticket.StatusOK {
		t.Fatalf("the used ticket of a session not connected: status %d, want OK", st)
	} else {
		c.Close()
	}
}

// One source cannot take every place of a gateway's QUIC end, and connections that show no
// ticket have a budget of their own (finding M5 of the security review: one address held all
// 10,000 places, each ticketless connection for 10 s).
func TestOneSourceCannotTakeEveryQUICPlace(t *testing.T) {
	r, _ := startOne(t)
	q, pool, ctx := startQUICBeside(t, r, func(q *QUIC) { q.perSource, q.maxTicketless = 3, 2 })
	dial := func() *quic.Conn {
		t.Helper()
		qc, err := quic.DialAddr(ctx, q.Addr().String(), &tls.Config{RootCAs: pool, NextProtos: []string{ticket.QUICALPN}}, &quic.Config{EnableDatagrams: true})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { qc.CloseWithError(0, "") })
		return qc
	}
	refused := func(qc *quic.Conn) bool {
		select {
		case <-qc.Context().Done():
			return true
		case <-time.After(500 * time.Millisecond):
			return false
		}
	}
	ticketed := func(qc *quic.Conn) {
		t.Helper()
		st, err := qc.OpenStreamSync(ctx)
		if err != nil {
			t.Fatal(err)
		}
		st.Write([]byte{ticket.QUICKindUDP, byte(r.port >> 8), byte(r.port)})
		ticket.WriteFrame(st, r.issue(t, ticket.Reconnect, "s-1", "vda-1"))
		st.SetReadDeadline(time.Now().Add(5 * time.Second))
		b := []byte{ticket.StatusDenied}
		io.ReadFull(st, b)
		if b[0] == ticket.StatusDenied {
			t.Fatalf("the ticket was refused")
		}
	}
	a, b := dial(), dial()
	if refused(a) || refused(b) {
		t.Fatal("a connection within the budgets was refused")
	}
	if c := dial(); !refused(c) {
		t.Fatal("a third connection without a ticket was taken past the ticketless budget of 2")
	}
	ticketed(a) // a shows its ticket: one ticketless place frees
	c := dial()
	if refused(c) {
		t.Fatal("a connection was refused with a ticketless place free")
	}
	ticketed(c) // one ticketless place is free again; the source holds 3
	if d := dial(); !refused(d) {
		t.Fatal("a fourth connection of one source was taken past its share of 3")
	}
}

// Finding L3 of the security review: a TCP channel port accepted without bound before the TLS
// handshake (600 silent connections from one address were held until their handshake
// timed out). Its connections are bounded now, a quarter of them a source; when all are
// taken, a connection that has not shown its ticket gives its place to a new one, while an
// admitted channel keeps its place.
func TestSilentConnectionsDoNotKeepChannelsOut(t *testing.T) {
	signer, v, pub := keys(t)
	port, stop := machine(t, pub)
	t.Cleanup(stop)
	s := newSessions("s-1", "s-2")
	r := startWith(t, "127.0.60.1", "gw-1", "127.0.50.1", port, 0, s, signer, v, nil, func(o *Options) {
		o.MaxTCPConns, o.HandshakeTimeout = 8, time.Minute
	})
	held := r.launchTCP(t)
	silent := func(src string) net.Conn {
		t.Helper()
		d := &net.Dialer{Timeout: 5 * time.Second, LocalAddr: &net.TCPAddr{IP: net.ParseIP(src)}}
		c, err := d.Dial("tcp", netip.AddrPortFrom(netip.MustParseAddr(r.addr), r.port).String())
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { c.Close() })
		return c
	}
	closedAtOnce := 0
	for range 5 {
		c := silent("127.0.51.1")
		c.SetReadDeadline(time.Now().Add(2 * time.Second))
		if _, err := c.Read(make([]byte, 1)); errors.Is(err, io.EOF) {
			closedAtOnce++
		}
	}
	if closedAtOnce != 3 {
		t.Fatalf("%d of 5 silent connections from one source were closed at once, want the 3 past its quarter of 8", closedAtOnce)
	}
	for i := range 5 { // every place taken: the held channel, two and five silent ones
		silent(fmt.Sprintf("127.0.52.%d", i+1))
	}
	c, st := r.dialTCP(t, r.issue(t, ticket.Launch, "s-2", "vda-1"))
	if st != ticket.StatusOK {
		t.Fatalf("a channel while silent connections take every place: status %d, want OK", st)
	}
	c.Close()
	held.SetDeadline(time.Now().Add(5 * time.Second))
	if _, err := held.Write([]byte("still here")); err != nil {
		t.Fatalf("the admitted channel, after new connections took the silent ones' places: %v", err)
	}
	got := make([]byte, 10)
	if _, err := io.ReadFull(held, got); err != nil || string(got) != "still here" {
		t.Fatalf("the admitted channel echoed %q, %v; want it kept", got, err)
	}
}

// The paces are kept per IPv4 address or IPv6 /64, and a flood of addresses does not reset
// them (finding L3 of the security review: at 65,536 addresses every pace was forgotten,
// the flooder's own too); the map stays bounded.
func TestSourcePacesSurviveAFloodOfAddresses(t *testing.T) {
	var s sourceLimits
	a, sameSlash64 := netip.MustParseAddr("2001:db8:1:2::1"), netip.MustParseAddr("2001:db8:1:2::ffff")
	for range newPerSourceBurst {
		s.allow(a)
	}
	if s.allow(sameSlash64) {
		t.Fatal("another address of the same /64 got a fresh pace")
	}
	for i := range 2 * maxSourcesTracked {
		s.allow(netip.AddrFrom4([4]byte{10, byte(i >> 16), byte(i >> 8), byte(i)}))
		s.allow(a)
	}
	if s.m.Len() > maxSourcesTracked {
		t.Fatalf("%d sources tracked, want at most %d", s.m.Len(), maxSourcesTracked)
	}
	again := 0
	for range newPerSourceBurst {
		if s.allow(a) {
			again++
		}
	}
	if again > newPerSourceBurst/2 {
		t.Fatalf("after a flood of addresses the busy source got %d new channels at once: its pace was reset", again)
	}
}
