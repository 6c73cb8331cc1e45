// Package testkit holds what the tests of every package share: waiting for a condition,
// running a server a test needs, and the two tiers (Site).
package testkit

import (
	"net"
	"os/exec"
	"sync"
	"testing"
	"time"

	"github.com/frontdoor-vdi/frontdoor/internal/testbuf"
)

// WaitTimeout is how long WaitFor waits.
const WaitTimeout = 10 * time.Second

// WaitFor polls cond every few milliseconds until it holds, and fails t, naming what it
// waited for, once WaitTimeout has passed. A test waits for what it can observe, not for a
// while.
func WaitFor(t testing.TB, what string, cond func() bool) {
	t.Helper()
	for deadline := time.Now().Add(WaitTimeout); !cond(); time.Sleep(5 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("after %s: %s", WaitTimeout, what)
		}
	}
}

// Start starts cmd (a server a test runs, as Pebble or unbound) until the test ends. What it
// writes is kept, returned, and shown when the test fails.
func Start(t testing.TB, what string, cmd *exec.Cmd) *testbuf.Buffer {
	t.Helper()
	logs := &testbuf.Buffer{}
	cmd.Stdout, cmd.Stderr = logs, logs
	if err := cmd.Start(); err != nil {
		t.Fatalf("starting %s: %v", what, err)
	}
	t.Cleanup(func() {
		cmd.Process.Kill()
		cmd.Wait()
		if t.Failed() {
			t.Logf("%s's log:\n%s", what, logs.String())
		}
	})
	return logs
}

// Serve accepts ln's connections until the test ends, each handled by handle on a goroutine of
// its own and closed after it. When the test ends it closes ln and every connection still
// open, and waits for the handlers: a stand-in server leaves no goroutine behind.
func Serve(t testing.TB, ln net.Listener, handle func(net.Conn)) {
	var (
		mu     sync.Mutex // guards open and closed
		open   = map[net.Conn]bool{}
		closed bool
		wg     sync.WaitGroup
	)
	wg.Go(func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			mu.Lock()
			if closed {
				mu.Unlock()
				c.Close()
				return
			}
			open[c] = true
			mu.Unlock()
			wg.Go(func() {
				defer func() {
					mu.Lock()
					delete(open, c)
					mu.Unlock()
					c.Close()
				}()
				handle(c)
			})
		}
	})
	t.Cleanup(func() {
		ln.Close()
		mu.Lock()
		closed = true
		for c := range open {
			c.Close()
		}
		mu.Unlock()
		wg.Wait()
	})
}
