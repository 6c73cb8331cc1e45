package acceptloop

import (
	"errors"
	"net"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/frontdoor-vdi/frontdoor/internal/testclock"
	"github.com/frontdoor-vdi/frontdoor/internal/testkit"
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

// failing is a listener whose accepts fail with err until it is let through.
type failing struct {
	net.Listener
	err    error
	let    atomic.Bool
	failed atomic.Int32
}

func (f *failing) Accept() (net.Conn, error) {
	if !f.let.Load() {
		f.failed.Add(1)
		return nil, &net.OpError{Op: "accept", Net: "tcp", Err: f.err}
	}
	return f.Listener.Accept()
}

// A loop out of descriptors or memory reads stalled until it accepts again, or until Stale
// after its last failure; a connection aborted before it was accepted stalls nothing.
func TestStalledWhileAcceptsFailForWantOfResources(t *testing.T) {
	for _, tt := range []struct {
		name  string
		err   error
		stall bool
	}{
		{"out of descriptors", syscall.EMFILE, true},
		{"the host out of descriptors", syscall.ENFILE, true},
		{"out of buffers", syscall.ENOBUFS, true},
		{"a connection aborted", syscall.ECONNABORTED, false},
	} {
		t.Run(tt.name, func(t *testing.T) {
			ln, err := net.Listen("tcp", "127.0.0.1:0")
			if err != nil {
				t.Fatal(err)
			}
			f := &failing{Listener: ln, err: tt.err}
			clock := testclock.New(time.Unix(1e9, 0))
			served := make(chan struct{}, 1)
			lp := &Loop{Serve: func(c net.Conn) { c.Close(); served <- struct{}{} }, now: clock.Now}
			done := make(chan error, 1)
			go func() { done <- lp.Run(f) }()
			defer func() {
				f.let.Store(true) // so that Accept reaches the closed listener
				ln.Close()
				if err := <-done; err != nil {
					t.Errorf("Run after Close: %v, want nil", err)
				}
			}()
			testkit.WaitFor(t, "no accept failed", func() bool { return f.failed.Load() >= 2 })
			if got := lp.Stalled(); got != tt.stall {
				t.Fatalf("Stalled() = %v while accepts fail with %v, want %v", got, tt.err, tt.stall)
			}
			if !tt.stall {
				return
			}
			// Past Stale, a loop that goes on failing is marked again by its next try.
			clock.Advance(Stale)
			testkit.WaitFor(t, "a loop that goes on failing is no longer stalled", lp.Stalled)
			f.let.Store(true)
			c, err := net.Dial("tcp", ln.Addr().String())
			if err != nil {
				t.Fatal(err)
			}
			defer c.Close()
			select {
			case <-served:
			case <-time.After(10 * time.Second):
				t.Fatal("nothing served once accepts worked again")
			}
			if lp.Stalled() {
				t.Fatal("Stalled() after a connection was accepted")
			}
		})
	}
}

// A mark fades Stale after the last failure, accepted connection or not: a loop that no
// longer fails has nothing waiting to say it cannot accept.
func TestAStallFadesWithoutFailures(t *testing.T) {
	clock := testclock.New(time.Unix(1e9, 0))
	lp := &Loop{now: clock.Now}
	lp.stalled.Store(clock.Now().UnixNano())
	if !lp.Stalled() {
		t.Fatal("not stalled right after a failure")
	}
	clock.Advance(Stale - time.Millisecond)
	if !lp.Stalled() {
		t.Fatal("not stalled just before Stale")
	}
	clock.Advance(time.Millisecond)
	if lp.Stalled() {
		t.Fatal("still stalled Stale after the last failure")
	}
}
