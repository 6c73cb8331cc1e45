package gslb

import (
	"context"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/miekg/dns"
)

// startServer runs e's handler on 127.0.0.1:0 and stops it when the test ends.
func startServer(t *testing.T, e *env) *Server {
	t.Helper()
	s := NewServer(e.h, ServerOptions{Address: "127.0.0.1:0"})
	if err := s.Listen(); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- s.Serve(ctx) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("Serve: %v", err)
		}
		s.Close()
	})
	return s
}

func exchange(t *testing.T, c *dns.Client, m *dns.Msg, addr string) *dns.Msg {
	t.Helper()
	var lastErr error
	for try := 0; try < 3; try++ { // UDP may lose a datagram; retries are bounded
		r, _, err := c.Exchange(m, addr)
		if err == nil {
			return r
		}
		lastErr = err
	}
	t.Fatalf("%s exchange: %v", c.Net, lastErr)
	return nil
}

func TestServeUDPAndTCP(t *testing.T) {
	e := newEnv(t)
	e.cfg.GSLB.Domains[0].Records = append(e.cfg.GSLB.Domains[0].Records, recordTXT("big", 3000))
	if err := e.h.Reload(e.cfg); err != nil {
		t.Fatal(err)
	}
	s := startServer(t, e)
	if s.UDPAddr().String() != s.TCPAddr().String() {
		t.Fatalf("udp %v and tcp %v differ", s.UDPAddr(), s.TCPAddr())
	}
	addr := s.UDPAddr().String()
	for _, proto := range []string{"udp", "tcp"} {
		t.Run(proto, func(t *testing.T) {
			c := &dns.Client{Net: proto, Timeout: 2 * time.Second}
			m := new(dns.Msg)
			m.SetQuestion("DeskTop.Example.Test.", dns.TypeA)
			r := exchange(t, c, m, addr)
			// 127.0.0.1 is in no zone: the sites' order, hq first.
			if got := join(addrs(r)); got != "198.51.100.11 198.51.100.12" || !r.Authoritative {
				t.Fatalf("got %q aa %v", got, r.Authoritative)
			}
			m.SetQuestion("desktop.example.test.", dns.TypeA)
			m.SetEdns0(1232, false)
			opt := m.IsEdns0()
			opt.Option = append(opt.Option, &dns.EDNS0_SUBNET{Code: dns.EDNS0SUBNET, Family: 1, SourceNetmask: 24, Address: net.IPv4(10, 3, 1, 0).To4()})
			r = exchange(t, c, m, addr)
			if got := join(addrs(r)); got != "198.51.100.31 198.51.100.32" {
				t.Fatalf("with a west ECS: got %q", got)
			}
			if ecs := ecsOf(r); ecs == nil || ecs.SourceScope != 22 {
				t.Fatalf("ECS echo %v, want scope 22 (10.3.0.0/22 avoids the nested 10.3.7.0/24)", ecs)
			}
			m = new(dns.Msg)
			m.SetQuestion("nope.example.test.", dns.TypeA)
			if r := exchange(t, c, m, addr); r.Rcode != dns.RcodeNameError || len(r.Ns) != 1 {
				t.Fatalf("NXDOMAIN: got %v", r)
			}
		})
	}
	t.Run("a truncated UDP answer is complete over TCP", func(t *testing.T) {
		m := new(dns.Msg)
		m.SetQuestion("big.example.test.", dns.TypeTXT)
		r := exchange(t, &dns.Client{Net: "udp", Timeout: 2 * time.Second}, m, addr)
		if !r.Truncated {
			t.Fatalf("UDP: TC not set on a 3000 byte answer: %v", r)
		}
		r = exchange(t, &dns.Client{Net: "tcp", Timeout: 2 * time.Second}, m, addr)
		if r.Truncated || len(r.Answer) != 1 || len(strings.Join(r.Answer[0].(*dns.TXT).Txt, "")) != 3000 {
			t.Fatalf("TCP retry: got TC %v and %d records", r.Truncated, len(r.Answer))
		}
	})
	t.Run("several queries on one TCP connection", func(t *testing.T) {
		c := &dns.Client{Net: "tcp", Timeout: 2 * time.Second}
		conn, err := c.Dial(addr)
		if err != nil {
			t.Fatal(err)
		}
		defer conn.Close()
		for i := 0; i < 5; i++ {
			m := new(dns.Msg)
			m.SetQuestion("mail.example.test.", dns.TypeA)
			r, _, err := c.ExchangeWithConn(m, conn)
			if err != nil || len(r.Answer) != 1 {
				t.Fatalf("query %d: %v %v", i, r, err)
			}
		}
	})
}

func TestServerLifecycle(t *testing.T) {
	e := newEnv(t)
	s := NewServer(e.h, ServerOptions{Address: "127.0.0.1:0", Protocols: []string{"udp"}})
	if err := s.Listen(); err != nil {
		t.Fatal(err)
	}
	if s.TCPAddr() != nil {
		t.Fatal("a udp-only server has a TCP socket")
	}
	done := make(chan error, 1)
	go func() { done <- s.Serve(context.Background()) }()
	m := new(dns.Msg)
	m.SetQuestion("mail.example.test.", dns.TypeA)
	exchange(t, &dns.Client{Net: "udp", Timeout: 2 * time.Second}, m, s.UDPAddr().String())
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	if err := <-done; err != nil {
		t.Fatalf("Serve after Close: %v, want nil", err)
	}
	if err := s.Serve(context.Background()); err == nil {
		t.Fatal("Serve after Close did not fail")
	}
	// Close before Serve releases the sockets.
	s2 := NewServer(e.h, ServerOptions{Address: "127.0.0.1:0"})
	if err := s2.Listen(); err != nil {
		t.Fatal(err)
	}
	addr := s2.TCPAddr().String()
	s2.Close()
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		t.Fatalf("the port of a closed server is still taken: %v", err)
	}
	ln.Close()
}

func TestServeUDPGarbage(t *testing.T) {
	e := newEnv(t)
	s := startServer(t, e)
	conn, err := net.Dial("udp", s.UDPAddr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	// A header that promises a question the datagram does not hold.
	garbage := []byte{0xbe, 0xef, 0x01, 0x00, 0x00, 0x01, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x07, 'd'}
	buf := make([]byte, 512)
	for try := 0; try < 3; try++ {
		if _, err := conn.Write(garbage); err != nil {
			t.Fatal(err)
		}
		conn.SetReadDeadline(time.Now().Add(time.Second))
		n, err := conn.Read(buf)
		if err != nil {
			continue
		}
		r := new(dns.Msg)
		if err := r.Unpack(buf[:n]); err != nil {
			t.Fatalf("reply does not unpack: %v", err)
		}
		if r.Id != 0xbeef || r.Rcode != dns.RcodeFormatError || !r.Response {
			t.Fatalf("reply %v, want FORMERR with id 0xbeef", r)
		}
		// The server still answers after the bad datagram.
		m := new(dns.Msg)
		m.SetQuestion("mail.example.test.", dns.TypeA)
		exchange(t, &dns.Client{Net: "udp", Timeout: 2 * time.Second}, m, s.UDPAddr().String())
		return
	}
	t.Fatal("no reply to a malformed query")
}

// TestUDPBatchWorker runs one batch worker on its own socket and stops it.
func TestUDPBatchWorker(t *testing.T) {
	e := newEnv(t)
	pc, err := net.ListenPacket("udp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	u := usableUDPLoop(pc, e.h, e.h.fastUDP, e.h.log)
	if u == nil {
		t.Fatal("no batch loop for a socket bound to 127.0.0.1")
	}
	done := make(chan error, 1)
	go func() { done <- u.serveBatches() }()
	for i := 0; i < 3; i++ {
		m := new(dns.Msg)
		m.SetQuestion("desktop.example.test.", dns.TypeAAAA)
		r := exchange(t, &dns.Client{Net: "udp", Timeout: 2 * time.Second}, m, pc.LocalAddr().String())
		if got := join(addrs(r)); got != "2001:db8:ff::11" {
			t.Fatalf("query %d: got %q", i, got)
		}
	}
	u.shutdown()
	pc.Close()
	if err := <-done; err != nil {
		t.Fatalf("worker after close: %v", err)
	}
}
