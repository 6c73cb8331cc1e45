//go:build linux

package health

import (
	"context"
	"errors"
	"net"
	"net/netip"
	"sync"
	"syscall"
	"testing"
	"time"
)

// startAll starts every probe with p.Start and waits for all results, at most 10s.
func startAll(t *testing.T, p *NetProber, addrs []netip.AddrPort, c *Check, timeout time.Duration) []error {
	t.Helper()
	errs := make([]error, len(addrs))
	var wg sync.WaitGroup
	wg.Add(len(addrs))
	dl := time.Now().Add(timeout)
	for i, ap := range addrs {
		p.Start(ap, c, dl, func(err error) { errs[i] = err; wg.Done() })
	}
	done := make(chan struct{})
	go func() { wg.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		t.Fatal("probes did not end within 10s")
	}
	return errs
}

func TestPollerManyProbesAndTimeouts(t *testing.T) {
	up := listenTCP(t)
	serveTCP(t, up, func(net.Conn) {})
	upAP, closed, blackholed := addrPort(t, up.Addr()), closedPort(t, "tcp"), fullBacklog(t)
	var addrs []netip.AddrPort
	for range 100 {
		addrs = append(addrs, upAP, closed, blackholed)
	}
	p := &NetProber{}
	start := time.Now()
	errs := startAll(t, p, addrs, &Check{Kind: KindTCP}, 200*time.Millisecond)
	took := time.Since(start)
	for i, err := range errs {
		switch i % 3 {
		case 0:
			if err != nil {
				t.Errorf("probe %d of a listener: %v, want up", i, err)
			}
		case 1:
			if !errors.Is(err, syscall.ECONNREFUSED) {
				t.Errorf("probe %d of a closed port: %v, want ECONNREFUSED", i, err)
			}
		case 2:
			if !errors.Is(err, ErrTimeout) {
				t.Errorf("probe %d of a full backlog: %v, want a timeout", i, err)
			}
		}
	}
	if took < 200*time.Millisecond || took > 2*time.Second {
		t.Errorf("300 probes with 100 timeouts of 200ms took %v", took)
	}
	p.poll.mu.Lock()
	defer p.poll.mu.Unlock()
	if p.poll.inflight != 0 || len(p.poll.deadline) != 0 || len(p.poll.ops) != 0 {
		t.Errorf("after the probes: %d in flight, %d deadlines, %d sockets", p.poll.inflight, len(p.poll.deadline), len(p.poll.ops))
	}
}

func TestPollerCancel(t *testing.T) {
	blackholed := fullBacklog(t)
	p := &NetProber{}
	ctx, cancel := context.WithCancel(context.Background())
	time.AfterFunc(50*time.Millisecond, cancel)
	err := p.Probe(ctx, blackholed, &Check{Kind: KindTCP})
	if !errors.Is(err, context.Canceled) {
		t.Errorf("cancelled probe: %v, want context.Canceled", err)
	}
}

// udpSockOf returns the fd of the kept socket for ap, or -1.
func udpSockOf(p *NetProber, ap netip.AddrPort) int {
	p.poll.mu.Lock()
	defer p.poll.mu.Unlock()
	if u := p.poll.udpBy[ap]; u != nil {
		return u.fd
	}
	return -1
}

func TestPollerKeepsUDPSockets(t *testing.T) {
	p := &NetProber{}
	c := &Check{Kind: KindUDP, Send: []byte("x")}
	probe := func(ap netip.AddrPort) error {
		t.Helper()
		ctx, cancel := context.WithTimeout(context.Background(), 150*time.Millisecond)
		defer cancel()
		return p.Probe(ctx, ap, c)
	}

	t.Run("an answering port keeps its socket", func(t *testing.T) {
		echo := serveUDP(t, []byte("ok"))
		if err := probe(echo); err != nil {
			t.Fatal(err)
		}
		fd := udpSockOf(p, echo)
		if err := probe(echo); err != nil {
			t.Fatal(err)
		}
		if got := udpSockOf(p, echo); got != fd || fd < 0 {
			t.Errorf("socket %d after the second probe, want %d again", got, fd)
		}
	})

	t.Run("a closed port is refused, then up on the same socket when it comes back", func(t *testing.T) {
		ap := closedPort(t, "udp")
		for range 2 {
			if err := probe(ap); !errors.Is(err, ErrPortUnreachable) {
				t.Fatalf("closed port: %v, want ErrPortUnreachable", err)
			}
		}
		fd := udpSockOf(p, ap)
		pc, err := net.ListenPacket("udp", ap.String())
		if err != nil {
			t.Skipf("port %s taken meanwhile: %v", ap, err)
		}
		defer pc.Close()
		go func() {
			buf := make([]byte, 64)
			for {
				_, from, err := pc.ReadFrom(buf)
				if err != nil {
					return
				}
				pc.WriteTo([]byte("back"), from)
			}
		}()
		if err := probe(ap); err != nil {
			t.Fatalf("port back: %v, want up", err)
		}
		if got := udpSockOf(p, ap); got != fd {
			t.Errorf("socket %d after the port came back, want %d", got, fd)
		}
	})

	t.Run("a late reply never counts for the next probe", func(t *testing.T) {
		// The port answers each datagram after 250ms: every probe (150ms) times out, and
		// the reply to probe n arrives while probe n+1 waits.
		pc, err := net.ListenPacket("udp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		var wg sync.WaitGroup
		defer func() { pc.Close(); wg.Wait() }()
		wg.Go(func() {
			buf := make([]byte, 64)
			for {
				_, from, err := pc.ReadFrom(buf)
				if err != nil {
					return
				}
				wg.Go(func() {
					time.Sleep(250 * time.Millisecond)
					pc.WriteTo([]byte("late"), from)
				})
			}
		})
		ap := addrPort(t, pc.LocalAddr())
		for i := range 4 {
			if err := probe(ap); !errors.Is(err, ErrTimeout) {
				t.Fatalf("probe %d: %v, want a timeout (a late reply was taken for an answer)", i, err)
			}
		}
	})
}
