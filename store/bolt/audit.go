package bolt

import (
	"bytes"
	"context"
	"fmt"
	"time"

	bbolt "go.etcd.io/bbolt"
)

// The audit log of a site of one node: bucket "audit", keyed by the entry's time in Unix
// nanoseconds, zero-padded to 20 digits, and the node ("00000001764610000123456789-fd-1"),
// so that the keys sort by time; the value is the entry as the admin API encodes it (JSON).
// An entry is only ever added (a key taken in the same nanosecond goes to the next one),
// and deleted past the site's retention (TrimAudit).

// auditTries bounds the nanoseconds an append tries past its own when its key is taken.
const auditTries = 16

func auditKey(at time.Time, node string) []byte {
	return fmt.Appendf(nil, "%020d-%s", max(at.UnixNano(), 0), node)
}

// AppendAudit adds an entry to the audit log: value, the action node took at at.
func (st *Store) AppendAudit(_ context.Context, at time.Time, node string, value []byte) error {
	return st.db.Update(func(tx *bbolt.Tx) error {
		b := tx.Bucket(bAudit)
		for i := range auditTries {
			k := auditKey(at.Add(time.Duration(i)), node)
			if b.Get(k) == nil {
				return b.Put(k, value)
			}
		}
		return fmt.Errorf("appending to the audit log: %d keys of node %s at %s are taken", auditTries, node, at.Format(time.RFC3339Nano))
	})
}

// ListAudit returns up to limit entries of the audit log older than before (zero: the
// newest), newest first.
func (st *Store) ListAudit(_ context.Context, limit int, before time.Time) ([][]byte, error) {
	var out [][]byte
	err := st.db.View(func(tx *bbolt.Tx) error {
		c := tx.Bucket(bAudit).Cursor()
		var k, v []byte
		if before.IsZero() {
			k, v = c.Last()
		} else {
			// The first key at or after before's nanosecond, then back one: older than before.
			k, v = c.Seek(fmt.Appendf(nil, "%020d", max(before.UnixNano(), 0)))
			if k == nil {
				k, v = c.Last()
			} else {
				k, v = c.Prev()
			}
		}
		for ; k != nil && len(out) < limit; k, v = c.Prev() {
			out = append(out, append([]byte(nil), v...))
		}
		return nil
	})
	return out, err
}

// trimBatch bounds the entries TrimAudit deletes in one transaction.
const trimBatch = 10000

// TrimAudit deletes the audit log's entries older than before (those past the site's
// retention) and returns how many.
func (st *Store) TrimAudit(_ context.Context, before time.Time) (int, error) {
	limit := fmt.Appendf(nil, "%020d", max(before.UnixNano(), 0))
	n := 0
	for {
		var keys [][]byte
		err := st.db.Update(func(tx *bbolt.Tx) error {
			b := tx.Bucket(bAudit)
			c := b.Cursor()
			keys = keys[:0]
			for k, _ := c.First(); k != nil && bytes.Compare(k, limit) < 0 && len(keys) < trimBatch; k, _ = c.Next() {
				keys = append(keys, append([]byte(nil), k...))
			}
			for _, k := range keys {
				if err := b.Delete(k); err != nil {
					return err
				}
			}
			return nil
		})
		if err != nil {
			return n, fmt.Errorf("trimming the audit log: %w", err)
		}
		n += len(keys)
		if len(keys) < trimBatch {
			return n, nil
		}
	}
}
