// Package testclock is a clock for tests that moves only when told to, with timers that fire
// as it passes them.
package testclock

import (
	"sync"
	"time"
)

// Clock is a clock that tests advance by hand; safe for concurrent use.
type Clock struct {
	mu     sync.Mutex // guards t and timers
	t      time.Time
	timers []*Timer
}

// New returns a clock reading t.
func New(t time.Time) *Clock { return &Clock{t: t} }

// Now returns the clock's time.
func (c *Clock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.t
}

// Advance moves the clock by d, backwards too (a clock that is set back), and fires the
// timers due.
func (c *Clock) Advance(d time.Duration) {
	c.mu.Lock()
	c.t = c.t.Add(d)
	c.mu.Unlock()
	c.fire()
}

// Set moves the clock to t (never backwards) and fires the timers due.
func (c *Clock) Set(t time.Time) {
	c.mu.Lock()
	if t.After(c.t) {
		c.t = t
	}
	c.mu.Unlock()
	c.fire()
}

// fire fires the timers due at the clock's time.
func (c *Clock) fire() {
	c.mu.Lock()
	now := c.t
	timers := append([]*Timer(nil), c.timers...)
	c.mu.Unlock()
	for _, tm := range timers {
		tm.fireIfDue(now)
	}
}

// NewTimer returns a timer that fires once when the clock reaches d from now, as
// time.NewTimer does on the real clock.
func (c *Clock) NewTimer(d time.Duration) *Timer {
	t := &Timer{c: c, ch: make(chan time.Time, 1)}
	t.Reset(d)
	c.mu.Lock()
	c.timers = append(c.timers, t)
	c.mu.Unlock()
	return t
}

// Timer is a timer of a Clock.
type Timer struct {
	c      *Clock
	ch     chan time.Time
	mu     sync.Mutex // guards when and active
	when   time.Time
	active bool
}

// C is the channel the timer fires on, with the clock's time.
func (t *Timer) C() <-chan time.Time { return t.ch }

// Reset makes the timer fire d from the clock's now, whether or not it fired already.
func (t *Timer) Reset(d time.Duration) {
	now := t.c.Now()
	t.mu.Lock()
	t.when, t.active = now.Add(d), true
	t.mu.Unlock()
	t.fireIfDue(now)
}

// Stop stops the timer.
func (t *Timer) Stop() {
	t.mu.Lock()
	t.active = false
	t.mu.Unlock()
}

func (t *Timer) fireIfDue(now time.Time) {
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
