package client

import (
	"fmt"
	"sync"
	"time"
)

// EventKind says what happened to a session.
type EventKind string

// The kinds of Event.
const (
	// EventUp: the channels opened for the first time.
	EventUp EventKind = "up"
	// EventCut: a channel broke; the session is down until EventBack or EventLost.
	EventCut EventKind = "cut"
	// EventAttempt: one try to reopen the channels (a route, or a new launch) failed.
	EventAttempt EventKind = "attempt"
	// EventRelaunch: a new launch through a front door answered.
	EventRelaunch EventKind = "relaunch"
	// EventBack: the channels are open again after a cut.
	EventBack EventKind = "back"
	// EventLost: the session gave up reconnecting.
	EventLost EventKind = "lost"
	// EventClosed: Close was called.
	EventClosed EventKind = "closed"
	// EventMigrated: the QUIC connection moved to a new local address (Address) without a cut.
	EventMigrated EventKind = "migrated"
)

// Event is one entry of a session's timeline.
type Event struct {
	Kind EventKind `json:"kind"`
	At   time.Time `json:"at"`
	// Session is the session ID at the time of the event (after a relaunch, the new one).
	Session string `json:"session"`
	// Mode is the descriptor's mode: gateway or direct.
	Mode string `json:"mode,omitempty"`
	// Via names the route: the gateway's name, or "direct".
	Via string `json:"via,omitempty"`
	// Address is the gateway's or machine's address.
	Address string `json:"address,omitempty"`
	// Ticket is the kind of ticket used: launch or reconnect (up, back, attempt).
	Ticket string `json:"ticket,omitempty"`
	// Reason says why a channel broke or an attempt failed.
	Reason string `json:"reason,omitempty"`
	// Gap is the time from the cut to this event (back, lost, attempt).
	Gap time.Duration `json:"gap,omitempty"`
	// SameSession is true on back when the session ID did not change.
	SameSession bool `json:"same_session,omitempty"`
	// Relaunched is true on back when a new launch was needed.
	Relaunched bool `json:"relaunched,omitempty"`
	// FrontDoor is the front door that answered a relaunch.
	FrontDoor string `json:"front_door,omitempty"`
}

// String formats the event as one line, times as HH:MM:SS.mmm.
func (e Event) String() string {
	at := e.At.Format("15:04:05.000")
	switch e.Kind {
	case EventUp:
		return fmt.Sprintf("up at %s: session %s via %s %s (%s ticket)", at, e.Session, e.Via, e.Address, e.Ticket)
	case EventCut:
		return fmt.Sprintf("cut at %s: session %s via %s %s: %s", at, e.Session, e.Via, e.Address, e.Reason)
	case EventAttempt:
		if e.Address == "" {
			return fmt.Sprintf("attempt at %s: %s", at, e.Reason)
		}
		return fmt.Sprintf("attempt at %s via %s %s (%s): %s", at, e.Via, e.Address, e.Ticket, e.Reason)
	case EventRelaunch:
		return fmt.Sprintf("relaunch at %s through front door %s: session %s, %s mode", at, e.FrontDoor, e.Session, e.Mode)
	case EventBack:
		how := "same session"
		if !e.SameSession {
			how = "new session " + e.Session
		}
		if e.Relaunched {
			how += " after a new launch through " + e.FrontDoor
		}
		return fmt.Sprintf("back at %s after %.3fs (%s via %s %s)", at, e.Gap.Seconds(), how, e.Via, e.Address)
	case EventLost:
		return fmt.Sprintf("lost at %s after %.3fs: %s", at, e.Gap.Seconds(), e.Reason)
	case EventMigrated:
		return fmt.Sprintf("migrated at %s: session %s via %s now from %s", at, e.Session, e.Via, e.Address)
	case EventClosed:
		return fmt.Sprintf("closed at %s: session %s", at, e.Session)
	}
	return fmt.Sprintf("%s at %s", e.Kind, at)
}

// maxEvents bounds a timeline; later events are counted but not kept.
const maxEvents = 10000

// Timeline is a session's events in order, safe for concurrent use.
type Timeline struct {
	mu      sync.Mutex // guards events, dropped
	events  []Event
	dropped int
}

func (t *Timeline) add(e Event) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if len(t.events) >= maxEvents {
		t.dropped++
		return
	}
	t.events = append(t.events, e)
}

// Events returns a copy of the events so far.
func (t *Timeline) Events() []Event {
	t.mu.Lock()
	defer t.mu.Unlock()
	return append([]Event(nil), t.events...)
}

// Dropped returns how many events did not fit in the timeline.
func (t *Timeline) Dropped() int {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.dropped
}
