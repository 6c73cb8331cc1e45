package health

import (
	"container/heap"
	"time"
)

// quantum is the step of the ports' phases. Ports whose interval is a multiple of it probe
// at shared instants, so that a Checker of thousands of ports starts its probes in batches
// and wakes at most 1s/quantum = 200 times a second, while every probe starts at its slot.
const quantum = 5 * time.Millisecond

// run is one port's place in the schedule, or one probe to start.
type run struct {
	tgt  *target
	ps   *portState
	slot time.Time // the grid slot of the next probe
	at   time.Time // when it starts: the slot, or up to Jitter×Interval before it
	seq  uint64    // for a probe to start: its sequence number
	idx  int       // heap index
}

// firstRun places a port's first slot at a random phase within one interval, a multiple of
// quantum after the Checker's origin, so that targets loaded together do not probe together
// and ports with the same interval start their probes together.
func (c *Checker) firstRun(tg *target, ps *portState, origin time.Time) *run {
	m := &tg.t.Monitor
	steps := max(int64(m.Interval/quantum), 1)
	phase := time.Duration(float64(steps)*c.rand()) * quantum
	if phase >= m.Interval {
		phase = 0
	}
	r := &run{tgt: tg, ps: ps, slot: origin.Add(phase)}
	r.at = c.jittered(r.slot, m, origin)
	return r
}

// advance moves r to its next slot after a probe started at now. Slots stay on the port's
// grid, Interval apart, and with no jitter (the default) a probe starts at its slot: a probe
// started early can see a port that fails just after it as up, which stretches the time to
// F failures by that much. A Checker that fell behind skips the missed slots.
func (c *Checker) advance(r *run, now time.Time) {
	m := &r.tgt.t.Monitor
	r.slot = r.slot.Add(m.Interval)
	if behind := now.Sub(r.slot); behind >= 0 {
		r.slot = r.slot.Add((behind/m.Interval + 1) * m.Interval)
	}
	r.at = c.jittered(r.slot, m, now)
}

// jittered returns a start up to Jitter×Interval before slot, never before now; the slot
// itself when the port has no jitter.
func (c *Checker) jittered(slot time.Time, m *Monitor, now time.Time) time.Time {
	if m.Jitter <= 0 {
		return slot
	}
	at := slot.Add(-time.Duration(c.rand() * m.Jitter * float64(m.Interval)))
	if at.Before(now) {
		return now
	}
	return at
}

// runHeap orders runs by start time.
type runHeap []*run

func (h runHeap) Len() int           { return len(h) }
func (h runHeap) Less(i, j int) bool { return h[i].at.Before(h[j].at) }
func (h runHeap) Swap(i, j int) {
	h[i], h[j] = h[j], h[i]
	h[i].idx, h[j].idx = i, j
}

// Push implements heap.Interface; use push.
func (h *runHeap) Push(x any) {
	r := x.(*run)
	r.idx = len(*h)
	*h = append(*h, r)
}

// Pop implements heap.Interface; use pop.
func (h *runHeap) Pop() any {
	old := *h
	r := old[len(old)-1]
	old[len(old)-1] = nil
	*h = old[:len(old)-1]
	return r
}

func (h *runHeap) push(r *run) { heap.Push(h, r) }
func (h *runHeap) pop() *run   { return heap.Pop(h).(*run) }
