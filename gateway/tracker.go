package gateway

import (
	"context"
	"sync"
)

// Tracker counts a session's open channels across the gateways that share it (all gateways of
// one node) and tells Sessions when a session's first channel opens and its last one closes.
// Sharing one Tracker keeps a reconnect through another gateway of the node from being undone
// by the old gateway's late close.
//
// A session's reports are made one at a time, in the order its counts changed: a close that
// found the last channel gone reports Disconnected before a reopen that follows it reports
// Connected, so the broker never ends up with the state of an older change.
type Tracker struct {
	s Sessions

	mu    sync.Mutex // guards count
	count map[string]*tracked
}

// tracked is one session's channel counts.
type tracked struct {
	users int // goroutines using the entry (guarded by Tracker.mu); dropped at 0 with no channel open

	mu       sync.Mutex     // serializes the session's changes and reports
	open     map[string]int // gateway -> open channels
	reported bool           // Connected was the last report
}

// NewTracker returns a Tracker reporting to s.
func NewTracker(s Sessions) *Tracker { return &Tracker{s: s, count: map[string]*tracked{}} }

// change applies delta to session's channels on gw and reports a change of "any channel open".
func (t *Tracker) change(session, gw string, delta int) {
	t.mu.Lock()
	e := t.count[session]
	if e == nil {
		e = &tracked{open: map[string]int{}}
		t.count[session] = e
	}
	e.users++
	t.mu.Unlock()

	e.mu.Lock()
	if n := e.open[gw] + delta; n > 0 {
		e.open[gw] = n
	} else {
		delete(e.open, gw)
	}
	switch up := len(e.open) > 0; {
	case up && !e.reported:
		e.reported = true
		t.s.Connected(context.Background(), session, gw)
	case !up && e.reported:
		e.reported = false
		t.s.Disconnected(context.Background(), session, gw)
	}
	e.mu.Unlock()

	t.mu.Lock()
	e.users--
	// With no user left nobody writes e.open: a new one would first need t.mu.
	if e.users == 0 && len(e.open) == 0 {
		delete(t.count, session)
	}
	t.mu.Unlock()
}

func (t *Tracker) open(session, gw string)  { t.change(session, gw, 1) }
func (t *Tracker) close(session, gw string) { t.change(session, gw, -1) }

// carries reports whether session has a channel open on gw (any of its ports or its QUIC
// end, when they share this Tracker).
func (t *Tracker) carries(session, gw string) bool {
	t.mu.Lock()
	e := t.count[session]
	t.mu.Unlock()
	if e == nil {
		return false
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.open[gw] > 0
}

// Open returns the number of open channels of session.
func (t *Tracker) Open(session string) int {
	t.mu.Lock()
	e := t.count[session]
	t.mu.Unlock()
	if e == nil {
		return 0
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	n := 0
	for _, c := range e.open {
		n += c
	}
	return n
}
