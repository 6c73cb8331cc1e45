package etcd

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
)

// Outage tells whether the node brokers from its view because etcd is out of reach (the Local
// Host Cache), and since when.
type Outage struct{ st *Store }

// Outage returns the store's outage state.
func (st *Store) Outage() Outage { return Outage{st} }

// Outage mode: the Local Host Cache (seed 001), far quicker than Citrix's.
//
// Every node keeps, in its view, what it needs to broker: sessions and their slots, machine
// states, revocations and superseded marks, the used launch tickets, the settings, the
// identity (and the cache file, cache.go, holds the same at its revision across restarts).
// A node checks every 250 ms that etcd answers a linearizable read within 450 ms. It notices
// etcd gone at the first failure; after three in a row (0.9 s after noticing, 1.35 s after
// the first failing probe began) it enters outage mode and brokers from its view alone. Two
// failures would be 0.5 s quicker, but a node whose CPU or etcd is merely starved for a
// second would then book from its share while the rest of the site books the same machines
// from etcd — and a false outage costs conflicts to reconcile, so the third probe pays for
// itself:
//
//   - Launches: a node books only the slots it owns. Each machine has its outage brokers
//     (Options.Plan: the nodes of its zone that serve launches, else the primary zone's), and
//     slot i of machine m belongs to broker (i + offset(m)) mod k of its k brokers, where the
//     offset counts the machines before m (by name) with the same brokers: single-session
//     desktops are dealt out among the zone's nodes like cards. Shares are
//     fixed by the configuration, so the nodes of a zone need no word with each other (they
//     may not see each other either) and no two of them ever book the same slot: no machine
//     goes over max_sessions. The price: a dead node's share stays unused until etcd is back,
//     and a machine of one session is booked by one node of its zone only.
//   - Tickets: a launch ticket opens a channel only at the gateways of the node that owns its
//     session's slot, whose ledger is then the only one that can admit it: never twice.
//     Reconnect tickets, revocations and superseded marks are kept as before, in the view.
//   - Expiry: leases do not run without etcd, so the node expires pending and disconnected
//     sessions of its view itself, every second.
//   - Settings, the identity and the operator's changes are refused (ErrOutage) until etcd
//     is back.
//
// The rest of the site does its part: a node that still reaches etcd books no new session on
// a machine whose outage brokers are all absent from the election (their leases expired:
// they may be brokering it from their cache), unless the machine's agent reports to a live
// node that is not one of them (its zone's front doors are dead, not cut off).
//
// When etcd answers again, the node writes back what its outage changed (the journal), then
// reloads its view and follows the watch again. Reconciliation rules:
//
//   - A session the outage created is written with its slot, or another free one; when the
//     machine is full (the rest of the site booked it before it saw the zone cut off), it is
//     written on an overflow slot past max_sessions: the machine takes no new session until
//     it is back under max_sessions, no session is cut, and the conflict is logged, counted
//     (frontdoor_store_outage_conflicts_total) and listed in the status.
//   - A session changed on both sides keeps the change with the later Changed time; one the
//     site no longer holds but the outage kept alive is written again (no session lost).
//   - A session ended in the outage is deleted unless the site changed it later.
//   - Revocations and superseded marks merge (the wider one stays); used launch tickets are
//     written, and one the site had admitted too would be reported as a conflict.

// ErrOutage is returned for what cannot be done while the site database is out of reach.
var ErrOutage = errors.New("the site database is out of reach (outage mode: brokering from the local host cache)")

// MachinePlan is what outage mode needs to know of a machine.
type MachinePlan struct {
	// Brokers are the nodes that may book it in an outage, in a fixed order (by name).
	Brokers []string
	// Max is its max_sessions.
	Max int
	// Offset deals its slots out among the brokers: slot i is broker (i+Offset) mod k's.
	Offset int
}

// Conflict is a disagreement found when an outage's changes were written back.
type Conflict struct {
	At      time.Time `json:"at"`
	Machine string    `json:"machine,omitempty"`
	Session string    `json:"session,omitempty"`
	What    string    `json:"what"`
}

// OutageStatus describes outage mode for the status.
type OutageStatus struct {
	// Active is true while the node brokers from its cache.
	Active bool `json:"active"`
	// Since is when the current outage began (zero when none).
	Since time.Time `json:"since,omitzero"`
	// Pending counts the changes waiting to be written back.
	Pending int `json:"pending"`
	// Outages counts the outages since the node started.
	Outages int `json:"outages"`
	// Last is the last outage's length, once it ended.
	Last string `json:"last,omitempty"`
	// Conflicts are those found at write-backs, the latest 100.
	Conflicts []Conflict `json:"conflicts,omitempty"`
}

// outageState is the store's outage mode; its fields are guarded by Store.mu unless noted.
type outageState struct {
	gate      sync.RWMutex // local operations hold it shared; leaving holds it alone
	since     time.Time
	journal   *journal
	conflicts []Conflict
	count     int
	last      time.Duration
	up        chan struct{}         // closed when etcd is back (replaced at each outage)
	alive     atomic.Pointer[alive] // canceled when an outage begins: operations in flight end
	onChange  []func(bool)
	local     []func() // changes made locally, to tell the followers in order; guarded by localMu
	localMu   sync.Mutex
	telling   sync.Mutex // held while local changes are told: one teller at a time, in order
	localKick chan struct{}
}

// Write-back: machines written at once; passes while the node brokers on; the journal size
// below which the last pass holds the local operations.
const (
	writeBackParallel = 16
	writeBackPasses   = 3
	writeBackLast     = 100
)

// Outage probing.
const (
	outageEvery   = 250 * time.Millisecond
	outageTimeout = 450 * time.Millisecond
	outageFails   = 3
)

// Active reports whether the node brokers from its cache.
func (h Outage) Active() bool { return h.st.outage.Load() }

// On calls fn when outage mode begins (true) and when it ends (false), after the view
// is whole again.
func (h Outage) On(fn func(bool)) {
	st := h.st
	st.mu.Lock()
	defer st.mu.Unlock()
	st.out.onChange = append(st.out.onChange, fn)
}

// Status returns the outage status.
func (h Outage) Status() OutageStatus {
	st := h.st
	st.mu.Lock()
	defer st.mu.Unlock()
	o := OutageStatus{Active: st.outage.Load(), Since: st.out.since, Outages: st.out.count, Conflicts: slices.Clone(st.out.conflicts)}
	if st.out.journal != nil {
		o.Pending = st.out.journal.size()
	}
	if st.out.last > 0 {
		o.Last = st.out.last.Round(time.Millisecond).String()
	}
	return o
}

// failover is the one rule of every write while the site database may be out of reach: in
// outage mode the write goes to local (the view, journaled for the write-back: outage_local.go);
// else to remote (etcd), and to local after all when the outage began while remote ran.
func failover[T any](st *Store, remote, local func() (T, error)) (v T, err error) {
	if st.local(func() { v, err = local() }) {
		return v, err
	}
	v, err = remote()
	if err != nil && st.local(func() { v, err = local() }) {
		return v, err
	}
	return v, err
}

// failoverErr is failover for the writes that return only an error.
func (st *Store) failoverErr(remote, local func() error) error {
	_, err := failover(st, func() (struct{}, error) { return struct{}{}, remote() }, func() (struct{}, error) { return struct{}{}, local() })
	return err
}

// local runs op in outage mode if the node is in one, and reports whether it did.
func (st *Store) local(op func()) bool {
	if !st.outage.Load() {
		return false
	}
	st.out.gate.RLock()
	defer st.out.gate.RUnlock()
	if !st.outage.Load() {
		return false // it ended while waiting for the gate
	}
	op()
	return true
}

// tellLocal queues fn, which tells the followers of a change made locally, after the ones
// before it; a goroutine calls them in order without mu (a follower may call the store).
func (st *Store) tellLocal(fn func()) {
	st.out.localMu.Lock()
	st.out.local = append(st.out.local, fn)
	st.out.localMu.Unlock()
	select {
	case st.out.localKick <- struct{}{}:
	default:
	}
}

// runLocal tells the followers of local changes until ctx ends; in outage mode it also
// expires pending and disconnected sessions every second.
func (st *Store) runLocal(ctx context.Context) {
	tick := time.NewTicker(time.Second)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-st.out.localKick:
		case <-tick.C:
			st.local(st.expireLocal)
		}
		st.tellQueued()
	}
}

// tellQueued tells the followers of the local changes queued so far, in order.
func (st *Store) tellQueued() {
	st.out.telling.Lock()
	defer st.out.telling.Unlock()
	st.out.localMu.Lock()
	fns := st.out.local
	st.out.local = nil
	st.out.localMu.Unlock()
	for _, fn := range fns {
		fn()
	}
}

// writeBackSession reconciles one session the outage changed.
func (st *Store) writeBackSession(ctx context.Context, id string, e *journalEntry) error {
	ctx, cancel := context.WithTimeout(ctx, ledgerTimeout)
	defer cancel()
	skey := st.sessionKey(id)
	r, err := st.cli.Get(ctx, skey)
	if err != nil {
		return err
	}
	var theirs *record
	var version int64
	if len(r.Kvs) > 0 {
		var rec record
		if json.Unmarshal(r.Kvs[0].Value, &rec) == nil {
			theirs, version = &rec, r.Kvs[0].Version
		}
	}
	if e.Session == nil { // ended in the outage
		if theirs == nil {
			return nil
		}
		if theirs.Session.Changed.After(e.Ended) {
			st.conflict(Conflict{Session: id, Machine: theirs.Session.Machine, What: "ended in the outage but changed later elsewhere: kept"})
			return nil
		}
		_, err := st.cli.Txn(ctx).If(clientv3.Compare(clientv3.Version(skey), "=", version)).
			Then(clientv3.OpDelete(skey), clientv3.OpDelete(st.slotKey(theirs.Session.Machine, theirs.Slot))).Commit()
		return err
	}
	s := *e.Session
	lease, err := st.leaseUntil(ctx, s.Expires)
	if err != nil {
		return err
	}
	if theirs != nil {
		if theirs.Session.Changed.After(s.Changed) {
			st.conflict(Conflict{Session: id, Machine: s.Machine, What: "changed in the outage and later elsewhere: the later change is kept"})
			return nil
		}
		s.Rev = uint64(version) + 1
		val, _ := json.Marshal(record{Session: s, Slot: theirs.Slot})
		_, err := st.cli.Txn(ctx).If(clientv3.Compare(clientv3.Version(skey), "=", version)).
			Then(clientv3.OpPut(skey, string(val), leaseOpt(lease)...), clientv3.OpPut(st.slotKey(s.Machine, theirs.Slot), id, leaseOpt(lease)...)).Commit()
		return err
	}
	// The site does not hold it: created in the outage, or expired or lost there while it
	// lived on here. It is written with its slot, another free one, or an overflow slot.
	slots := st.key("slots", s.Machine) + "/"
	sr, err := st.cli.Get(ctx, slots, clientv3.WithPrefix())
	if err != nil {
		return err
	}
	taken := slotsOf(sr.Kvs, slots)
	maxSessions := cmp.Or(st.o.Plan[s.Machine].Max, e.Slot+1)
	slot := -1
	if !taken[e.Slot] {
		slot = e.Slot
	}
	for i := 0; slot < 0 && i < maxSessions; i++ {
		if !taken[i] {
			slot = i
		}
	}
	if slot < 0 {
		for slot = maxSessions; taken[slot]; slot++ {
		}
		var holders []string
		for _, kv := range sr.Kvs {
			holders = append(holders, string(kv.Value))
		}
		st.conflict(Conflict{Session: id, Machine: s.Machine, What: fmt.Sprintf(
			"the machine was full when the outage's session came back (held by %v): written on overflow slot %d; no new session there until it is under max_sessions (%d)",
			holders, slot, maxSessions)})
	}
	s.Rev = 1
	val, _ := json.Marshal(record{Session: s, Slot: slot})
	slotKey := st.slotKey(s.Machine, slot)
	tr, err := st.cli.Txn(ctx).If(clientv3.Compare(clientv3.Version(skey), "=", 0), clientv3.Compare(clientv3.Version(slotKey), "=", 0)).
		Then(clientv3.OpPut(skey, string(val), leaseOpt(lease)...), clientv3.OpPut(slotKey, id, leaseOpt(lease)...)).Commit()
	if err != nil {
		return err
	}
	if !tr.Succeeded {
		return fmt.Errorf("writing back session %s: its slot %s/%d was taken meanwhile", id, s.Machine, slot)
	}
	return nil
}
