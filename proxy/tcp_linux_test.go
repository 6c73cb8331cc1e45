//go:build linux && (amd64 || arm64)

package proxy

// Tests of the TCP path that hold on the raw engine only (its halves, TCP_DEFER_ACCEPT).

import (
	"io"
	"log/slog"
	"net"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/frontdoor-vdi/frontdoor/internal/testbuf"
)

func TestKillingAConnectionWhoseBackendHasNotAnsweredEndsBothHalves(t *testing.T) {
	got := make(chan struct{})
	be := startTCP(t, func(c *net.TCPConn) {
		c.Read(make([]byte, 1))
		close(got)
		io.Copy(io.Discard, c) // never answers
	})
	var logs testbuf.Buffer
	s, err := New(Config{
		Listeners: []Listener{tcpListener("l", "p")},
		Pools:     []Pool{onePool("p", be.addr())},
	}, Options{Logger: slog.New(slog.NewTextHandler(&logs, nil))})
	if err != nil {
		t.Fatal(err)
	}
	s.parkAfter, s.parkSilent = time.Hour, time.Hour // the in half keeps waiting in its goroutine
	serveTest(t, s)
	c := dial(t, s.Addr("l"))
	c.Write([]byte("x"))
	<-got
	// Wait until the connection is handed to its halves, the out half not yet started.
	var list []*session
	for i := 0; len(list) == 0; i++ {
		if i == 500 {
			t.Fatal("the connection never reached its halves")
		}
		time.Sleep(time.Millisecond)
		s.mu.Lock()
		for ss := range s.sessions {
			if t, ok := ss.t.(*tconn); ok && ss.backend.(rawConn).Armed(&t.out.arm) {
				list = append(list, ss)
			}
		}
		s.mu.Unlock()
	}
	s.killSessions(list, errIdle)
	expectClosed(t, c)
	s.Close()
	if line := logs.String(); !strings.Contains(line, "reason=idle") {
		t.Fatalf("access log %q lacks reason=idle", line)
	}
}

// TestTCPDeferAcceptWaitsForTheClientsFirstBytes: with DeferAccept, a connected client that
// has sent nothing yet costs no backend connection; its first bytes bring it in as usual.
func TestTCPDeferAcceptWaitsForTheClientsFirstBytes(t *testing.T) {
	be := startTCP(t, func(c *net.TCPConn) {
		b := make([]byte, 64)
		n, _ := c.Read(b)
		c.Write([]byte("answer to " + string(b[:n])))
	})
	l := tcpListener("l", "p")
	l.DeferAccept = true
	s := startServer(t, Config{Listeners: []Listener{l}, Pools: []Pool{onePool("p", be.addr())}}, Options{})
	c := dial(t, s.Addr("l"))
	time.Sleep(300 * time.Millisecond)
	be.mu.Lock()
	early := len(be.conns)
	be.mu.Unlock()
	if early != 0 {
		t.Fatalf("%d backend connections for a client that sent nothing yet, want 0", early)
	}
	c.Write([]byte("question"))
	buf := make([]byte, 64)
	n, err := c.Read(buf)
	if err != nil || string(buf[:n]) != "answer to question" {
		t.Fatalf("got %q, %v", buf[:n], err)
	}
}

// TestTCPBytesAfterUrgentDataAreNotHeld: a read stops short at the TCP urgent mark while bytes
// behind it are queued; they must still be moved at once, not when the half's next deadline
// passes (set to an hour here, so a missed wake-up would hang).
func TestTCPBytesAfterUrgentDataAreNotHeld(t *testing.T) {
	got := make(chan string, 100)
	be := startTCP(t, func(c *net.TCPConn) {
		b := make([]byte, 4096)
		for {
			n, err := c.Read(b)
			if n > 0 {
				got <- string(b[:n])
			}
			if err != nil {
				return
			}
		}
	})
	s, err := New(Config{Listeners: []Listener{tcpListener("l", "p")}, Pools: []Pool{onePool("p", be.addr())}},
		Options{Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	if err != nil {
		t.Fatal(err)
	}
	s.parkAfter, s.parkSilent = time.Hour, time.Hour
	serveTest(t, s)
	for round := range 10 {
		c := dial(t, s.Addr("l"))
		c.Write([]byte("hello"))
		if g := <-got; g != "hello" {
			t.Fatalf("got %q", g)
		}
		rc, _ := c.SyscallConn()
		rc.Write(func(fd uintptr) bool {
			unix.Write(int(fd), []byte("abc"))
			unix.Sendto(int(fd), []byte("X"), unix.MSG_OOB, nil)
			unix.Write(int(fd), []byte("def"))
			return true
		})
		var all string
		for !strings.Contains(all, "def") {
			select {
			case g := <-got:
				all += g
			case <-time.After(5 * time.Second):
				t.Fatalf("round %d: the backend got %q and never the bytes after the urgent mark", round, all)
			}
		}
		c.Close()
	}
}
