package health

import "time"

// Clock is the time source of a Checker; tests inject a fake one and advance it instead of
// sleeping.
type Clock interface {
	// Now returns the current time.
	Now() time.Time
	// NewTimer returns a timer that fires once after d.
	NewTimer(d time.Duration) Timer
}

// Timer is the part of *time.Timer a Checker uses.
type Timer interface {
	// C is the channel the timer fires on.
	C() <-chan time.Time
	// Reset makes the timer fire after d, whether or not it fired already.
	Reset(d time.Duration)
	// Stop stops the timer.
	Stop()
}

// SystemClock returns the real clock.
func SystemClock() Clock { return systemClock{} }

type systemClock struct{}

func (systemClock) Now() time.Time { return time.Now() }

func (systemClock) NewTimer(d time.Duration) Timer { return sysTimer{time.NewTimer(d)} }

type sysTimer struct{ t *time.Timer }

func (t sysTimer) C() <-chan time.Time   { return t.t.C }
func (t sysTimer) Reset(d time.Duration) { t.t.Reset(d) }
func (t sysTimer) Stop()                 { t.t.Stop() }
