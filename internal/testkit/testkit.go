// Package testkit holds what the tests of every package share: waiting for a condition.
package testkit

import (
	"testing"
	"time"
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
