//go:build linux && (amd64 || arm64)

package rawio

import (
	"errors"
	"io"
	"net"
	"net/netip"
	"os"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

var loopback = netip.MustParseAddrPort("127.0.0.1:0")

// testPoll returns a running dispatching Poll; cleanup stops it.
func testPoll(t *testing.T) *Poll {
	t.Helper()
	tp, err := NewPoll()
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	go func() {
		defer close(done)
		tp.Loop()
	}()
	t.Cleanup(func() {
		tp.Close()
		<-done
	})
	return tp
}

// sockPair returns a Sock (with a running Poll) connected to a net.Conn.
func sockPair(t *testing.T) (*Sock, net.Conn) {
	t.Helper()
	tp := testPoll(t)
	l, err := ListenTCP(tp, loopback, 0, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	c, err := net.DialTCP("tcp", nil, net.TCPAddrFromAddrPort(l.Addr()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	s, _, err := l.Accept()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return s, c
}

func TestSockReadWaitsForBytesAndSeesEOF(t *testing.T) {
	s, c := sockPair(t)
	go func() {
		time.Sleep(10 * time.Millisecond)
		c.Write([]byte("hello"))
		c.(*net.TCPConn).CloseWrite()
	}()
	b, err := io.ReadAll(s)
	if err != nil || string(b) != "hello" {
		t.Fatalf("got %q, %v; want %q", b, err, "hello")
	}
}

func TestSockWaitEndsAtTheDeadlineAndAtClose(t *testing.T) {
	s, _ := sockPair(t)
	s.SetReadDeadline(time.Now().Add(20 * time.Millisecond))
	if _, err := s.Read(make([]byte, 1)); !errors.Is(err, os.ErrDeadlineExceeded) {
		t.Fatalf("read past the deadline: %v, want os.ErrDeadlineExceeded", err)
	}
	s.SetReadDeadline(time.Time{})
	errc := make(chan error, 1)
	go func() {
		_, err := s.Read(make([]byte, 1))
		errc <- err
	}()
	time.Sleep(10 * time.Millisecond) // let it wait; the test passes either way
	s.Close()
	select {
	case err := <-errc:
		if !errors.Is(err, net.ErrClosed) {
			t.Fatalf("read across Close: %v, want net.ErrClosed", err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("read still waiting after Close")
	}
}

func TestSockDeadlineInThePastCutsAWaitAtOnce(t *testing.T) {
	s, _ := sockPair(t)
	errc := make(chan error, 1)
	go func() {
		_, err := s.Read(make([]byte, 1))
		errc <- err
	}()
	time.Sleep(10 * time.Millisecond)
	s.SetReadDeadline(time.Unix(1, 0))
	select {
	case err := <-errc:
		if !errors.Is(err, os.ErrDeadlineExceeded) {
			t.Fatalf("got %v, want os.ErrDeadlineExceeded", err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("read still waiting after its deadline passed")
	}
}

// TestTCPPollClosesWhileEventsFlow: closing the poller while its loop dispatches events from
// busy sockets neither hangs nor leaves the loop running.
func TestTCPPollClosesWhileEventsFlow(t *testing.T) {
	for iter := range 8 {
		tp, err := NewPoll()
		if err != nil {
			t.Fatal(err)
		}
		loopDone := make(chan struct{})
		go func() {
			defer close(loopDone)
			tp.Loop()
		}()
		l, err := ListenTCP(tp, loopback, 0, 0)
		if err != nil {
			t.Fatal(err)
		}
		stop := make(chan struct{})
		var wg sync.WaitGroup
		var socks []*Sock
		var conns []net.Conn
		for range 16 {
			c, err := net.DialTCP("tcp", nil, net.TCPAddrFromAddrPort(l.Addr()))
			if err != nil {
				t.Fatal(err)
			}
			s, _, err := l.Accept()
			if err != nil {
				t.Fatal(err)
			}
			if err := tp.register(s); err != nil {
				t.Fatal(err)
			}
			socks, conns = append(socks, s), append(conns, c)
			wg.Add(2)
			go func() { // each write is an event for the loop
				defer wg.Done()
				for range 100000 {
					select {
					case <-stop:
						return
					default:
					}
					c.Write([]byte("x"))
				}
			}()
			go func() {
				defer wg.Done()
				b := make([]byte, 4096)
				for {
					if _, err := s.Read(b); err != nil {
						return
					}
				}
			}()
		}
		time.Sleep(2 * time.Millisecond)
		closed := make(chan struct{})
		go func() {
			tp.Close()
			close(closed)
		}()
		select {
		case <-closed:
		case <-time.After(5 * time.Second):
			t.Fatalf("iteration %d: closing the poller hung", iter)
		}
		<-loopDone
		close(stop)
		for _, s := range socks {
			s.Close()
		}
		for _, c := range conns {
			c.Close()
		}
		l.Close()
		wg.Wait()
	}
}

// Once the poller has failed, a socket's wait returns the failure at once instead of
// waiting for readiness, and a socket not in the set yet cannot join it.
func TestTCPPollFailureEndsWaits(t *testing.T) {
	s, _ := sockPair(t)
	s2, _ := sockPair(t)
	s2.p = s.p
	readErr := make(chan error, 1)
	go func() {
		_, err := s.Read(make([]byte, 1)) // nothing comes: waits in the set
		readErr <- err
	}()
	time.Sleep(20 * time.Millisecond)
	injected := errors.New("injected")
	s.p.Fail(injected)
	select {
	case err := <-readErr:
		if !errors.Is(err, injected) {
			t.Fatalf("waiting read returned %v; want the poller's error", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("read still waiting after the poller failed")
	}
	if _, err := s2.Read(make([]byte, 1)); !errors.Is(err, injected) {
		t.Fatalf("read of a socket outside the set returned %v; want the poller's error", err)
	}
}

// counter is a Starter that counts its starts.
type counter struct{ n *atomic.Int32 }

func (c counter) Start() { c.n.Add(1) }

// Work armed to start on its socket's readiness starts exactly once, whichever of the
// arming and the readiness comes first, however closely they race.
func TestArmedWorkStartsExactlyOnce(t *testing.T) {
	var started atomic.Int32
	tp := testPoll(t)
	rounds := 50000 // the old order (take the half, then leave the token) failed within 17,000
	if testing.Short() {
		rounds = 5000
	}
	for i := range rounds {
		fds, err := unix.Socketpair(unix.AF_UNIX, unix.SOCK_STREAM|unix.SOCK_NONBLOCK|unix.SOCK_CLOEXEC, 0)
		if err != nil {
			t.Fatal(err)
		}
		s := NewSock(tp, fds[0])
		started.Store(0)
		a := &Arm{counter{&started}}
		var wg sync.WaitGroup
		wg.Add(2)
		go func() { defer wg.Done(); s.StartOnReadable(a) }()
		go func() { defer wg.Done(); s.r.wakeOrStart() }()
		wg.Wait()
		if n := started.Load(); n != 1 {
			t.Fatalf("round %d: the armed work started %d times, want once", i, n)
		}
		s.Close()
		unix.Close(fds[1])
	}
}
