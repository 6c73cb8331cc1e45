package etcd

import (
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"sync"
	"time"

	"github.com/frontdoor-vdi/frontdoor/broker"
	bbolt "go.etcd.io/bbolt"
)

// The local host cache file (Options.CacheFile): a bolt file that mirrors the keys of the
// view at the view's revision, written from the watch in batches (at most every
// cacheFlush, each batch one fsynced bolt transaction), with the outage's journal beside
// them. A node that starts while etcd is out of reach opens from it in outage mode: the
// view, the sealed identity (Identity unseals it from there), the journal of the outage it
// was in. Passive health reports and the audit log are not kept; everything else under the
// prefix is.
//
// What a crash can lose: the last cacheFlush of changes, which etcd has (or, in an outage,
// the launches of that last instant, whose clients retry).

// cacheFlush is the longest a change waits before the cache file has it.
const cacheFlush = 100 * time.Millisecond

var (
	bucketKV   = []byte("kv")
	bucketMeta = []byte("meta")
	keyRev     = []byte("revision")
	keyJournal = []byte("journal")
)

// cachedKV is one key of the view in the cache file.
type cachedKV struct {
	Value     []byte `json:"v"`
	Version   int64  `json:"ver"`
	CreateRev int64  `json:"crev,omitempty"`
}

// cache is the local host cache file.
type cache struct {
	db *bbolt.DB

	mu    sync.Mutex           // guards dirty, reset, rev
	dirty map[string]*cachedKV // by key; nil: deleted
	reset map[string]*cachedKV // a whole view that replaces the file's (loadAll)
	rev   int64
}

func openCache(path string) (*cache, error) {
	db, err := bbolt.Open(path, 0o600, &bbolt.Options{Timeout: time.Second})
	if err != nil {
		return nil, fmt.Errorf("opening the local host cache %s: %w", path, err)
	}
	err = db.Update(func(tx *bbolt.Tx) error {
		for _, b := range [][]byte{bucketKV, bucketMeta} {
			if _, err := tx.CreateBucketIfNotExists(b); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		db.Close()
		return nil, fmt.Errorf("the local host cache %s: %w", path, err)
	}
	return &cache{db: db, dirty: map[string]*cachedKV{}}, nil
}

// cacheKVLocked notes a key's change for the cache file; st.mu is held.
func (st *Store) cacheKVLocked(x kv, deleted bool) {
	if st.cache == nil || strings.HasPrefix(x.key, st.o.Prefix+"passive/") || strings.HasPrefix(x.key, st.o.Prefix+auditDir) {
		return
	}
	st.cache.mu.Lock()
	defer st.cache.mu.Unlock()
	if deleted {
		st.cache.dirty[x.key] = nil
	} else {
		st.cache.dirty[x.key] = &cachedKV{Value: x.value, Version: x.version, CreateRev: x.createRev}
	}
}

// cacheSessionLocked writes a session the outage changed as etcd would hold it.
func (st *Store) cacheSessionLocked(s broker.Session, slot int) {
	val, _ := json.Marshal(record{Session: s, Slot: slot})
	st.cacheKVLocked(kv{key: st.sessionKey(s.ID), value: val, version: int64(s.Rev)}, false)
	st.cacheKVLocked(kv{key: st.slotKey(s.Machine, slot), value: []byte(s.ID), version: 1}, false)
}

// cacheDeleteSessionLocked removes a session the outage ended.
func (st *Store) cacheDeleteSessionLocked(id string, ref slotRef) {
	st.cacheKVLocked(kv{key: st.sessionKey(id)}, true)
	st.cacheKVLocked(kv{key: st.slotKey(ref.machine, ref.slot)}, true)
}

// flushCache writes what changed since the last flush, with the view's revision and the
// outage's journal, in one transaction.
func (st *Store) flushCache() error {
	c := st.cache
	st.mu.Lock()
	rev := st.rev
	var jb []byte
	if st.out.journal != nil {
		jb, _ = json.Marshal(st.out.journal)
	}
	st.mu.Unlock()
	c.mu.Lock()
	dirty, reset := c.dirty, c.reset
	c.dirty, c.reset = map[string]*cachedKV{}, nil
	same := len(dirty) == 0 && reset == nil && rev == c.rev && jb == nil
	c.rev = rev
	c.mu.Unlock()
	if same {
		return nil
	}
	return c.db.Update(func(tx *bbolt.Tx) error {
		if reset != nil {
			if err := tx.DeleteBucket(bucketKV); err != nil {
				return err
			}
			if _, err := tx.CreateBucket(bucketKV); err != nil {
				return err
			}
		}
		b := tx.Bucket(bucketKV)
		for _, m := range []map[string]*cachedKV{reset, dirty} {
			for k, v := range m {
				if v == nil {
					if err := b.Delete([]byte(k)); err != nil {
						return err
					}
					continue
				}
				enc, _ := json.Marshal(v)
				if err := b.Put([]byte(k), enc); err != nil {
					return err
				}
			}
		}
		meta := tx.Bucket(bucketMeta)
		if err := meta.Put(keyRev, fmt.Appendf(nil, "%d", rev)); err != nil {
			return err
		}
		if jb == nil {
			return meta.Delete(keyJournal)
		}
		return meta.Put(keyJournal, jb)
	})
}

// runCache flushes the cache file every cacheFlush until done is closed, then once more.
func (st *Store) runCache(done <-chan struct{}) {
	tick := time.NewTicker(cacheFlush)
	defer tick.Stop()
	for {
		select {
		case <-done:
			if err := st.flushCache(); err != nil {
				st.log.Warn("etcd: writing the local host cache", "err", err)
			}
			return
		case <-tick.C:
			if err := st.flushCache(); err != nil {
				st.log.Warn("etcd: writing the local host cache", "err", err)
			}
		}
	}
}

// errNoCache is returned by loadCache when the file holds no view.
var errNoCache = errors.New("the local host cache holds no view yet")

// loadCache fills the view from the cache file, with the journal of the outage it was in.
func (st *Store) loadCache() error {
	var rev int64
	var j *journal
	kvs := map[string]*cachedKV{}
	err := st.cache.db.View(func(tx *bbolt.Tx) error {
		meta := tx.Bucket(bucketMeta)
		if v := meta.Get(keyRev); v != nil {
			fmt.Sscanf(string(v), "%d", &rev)
		}
		if v := meta.Get(keyJournal); v != nil {
			j = newJournal()
			if err := json.Unmarshal(v, j); err != nil {
				return fmt.Errorf("the outage journal: %w", err)
			}
		}
		return tx.Bucket(bucketKV).ForEach(func(k, v []byte) error {
			var c cachedKV
			if json.Unmarshal(v, &c) == nil {
				kvs[string(k)] = &c
			}
			return nil
		})
	})
	if err != nil {
		return err
	}
	if rev == 0 {
		return errNoCache
	}
	st.mu.Lock()
	defer st.mu.Unlock()
	for k, c := range kvs {
		st.applyLocked(kv{key: k, value: c.Value, version: c.Version, createRev: c.CreateRev}, false)
	}
	st.rev = rev
	st.newRaw, st.newRevoked = nil, nil
	if j != nil {
		if j.Sessions == nil {
			j.Sessions = map[string]*journalEntry{}
		}
		if j.Revoked == nil {
			j.Revoked = map[string][2]time.Time{}
		}
		if j.Superseded == nil {
			j.Superseded = map[string]supersede{}
		}
		if j.Used == nil {
			j.Used = map[string]time.Time{}
		}
		if j.Flags == nil {
			j.Flags = map[string]machineFlags{}
		}
		st.out.journal = j
	}
	return nil
}

// cachedValue returns a key's value from the cache file.
func (st *Store) cachedValue(key string) ([]byte, bool) {
	if st.cache == nil {
		return nil, false
	}
	var out []byte
	st.cache.db.View(func(tx *bbolt.Tx) error {
		if v := tx.Bucket(bucketKV).Get([]byte(key)); v != nil {
			var c cachedKV
			if json.Unmarshal(v, &c) == nil {
				out = c.Value
			}
		}
		return nil
	})
	return out, out != nil
}
