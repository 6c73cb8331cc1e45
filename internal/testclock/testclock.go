// Package testclock is a clock for tests that moves only when told to.
package testclock

import (
	"sync"
	"time"
)

// Clock is a clock that tests advance by hand; safe for concurrent use.
type Clock struct {
	mu sync.Mutex
	t  time.Time
}

// New returns a clock reading t.
func New(t time.Time) *Clock { return &Clock{t: t} }

// Now returns the clock's time.
func (c *Clock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.t
}

// Advance moves the clock by d.
func (c *Clock) Advance(d time.Duration) {
	c.mu.Lock()
	c.t = c.t.Add(d)
	c.mu.Unlock()
}
