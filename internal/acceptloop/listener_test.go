package acceptloop

import (
	"net"
	"syscall"
	"testing"
	"time"
)

// emfileThenClosed fails its first n accepts with EMFILE, then reports itself closed.
type emfileThenClosed struct {
	net.Listener
	n int
}

func (f *emfileThenClosed) Accept() (net.Conn, error) {
	if f.n == 0 {
		return nil, net.ErrClosed
	}
	f.n--
	return nil, &net.OpError{Op: "accept", Net: "tcp", Err: syscall.EMFILE}
}

// TestListenerBacksOff: each failed accept waits longer than the one before (5, 10, 20 ms),
// and a closed listener returns at once.
func TestListenerBacksOff(t *testing.T) {
	l := Listener(&emfileThenClosed{n: 3})
	var waits []time.Duration
	for range 3 {
		start := time.Now()
		if _, err := l.Accept(); err == nil {
			t.Fatal("no error")
		}
		waits = append(waits, time.Since(start))
	}
	for i, w := range waits {
		if want := first << i; w < want {
			t.Errorf("failed accept %d returned after %v, want at least %v", i, w, want)
		}
	}
	start := time.Now()
	if _, err := l.Accept(); err != net.ErrClosed {
		t.Fatalf("closed: %v", err)
	}
	if d := time.Since(start); d > first {
		t.Errorf("a closed listener's accept waited %v", d)
	}
}
