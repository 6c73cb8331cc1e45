//go:build unix

package testkit

import (
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// TestAloneTakesTurns: tests that call Alone run one at a time, each to its end.
func TestAloneTakesTurns(t *testing.T) {
	var inside, most atomic.Int32
	var wg sync.WaitGroup
	for range 4 {
		wg.Go(func() {
			t.Run("turn", func(t *testing.T) {
				Alone(t)
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
