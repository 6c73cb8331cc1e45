package bolt

import (
	"encoding/binary"
	"fmt"
	"sync"
	"time"

	bbolt "go.etcd.io/bbolt"
)

// The ticket ledger of a site of one node, in the bolt file, so that a restart forgets no
// revocation, no supersede mark and no use of a single-use ticket or one-time code: bucket
// "ledger", keys "u" + ticket id + channel ("8443/tcp", or what a one-time code is) for a
// use, "r" + session for a revocation, "g" + session for the mark of the last reconnect
// ticket used; values are big-endian Unix nanoseconds (and the mark): until, then before or
// the mark. A later revocation or mark only widens the one there. Each write is in the file
// (batched with other goroutines' writes, fsynced) before it is answered; reads look in the
// file. Expired entries are deleted once an hour, by the write that finds an hour passed.

var bLedger = []byte("ledger")

// ledgerPurgeEvery is how often the expired entries of the ledger are deleted.
const ledgerPurgeEvery = time.Hour

// Ledger is the store's ticket ledger (node adapts it to ticket.Ledger).
type Ledger struct {
	st  *Store
	now func() time.Time

	mu     sync.Mutex // guards purged
	purged time.Time  // when expired entries were last deleted
}

// Ledger returns the store's ticket ledger; now is its clock (time.Now when nil).
func (st *Store) Ledger(now func() time.Time) *Ledger {
	if now == nil {
		now = time.Now
	}
	return &Ledger{st: st, now: now}
}

func ledgerKey(kind byte, parts ...[]byte) []byte {
	k := []byte{kind}
	for _, p := range parts {
		k = append(k, p...)
	}
	return k
}

func nanos(t time.Time) []byte {
	return binary.BigEndian.AppendUint64(nil, uint64(max(t.UnixNano(), 0)))
}

func fromNanos(b []byte) time.Time { return time.Unix(0, int64(binary.BigEndian.Uint64(b))) }

// Use records that ticket id opened ch and reports false if it already had (and the use has
// not expired).
func (l *Ledger) Use(id [16]byte, ch string, until time.Time) (bool, error) {
	k := ledgerKey('u', id[:], []byte(ch))
	now := l.now()
	var fresh bool
	err := l.st.db.Batch(func(tx *bbolt.Tx) error {
		b := tx.Bucket(bLedger)
		if v := b.Get(k); len(v) == 8 && now.Before(fromNanos(v)) {
			fresh = false
			return nil
		}
		fresh = true
		return b.Put(k, nanos(until))
	})
	if err != nil {
		return false, fmt.Errorf("recording a ticket's use: %w", err)
	}
	l.purge(now)
	return fresh, nil
}

// Revoke makes the tickets of session issued before before invalid until until, widening a
// revocation there.
func (l *Ledger) Revoke(session string, before, until time.Time) error {
	return l.widen('r', session, uint64(max(before.UnixNano(), 0)), until)
}

// Revoked returns the issue time before which session's tickets are revoked; zero when none
// are.
func (l *Ledger) Revoked(session string) (time.Time, error) {
	v, ok, err := l.get('r', session)
	if err != nil || !ok {
		return time.Time{}, err
	}
	return time.Unix(0, int64(v)), nil
}

// Supersede records that a reconnect ticket of session with mark was used, widening a mark
// there.
func (l *Ledger) Supersede(session string, mark uint64, until time.Time) error {
	return l.widen('g', session, mark, until)
}

// Superseded returns the mark below which session's reconnect tickets are refused; 0 when
// none is.
func (l *Ledger) Superseded(session string) (uint64, error) {
	v, _, err := l.get('g', session)
	return v, err
}

// widen stores value and until for session under kind, each the larger of it and the
// unexpired entry's.
func (l *Ledger) widen(kind byte, session string, value uint64, until time.Time) error {
	k := ledgerKey(kind, []byte(session))
	now := l.now()
	err := l.st.db.Batch(func(tx *bbolt.Tx) error {
		b := tx.Bucket(bLedger)
		u, val := until, value
		if old := b.Get(k); len(old) == 16 && now.Before(fromNanos(old[:8])) {
			u = maxTime(u, fromNanos(old[:8]))
			val = max(val, binary.BigEndian.Uint64(old[8:]))
		}
		return b.Put(k, binary.BigEndian.AppendUint64(nanos(u), val))
	})
	if err != nil {
		return fmt.Errorf("recording a ticket revocation: %w", err)
	}
	l.purge(now)
	return nil
}

// get returns the value of session's unexpired entry of kind.
func (l *Ledger) get(kind byte, session string) (v uint64, ok bool, err error) {
	k := ledgerKey(kind, []byte(session))
	now := l.now()
	err = l.st.db.View(func(tx *bbolt.Tx) error {
		e := tx.Bucket(bLedger).Get(k)
		if len(e) == 16 && now.Before(fromNanos(e[:8])) {
			v, ok = binary.BigEndian.Uint64(e[8:]), true
		}
		return nil
	})
	if err != nil {
		return 0, false, fmt.Errorf("reading the ticket ledger: %w", err)
	}
	return v, ok, nil
}

// purge deletes the expired entries if ledgerPurgeEvery has passed since the last time; a
// failure is left for the next.
func (l *Ledger) purge(now time.Time) {
	l.mu.Lock()
	if now.Sub(l.purged) < ledgerPurgeEvery {
		l.mu.Unlock()
		return
	}
	l.purged = now
	l.mu.Unlock()
	l.st.db.Update(func(tx *bbolt.Tx) error {
		b := tx.Bucket(bLedger)
		var gone [][]byte
		b.ForEach(func(k, v []byte) error {
			if len(v) >= 8 && !now.Before(fromNanos(v[:8])) {
				gone = append(gone, append([]byte(nil), k...))
			}
			return nil
		})
		for _, k := range gone {
			if err := b.Delete(k); err != nil {
				return err
			}
		}
		return nil
	})
}

func maxTime(a, b time.Time) time.Time {
	if a.After(b) {
		return a
	}
	return b
}
