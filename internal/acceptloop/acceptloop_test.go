package acceptloop

import (
	"errors"
	"net"
	"sync/atomic"
	"syscall"
	"testing"
	"time"
)

// flaky is a listener whose first accepts fail as a process out of descriptors sees them.
type flaky struct {
	net.Listener
	fails atomic.Int32
}

func (f *flaky) Accept() (net.Conn, error) {
	if f.fails.Add(-1) >= 0 {
		return nil, &net.OpError{Op: "accept", Net: "tcp", Err: syscall.EMFILE}
	}
	return f.Listener.Accept()
}

// The loop outlives "too many open files" and serves the next connection; it returns once
// the listener is closed.
func TestRunOutlivesDescriptorExhaustion(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	f := &flaky{Listener: ln}
	f.fails.Store(3)
	served := make(chan struct{}, 1)
	var told atomic.Int32
	done := make(chan error, 1)
	go func() {
		done <- Run(f, func(c net.Conn) { c.Close(); served <- struct{}{} }, func(err error) {
			if !errors.Is(err, syscall.EMFILE) {
				t.Errorf("told %v, want EMFILE", err)
			}
			told.Add(1)
		})
	}()
	c, err := net.Dial("tcp", ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	select {
	case <-served:
	case <-time.After(10 * time.Second):
		t.Fatal("the loop served nothing after the failures")
	}
	if told.Load() != 1 {
		t.Errorf("told %d times of three failures within a second, want once", told.Load())
	}
	ln.Close()
	if err := <-done; err != nil {
		t.Fatalf("Run after Close: %v, want nil", err)
	}
}
