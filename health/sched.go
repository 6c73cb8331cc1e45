package health

import (
	"container/heap"
	"time"
)

// run is one port's place in the schedule, or one probe to start.
type run struct {
	tgt  *target
	ps   *portState
	slot time.Time // the grid slot of the next probe
	at   time.Time // when it starts: slot minus jitter
	seq  uint64    // for a probe to start: its sequence number
	idx  int       // heap index
}

// firstRun places a port's first slot at a random phase within one interval, so that targets
// loaded together do not probe together.
func (c *Checker) firstRun(tg *target, ps *portState, now time.Time) *run {
	m := &tg.t.Monitor
	r := &run{tgt: tg, ps: ps, slot: now.Add(time.Duration(c.rand() * float64(m.Interval)))}
	r.at = c.jittered(r.slot, m, now)
	return r
}

// advance moves r to its next slot after a probe started at now. Slots stay on the port's
// grid, so jitter does not accumulate; a Checker that fell behind skips the missed slots.
func (c *Checker) advance(r *run, now time.Time) {
	m := &r.tgt.t.Monitor
	r.slot = r.slot.Add(m.Interval)
	if behind := now.Sub(r.slot); behind >= 0 {
		r.slot = r.slot.Add((behind/m.Interval + 1) * m.Interval)
	}
	r.at = c.jittered(r.slot, m, now)
}

// jittered returns a start time up to Jitter×Interval before slot, never before now.
func (c *Checker) jittered(slot time.Time, m *Monitor, now time.Time) time.Time {
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
