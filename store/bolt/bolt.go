// Package bolt is the embedded, persistent broker.Store: one go.etcd.io/bbolt file holding
// sessions, per-machine session counts and machine states, so that they survive a restart.
//
// Layout: bucket "sessions" (id → JSON Session), bucket "counts" (machine → live session
// count, 8 bytes big endian), bucket "machines" (name → JSON MachineState), bucket "audit"
// (the admin audit log: audit.go), bucket "ledger" (the ticket ledger: ledger.go), bucket
// "settings" (the site's settings: settings.go), bucket "meta" ("schema" → "1").
// CreateSession reads the count and writes the session and the count in one read-write
// transaction, so max_sessions holds across goroutines and processes.
package bolt

import (
	"context"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"time"

	"github.com/frontdoor-vdi/frontdoor/broker"
	"github.com/frontdoor-vdi/frontdoor/store/settings"
	bbolt "go.etcd.io/bbolt"
)

var (
	bSessions = []byte("sessions")
	bCounts   = []byte("counts")
	bMachines = []byte("machines")
	bMeta     = []byte("meta")
	bAudit    = []byte("audit")
	schema    = []byte("1")
)

// ErrLocked is returned by Open when another process holds the bolt file.
var ErrLocked = errors.New("bolt file is locked by another process")

// ErrCorrupt is returned by Open when the file is not a valid frontdoor bolt store.
var ErrCorrupt = errors.New("bolt file is corrupt or not a frontdoor store")

// Store is a broker.Store in one bolt file.
type Store struct {
	db       *bbolt.DB
	settings *settings.Local
}

var _ broker.Store = (*Store)(nil)

// Options tune Open.
type Options struct {
	// LockTimeout bounds waiting for the file lock. Default: 1s.
	LockTimeout time.Duration
	// NoSync skips fsync after each write (benchmarks only: a crash may lose writes).
	NoSync bool
}

// Open opens or creates the store at path. A file locked by another process gives ErrLocked
// after opts.LockTimeout; a corrupt file gives ErrCorrupt. Neither is silently replaced.
func Open(path string, opts Options) (st *Store, err error) {
	if opts.LockTimeout == 0 {
		opts.LockTimeout = time.Second
	}
	defer func() {
		// bbolt panics on some kinds of damaged pages; report them as corruption.
		if r := recover(); r != nil {
			st, err = nil, fmt.Errorf("opening %s: %w: %v", path, ErrCorrupt, r)
		}
	}()
	db, err := bbolt.Open(path, 0o600, &bbolt.Options{Timeout: opts.LockTimeout, NoSync: opts.NoSync})
	switch {
	case errors.Is(err, bbolt.ErrTimeout):
		return nil, fmt.Errorf("opening %s: %w (waited %s)", path, ErrLocked, opts.LockTimeout)
	case errors.Is(err, bbolt.ErrInvalid), errors.Is(err, bbolt.ErrChecksum), errors.Is(err, bbolt.ErrVersionMismatch):
		return nil, fmt.Errorf("opening %s: %w: %v", path, ErrCorrupt, err)
	case err != nil:
		if _, serr := os.Stat(path); serr == nil {
			return nil, fmt.Errorf("opening %s: %w: %v", path, ErrCorrupt, err)
		}
		return nil, fmt.Errorf("opening %s: %w", path, err)
	}
	err = db.Update(func(tx *bbolt.Tx) error {
		meta, err := tx.CreateBucketIfNotExists(bMeta)
		if err != nil {
			return err
		}
		if v := meta.Get([]byte("schema")); v != nil && string(v) != string(schema) {
			return fmt.Errorf("%w: schema %q, want %q", ErrCorrupt, v, schema)
		}
		if err := meta.Put([]byte("schema"), schema); err != nil {
			return err
		}
		for _, b := range [][]byte{bSessions, bCounts, bMachines, bAudit, bLedger, bSettings} {
			if _, err := tx.CreateBucketIfNotExists(b); err != nil {
				return err
			}
		}
		return nil
	})
	if err == nil {
		err = db.View(func(tx *bbolt.Tx) error {
			for e := range tx.Check() {
				return fmt.Errorf("%w: %v", ErrCorrupt, e)
			}
			return nil
		})
	}
	if err != nil {
		db.Close()
		return nil, fmt.Errorf("opening %s: %w", path, err)
	}
	// The ticket ledger's writes are batched (ledger.go): a lone one, a channel's admission,
	// waits at most a millisecond for company, not bbolt's default 10 ms.
	db.MaxBatchDelay = time.Millisecond
	set, err := settings.NewLocal(settingsFile{db})
	if err != nil {
		db.Close()
		return nil, fmt.Errorf("opening %s: %w", path, err)
	}
	return &Store{db: db, settings: set}, nil
}

func count(b *bbolt.Bucket, machine string) int {
	v := b.Get([]byte(machine))
	if len(v) != 8 {
		return 0
	}
	return int(binary.BigEndian.Uint64(v))
}

func setCount(b *bbolt.Bucket, machine string, n int) error {
	if n <= 0 {
		return b.Delete([]byte(machine))
	}
	var v [8]byte
	binary.BigEndian.PutUint64(v[:], uint64(n))
	return b.Put([]byte(machine), v[:])
}

// Load returns every session and machine state.
func (st *Store) Load(context.Context) (broker.Snapshot, error) {
	var snap broker.Snapshot
	err := st.db.View(func(tx *bbolt.Tx) error {
		err := tx.Bucket(bSessions).ForEach(func(k, v []byte) error {
			var s broker.Session
			if err := json.Unmarshal(v, &s); err != nil {
				return fmt.Errorf("%w: session %q: %v", ErrCorrupt, k, err)
			}
			snap.Sessions = append(snap.Sessions, s)
			return nil
		})
		if err != nil {
			return err
		}
		return tx.Bucket(bMachines).ForEach(func(k, v []byte) error {
			var m broker.MachineState
			if err := json.Unmarshal(v, &m); err != nil {
				return fmt.Errorf("%w: machine %q: %v", ErrCorrupt, k, err)
			}
			snap.Machines = append(snap.Machines, m)
			return nil
		})
	})
	return snap, err
}

// CreateSession checks the machine's count and creates the session in one transaction.
func (st *Store) CreateSession(_ context.Context, s broker.Session, maxSessions int) error {
	s.Rev = 1
	v, err := json.Marshal(s)
	if err != nil {
		return err
	}
	return st.db.Update(func(tx *bbolt.Tx) error {
		ss, cs := tx.Bucket(bSessions), tx.Bucket(bCounts)
		if ss.Get([]byte(s.ID)) != nil {
			return fmt.Errorf("session %s: %w", s.ID, broker.ErrExists)
		}
		n := count(cs, s.Machine)
		if n >= maxSessions {
			return fmt.Errorf("%s holds %d of %d sessions: %w", s.Machine, n, maxSessions, broker.ErrMachineFull)
		}
		if err := ss.Put([]byte(s.ID), v); err != nil {
			return err
		}
		return setCount(cs, s.Machine, n+1)
	})
}

// UpdateSession replaces a session if its stored revision is prevRev.
func (st *Store) UpdateSession(_ context.Context, s broker.Session, prevRev uint64) error {
	s.Rev = prevRev + 1
	v, err := json.Marshal(s)
	if err != nil {
		return err
	}
	return st.db.Update(func(tx *bbolt.Tx) error {
		ss := tx.Bucket(bSessions)
		var cur *broker.Session
		if old := ss.Get([]byte(s.ID)); old != nil {
			cur = new(broker.Session)
			if err := json.Unmarshal(old, cur); err != nil {
				return fmt.Errorf("%w: session %q: %v", ErrCorrupt, s.ID, err)
			}
		}
		if err := broker.CheckUpdate(cur, s, prevRev); err != nil {
			return err
		}
		return ss.Put([]byte(s.ID), v)
	})
}

// DeleteSession removes a session and decrements its machine's count.
func (st *Store) DeleteSession(_ context.Context, id string) error {
	return st.db.Update(func(tx *bbolt.Tx) error {
		ss, cs := tx.Bucket(bSessions), tx.Bucket(bCounts)
		old := ss.Get([]byte(id))
		if old == nil {
			return fmt.Errorf("session %s: %w", id, broker.ErrNoSession)
		}
		var cur broker.Session
		if err := json.Unmarshal(old, &cur); err != nil {
			return fmt.Errorf("%w: session %q: %v", ErrCorrupt, id, err)
		}
		if err := ss.Delete([]byte(id)); err != nil {
			return err
		}
		return setCount(cs, cur.Machine, count(cs, cur.Machine)-1)
	})
}

// PutMachine stores a machine state.
func (st *Store) PutMachine(_ context.Context, m broker.MachineState) error {
	v, err := json.Marshal(m)
	if err != nil {
		return err
	}
	return st.db.Update(func(tx *bbolt.Tx) error { return tx.Bucket(bMachines).Put([]byte(m.Name), v) })
}

// Count returns the stored live session count of a machine.
func (st *Store) Count(machine string) int {
	n := 0
	st.db.View(func(tx *bbolt.Tx) error { n = count(tx.Bucket(bCounts), machine); return nil })
	return n
}

// Close closes the file, once the settings' changes are told.
func (st *Store) Close() error {
	st.settings.Close()
	return st.db.Close()
}

// Import writes many sessions in one transaction (restores, benchmarks), keeping the
// per-machine counts; it does not check capacity.
func (st *Store) Import(_ context.Context, sessions []broker.Session) error {
	return st.db.Update(func(tx *bbolt.Tx) error {
		ss, cs := tx.Bucket(bSessions), tx.Bucket(bCounts)
		for _, s := range sessions {
			if ss.Get([]byte(s.ID)) != nil {
				return fmt.Errorf("session %s: %w", s.ID, broker.ErrExists)
			}
			if s.Rev == 0 {
				s.Rev = 1
			}
			v, err := json.Marshal(s)
			if err != nil {
				return err
			}
			if err := ss.Put([]byte(s.ID), v); err != nil {
				return err
			}
			if err := setCount(cs, s.Machine, count(cs, s.Machine)+1); err != nil {
				return err
			}
		}
		return nil
	})
}
