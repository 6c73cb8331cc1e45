// Package starve tells a process whether it was on time to see an answer. A timeout says the
// other end is gone only if this process could have run when the answer came: when its CPU
// is starved, the answer waits in the run queue, and a busy process would read as a dead
// peer. The health checker's probes and the client's keepalives both ask before they judge.
package starve

import (
	rtmetrics "runtime/metrics"
	"sync"
	"time"
)

const (
	schedMetric = "/sched/latencies:seconds"
	// schedEvery is how often the meter keeps a snapshot of the histogram, at most.
	schedEvery = 20 * time.Millisecond
	schedRing  = 128 // snapshots kept: at least 2.5 s at schedEvery
)

// Meter answers how long this process kept a runnable goroutine from a CPU, from the
// runtime's scheduling-latency histogram. Snapshots are taken when the user starts a wait it
// will judge (Mark), so one is never older than the wait it measures by more than schedEvery.
type Meter struct {
	mu    sync.Mutex // guards ring, next, n, buf
	ring  [schedRing]schedSnap
	next  int // the slot Mark writes next
	n     int // snapshots held, up to schedRing
	buf   []rtmetrics.Sample
	bound []float64 // bucket boundaries; the runtime's are fixed for the process's life
}

type schedSnap struct {
	at     time.Time
	counts []uint64
}

// Process is the process's meter, made at first use (nil when the runtime has no
// scheduling-latency histogram): it measures the whole process, so every user shares it
// rather than keep a ring of snapshots (about 160 kB) each.
var Process = sync.OnceValue(New)

// New returns a meter, or nil when the runtime has no scheduling-latency histogram.
func New() *Meter {
	s := &Meter{buf: []rtmetrics.Sample{{Name: schedMetric}}}
	rtmetrics.Read(s.buf)
	if s.buf[0].Value.Kind() != rtmetrics.KindFloat64Histogram {
		return nil // an unknown runtime: no meter, every timeout counts
	}
	s.bound = s.buf[0].Value.Float64Histogram().Buckets
	return s
}

// Mark keeps a snapshot taken at now unless the newest is younger than schedEvery.
func (s *Meter) Mark(now time.Time) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.n > 0 && now.Sub(s.ring[(s.next+schedRing-1)%schedRing].at) < schedEvery {
		return
	}
	slot := &s.ring[s.next]
	slot.at, slot.counts = now, s.readLocked(slot.counts)
	s.next = (s.next + 1) % schedRing
	s.n = min(s.n+1, schedRing)
}

// readLocked copies the histogram's counts into dst.
func (s *Meter) readLocked(dst []uint64) []uint64 {
	rtmetrics.Read(s.buf)
	return append(dst[:0], s.buf[0].Value.Float64Histogram().Counts...)
}

// Longest reports how long, at most, a runnable goroutine of this process waited for a
// CPU between from and now: the lower bound of the highest bucket that gained a count since
// the newest snapshot taken at or before from (the oldest held when none is that old).
func (s *Meter) Longest(from time.Time) time.Duration {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.n == 0 {
		return 0
	}
	base := &s.ring[(s.next+schedRing-s.n)%schedRing]
	for i := 1; i <= s.n; i++ {
		snap := &s.ring[(s.next+schedRing-i)%schedRing]
		if !snap.at.After(from) {
			base = snap
			break
		}
	}
	now := s.readLocked(nil)
	for i := len(now) - 1; i >= 0; i-- {
		if i < len(base.counts) && now[i] > base.counts[i] {
			return time.Duration(max(s.bound[i], 0) * float64(time.Second))
		}
	}
	return 0
}
