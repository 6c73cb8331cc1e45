package gateway

import (
	"bytes"
	"context"
	"crypto/tls"
	"encoding/base64"
	"io"
	"log/slog"
	"net"
	"net/netip"
	"sync"
	"testing"
	"time"

	"github.com/frontdoor-vdi/frontdoor/internal/quicguard"
	"github.com/frontdoor-vdi/frontdoor/ticket"
	"github.com/quic-go/quic-go"
)

// A flood of forged first datagrams — well-formed tickets that name the site's key, whose
// signatures are wrong, so each costs a full check — does not stop the relay of an open flow:
// the tickets wait for their checkers in a bounded queue, the open flow's datagrams do not.
// The flood, about 40,000 a second from four senders, is more than two cores check and less
// than one reader drains (a flood beyond that fills the socket's queue, which loses any
// datagram: only the open flow's retries get through). Bounded: 1.5 s, 15,000 per sender.
func TestForgedFirstDatagramsDoNotStallAnOpenFlow(t *testing.T) {
	r, s := startOne(t)
	gwAddr := &net.UDPAddr{IP: net.ParseIP("127.0.50.1"), Port: int(r.port)}
	c, err := net.DialUDP("udp", nil, gwAddr)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	buf := make([]byte, 2048)
	c.Write(ticket.Datagram(r.issue(t, ticket.Launch, "s-1", "vda-1")))
	c.SetReadDeadline(time.Now().Add(2 * time.Second))
	if n, err := c.Read(buf); err != nil || string(buf[:n]) != ticket.UDPReady {
		t.Fatalf("ticket answer %q, %v", buf[:n], err)
	}
	s.want(t, "connected s-1 gw-1")

	b, err := base64.RawURLEncoding.DecodeString(r.issue(t, ticket.Reconnect, "s-1", "vda-1"))
	if err != nil {
		t.Fatal(err)
	}
	b[len(b)-1] ^= 1 // the signature no longer checks, after the whole check
	forged := ticket.Datagram(base64.RawURLEncoding.EncodeToString(b))
	ctx, stop := context.WithTimeout(context.Background(), 1500*time.Millisecond)
	defer stop()
	var flood sync.WaitGroup
	for range 4 {
		flood.Go(func() {
			f, err := net.DialUDP("udp", nil, gwAddr)
			if err != nil {
				t.Error(err)
				return
			}
			defer f.Close()
			for i := 0; i < 15000 && ctx.Err() == nil; i++ {
				f.Write(forged)
				if i%100 == 99 {
					time.Sleep(10 * time.Millisecond)
				}
			}
		})
	}
	// UDP may lose a datagram to a socket queue the flood fills: each is sent again after
	// 100 ms, up to 10 times.
	echoed, sent := 0, 0
	for i := 0; ctx.Err() == nil && i < 10000; i++ {
		msg := []byte{byte(i), byte(i >> 8), 1, 2}
		back := false
		for try := 0; try < 10 && !back; try++ {
			c.Write(msg)
			sent++
			c.SetReadDeadline(time.Now().Add(100 * time.Millisecond))
			for {
				n, err := c.Read(buf)
				if err != nil {
					break
				}
				if bytes.Equal(buf[:n], msg) {
					back = true
					break
				}
			}
		}
		if !back {
			t.Fatalf("datagram %d of the open flow did not come back in 10 tries during the flood", i)
		}
		echoed++
	}
	flood.Wait()
	var dropped int64
	for _, p := range r.gw.packets {
		dropped += p.dropped.Load()
	}
	t.Logf("the open flow echoed %d datagrams (%d sent) during the flood; %d forged first datagrams were dropped by a full queue", echoed, sent, dropped)
	if echoed == 0 {
		t.Fatal("the open flow echoed nothing during the flood")
	}
}

// Past quicguard.FreshPerSecond new connections a second a QUIC client must prove its address
// with a Retry first; an honest client does, and every connection completes.
func TestQUICConnectionsPastTheUnvalidatedRateGoThroughARetry(t *testing.T) {
	_, v, _ := keys(t)
	tlsc, pool := selfSigned(t)
	q, err := ListenQUIC(QUICOptions{Name: "gw", Address: "127.0.50.1:0", TLS: tlsc, Verifier: v, MachineTLS: machineTLS("gw", "127.0.50.1"),
		Logger:  slog.New(slog.NewTextHandler(io.Discard, nil)),
		Machine: func(string) (netip.Addr, bool) { return netip.Addr{}, false }})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	served := make(chan error, 1)
	go func() { served <- q.Serve(ctx) }()
	defer func() { cancel(); <-served; q.Close() }()
	n := quicguard.FreshPerSecond + quicguard.FreshPerSecond/2
	for i := range n {
		qc, err := quic.DialAddr(ctx, q.Addr().String(), &tls.Config{RootCAs: pool, NextProtos: []string{ticket.QUICALPN}}, &quic.Config{})
		if err != nil {
			t.Fatalf("connection %d of %d: %v", i, n, err)
		}
		if qc.ConnectionState().Used0RTT {
			t.Fatal("0-RTT is not offered")
		}
		qc.CloseWithError(0, "")
	}
}

// A QUIC connection that presents no ticket is closed after TicketWithin, keepalives or not.
func TestQUICConnectionWithoutATicketIsClosed(t *testing.T) {
	_, v, _ := keys(t)
	tlsc, pool := selfSigned(t)
	q, err := ListenQUIC(QUICOptions{Name: "gw", Address: "127.0.50.1:0", TLS: tlsc, Verifier: v, MachineTLS: machineTLS("gw", "127.0.50.1"),
		TicketWithin: 300 * time.Millisecond, Logger: slog.New(slog.NewTextHandler(io.Discard, nil)),
		Machine: func(string) (netip.Addr, bool) { return netip.Addr{}, false }})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	served := make(chan error, 1)
	go func() { served <- q.Serve(ctx) }()
	defer func() { cancel(); <-served; q.Close() }()
	qc, err := quic.DialAddr(ctx, q.Addr().String(), &tls.Config{RootCAs: pool, NextProtos: []string{ticket.QUICALPN}},
		&quic.Config{KeepAlivePeriod: 50 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	select {
	case <-qc.Context().Done():
	case <-time.After(10 * time.Second):
		t.Fatal("a connection without a ticket was kept for 10s")
	}
}
