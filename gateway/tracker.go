package gateway

import (
	"context"
	"sync"
)

// Tracker counts a session's open channels across the gateways that share it (all gateways of
// one node) and tells Sessions when a session's first channel opens and its last one closes.
// Sharing one Tracker keeps a reconnect through another gateway of the node from being undone
// by the old gateway's late close.
type Tracker struct {
	s Sessions

	mu    sync.Mutex // guards count
	count map[string]map[string]int
}

// NewTracker returns a Tracker reporting to s.
func NewTracker(s Sessions) *Tracker { return &Tracker{s: s, count: map[string]map[string]int{}} }

func (t *Tracker) open(session, gw string) {
	t.mu.Lock()
	m := t.count[session]
	if m == nil {
		m = map[string]int{}
		t.count[session] = m
	}
	first := len(m) == 0
	m[gw]++
	t.mu.Unlock()
	if first {
		t.s.Connected(context.Background(), session, gw)
	}
}

func (t *Tracker) close(session, gw string) {
	t.mu.Lock()
	m := t.count[session]
	m[gw]--
	if m[gw] <= 0 {
		delete(m, gw)
	}
	last := len(m) == 0
	if last {
		delete(t.count, session)
	}
	t.mu.Unlock()
	if last {
		t.s.Disconnected(context.Background(), session, gw)
	}
}

// Open returns the number of open channels of session.
func (t *Tracker) Open(session string) int {
	t.mu.Lock()
	defer t.mu.Unlock()
	n := 0
	for _, c := range t.count[session] {
		n += c
	}
	return n
}
