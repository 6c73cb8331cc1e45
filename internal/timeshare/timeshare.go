// Package timeshare meters work to a share of the time: a piece of work may start once the
// work charged before it is paid for, at a share of seconds of work a second (1: one CPU's
// worth). Nothing is saved up while no work runs, so a quiet spell lets no burst follow.
// Work is charged its wall time: on a busy CPU it takes longer and gets less. The login
// throttle meters suspect password checks with it, and connlimit the TLS handshakes of
// sources that hold many connections.
package timeshare

import (
	"sync"
	"time"
)

// Share is a share of the time. The zero value is no share: use New.
type Share struct {
	share float64
	mu    sync.Mutex // guards paid
	paid  time.Time  // when the work charged so far is paid for
}

// New returns a Share of share seconds of work a second (more than 0).
func New(share float64) *Share { return &Share{share: share} }

// Next returns when work may start, now or later.
func (s *Share) Next(now time.Time) time.Time {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.paid.After(now) {
		return s.paid
	}
	return now
}

// Charge counts work that ran from start to end.
func (s *Share) Charge(start, end time.Time) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.paid.Before(start) {
		s.paid = start
	}
	s.paid = s.paid.Add(time.Duration(float64(end.Sub(start)) / s.share))
}
