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
				turnAt(t, lock, true)
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
	turnAt(t, lock, true)
	turnAt(t, lock, true)
	t.Run("sub", func(t *testing.T) { turnAt(t, lock, true) })
}

// TestBesideTakesTurnsWithAlone: a test that runs alone never runs beside another.
func TestBesideTakesTurnsWithAlone(t *testing.T) {
	lock := filepath.Join(t.TempDir(), "lock")
	var alone, beside atomic.Int32
	var bad atomic.Bool
	var wg sync.WaitGroup
	for i := range 6 {
		wg.Go(func() {
			t.Run("turn", func(t *testing.T) {
				if i%3 == 0 {
					turnAt(t, lock, true)
					if alone.Add(1) > 1 || beside.Load() > 0 {
						bad.Store(true)
					}
					time.Sleep(20 * time.Millisecond)
					alone.Add(-1)
					return
				}
				turnAt(t, lock, false)
				beside.Add(1)
				if alone.Load() > 0 {
					bad.Store(true)
				}
				time.Sleep(40 * time.Millisecond)
				beside.Add(-1)
			})
		})
	}
	wg.Wait()
	if bad.Load() {
		t.Fatal("a test ran alone beside another")
	}
}
