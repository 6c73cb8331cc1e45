package health

import (
	"time"

	"github.com/frontdoor-vdi/frontdoor/internal/testclock"
)

// fakeClock is the test kit's clock as a Checker's Clock: it moves only when the test says so.
type fakeClock struct{ *testclock.Clock }

func newFakeClock() fakeClock {
	return fakeClock{testclock.New(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))}
}

func (c fakeClock) NewTimer(d time.Duration) Timer { return c.Clock.NewTimer(d) }
