package etcd

import (
	"encoding/hex"
	"fmt"
	"slices"
	"time"

	"github.com/frontdoor-vdi/frontdoor/broker"
)

// ownsSlot reports whether this node may book slot i of machine m in an outage.
func (st *Store) ownsSlot(m string, i int) bool {
	p, ok := st.o.Plan[m]
	if !ok || len(p.Brokers) == 0 {
		return false
	}
	return p.Brokers[(i+p.Offset)%len(p.Brokers)] == st.o.Node
}

// cutOffLocked reports whether machine m is left to its outage brokers: a plan names them,
// none is standing in the election, and its agent reports to no live node but them.
func (st *Store) cutOffLocked(m string) (bool, []string) {
	p, ok := st.o.Plan[m]
	if !ok || len(p.Brokers) == 0 {
		return false, nil
	}
	for _, b := range p.Brokers {
		if st.standingLocked(b) {
			return false, nil
		}
	}
	if l, ok := st.loads[m]; ok && l.Node != "" && !slices.Contains(p.Brokers, l.Node) && st.standingLocked(l.Node) {
		return false, nil
	}
	return true, p.Brokers
}

// standingLocked reports whether node stands in its zone's election (a few zones: no
// allocation on the launch path).
func (st *Store) standingLocked(node string) bool {
	for _, cs := range st.candidates {
		if _, ok := cs[node]; ok {
			return true
		}
	}
	return false
}

// createLocal books a slot this node owns and creates the session in the view.
func (st *Store) createLocal(s broker.Session, maxSessions int) error {
	st.mu.Lock()
	defer st.mu.Unlock()
	if _, ok := st.sessions[s.ID]; ok {
		return fmt.Errorf("session %s: %w", s.ID, broker.ErrExists)
	}
	owned, slot := 0, -1
	for i := range maxSessions {
		if !st.ownsSlot(s.Machine, i) {
			continue
		}
		owned++
		if _, taken := st.used[s.Machine][i]; !taken && slot < 0 {
			slot = i
		}
	}
	switch {
	case owned == 0:
		return fmt.Errorf("%s is booked in an outage by %v, not by this node: %w", s.Machine, st.o.Plan[s.Machine].Brokers, broker.ErrMachineFull)
	case slot < 0:
		return fmt.Errorf("this node's %d of %s's %d slots are all taken (outage mode): %w", owned, s.Machine, maxSessions, broker.ErrMachineFull)
	}
	s.Rev = 1
	st.putSessionLocked(s, slot)
	st.out.journal.Sessions[s.ID] = &journalEntry{Created: true, Session: &s, Machine: s.Machine, Slot: slot}
	st.tellSessionLocked(s)
	return nil
}

func (st *Store) putSessionLocked(s broker.Session, slot int) {
	st.sessions[s.ID] = s
	st.slotOf[s.ID] = slotRef{s.Machine, slot}
	if st.used[s.Machine] == nil {
		st.used[s.Machine] = map[int]string{}
	}
	st.used[s.Machine][slot] = s.ID
	st.cacheSessionLocked(s, slot)
}

func (st *Store) tellSessionLocked(s broker.Session) {
	st.tellLocal(func() { st.dispatch([]broker.Change{{Session: &s}}, nil) })
}

// updateLocal replaces a session of the view.
func (st *Store) updateLocal(s broker.Session, prevRev uint64) error {
	st.mu.Lock()
	defer st.mu.Unlock()
	var cur *broker.Session
	if old, ok := st.sessions[s.ID]; ok {
		cur = &old
	}
	if err := broker.CheckUpdate(cur, s, prevRev); err != nil {
		return err
	}
	s.Rev = prevRev + 1
	ref := st.slotOf[s.ID]
	st.putSessionLocked(s, ref.slot)
	e := st.out.journal.Sessions[s.ID]
	if e == nil {
		e = &journalEntry{}
		st.out.journal.Sessions[s.ID] = e
	}
	e.Session, e.Machine, e.Slot, e.Ended = &s, s.Machine, ref.slot, time.Time{}
	st.tellSessionLocked(s)
	return nil
}

// deleteLocal ends a session of the view.
func (st *Store) deleteLocal(id string) error {
	st.mu.Lock()
	defer st.mu.Unlock()
	if _, ok := st.sessions[id]; !ok {
		return fmt.Errorf("session %s: %w", id, broker.ErrNoSession)
	}
	st.endLocked(id)
	return nil
}

// endLocked removes a session from the view and journals its end.
func (st *Store) endLocked(id string) {
	ref := st.slotOf[id]
	delete(st.sessions, id)
	delete(st.slotOf, id)
	delete(st.used[ref.machine], ref.slot)
	st.cacheDeleteSessionLocked(id, ref)
	if e := st.out.journal.Sessions[id]; e != nil && e.Created {
		delete(st.out.journal.Sessions, id) // it never reached the site
	} else {
		st.out.journal.Sessions[id] = &journalEntry{Machine: ref.machine, Slot: ref.slot, Ended: st.now()}
	}
	st.tellLocal(func() { st.dispatch([]broker.Change{{Ended: id}}, nil) })
}

// expireLocal ends the pending and disconnected sessions of the view past their Expires, as
// etcd's leases would.
func (st *Store) expireLocal() {
	st.mu.Lock()
	defer st.mu.Unlock()
	now := st.now()
	for id, s := range st.sessions {
		if !s.Expires.IsZero() && s.Expires.Before(now) && s.State != broker.StateConnected {
			st.endLocked(id)
		}
	}
}

// putMachineLocal keeps a machine's state in the view; its flags are journaled.
func (st *Store) putMachineLocal(m broker.MachineState) {
	st.mu.Lock()
	defer st.mu.Unlock()
	l := machineLoad{CPU: m.CPU, Memory: m.Memory, Reported: m.Reported, Zone: m.LoadZone, Node: st.o.Node}
	if old, ok := st.loads[m.Name]; !ok || l.Reported.After(old.Reported) {
		st.loads[m.Name] = l
	}
	f := machineFlags{Maintenance: m.Maintenance}
	if !sameMaintenance(st.flags[m.Name].Maintenance, f.Maintenance) {
		st.flags[m.Name] = f
		st.out.journal.Flags[m.Name] = f
	}
	ms := st.machineLocked(m.Name)
	st.tellLocal(func() { st.dispatch([]broker.Change{{Machine: &ms}}, nil) })
}

// ownsSessionLocked reports whether this node owns the slot of a session of its view.
func (st *Store) ownsSessionLocked(session string) bool {
	ref, ok := st.slotOf[session]
	return ok && st.ownsSlot(ref.machine, ref.slot)
}

// useLocal records a ticket's channel in the view's ledger. A launch ticket's channel opens
// only at the node that owns its session's slot (session "" is an enrolment ticket).
func (st *Store) useLocal(id [16]byte, session, ch string, until time.Time) (bool, error) {
	st.mu.Lock()
	defer st.mu.Unlock()
	if session != "" && !st.ownsSessionLocked(session) {
		return false, fmt.Errorf("session %s: in an outage its launch ticket opens channels only at the node that owns its slot: %w", session, ErrOutage)
	}
	k := hex.EncodeToString(id[:]) + "/" + ch
	if st.usedTickets[k] {
		return false, nil
	}
	st.usedTickets[k] = true
	st.out.journal.Used[k] = until
	return true, nil
}

// revokeLocal keeps a revocation in the view and tells the followers.
func (st *Store) revokeLocal(session string, before, until time.Time) {
	st.mu.Lock()
	defer st.mu.Unlock()
	if before.After(st.revoked[session]) {
		st.revoked[session] = before
	}
	j := st.out.journal.Revoked[session]
	if before.After(j[0]) {
		j[0] = before
	}
	j[1] = maxTime(j[1], until)
	st.out.journal.Revoked[session] = j
	r := []revocation{{session, st.revoked[session]}}
	st.tellLocal(func() { st.dispatchRevoked(r) })
}

// supersedeLocal keeps a superseded mark in the view.
func (st *Store) supersedeLocal(session string, mark uint64, until time.Time) {
	st.mu.Lock()
	defer st.mu.Unlock()
	st.superseded[session] = max(st.superseded[session], mark)
	j := st.out.journal.Superseded[session]
	st.out.journal.Superseded[session] = supersede{Mark: max(j.Mark, mark), Until: maxTime(j.Until, until)}
}

func maxTime(a, b time.Time) time.Time {
	if a.After(b) {
		return a
	}
	return b
}
