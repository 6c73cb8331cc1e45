//go:build linux && (amd64 || arm64)

package gslb

import (
	"context"
	"net"
	"runtime"
	"testing"
	"time"

	"github.com/miekg/dns"
)

// TestBlockingWorkers runs a Server with BlockingUDP beside one without: the first reads with
// a worker blocked in recvmmsg on a socket outside the Go poller, both answer on the fast and
// the full path, the garbage collector stops the world while the worker waits, and Serve
// returns once cancelled.
func TestBlockingWorkers(t *testing.T) {
	defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(runtime.GOMAXPROCS(0) + 1))
	e := newEnv(t)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	run := func(blocking bool) (*Server, chan error) {
		s := NewServer(e.h, ServerOptions{Address: "127.0.0.1:0", BlockingUDP: blocking})
		if err := s.Listen(); err != nil {
			t.Fatal(err)
		}
		done := make(chan error, 1)
		go func() { done <- s.Serve(ctx) }()
		return s, done
	}
	s1, done1 := run(true)
	s2, done2 := run(false)
	if s1.raw == nil || s2.raw != nil {
		t.Fatalf("raw sockets: with BlockingUDP %v, without %v; want only the first", s1.raw != nil, s2.raw != nil)
	}
	for _, s := range []*Server{s1, s2} {
		ask := func(name string, qtype uint16) *dns.Msg {
			t.Helper()
			m := new(dns.Msg)
			m.SetQuestion(name, qtype)
			return exchange(t, &dns.Client{Net: "udp", Timeout: 2 * time.Second}, m, s.UDPAddr().String())
		}
		if got := join(addrs(ask("desktop.example.test.", dns.TypeAAAA))); got != "2001:db8:ff::11" {
			t.Fatalf("fast path answer: %q", got)
		}
		if r := ask("mail.example.test.", dns.TypeA); join(addrs(r)) != "192.0.2.25" {
			t.Fatalf("full path answer: %v", r)
		}
	}
	// The blocking worker now waits in recvmmsg; each collection must stop the world anyway.
	start := time.Now()
	for range 20 {
		runtime.GC()
	}
	if d := time.Since(start); d > 5*time.Second {
		t.Fatalf("20 collections with the worker waiting took %v", d)
	}
	cancel()
	for _, done := range []chan error{done1, done2} {
		select {
		case err := <-done:
			if err != nil {
				t.Fatalf("Serve: %v", err)
			}
		case <-time.After(5 * time.Second):
			t.Fatal("Serve did not return after cancel")
		}
	}
	s1.Close()
	s2.Close()
}

// TestCoalescingWorkerAnswersEveryQuery sends bursts of queries, some larger than a batch, to
// a blocking worker that pauses after each partial batch: every query gets its own answer once,
// with collections run between the bursts.
func TestCoalescingWorkerAnswersEveryQuery(t *testing.T) {
	defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(runtime.GOMAXPROCS(0) + 1))
	e := newEnv(t)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	s := NewServer(e.h, ServerOptions{Address: "127.0.0.1:0", Protocols: []string{"udp"}, BlockingUDP: true, UDPCoalesce: 2 * time.Millisecond})
	if err := s.Listen(); err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	go s.Serve(ctx)
	c, err := net.DialUDP("udp", nil, s.UDPAddr().(*net.UDPAddr))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	c.SetReadBuffer(1 << 20)

	const bursts, per = 20, batchSize + 8
	seen := map[uint16]bool{}
	for b := range bursts {
		for i := range per {
			m := new(dns.Msg)
			m.SetQuestion("desktop.example.test.", dns.TypeAAAA)
			m.Id = uint16(b*per + i)
			wire, _ := m.Pack()
			if _, err := c.Write(wire); err != nil {
				t.Fatal(err)
			}
		}
		if b%5 == 0 {
			runtime.GC()
		}
		buf := make([]byte, 1500)
		for range per {
			c.SetReadDeadline(time.Now().Add(5 * time.Second))
			n, err := c.Read(buf)
			if err != nil {
				t.Fatalf("burst %d: %d answers so far: %v", b, len(seen), err)
			}
			r := new(dns.Msg)
			if err := r.Unpack(buf[:n]); err != nil {
				t.Fatal(err)
			}
			if seen[r.Id] {
				t.Fatalf("query %d answered twice", r.Id)
			}
			seen[r.Id] = true
			if got := join(addrs(r)); got != "2001:db8:ff::11" {
				t.Fatalf("query %d: answer %q", r.Id, got)
			}
		}
	}
	if len(seen) != bursts*per {
		t.Fatalf("%d answers, want %d", len(seen), bursts*per)
	}
}
