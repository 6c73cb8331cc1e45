package etcd

// Sessions and their slots: the sessions/ and slots/ families, and the operations that write
// them in one transaction each (broker.Store's session methods). In an outage each operation
// runs on the view instead (outage.go).

import (
	"context"
	"encoding/json"
	"fmt"
	"hash/fnv"
	"strconv"
	"strings"
	"time"

	"github.com/frontdoor-vdi/frontdoor/broker"
	"go.etcd.io/etcd/api/v3/mvccpb"
	clientv3 "go.etcd.io/etcd/client/v3"
)

// sessionsView is the view's part of the sessions and slots families.
type sessionsView struct {
	sessions map[string]broker.Session
	slotOf   map[string]slotRef // session id -> its slot
	used     map[string]map[int]string
}

type record struct {
	Session broker.Session `json:"session"`
	Slot    int            `json:"slot"`
}

// slotRef names a session's slot.
type slotRef struct {
	machine string
	slot    int
}

func (st *Store) sessionKey(id string) string { return st.key("sessions", id) }

func (st *Store) slotKey(machine string, i int) string {
	return st.key("slots", machine, strconv.Itoa(i))
}

// applySession applies sessions/<id>.
func (st *Store) applySession(parts []string, x kv, deleted bool) broker.Change {
	id := parts[1]
	if deleted {
		if _, ok := st.sessions[id]; !ok {
			return broker.Change{}
		}
		delete(st.sessions, id)
		delete(st.slotOf, id)
		return broker.Change{Ended: id}
	}
	var r record
	if err := json.Unmarshal(x.value, &r); err != nil {
		st.log.Warn("etcd: unreadable session", "key", x.key, "err", err)
		return broker.Change{}
	}
	r.Session.Rev = uint64(x.version)
	st.sessions[id] = r.Session
	st.slotOf[id] = slotRef{r.Session.Machine, r.Slot}
	s := r.Session
	return broker.Change{Session: &s}
}

// applySlot applies slots/<machine>/<i>.
func (st *Store) applySlot(parts []string, x kv, deleted bool) broker.Change {
	i, err := strconv.Atoi(parts[2])
	if err != nil {
		return broker.Change{}
	}
	m := parts[1]
	if deleted {
		delete(st.used[m], i)
		return broker.Change{}
	}
	if st.used[m] == nil {
		st.used[m] = map[int]string{}
	}
	st.used[m][i] = string(x.value)
	return broker.Change{}
}

// GetSession implements broker.Shared.
func (st *Store) GetSession(ctx context.Context, id string) (broker.Session, error) {
	if st.outage.Load() {
		st.mu.Lock()
		s, ok := st.sessions[id]
		st.mu.Unlock()
		if !ok {
			return broker.Session{}, fmt.Errorf("session %s: %w", id, broker.ErrNoSession)
		}
		return s, nil
	}
	ctx, cancel := st.opContext(ctx)
	defer cancel()
	r, err := st.cli.Get(ctx, st.sessionKey(id))
	if err != nil {
		return broker.Session{}, fmt.Errorf("reading session %s: %w", id, err)
	}
	if len(r.Kvs) == 0 {
		return broker.Session{}, fmt.Errorf("session %s: %w", id, broker.ErrNoSession)
	}
	var rec record
	if err := json.Unmarshal(r.Kvs[0].Value, &rec); err != nil {
		return broker.Session{}, fmt.Errorf("session %s: %w", id, err)
	}
	rec.Session.Rev = uint64(r.Kvs[0].Version)
	st.mu.Lock()
	st.slotOf[id] = slotRef{rec.Session.Machine, rec.Slot}
	st.mu.Unlock()
	return rec.Session, nil
}

// CreateSession implements broker.Store: it takes a slot of s.Machine that is free in the
// view (searching from one the session id hashes to), and creates the session and the slot in
// one transaction that requires both absent. When the view was behind, the transaction's answer tells which slots are taken and
// the next free one is tried; with none free it returns ErrMachineFull.
//
// In outage mode it books a slot this node owns, in the view (outage.go); out of it, none of a
// machine left to its zone cut off from etcd.
func (st *Store) CreateSession(ctx context.Context, s broker.Session, maxSessions int) error {
	return st.failoverErr(func() error { return st.createRemote(ctx, s, maxSessions) }, func() error { return st.createLocal(s, maxSessions) })
}

func (st *Store) createRemote(ctx context.Context, s broker.Session, maxSessions int) error {
	ctx, cancel := st.opContext(ctx)
	defer cancel()
	lease, err := st.leaseUntil(ctx, s.Expires)
	if err != nil {
		return err
	}
	s.Rev = 1
	taken := map[int]bool{}
	st.mu.Lock()
	_, exists := st.sessions[s.ID]
	for i := range st.used[s.Machine] {
		taken[i] = true
	}
	cut, brokers := st.cutOffLocked(s.Machine)
	st.mu.Unlock()
	if exists {
		return fmt.Errorf("session %s: %w", s.ID, broker.ErrExists)
	}
	if cut {
		st.met.observe("create", "cut-off", time.Now())
		return fmt.Errorf("%s is left to its zone's front doors %v, which are cut off from the site database and broker it from their local host cache: %w",
			s.Machine, brokers, broker.ErrMachineFull)
	}
	skey := st.sessionKey(s.ID)
	slots := st.key("slots", s.Machine) + "/"
	confirmed := false // taken was read from etcd, not the view
	h := fnv.New32a()
	h.Write([]byte(s.ID))
	start := int(h.Sum32() % uint32(max(maxSessions, 1)))
	for attempt := 0; attempt < maxSessions+2; attempt++ {
		// Each session starts its search at a slot of its own, so that nodes that pick the
		// same machine at once mostly take different slots instead of conflicting.
		slot := -1
		for k := 0; k < maxSessions && len(taken) < maxSessions; k++ {
			// len(taken) counts the overflow slots of an outage's conflict too: such a
			// machine takes no new session until it is back under maxSessions.
			if i := (start + k) % maxSessions; !taken[i] {
				slot = i
				break
			}
		}
		if slot < 0 && !confirmed {
			// The view may hold slots freed since: ask etcd once before saying full.
			r, err := st.cli.Get(ctx, slots, clientv3.WithPrefix(), clientv3.WithKeysOnly())
			if err != nil {
				return fmt.Errorf("reading the slots of %s: %w", s.Machine, err)
			}
			taken, confirmed = slotsOf(r.Kvs, slots), true
			attempt--
			continue
		}
		if slot < 0 {
			st.met.observe("create", "full", time.Now())
			return fmt.Errorf("%s holds %d of %d sessions: %w", s.Machine, len(taken), maxSessions, broker.ErrMachineFull)
		}
		val, err := json.Marshal(record{Session: s, Slot: slot})
		if err != nil {
			return err
		}
		slotKey := st.slotKey(s.Machine, slot)
		start := time.Now()
		r, err := st.cli.Txn(ctx).
			If(clientv3.Compare(clientv3.Version(skey), "=", 0), clientv3.Compare(clientv3.Version(slotKey), "=", 0)).
			Then(clientv3.OpPut(skey, string(val), leaseOpt(lease)...), clientv3.OpPut(slotKey, s.ID, leaseOpt(lease)...)).
			Else(clientv3.OpGet(skey, clientv3.WithCountOnly()), clientv3.OpGet(slots, clientv3.WithPrefix(), clientv3.WithKeysOnly())).
			Commit()
		if err != nil {
			st.met.observe("create", "error", start)
			return fmt.Errorf("creating session %s: %w", s.ID, err)
		}
		if r.Succeeded {
			st.met.observe("create", "ok", start)
			st.mu.Lock()
			st.slotOf[s.ID] = slotRef{s.Machine, slot}
			st.mu.Unlock()
			return nil
		}
		if r.Responses[0].GetResponseRange().Count > 0 {
			st.met.observe("create", "exists", start)
			return fmt.Errorf("session %s: %w", s.ID, broker.ErrExists)
		}
		st.met.observe("create", "conflict", start)
		taken, confirmed = slotsOf(r.Responses[1].GetResponseRange().Kvs, slots), true
	}
	return fmt.Errorf("%s: no free slot after %d tries: %w", s.Machine, maxSessions+2, broker.ErrMachineFull)
}

// slotsOf returns the slot numbers of slot keys under prefix.
func slotsOf(kvs []*mvccpb.KeyValue, prefix string) map[int]bool {
	taken := map[int]bool{}
	for _, x := range kvs {
		if i, err := strconv.Atoi(strings.TrimPrefix(string(x.Key), prefix)); err == nil {
			taken[i] = true
		}
	}
	return taken
}

// slot returns the slot of session id, from the view or else from etcd.
func (st *Store) slot(ctx context.Context, id string) (slotRef, error) {
	st.mu.Lock()
	ref, ok := st.slotOf[id]
	st.mu.Unlock()
	if ok {
		return ref, nil
	}
	s, err := st.GetSession(ctx, id)
	if err != nil {
		return slotRef{}, err
	}
	st.mu.Lock()
	defer st.mu.Unlock()
	return st.slotOf[s.ID], nil
}

// UpdateSession implements broker.Store: one transaction that requires the session's key
// at Version prevRev and rewrites the session and its slot on the lease of its new Expires
// (none for a connected session).
func (st *Store) UpdateSession(ctx context.Context, s broker.Session, prevRev uint64) error {
	return st.failoverErr(func() error { return st.updateRemote(ctx, s, prevRev) }, func() error { return st.updateLocal(s, prevRev) })
}

func (st *Store) updateRemote(ctx context.Context, s broker.Session, prevRev uint64) error {
	ctx, cancel := st.opContext(ctx)
	defer cancel()
	ref, err := st.slot(ctx, s.ID)
	if err != nil {
		return err
	}
	if ref.machine != s.Machine {
		return broker.MachineChanged(s.ID)
	}
	lease, err := st.leaseUntil(ctx, s.Expires)
	if err != nil {
		return err
	}
	s.Rev = prevRev + 1
	val, err := json.Marshal(record{Session: s, Slot: ref.slot})
	if err != nil {
		return err
	}
	skey := st.sessionKey(s.ID)
	start := time.Now()
	r, err := st.cli.Txn(ctx).
		If(clientv3.Compare(clientv3.Version(skey), "=", int64(prevRev))).
		Then(clientv3.OpPut(skey, string(val), leaseOpt(lease)...), clientv3.OpPut(st.slotKey(s.Machine, ref.slot), s.ID, leaseOpt(lease)...)).
		Else(clientv3.OpGet(skey)).
		Commit()
	if err != nil {
		st.met.observe("update", "error", start)
		return fmt.Errorf("updating session %s: %w", s.ID, err)
	}
	if r.Succeeded {
		st.met.observe("update", "ok", start)
		return nil
	}
	st.met.observe("update", "conflict", start)
	kvs := r.Responses[0].GetResponseRange().Kvs
	if len(kvs) == 0 {
		return fmt.Errorf("session %s: %w", s.ID, broker.ErrNoSession)
	}
	return broker.Conflict(s.ID, uint64(kvs[0].Version), prevRev)
}

// DeleteSession implements broker.Store: the session and its slot go in one transaction.
func (st *Store) DeleteSession(ctx context.Context, id string) error {
	return st.failoverErr(func() error { return st.deleteRemote(ctx, id) }, func() error { return st.deleteLocal(id) })
}

func (st *Store) deleteRemote(ctx context.Context, id string) error {
	ctx, cancel := st.opContext(ctx)
	defer cancel()
	ref, err := st.slot(ctx, id)
	if err != nil {
		return err
	}
	skey := st.sessionKey(id)
	start := time.Now()
	r, err := st.cli.Txn(ctx).
		If(clientv3.Compare(clientv3.Version(skey), ">", 0)).
		Then(clientv3.OpDelete(skey), clientv3.OpDelete(st.slotKey(ref.machine, ref.slot))).
		Commit()
	st.met.observe("delete", map[bool]string{true: "error", false: "ok"}[err != nil], start)
	if err != nil {
		return fmt.Errorf("deleting session %s: %w", id, err)
	}
	if !r.Succeeded {
		return fmt.Errorf("session %s: %w", id, broker.ErrNoSession)
	}
	return nil
}
