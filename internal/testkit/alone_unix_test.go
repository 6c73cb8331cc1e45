//go:build unix

package testkit

import (
	"path/filepath"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// TestAloneTakesTurns: tests that call Alone run one at a time, each to its end.
func TestAloneTakesTurns(t *testing.T) {
	lock := filepath.Join(t.TempDir(), "lock") // not the site tests' own: they may run now
	var inside, most atomic.Int32
	var wg sync.WaitGroup
	for range 4 {
		wg.Go(func() {
			t.Run("turn", func(t *testing.T) {
				aloneAt(t, lock)
				n := inside.Add(1)
				for m := most.Load(); n > m && !most.CompareAndSwap(m, n); m = most.Load() {
				}
				time.Sleep(20 * time.Millisecond) // a site test's work
				inside.Add(-1)
			})
		})
	}
	wg.Wait()
	if most.Load() != 1 {
		t.Fatalf("%d tests ran at once, want 1", most.Load())
	}
}

// TestAloneTwiceInOneTest: a test that asks twice (a helper that asks, called twice), and its
// subtests, already have their turn; they do not wait for themselves.
func TestAloneTwiceInOneTest(t *testing.T) {
	lock := filepath.Join(t.TempDir(), "lock")
	aloneAt(t, lock)
	aloneAt(t, lock)
	t.Run("sub", func(t *testing.T) { aloneAt(t, lock) })
}
