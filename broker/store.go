package broker

import (
	"context"
	"fmt"
	"time"
)

// State is the lifecycle state of a session: pending → connected ⇄ disconnected → ended.
type State string

// Session states.
const (
	// StatePending is a launched session whose client has not connected yet. It expires
	// after site.sessions.pending_timeout and frees its slot.
	StatePending State = "pending"
	// StateConnected is a session with a client attached.
	StateConnected State = "connected"
	// StateDisconnected is a session kept for reconnection; it expires after its group's
	// disconnect_timeout.
	StateDisconnected State = "disconnected"
	// StateEnded is a session that was logged off or expired. Ended sessions are removed from
	// the store; the state only appears in values returned by Logoff and Expire.
	StateEnded State = "ended"
)

// Session is one user session on one machine. Sessions are values: the broker and the store
// hand out copies.
type Session struct {
	// ID identifies the session in the site.
	ID string `json:"id"`
	// User is the user name.
	User string `json:"user"`
	// Resource is the launched resource.
	Resource string `json:"resource"`
	// Group is the delivery group of the machine.
	Group string `json:"group"`
	// Machine is the machine name.
	Machine string `json:"machine"`
	// Zone is the machine's zone.
	Zone string `json:"zone"`
	// State is the lifecycle state.
	State State `json:"state"`
	// Endpoint identifies the client device of the last launch or reconnect.
	Endpoint string `json:"endpoint,omitempty"`
	// Via is what carries the connected session's channels: a gateway's name, or "direct"
	// for a machine's own report; kept after a disconnect. Empty when not known.
	Via string `json:"via,omitempty"`
	// Mode is "gateway" or "direct", fixed at launch (running sessions keep their mode when
	// the group's secure_gateway changes).
	Mode string `json:"mode"`
	// Created is when the session was launched.
	Created time.Time `json:"created"`
	// Changed is when the state last changed.
	Changed time.Time `json:"changed"`
	// Expires is when a pending or disconnected session ends; zero for connected sessions.
	Expires time.Time `json:"expires,omitzero"`
	// Rev is the store revision of the session, incremented by every write; UpdateSession
	// compares it (like an etcd ModRevision).
	Rev uint64 `json:"rev"`
}

// live reports whether the session occupies a slot on its machine.
func (s *Session) live() bool { return s.State != StateEnded }

// MachineState is the run-time state of a machine kept in the store: the load reported by its
// agent and the flags set by operators and health checks.
type MachineState struct {
	// Name is the machine name.
	Name string `json:"name"`
	// CPU is the percent of CPU busy, 0..100, reported by the agent.
	CPU int `json:"cpu"`
	// Memory is the percent of memory used, 0..100, reported by the agent.
	Memory int `json:"memory"`
	// Maintenance overrides the configured maintenance flag when not nil.
	Maintenance *bool `json:"maintenance,omitempty"`
	// Down is set by health when the machine does not answer; a down machine is not available.
	Down bool `json:"down"`
	// Reported is when the load was last reported.
	Reported time.Time `json:"reported,omitzero"`
	// LoadZone is the zone of the node the machine's agent reports its load to; "" for
	// the machine's own zone. Without share_load_across_zones a broker uses the CPU and
	// memory of the machines that report in its own zone only.
	LoadZone string `json:"load_zone,omitempty"`
}

// Snapshot is everything a store holds, read once when a broker starts.
type Snapshot struct {
	// Sessions are the live sessions.
	Sessions []Session
	// Machines are the stored machine states.
	Machines []MachineState
}

// Store keeps the live state of a site: sessions and machine states. Implementations must be
// safe for concurrent use.
//
// A launch is one atomic CreateSession call: check the machine's capacity and create the
// session. With etcd that is one transaction over a per-machine counter key:
//
//	txn If(Version("sessions/<id>") == 0, ModRevision("count/<machine>") == rev)
//	    Then(Put("sessions/<id>", s), Put("count/<machine>", n+1))
//
// where n (< max) and rev were read just before; a failed compare is retried or reported as
// ErrMachineFull. UpdateSession is a compare-and-swap on Session.Rev (an etcd ModRevision).
type Store interface {
	// Load returns every live session and every stored machine state.
	Load(ctx context.Context) (Snapshot, error)
	// CreateSession stores s (with s.Rev = 1) if s.Machine holds fewer than maxSessions live
	// sessions, in one atomic step. It returns ErrMachineFull when the machine is full and
	// ErrExists when s.ID is taken.
	CreateSession(ctx context.Context, s Session, maxSessions int) error
	// UpdateSession replaces the session s.ID if its stored revision is prevRev; s.Rev must
	// be prevRev+1. It returns ErrConflict on another revision and ErrNoSession when the
	// session does not exist. A session's machine never changes.
	UpdateSession(ctx context.Context, s Session, prevRev uint64) error
	// DeleteSession removes the session and frees its slot; ErrNoSession when it does not
	// exist.
	DeleteSession(ctx context.Context, id string) error
	// PutMachine stores a machine's state.
	PutMachine(ctx context.Context, m MachineState) error
	// Close releases the store.
	Close() error
}

// CheckUpdate is UpdateSession's rule, in one place for every store: an update of the stored
// session cur (nil: there is none) to s names cur's revision, and keeps its machine. A store
// that compares the revision itself (etcd, in its transaction) reports a conflict with
// Conflict.
func CheckUpdate(cur *Session, s Session, prevRev uint64) error {
	switch {
	case cur == nil:
		return fmt.Errorf("session %s: %w", s.ID, ErrNoSession)
	case cur.Rev != prevRev:
		return Conflict(s.ID, cur.Rev, prevRev)
	case cur.Machine != s.Machine:
		return MachineChanged(s.ID)
	}
	return nil
}

// Conflict is the error of an update of session id that names revision prevRev while the
// store holds revision rev: ErrConflict.
func Conflict(id string, rev, prevRev uint64) error {
	return fmt.Errorf("session %s at revision %d, not %d: %w", id, rev, prevRev, ErrConflict)
}

// MachineChanged is the error of an update that would move session id to another machine.
func MachineChanged(id string) error {
	return fmt.Errorf("session %s: the machine of a session cannot change", id)
}

// Change is one change to a shared store's state, made by this node, another node or an
// expiry: exactly one of its fields is set.
type Change struct {
	// Session is a session created or updated.
	Session *Session
	// Ended is the id of a session that was deleted (logged off, or expired by the store).
	Ended string
	// Machine is a machine's new stored state.
	Machine *MachineState
}

// Shared is a Store that several nodes use at once (etcd). The broker follows it instead of
// loading it once: every change any node makes reaches every broker's view, and the store
// expires pending and disconnected sessions by itself at their Expires time (no broker runs
// Expire over it).
type Shared interface {
	Store
	// Follow returns the current state, as Load does, and from then on calls fn with every
	// later change in order, until the store closes; a change the snapshot already holds
	// may come again, so fn must be idempotent (a session revision it has seen is ignored).
	// fn must not block for long.
	Follow(ctx context.Context, fn func(Change)) (Snapshot, error)
	// GetSession reads one session from the store (not from a view): the broker's way to
	// catch up after a conflict. ErrNoSession when it does not exist.
	GetSession(ctx context.Context, id string) (Session, error)
}
