package health

import (
	"sync"
	"time"
)

// fakeClock is a Clock that moves only when the test says so.
type fakeClock struct {
	mu     sync.Mutex // guards now and timers
	now    time.Time
	timers []*fakeTimer
}

func newFakeClock() *fakeClock {
	return &fakeClock{now: time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)}
}

func (c *fakeClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

// Set moves the clock to t (never backwards) and fires the timers due.
func (c *fakeClock) Set(t time.Time) {
	c.mu.Lock()
	if t.After(c.now) {
		c.now = t
	}
	now := c.now
	timers := append([]*fakeTimer(nil), c.timers...)
	c.mu.Unlock()
	for _, tm := range timers {
		tm.fireIfDue(now)
	}
}

// Advance moves the clock by d.
func (c *fakeClock) Advance(d time.Duration) { c.Set(c.Now().Add(d)) }

func (c *fakeClock) NewTimer(d time.Duration) Timer {
	t := &fakeTimer{c: c, ch: make(chan time.Time, 1)}
	t.Reset(d)
	c.mu.Lock()
	c.timers = append(c.timers, t)
	c.mu.Unlock()
	return t
}

type fakeTimer struct {
	c      *fakeClock
	ch     chan time.Time
	mu     sync.Mutex // guards when and active
	when   time.Time
	active bool
}

func (t *fakeTimer) C() <-chan time.Time { return t.ch }

func (t *fakeTimer) Reset(d time.Duration) {
	now := t.c.Now()
	t.mu.Lock()
	t.when, t.active = now.Add(d), true
	t.mu.Unlock()
	t.fireIfDue(now)
}

func (t *fakeTimer) Stop() {
	t.mu.Lock()
	t.active = false
	t.mu.Unlock()
}

func (t *fakeTimer) fireIfDue(now time.Time) {
	t.mu.Lock()
	fire := t.active && !t.when.After(now)
	if fire {
		t.active = false
	}
	t.mu.Unlock()
	if fire {
		select {
		case t.ch <- now:
		default:
		}
	}
}
