package etcd

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"time"

	"github.com/frontdoor-vdi/frontdoor/broker"
	clientv3 "go.etcd.io/etcd/client/v3"
)

// Audit is the site's audit log in etcd: entries appended by every node, kept while etcd is out
// of reach and written back, listed newest first and trimmed past the site's retention.
type Audit struct{ st *Store }

// Audit returns the store's audit log.
func (st *Store) Audit() Audit { return Audit{st} }

// The site's audit log: every admin action, append-only, under P audit/. An entry's key is
// its time in Unix nanoseconds, zero-padded to 20 digits, and the node that took the action
// (P audit/00000001764610000123456789-fd-hq-1), so that the keys sort by time; it is created
// with If(CreateRevision == 0) — an entry already there is never overwritten (a key taken in
// the same nanosecond by another entry tries the next; by the same one, from a try whose
// answer was lost, is the entry) — and nothing of frontdoor changes it; TrimAudit deletes
// the entries past the site's retention (site.audit_retention). The
// value is the entry as the admin API encodes it (JSON). No node's view holds the log: the
// view's load skips it, the local host cache does not keep it, and a list reads it with one
// ranged Get, newest first. The watch still tells every node that entries were added
// (OnAudit), so that every console shows them.
//
// While etcd is out of reach (outage mode), an entry is kept in the node's memory, listed
// with the others, and written when etcd is back (before the next entry otherwise); at most
// maxAuditHeld entries are held, past which an append fails with ErrOutage. A node that
// stops in the outage loses the entries it held (its log shows them: every admin action is
// logged too). Without an outage plan (Options.Plan) there is no outage mode: an append
// fails while etcd is away.

const (
	auditDir = "audit/"
	// maxAuditHeld bounds the audit entries a node keeps while etcd is out of reach.
	maxAuditHeld = 10000
	// auditTries bounds the nanoseconds an append tries past its own when its key is taken.
	auditTries = 16
	// heldRetry and heldTries pace writing the held entries once an outage ends.
	heldRetry = 500 * time.Millisecond
	heldTries = 20
)

// ErrAuditFull is an audit entry refused in an outage: too many are held already.
var ErrAuditFull = errors.New("too many audit entries held until the site database is back")

// auditQueue is what a Store keeps of the audit log: the entries held in an outage, and the
// followers of the log.
type auditQueue struct {
	mu      sync.Mutex // guards held
	held    []heldAudit
	flushMu sync.Mutex // serializes writing the held entries
	once    sync.Once  // follows the outage's end, from the first append

	followers []func() // told of appends anywhere in the site; guarded by Store.mu
}

// heldAudit is an entry kept until etcd is back.
type heldAudit struct {
	at        time.Time
	node, key string
	value     []byte
}

// viewRanges are the key ranges a view is read from: the whole prefix but the audit log,
// the largest range first.
func (st *Store) viewRanges() [][2]string {
	p := st.o.Prefix
	return [][2]string{{clientv3.GetPrefixRangeEnd(p + auditDir), clientv3.GetPrefixRangeEnd(p)}, {p, p + auditDir}}
}

func (st *Store) auditKey(at time.Time, node string) string {
	return st.key("audit", fmt.Sprintf("%020d-%s", max(at.UnixNano(), 0), node))
}

// AppendAudit adds an entry to the site's audit log: value, the action node took at at. In
// an outage the entry is held and written once etcd is back.
func (h Audit) AppendAudit(ctx context.Context, at time.Time, node string, value []byte) error {
	st := h.st
	st.audit.once.Do(func() {
		st.Outage().On(func(out bool) {
			if !out {
				go st.writeHeldAfterOutage()
			}
		})
	})
	if !st.outage.Load() {
		if err := st.writeHeldAudit(ctx); err != nil {
			st.log.Warn("etcd: audit entries held in the outage are not written yet", "err", err)
		}
		err := st.putAudit(ctx, at, node, value)
		if err == nil || !st.outage.Load() {
			return err
		}
	}
	return st.holdAudit(at, node, value)
}

func (st *Store) holdAudit(at time.Time, node string, value []byte) error {
	q := &st.audit
	q.mu.Lock()
	defer q.mu.Unlock()
	if len(q.held) >= maxAuditHeld {
		return fmt.Errorf("%w (%d): %w", ErrAuditFull, maxAuditHeld, ErrOutage)
	}
	q.held = append(q.held, heldAudit{at: at, node: node, key: st.auditKey(at, node), value: value})
	return nil
}

// putAudit creates the entry's key, or the first free one of the nanoseconds after it.
func (st *Store) putAudit(ctx context.Context, at time.Time, node string, value []byte) error {
	ctx, cancel := st.opContext(ctx)
	defer cancel()
	for i := range auditTries {
		k := st.auditKey(at.Add(time.Duration(i)), node)
		r, err := st.cli.Txn(ctx).If(clientv3.Compare(clientv3.CreateRevision(k), "=", 0)).
			Then(clientv3.OpPut(k, string(value))).Else(clientv3.OpGet(k)).Commit()
		if err != nil {
			return fmt.Errorf("appending to the audit log: %w", err)
		}
		if r.Succeeded {
			return nil
		}
		if kvs := r.Responses[0].GetResponseRange().Kvs; len(kvs) == 1 && string(kvs[0].Value) == string(value) {
			return nil // written before, by a try whose answer was lost
		}
	}
	return fmt.Errorf("appending to the audit log: %d keys of node %s at %s are taken", auditTries, node, at.Format(time.RFC3339Nano))
}

// writeHeldAudit writes the entries held in an outage, oldest first, and forgets each one
// written; it stops at the first failure.
func (st *Store) writeHeldAudit(ctx context.Context) error {
	q := &st.audit
	q.flushMu.Lock()
	defer q.flushMu.Unlock()
	q.mu.Lock()
	held := slices.Clone(q.held)
	q.mu.Unlock()
	if len(held) == 0 {
		return nil
	}
	written := 0
	var err error
	for _, h := range held {
		if err = st.putAudit(ctx, h.at, h.node, h.value); err != nil {
			break
		}
		written++
	}
	q.mu.Lock()
	q.held = q.held[written:] // appends meanwhile went after them
	q.mu.Unlock()
	if written > 0 {
		st.log.Info("etcd: audit entries held in the outage written", "entries", written)
	}
	return err
}

// writeHeldAfterOutage writes the entries held in an outage that ended, trying again every
// heldRetry for a while if etcd does not take them yet (after that the next append, or the
// end of the next outage, tries).
func (st *Store) writeHeldAfterOutage() {
	t := time.NewTicker(heldRetry)
	defer t.Stop()
	for range heldTries {
		err := st.writeHeldAudit(context.Background())
		if err == nil || st.outage.Load() {
			return
		}
		st.log.Warn("etcd: audit entries held in the outage not written yet; trying again", "err", err)
		select {
		case <-t.C:
		case <-st.done:
			return
		}
	}
}

// ListAudit returns up to limit entries of the audit log older than before (zero: the
// newest), newest first, with the entries held in an outage. When etcd cannot be read it
// returns the held entries with the error.
func (h Audit) ListAudit(ctx context.Context, limit int, before time.Time) ([][]byte, error) {
	st := h.st
	if limit <= 0 {
		return nil, nil
	}
	from := st.o.Prefix + auditDir
	end := clientv3.GetPrefixRangeEnd(from)
	if !before.IsZero() {
		end = from + fmt.Sprintf("%020d", max(before.UnixNano(), 0))
	}
	type kv struct {
		key   string
		value []byte
	}
	var all []kv
	var err error
	if st.outage.Load() {
		err = fmt.Errorf("reading the audit log: %w; only the entries this node holds are listed", ErrOutage)
	} else {
		octx, cancel := st.opContext(ctx)
		r, gerr := st.cli.Get(octx, from, clientv3.WithRange(end), clientv3.WithSort(clientv3.SortByKey, clientv3.SortDescend),
			clientv3.WithLimit(int64(limit)))
		cancel()
		if gerr != nil {
			err = fmt.Errorf("reading the audit log: %w", gerr)
		} else {
			for _, x := range r.Kvs {
				all = append(all, kv{string(x.Key), x.Value})
			}
		}
	}
	st.audit.mu.Lock()
	for _, h := range st.audit.held {
		if h.key < end && !slices.ContainsFunc(all, func(x kv) bool { return x.key == h.key }) {
			all = append(all, kv{h.key, h.value})
		}
	}
	st.audit.mu.Unlock()
	slices.SortFunc(all, func(a, b kv) int { return cmp.Compare(b.key, a.key) })
	out := make([][]byte, 0, min(limit, len(all)))
	for _, x := range all[:min(limit, len(all))] {
		out = append(out, x.value)
	}
	return out, err
}

// TrimAudit deletes the audit log's entries older than before (those past the site's
// retention) and returns how many, in one ranged delete; in an outage it fails with
// ErrOutage (the held entries are newer).
func (h Audit) TrimAudit(ctx context.Context, before time.Time) (int, error) {
	st := h.st
	if st.outage.Load() {
		return 0, fmt.Errorf("trimming the audit log: %w", ErrOutage)
	}
	from := st.o.Prefix + auditDir
	octx, cancel := st.opContext(ctx)
	defer cancel()
	r, err := st.cli.Delete(octx, from, clientv3.WithRange(from+fmt.Sprintf("%020d", max(before.UnixNano(), 0))))
	if err != nil {
		return 0, fmt.Errorf("trimming the audit log: %w", err)
	}
	return int(r.Deleted), nil
}

// OnAudit calls fn, from the watch, whenever entries were added to the audit log, by any
// node. fn must not block for long.
func (h Audit) OnAudit(fn func()) {
	st := h.st
	st.mu.Lock()
	defer st.mu.Unlock()
	st.audit.followers = append(st.audit.followers, fn)
}

// applyAudit applies audit/<entry>: held by no view, only told to the audit's followers.
func (st *Store) applyAudit(parts []string, _ kv, deleted bool) broker.Change {
	if !deleted {
		st.newRaw = append(st.newRaw, rawEvent{"audit", parts[1], nil})
	}
	return broker.Change{}
}
