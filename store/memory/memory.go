// Package memory is an in-memory broker.Store: fast, safe for concurrent use, and gone when
// the process ends, with the site's settings (package settings).
package memory

import (
	"context"
	"fmt"
	"sync"

	"github.com/frontdoor-vdi/frontdoor/broker"
	"github.com/frontdoor-vdi/frontdoor/store/settings"
)

// Store keeps sessions and machine states in maps.
type Store struct {
	mu       sync.Mutex // guards sessions, counts and machines
	sessions map[string]broker.Session
	counts   map[string]int // live sessions per machine
	machines map[string]broker.MachineState
	settings *settings.Local
}

var _ broker.Store = (*Store)(nil)

// New returns an empty store.
func New() *Store {
	set, _ := settings.NewLocal(nil) // nothing to load: no error
	return &Store{sessions: map[string]broker.Session{}, counts: map[string]int{},
		machines: map[string]broker.MachineState{}, settings: set}
}

// Settings returns the store's settings, in memory.
func (st *Store) Settings() *settings.Local { return st.settings }

// Load returns copies of every session and machine state.
func (st *Store) Load(context.Context) (broker.Snapshot, error) {
	st.mu.Lock()
	defer st.mu.Unlock()
	var snap broker.Snapshot
	for _, s := range st.sessions {
		snap.Sessions = append(snap.Sessions, s)
	}
	for _, m := range st.machines {
		snap.Machines = append(snap.Machines, m)
	}
	return snap, nil
}

// CreateSession checks the machine's capacity and creates s in one step.
func (st *Store) CreateSession(_ context.Context, s broker.Session, maxSessions int) error {
	st.mu.Lock()
	defer st.mu.Unlock()
	if _, ok := st.sessions[s.ID]; ok {
		return fmt.Errorf("session %s: %w", s.ID, broker.ErrExists)
	}
	if n := st.counts[s.Machine]; n >= maxSessions {
		return fmt.Errorf("%s holds %d of %d sessions: %w", s.Machine, n, maxSessions, broker.ErrMachineFull)
	}
	s.Rev = 1
	st.sessions[s.ID] = s
	st.counts[s.Machine]++
	return nil
}

// UpdateSession replaces a session if its revision is prevRev.
func (st *Store) UpdateSession(_ context.Context, s broker.Session, prevRev uint64) error {
	st.mu.Lock()
	defer st.mu.Unlock()
	var cur *broker.Session
	if c, ok := st.sessions[s.ID]; ok {
		cur = &c
	}
	if err := broker.CheckUpdate(cur, s, prevRev); err != nil {
		return err
	}
	s.Rev = prevRev + 1
	st.sessions[s.ID] = s
	return nil
}

// DeleteSession removes a session and frees its slot.
func (st *Store) DeleteSession(_ context.Context, id string) error {
	st.mu.Lock()
	defer st.mu.Unlock()
	cur, ok := st.sessions[id]
	if !ok {
		return fmt.Errorf("session %s: %w", id, broker.ErrNoSession)
	}
	delete(st.sessions, id)
	if st.counts[cur.Machine]--; st.counts[cur.Machine] <= 0 {
		delete(st.counts, cur.Machine)
	}
	return nil
}

// PutMachine stores a machine state.
func (st *Store) PutMachine(_ context.Context, m broker.MachineState) error {
	st.mu.Lock()
	defer st.mu.Unlock()
	st.machines[m.Name] = m
	return nil
}

// Count returns the live sessions stored for a machine (for tests and the admin view).
func (st *Store) Count(machine string) int {
	st.mu.Lock()
	defer st.mu.Unlock()
	return st.counts[machine]
}

// Close waits until the settings' changes are told.
func (st *Store) Close() error {
	st.settings.Close()
	return nil
}
