package etcd

import (
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"slices"
	"time"

	"github.com/frontdoor-vdi/frontdoor/broker"
	clientv3 "go.etcd.io/etcd/client/v3"
)

// PutHealth writes the health records of targets (an empty record deletes one) in one
// transaction fenced on the zone's leadership rev: ErrNotLeader when the zone's leader key
// is no longer that leadership's.
func (h Election) PutHealth(ctx context.Context, zone string, rev int64, records map[string][]byte) error {
	st := h.st
	ctx, cancel := st.opContext(ctx)
	defer cancel()
	ops := make([]clientv3.Op, 0, len(records))
	for name, b := range records {
		if len(b) == 0 {
			ops = append(ops, clientv3.OpDelete(st.key("health", name)))
		} else {
			ops = append(ops, clientv3.OpPut(st.key("health", name), string(b)))
		}
	}
	start := time.Now()
	r, err := st.cli.Txn(ctx).If(clientv3.Compare(clientv3.CreateRevision(st.leaderKey(zone)), "=", rev)).Then(ops...).Commit()
	switch {
	case err != nil:
		st.met.observe("health", "error", start)
		return fmt.Errorf("publishing health verdicts: %w", err)
	case !r.Succeeded:
		st.met.observe("health", "conflict", start)
		return fmt.Errorf("publishing health verdicts of zone %s: %w", zone, ErrNotLeader)
	}
	st.met.observe("health", "ok", start)
	return nil
}

// HealthRecords returns the published health records by target, from the view.
func (h Election) HealthRecords() map[string][]byte {
	st := h.st
	st.mu.Lock()
	defer st.mu.Unlock()
	return maps.Clone(st.healthRecs)
}

// OnHealth calls fn, from the watch, with each health record written (deleted: nil).
func (h Election) OnHealth(fn func(target string, record []byte)) {
	st := h.st
	st.mu.Lock()
	defer st.mu.Unlock()
	st.onHealth = append(st.onHealth, fn)
}

// Passive is a failure a node saw on a target's port, for the target's prober.
type Passive struct {
	Node string `json:"node"`
	Port string `json:"port"`
	Err  string `json:"err"`
}

// ReportPassive tells the target's prober of a failure seen here: a put on
// P passive/<target>/<node>, on the node's lease, that the prober's watch delivers.
func (h Election) ReportPassive(ctx context.Context, target string, p Passive) error {
	st := h.st
	ctx, cancel := st.opContext(ctx)
	defer cancel()
	p.Node = st.o.Node
	b, _ := json.Marshal(p)
	_, err := st.cli.Put(ctx, st.key("passive", target, st.o.Node), string(b), clientv3.WithLease(st.nodeLease()))
	return err
}

// OnPassive calls fn, from the watch, with each failure a node reported (ReportPassive).
func (h Election) OnPassive(fn func(target string, p Passive)) {
	st := h.st
	st.mu.Lock()
	defer st.mu.Unlock()
	st.onPassive = append(st.onPassive, fn)
}

// rawEvent is a health record, a passive report or an audit entry the watch applied, for
// dispatch.
type rawEvent struct {
	section, name string
	value         []byte
}

// dispatchRaw tells the followers of health records, passive reports and the audit log
// (once for a batch of entries), without mu.
func (st *Store) dispatchRaw(evs []rawEvent) {
	if len(evs) == 0 {
		return
	}
	st.mu.Lock()
	onH, onP, onA := slices.Clone(st.onHealth), slices.Clone(st.onPassive), slices.Clone(st.audit.followers)
	st.mu.Unlock()
	audited := false
	defer func() {
		if audited {
			for _, fn := range onA {
				fn()
			}
		}
	}()
	for _, ev := range evs {
		switch ev.section {
		case "audit":
			audited = true
		case "health":
			for _, fn := range onH {
				fn(ev.name, ev.value)
			}
		case "passive":
			var p Passive
			if json.Unmarshal(ev.value, &p) != nil {
				continue
			}
			for _, fn := range onP {
				fn(ev.name, p)
			}
		}
	}
}

// applyHealth applies health/<target>.
func (st *Store) applyHealth(parts []string, x kv, deleted bool) broker.Change {
	if deleted {
		delete(st.healthRecs, parts[1])
		st.newRaw = append(st.newRaw, rawEvent{"health", parts[1], nil})
	} else {
		st.healthRecs[parts[1]] = x.value
		st.newRaw = append(st.newRaw, rawEvent{"health", parts[1], x.value})
	}
	return broker.Change{}
}

// applyPassive applies passive/<target>/<node>.
func (st *Store) applyPassive(parts []string, x kv, deleted bool) broker.Change {
	if !deleted {
		st.newRaw = append(st.newRaw, rawEvent{"passive", parts[1], x.value})
	}
	return broker.Change{}
}
