package broker

import (
	"cmp"
	"fmt"
	"slices"
)

// FullLoad is the load index of a machine that takes no new session.
const FullLoad = 10000

// Evaluators are a machine's load evaluators (CTX202150), each 0..FullLoad: sessions /
// max_sessions, CPU, memory, and logons in flight / the group's max_logons. An evaluator the
// machine's group does not use is -1 (load.cpu or load.memory false, max_logons 0).
type Evaluators struct {
	Sessions, CPU, Memory, Logons int
}

// evaluators computes m's evaluators.
func (m *machine) evaluators() Evaluators {
	e := Evaluators{Sessions: min(m.sessions*FullLoad/m.max, FullLoad), CPU: -1, Memory: -1, Logons: -1}
	g := m.group
	if g.cpu {
		e.CPU = min(max(m.cpu, 0), 100) * 100
	}
	if g.mem {
		e.Memory = min(max(m.mem, 0), 100) * 100
	}
	if g.maxLogons > 0 {
		e.Logons = min(m.pending*FullLoad/g.maxLogons, FullLoad)
	}
	return e
}

// loadIndex computes the Citrix-style load index of m from its evaluators: the index is the
// largest evaluator plus 0.05 × the mean of the others, capped at FullLoad.
func (m *machine) loadIndex() int {
	e := m.evaluators()
	largest, sum, n := 0, 0, 0
	for _, v := range [4]int{e.Sessions, e.CPU, e.Memory, e.Logons} {
		if v < 0 {
			continue
		}
		largest = max(largest, v)
		sum += v
		n++
	}
	idx := largest
	if n > 1 {
		idx += (sum - largest) / (n - 1) / 20
	}
	return min(idx, FullLoad)
}

// unavailable says why m takes no new session, or "" when it may.
func (m *machine) unavailable() string {
	switch {
	case m.down:
		return "down"
	case m.maintenance:
		return "maintenance"
	case m.sessions >= m.max:
		return fmt.Sprintf("full (%d/%d sessions)", m.sessions, m.max)
	case m.load >= FullLoad:
		return fmt.Sprintf("load index %d", m.load)
	}
	return ""
}

// compareLoad orders machines least loaded first, ties by the stable hash, then name.
func compareLoad(a, b *machine) int {
	if c := cmp.Compare(a.load, b.load); c != 0 {
		return c
	}
	if c := cmp.Compare(a.tie, b.tie); c != 0 {
		return c
	}
	return cmp.Compare(a.name, b.name)
}

// bucket holds the machines of one group in one zone: the available ones ordered by load and
// the unavailable ones by name, with load aggregates for site search.
type bucket struct {
	zone    string
	avail   []*machine // available for new sessions, by compareLoad
	unavail []*machine // the others, by name
	all     int        // machine count

	// aggregates over all machines of the bucket (unavailable ones count as FullLoad)
	sumLoad  int
	sessions int
	capacity int
}

func (b *bucket) insert(m *machine) {
	if m.unavailable() == "" {
		i, _ := slices.BinarySearchFunc(b.avail, m, compareLoad)
		b.avail = slices.Insert(b.avail, i, m)
		m.inAvail = true
	} else {
		i, _ := slices.BinarySearchFunc(b.unavail, m, func(x, y *machine) int { return cmp.Compare(x.name, y.name) })
		b.unavail = slices.Insert(b.unavail, i, m)
		m.inAvail = false
	}
	b.sumLoad += m.effLoad()
	b.sessions += m.sessions
	b.capacity += m.max
}

func (b *bucket) remove(m *machine) {
	if m.inAvail {
		if i, ok := slices.BinarySearchFunc(b.avail, m, compareLoad); ok {
			b.avail = slices.Delete(b.avail, i, i+1)
		}
	} else {
		if i, ok := slices.BinarySearchFunc(b.unavail, m, func(x, y *machine) int { return cmp.Compare(x.name, y.name) }); ok {
			b.unavail = slices.Delete(b.unavail, i, i+1)
		}
	}
	b.sumLoad -= m.effLoad()
	b.sessions -= m.sessions
	b.capacity -= m.max
}

// effLoad is the load counted in site aggregates.
func (m *machine) effLoad() int {
	if m.down || m.maintenance {
		return FullLoad
	}
	return m.load
}

// pick returns the best available machine of the bucket for new sessions — least loaded, or
// most loaded with room when vertical — skipping excluded ones.
func (b *bucket) pick(vertical bool, exclude map[*machine]bool) *machine {
	if !vertical {
		for _, m := range b.avail {
			if !exclude[m] {
				return m
			}
		}
		return nil
	}
	for i := len(b.avail) - 1; i >= 0; i-- {
		if m := b.avail[i]; !exclude[m] {
			return m
		}
	}
	return nil
}

// better reports whether a beats b for placement under the policy.
func better(a, b *machine, vertical bool) bool {
	if b == nil {
		return true
	}
	if vertical {
		return compareLoad(a, b) > 0
	}
	return compareLoad(a, b) < 0
}

// update re-evaluates m after a change of its counters or flags, keeping its bucket ordered.
// The caller holds Broker.mu and applies the change inside fn.
func (m *machine) update(fn func()) {
	b := m.group.buckets[m.zone]
	b.remove(m)
	fn()
	m.load = m.loadIndex()
	b.insert(m)
}
