package proxy

import (
	"errors"
	"io"
	"net"
	"os"
	"testing"
	"time"
)

// testPoll returns a running tcpPoll; cleanup stops it.
func testPoll(t *testing.T) *tcpPoll {
	t.Helper()
	tp, err := newTCPPoll()
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	go func() {
		defer close(done)
		tp.loop()
	}()
	t.Cleanup(func() {
		tp.close()
		<-done
	})
	return tp
}

// sockPair returns a sock (with a running tcpPoll) connected to a net.Conn.
func sockPair(t *testing.T) (*sock, net.Conn) {
	t.Helper()
	tp := testPoll(t)
	l, err := listenTCP(tp, loopback, 0, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	c := dial(t, l.Addr())
	fd, _, err := l.next()
	if err != nil {
		t.Fatal(err)
	}
	s := newSock(tp, fd)
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
