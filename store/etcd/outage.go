package etcd

import (
	"cmp"
	"context"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/frontdoor-vdi/frontdoor/broker"
	clientv3 "go.etcd.io/etcd/client/v3"
)

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

// journalEntry is one session's change in an outage: its state after the outage (nil: ended).
type journalEntry struct {
	Created bool            `json:"created,omitempty"` // the outage created it
	Session *broker.Session `json:"session,omitempty"`
	Machine string          `json:"machine"`
	Slot    int             `json:"slot"`
	Ended   time.Time       `json:"ended,omitzero"`
}

// journal is what an outage changed, to write back.
type journal struct {
	Sessions   map[string]*journalEntry `json:"sessions"`
	Revoked    map[string][2]time.Time  `json:"revoked"`    // session -> before, until
	Superseded map[string]supersede     `json:"superseded"` // session -> mark, until
	Used       map[string]time.Time     `json:"used"`       // "<ticket id>/<channel>" -> until
	Flags      map[string]machineFlags  `json:"flags"`      // machine -> its flags
}

type supersede struct {
	Mark  uint64    `json:"mark"`
	Until time.Time `json:"until"`
}

func newJournal() *journal {
	return &journal{Sessions: map[string]*journalEntry{}, Revoked: map[string][2]time.Time{},
		Superseded: map[string]supersede{}, Used: map[string]time.Time{}, Flags: map[string]machineFlags{}}
}

func (j *journal) size() int {
	return len(j.Sessions) + len(j.Revoked) + len(j.Superseded) + len(j.Used) + len(j.Flags)
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

// takeJournal swaps the outage's journal for an empty one and returns it.
func (st *Store) takeJournal() *journal {
	st.mu.Lock()
	defer st.mu.Unlock()
	j := st.out.journal
	if j == nil {
		j = newJournal()
	}
	st.out.journal = newJournal()
	return j
}

// mergeJournal puts back what a failed write-back left of j, under what was journaled since.
func (st *Store) mergeJournal(j *journal) {
	st.mu.Lock()
	defer st.mu.Unlock()
	if st.out.journal == nil {
		st.out.journal = newJournal()
	}
	cur := st.out.journal
	keepNewer(cur.Sessions, j.Sessions)
	keepNewer(cur.Revoked, j.Revoked)
	keepNewer(cur.Superseded, j.Superseded)
	keepNewer(cur.Used, j.Used)
	keepNewer(cur.Flags, j.Flags)
}

// keepNewer copies into dst the entries of old that dst does not have.
func keepNewer[K comparable, V any](dst, old map[K]V) {
	for k, v := range old {
		if _, newer := dst[k]; !newer {
			dst[k] = v
		}
	}
}

// Outage probing.
const (
	outageEvery   = 250 * time.Millisecond
	outageTimeout = 450 * time.Millisecond
	outageFails   = 3
)

// InOutage reports whether the node brokers from its cache.
func (st *Store) InOutage() bool { return st.outage.Load() }

// OnOutage calls fn when outage mode begins (true) and when it ends (false), after the view
// is whole again.
func (st *Store) OnOutage(fn func(bool)) {
	st.mu.Lock()
	defer st.mu.Unlock()
	st.out.onChange = append(st.out.onChange, fn)
}

// Outage returns the outage status.
func (st *Store) Outage() OutageStatus {
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

// alive is a context that lives until the next outage begins; read without a lock by every
// operation (opContext) and the watch.
type alive struct {
	ctx    context.Context
	cancel context.CancelFunc
}

func newAlive() *alive {
	ctx, cancel := context.WithCancel(context.Background())
	return &alive{ctx, cancel}
}

func (st *Store) initOutage() {
	st.out.alive.Store(newAlive())
	st.out.up = make(chan struct{})
	close(st.out.up)
	st.out.localKick = make(chan struct{}, 1)
}

// detect checks etcd every outageEvery and enters or leaves outage mode.
func (st *Store) detect(ctx context.Context) {
	fails := 0
	tick := time.NewTicker(outageEvery)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
		cctx, cancel := context.WithTimeout(ctx, outageTimeout)
		_, err := st.cli.Get(cctx, st.key("identity"), clientv3.WithCountOnly())
		cancel()
		if ctx.Err() != nil {
			return
		}
		if err == nil {
			fails = 0
			if st.outage.Load() {
				st.leaveOutage(ctx)
			}
			continue
		}
		if fails++; fails >= outageFails && !st.outage.Load() && st.o.Plan != nil {
			st.enterOutage(err)
		}
	}
}

// enterOutage switches to brokering from the view.
func (st *Store) enterOutage(cause error) {
	st.mu.Lock()
	st.out.since = st.now()
	st.out.count++
	if st.out.journal == nil {
		st.out.journal = newJournal()
	}
	st.out.up = make(chan struct{})
	st.outage.Store(true)
	st.out.alive.Load().cancel() // operations in flight and the watch end now
	fns := slices.Clone(st.out.onChange)
	rev := st.rev
	st.mu.Unlock()
	st.met.outages.Inc()
	st.log.Error("etcd unreachable: outage mode — brokering this node's share from the local host cache",
		"err", cause, "revision", rev, "node", st.o.Node)
	for _, fn := range fns {
		fn(true)
	}
}

// leaveOutage writes back what the outage changed, reloads the view and follows etcd again.
//
// The journal is written back in passes while the node goes on brokering locally, so that a
// long outage's write-back holds no launch; only the last pass, of what came meanwhile, holds
// the local operations until the view is reloaded.
func (st *Store) leaveOutage(ctx context.Context) {
	for range writeBackPasses {
		j := st.takeJournal()
		if err := st.writeBack(ctx, j); err != nil {
			st.log.Warn("etcd is back but the outage's changes could not all be written; retrying", "err", err)
			st.mergeJournal(j) // retried at the next check; writeBack skipped what it wrote
			return
		}
		st.mu.Lock()
		left := st.out.journal.size()
		st.mu.Unlock()
		if left < writeBackLast {
			break
		}
	}
	st.out.gate.Lock() // no local operation meanwhile
	defer st.out.gate.Unlock()
	st.tellQueued() // the outage's changes reach the followers before the reloaded view
	j := st.takeJournal()
	st.mu.Lock()
	st.out.journal = nil
	st.mu.Unlock()
	if err := st.writeBack(ctx, j); err != nil {
		st.log.Warn("etcd is back but the outage's changes could not all be written; retrying", "err", err)
		st.mu.Lock()
		st.out.journal = newJournal()
		st.mu.Unlock()
		st.mergeJournal(j)
		return
	}
	st.resync(ctx)
	st.mu.Lock()
	st.out.last = st.now().Sub(st.out.since)
	st.out.alive.Store(newAlive())
	st.outage.Store(false)
	close(st.out.up)
	fns := slices.Clone(st.out.onChange)
	last, conflicts := st.out.last, len(st.out.conflicts)
	st.mu.Unlock()
	st.log.Warn("etcd is back: outage mode ended, the outage's changes are written back", "outage", last.Round(time.Millisecond), "conflicts", conflicts)
	for _, fn := range fns {
		fn(false)
	}
}

// waitUp waits until no outage is on, or ctx ends.
func (st *Store) waitUp(ctx context.Context) {
	st.mu.Lock()
	up := st.out.up
	st.mu.Unlock()
	select {
	case <-up:
	case <-ctx.Done():
	}
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
	old, ok := st.sessions[s.ID]
	if !ok {
		return fmt.Errorf("session %s: %w", s.ID, broker.ErrNoSession)
	}
	if old.Rev != prevRev {
		return fmt.Errorf("session %s at revision %d, not %d: %w", s.ID, old.Rev, prevRev, broker.ErrConflict)
	}
	if old.Machine != s.Machine {
		return fmt.Errorf("session %s: the machine of a session cannot change", s.ID)
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

// conflict records a reconciliation conflict.
func (st *Store) conflict(c Conflict) {
	c.At = st.now()
	st.met.conflicts.Inc()
	st.log.Warn("outage write-back: conflict", "machine", c.Machine, "session", c.Session, "what", c.What)
	st.mu.Lock()
	st.out.conflicts = append(st.out.conflicts, c)
	if n := len(st.out.conflicts); n > 100 {
		st.out.conflicts = slices.Delete(st.out.conflicts, 0, n-100)
	}
	st.mu.Unlock()
}

// writeBack writes an outage's journal to etcd by the reconciliation rules of the package
// doc. What it wrote is removed from j, so that a retry skips it.
//
// Sessions are written machine by machine (a machine's slots are chosen in order), up to
// writeBackParallel machines at once.
func (st *Store) writeBack(ctx context.Context, j *journal) error {
	byMachine := map[string][]string{}
	for id, e := range j.Sessions {
		byMachine[e.Machine] = append(byMachine[e.Machine], id)
	}
	var mu sync.Mutex // guards j.Sessions and errs
	var errs []error
	sem := make(chan struct{}, writeBackParallel)
	var wg sync.WaitGroup
	for _, ids := range byMachine {
		slices.Sort(ids)
		wg.Go(func() {
			sem <- struct{}{}
			defer func() { <-sem }()
			for _, id := range ids {
				mu.Lock()
				e := j.Sessions[id]
				mu.Unlock()
				if err := st.writeBackSession(ctx, id, e); err != nil {
					mu.Lock()
					errs = append(errs, err)
					mu.Unlock()
					return
				}
				mu.Lock()
				delete(j.Sessions, id)
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		return err
	}
	// Straight to etcd: the outage-aware Revoke and Supersede would journal them again,
	// and in the last pass wait for the outage's gate, which it holds.
	for s, r := range j.Revoked {
		wctx, cancel := context.WithTimeout(ctx, ledgerTimeout)
		err := st.Ledger().revoke(wctx, s, r[0], r[1])
		cancel()
		if err != nil {
			return err
		}
		delete(j.Revoked, s)
	}
	for s, m := range j.Superseded {
		wctx, cancel := context.WithTimeout(ctx, ledgerTimeout)
		err := st.Ledger().supersede(wctx, s, m.Mark, m.Until)
		cancel()
		if err != nil {
			return err
		}
		delete(j.Superseded, s)
	}
	for k, until := range j.Used {
		wctx, cancel := context.WithTimeout(ctx, ledgerTimeout)
		lease, err := st.leaseUntil(wctx, until)
		if err == nil {
			id, ch, _ := strings.Cut(k, "/") // "<ticket id>/<channel>", whose channel has a slash
			key := st.key("tickets", "used", id, ch)
			var r *clientv3.TxnResponse
			r, err = st.cli.Txn(wctx).If(clientv3.Compare(clientv3.CreateRevision(key), "=", 0)).
				Then(clientv3.OpPut(key, "", leaseOpt(lease)...)).Commit()
			if err == nil && !r.Succeeded {
				st.conflict(Conflict{What: "launch ticket channel " + k + " was admitted elsewhere too"})
			}
		}
		cancel()
		if err != nil {
			return err
		}
		delete(j.Used, k)
	}
	for m, f := range j.Flags {
		b, _ := json.Marshal(f)
		wctx, cancel := context.WithTimeout(ctx, ledgerTimeout)
		_, err := st.cli.Put(wctx, st.key("machines", m, "flags"), string(b))
		cancel()
		if err != nil {
			return err
		}
		delete(j.Flags, m)
	}
	return nil
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
