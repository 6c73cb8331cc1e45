package health

import (
	rtmetrics "runtime/metrics"
	"sync"
	"time"
)

// A probe that times out says the target is down only if this process was on time to see
// the answer. When the process's CPU is starved (a node on one busy core, thousands of TLS
// handshakes queued), the answer of a healthy gateway, often one this very process hosts,
// waits in the run queue behind them, and three such probes in a row would read a busy
// node as a dead gateway. So the Checker asks, for each timed-out probe, how long a
// runnable goroutine of this process waited for a CPU while the probe ran (the runtime's
// /sched/latencies:seconds histogram), and holds the result when that reached a quarter of
// the probe's timeout. Held results count neither way; after Fall of them in a row the next
// ones count as failures again, so a dead target behind a starved prober still goes down,
// after at most twice the usual number of probes. Memberlist's Lifeguard ("local health
// aware probe") makes the same call for its failure detector.

// StarvedFunc reports how long, at most, a runnable goroutine of this process waited for a
// CPU between from and now. The Checker calls it for probes that timed out.
type StarvedFunc func(from time.Time) time.Duration

const (
	schedMetric = "/sched/latencies:seconds"
	// schedEvery is how often the meter keeps a snapshot of the histogram, at most.
	schedEvery = 20 * time.Millisecond
	schedRing  = 128 // snapshots kept: at least 2.5 s at schedEvery
)

// schedMeter answers StarvedFunc from the runtime's scheduling-latency histogram. Snapshots
// are taken when the Checker starts probes (mark), so one is never older than the probe it
// measures by more than schedEvery.
type schedMeter struct {
	mu    sync.Mutex // guards ring, next, n, buf
	ring  [schedRing]schedSnap
	next  int // the slot mark writes next
	n     int // snapshots held, up to schedRing
	buf   []rtmetrics.Sample
	bound []float64 // bucket boundaries; the runtime's are fixed for the process's life
}

type schedSnap struct {
	at     time.Time
	counts []uint64
}

func newSchedMeter() *schedMeter {
	s := &schedMeter{buf: []rtmetrics.Sample{{Name: schedMetric}}}
	rtmetrics.Read(s.buf)
	if s.buf[0].Value.Kind() != rtmetrics.KindFloat64Histogram {
		return nil // an unknown runtime: no meter, every timeout counts
	}
	s.bound = s.buf[0].Value.Float64Histogram().Buckets
	return s
}

// mark keeps a snapshot taken at now unless the newest is younger than schedEvery.
func (s *schedMeter) mark(now time.Time) {
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
func (s *schedMeter) readLocked(dst []uint64) []uint64 {
	rtmetrics.Read(s.buf)
	return append(dst[:0], s.buf[0].Value.Float64Histogram().Counts...)
}

// longest is a StarvedFunc: the lower bound of the highest bucket that gained a count since
// the newest snapshot taken at or before from (the oldest held when none is that old).
func (s *schedMeter) longest(from time.Time) time.Duration {
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
