package ratemap

import (
	"testing"
	"time"

	"golang.org/x/time/rate"
)

// A full map forgets only idle limiters, and the keys that do not fit share one limiter: a
// flood of keys gets neither a fresh budget each nor a reset of a busy key's.
func TestAFullMapFailsClosed(t *testing.T) {
	now := time.Date(2026, 12, 1, 9, 0, 0, 0, time.UTC)
	m := New[int](rate.Every(time.Minute), 2, 3)
	for k := range 3 {
		m.Get(k, now).AllowN(now, 2) // busy: no token left
	}
	if m.Len() != 3 {
		t.Fatalf("%d limiters, want 3", m.Len())
	}
	a, b := m.Get(10, now), m.Get(11, now)
	if a != b || m.Len() != 3 {
		t.Fatalf("keys past a full map of busy limiters got their own (%v), want one shared", a != b)
	}
	if !a.AllowN(now, 2) || b.AllowN(now, 1) {
		t.Fatal("the shared limiter is not one budget")
	}
	if m.Get(0, now).AllowN(now, 1) {
		t.Fatal("a busy key's limiter was reset")
	}
	// Two minutes on, the three are full again: a new key takes the place of one.
	later := now.Add(2 * time.Minute)
	if c := m.Get(12, later); c == a || m.Len() != 1 {
		t.Fatalf("after the limiters refilled: shared %v, %d limiters; want a fresh one among 1", c == a, m.Len())
	}
}
