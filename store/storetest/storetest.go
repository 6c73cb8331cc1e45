// Package storetest is the conformance suite of broker.Store: what every store of sessions
// must do, whatever keeps them (memory, a bolt file, etcd, or etcd's view in an outage). The
// rules are broker.Store's: a session is created at revision 1 if its machine has room, in one
// step; an update names the revision it replaces and moves it up by one, and any other
// revision is a conflict; a session's machine never changes; a delete frees its slot.
package storetest

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/frontdoor-vdi/frontdoor/broker"
)

// Machines returns the machines the suite books, by name, with their max_sessions. A store
// with an outage plan must let its node book every slot of them.
func Machines() map[string]int { return map[string]int{"m1": m1Max, "m2": 1} }

// m1Max is the max_sessions of m1, the machine the suite fills.
const m1Max = 2

// Run runs the suite against the stores open returns: an empty one for each subtest, closed
// by open's own cleanup.
func Run(t *testing.T, open func(t *testing.T) broker.Store) {
	t.Run("a created session reads back at revision 1", func(t *testing.T) {
		st := open(t)
		if err := st.CreateSession(t.Context(), session("s1", "m1"), m1Max); err != nil {
			t.Fatal(err)
		}
		got := readBack(t, st, "s1", 1)
		if got.Machine != "m1" || got.User != "u-s1" || got.State != broker.StatePending {
			t.Fatalf("read back %+v", got)
		}
	})
	t.Run("an ID is created once", func(t *testing.T) {
		st := open(t)
		if err := st.CreateSession(t.Context(), session("s1", "m1"), m1Max); err != nil {
			t.Fatal(err)
		}
		if err := st.CreateSession(t.Context(), session("s1", "m1"), m1Max); !errors.Is(err, broker.ErrExists) {
			t.Fatalf("the same ID again: %v, want %v", err, broker.ErrExists)
		}
	})
	t.Run("a machine takes no more than its max and a delete frees a slot", func(t *testing.T) {
		st := open(t)
		for i := range m1Max {
			if err := st.CreateSession(t.Context(), session(fmt.Sprint("s", i), "m1"), m1Max); err != nil {
				t.Fatalf("session %d of %d: %v", i+1, m1Max, err)
			}
		}
		if err := st.CreateSession(t.Context(), session("over", "m1"), m1Max); !errors.Is(err, broker.ErrMachineFull) {
			t.Fatalf("a session past the max: %v, want %v", err, broker.ErrMachineFull)
		}
		if err := st.DeleteSession(t.Context(), "s0"); err != nil {
			t.Fatal(err)
		}
		if err := st.CreateSession(t.Context(), session("after", "m1"), m1Max); err != nil {
			t.Fatalf("a session in the freed slot: %v", err)
		}
	})
	t.Run("an update replaces the revision it names and no other", func(t *testing.T) {
		st := open(t)
		if err := st.CreateSession(t.Context(), session("s1", "m1"), m1Max); err != nil {
			t.Fatal(err)
		}
		s := readBack(t, st, "s1", 1)
		s.State, s.Rev = broker.StateConnected, 2
		if err := st.UpdateSession(t.Context(), s, 1); err != nil {
			t.Fatalf("an update at revision 1: %v", err)
		}
		if got := readBack(t, st, "s1", 2); got.State != broker.StateConnected {
			t.Fatalf("after the update: %+v", got)
		}
		s.State, s.Rev = broker.StateDisconnected, 2
		if err := st.UpdateSession(t.Context(), s, 1); !errors.Is(err, broker.ErrConflict) {
			t.Fatalf("an update at the stale revision 1: %v, want %v", err, broker.ErrConflict)
		}
		if got := readBack(t, st, "s1", 2); got.State != broker.StateConnected {
			t.Fatalf("a conflicting update changed the session: %+v", got)
		}
		s.ID = "none"
		if err := st.UpdateSession(t.Context(), s, 1); !errors.Is(err, broker.ErrNoSession) {
			t.Fatalf("an update of no session: %v, want %v", err, broker.ErrNoSession)
		}
	})
	t.Run("a session's machine never changes", func(t *testing.T) {
		st := open(t)
		if err := st.CreateSession(t.Context(), session("s1", "m1"), m1Max); err != nil {
			t.Fatal(err)
		}
		s := readBack(t, st, "s1", 1)
		s.Machine, s.Rev = "m2", 2
		if err := st.UpdateSession(t.Context(), s, 1); err == nil {
			t.Fatal("an update that moves the session to another machine was taken")
		}
		if got := readBack(t, st, "s1", 1); got.Machine != "m1" {
			t.Fatalf("after a refused move: %+v", got)
		}
	})
	t.Run("a delete of no session is ErrNoSession", func(t *testing.T) {
		st := open(t)
		if err := st.DeleteSession(t.Context(), "none"); !errors.Is(err, broker.ErrNoSession) {
			t.Fatalf("%v, want %v", err, broker.ErrNoSession)
		}
	})
	t.Run("creations at once book no more than the max", func(t *testing.T) {
		st := open(t)
		const tries = 8
		var wg sync.WaitGroup
		errs := make([]error, tries)
		for i := range tries {
			wg.Go(func() {
				ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
				defer cancel()
				errs[i] = st.CreateSession(ctx, session(fmt.Sprint("c", i), "m1"), m1Max)
			})
		}
		wg.Wait()
		ok := 0
		for _, err := range errs {
			switch {
			case err == nil:
				ok++
			case !errors.Is(err, broker.ErrMachineFull):
				t.Errorf("a creation failed otherwise than full: %v", err)
			}
		}
		if ok != m1Max {
			t.Fatalf("%d of %d creations at once were taken on a machine of %d", ok, tries, m1Max)
		}
	})
}

// session is a pending session of machine m, for an hour.
func session(id, m string) broker.Session {
	now := time.Now().Truncate(time.Second)
	return broker.Session{ID: id, User: "u-" + id, Resource: "desk", Group: "rds", Machine: m, Zone: "z1",
		State: broker.StatePending, Mode: "gateway", Created: now, Changed: now, Expires: now.Add(time.Hour)}
}

// readBack returns session id as st holds it: from the store itself for a shared store
// (broker.Shared.GetSession; its Load answers from a view that follows the store), else
// from Load. It fails the test unless the session is at revision rev.
func readBack(t *testing.T, st broker.Store, id string, rev uint64) broker.Session {
	t.Helper()
	var got broker.Session
	if sh, ok := st.(broker.Shared); ok {
		s, err := sh.GetSession(t.Context(), id)
		if err != nil {
			t.Fatalf("reading session %s: %v", id, err)
		}
		got = s
	} else {
		snap, err := st.Load(t.Context())
		if err != nil {
			t.Fatal(err)
		}
		i := slices.IndexFunc(snap.Sessions, func(s broker.Session) bool { return s.ID == id })
		if i < 0 {
			t.Fatalf("session %s is not in Load", id)
		}
		got = snap.Sessions[i]
	}
	if got.Rev != rev {
		t.Fatalf("session %s at revision %d, want %d", id, got.Rev, rev)
	}
	return got
}
