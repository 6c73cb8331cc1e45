package etcd

import (
	"context"
	"crypto/cipher"
	"encoding/binary"
	"fmt"
	"io/fs"
	"net/url"
	"slices"
	"strings"
	"sync"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.etcd.io/etcd/client/v3/concurrency"
)

// Certs is the site's certificate storage in etcd: ACME accounts, certificates and their keys,
// sealed as the site identity is (the store secret), so that every node serves what one
// obtained; and the locks that make one node of the site obtain a name's certificate while
// the others wait for it. Keys are certmagic's paths ("certificates/CA/NAME/NAME.crt").
type Certs struct {
	st   *Store
	aead cipher.AEAD

	mu    sync.Mutex // guards sess, held, locks
	sess  *concurrency.Session
	held  map[string]chan struct{}      // names locked by this node: closed when unlocked
	locks map[string]*concurrency.Mutex // their etcd locks
}

// Certs returns the site's certificate storage, sealed with secret.
func (h Keys) Certs(secret []byte) (*Certs, error) {
	st := h.st
	a, err := st.aead(secret)
	if err != nil {
		return nil, err
	}
	return &Certs{st: st, aead: a, held: map[string]chan struct{}{}, locks: map[string]*concurrency.Mutex{}}, nil
}

func (c *Certs) key(k string) string { return c.st.o.Prefix + "certs/" + strings.Trim(k, "/") }

// sealed is value as stored under the etcd key ek: sealed, with the time it is stored.
func (c *Certs) sealed(ek string, value []byte) string {
	plain := binary.BigEndian.AppendUint64(nil, uint64(c.st.now().UnixNano()))
	return string(seal(c.aead, ek, append(plain, value...)))
}

// Put stores value under k, sealed, with the time it was stored.
func (c *Certs) Put(ctx context.Context, k string, value []byte) error {
	ek := c.key(k)
	if _, err := c.st.cli.Put(ctx, ek, c.sealed(ek, value)); err != nil {
		return fmt.Errorf("storing %s: %w", k, err)
	}
	return nil
}

// Create stores value under k, sealed, unless k holds one already, and returns what k holds
// then: of nodes that create at once, one wins and every node gets the winner's.
func (c *Certs) Create(ctx context.Context, k string, value []byte) ([]byte, error) {
	ek := c.key(k)
	t, err := c.st.cli.Txn(ctx).
		If(clientv3.Compare(clientv3.CreateRevision(ek), "=", 0)).
		Then(clientv3.OpPut(ek, c.sealed(ek, value))).
		Commit()
	if err != nil {
		return nil, fmt.Errorf("storing %s: %w", k, err)
	}
	if t.Succeeded {
		return value, nil
	}
	v, _, err := c.Get(ctx, k)
	return v, err
}

// Get returns the value under k and when it was stored; fs.ErrNotExist when there is none.
func (c *Certs) Get(ctx context.Context, k string) ([]byte, time.Time, error) {
	ek := c.key(k)
	r, err := c.st.cli.Get(ctx, ek)
	if err != nil {
		return nil, time.Time{}, fmt.Errorf("reading %s: %w", k, err)
	}
	if len(r.Kvs) == 0 {
		return nil, time.Time{}, fmt.Errorf("%s: %w", k, fs.ErrNotExist)
	}
	plain, err := unseal(c.aead, ek, r.Kvs[0].Value, k)
	if err != nil {
		return nil, time.Time{}, err
	}
	if len(plain) < 8 {
		return nil, time.Time{}, fmt.Errorf("%w: %s is truncated", ErrSecret, k)
	}
	return plain[8:], time.Unix(0, int64(binary.BigEndian.Uint64(plain))), nil
}

// Delete deletes k and every key below it.
func (c *Certs) Delete(ctx context.Context, k string) error {
	ek := c.key(k)
	_, err := c.st.cli.Txn(ctx).Then(clientv3.OpDelete(ek), clientv3.OpDelete(ek+"/", clientv3.WithPrefix())).Commit()
	return err
}

// List returns the keys below prefix: every one when recursive, else the next level's
// names (a key or a directory) once each.
func (c *Certs) List(ctx context.Context, prefix string, recursive bool) ([]string, error) {
	base := c.key(prefix) + "/"
	if strings.Trim(prefix, "/") == "" {
		base = c.key("")
	}
	r, err := c.st.cli.Get(ctx, base, clientv3.WithPrefix(), clientv3.WithKeysOnly())
	if err != nil {
		return nil, err
	}
	var out []string
	for _, kv := range r.Kvs {
		rel := strings.TrimPrefix(string(kv.Key), base)
		if !recursive {
			rel, _, _ = strings.Cut(rel, "/")
		}
		k := strings.TrimPrefix(base+rel, c.key(""))
		if !slices.Contains(out, k) {
			out = append(out, k)
		}
	}
	return out, nil
}

// HasBelow reports whether a key lies below k (k is a directory).
func (c *Certs) HasBelow(ctx context.Context, k string) bool {
	r, err := c.st.cli.Get(ctx, c.key(k)+"/", clientv3.WithPrefix(), clientv3.WithCountOnly())
	return err == nil && r.Count > 0
}

// Lock takes the site-wide lock name, waiting within ctx for the task of this node or the
// node that holds it. A lock whose node died is freed when its etcd lease ends (30 s).
func (c *Certs) Lock(ctx context.Context, name string) error {
	for {
		c.mu.Lock()
		wait, busy := c.held[name]
		if !busy {
			c.held[name] = make(chan struct{})
		}
		c.mu.Unlock()
		if !busy {
			break
		}
		select {
		case <-wait:
		case <-ctx.Done():
			return fmt.Errorf("locking %s: %w", name, ctx.Err())
		}
	}
	sess, err := c.session(ctx)
	if err == nil {
		m := concurrency.NewMutex(sess, c.st.o.Prefix+"certlocks/"+name)
		if err = m.Lock(ctx); err == nil {
			c.mu.Lock()
			c.locks[name] = m
			c.mu.Unlock()
			return nil
		}
	}
	c.release(name)
	return fmt.Errorf("locking %s: %w", name, err)
}

// session returns the node's lock session, a new one when there is none or its lease ended
// (the node was cut from etcd past it).
func (c *Certs) session(ctx context.Context) (*concurrency.Session, error) {
	c.mu.Lock()
	s := c.sess
	c.mu.Unlock()
	if s != nil {
		select {
		case <-s.Done():
		default:
			return s, nil
		}
	}
	gctx, cancel := c.st.opContext(ctx)
	defer cancel()
	l, err := c.st.cli.Grant(gctx, 30)
	if err != nil {
		return nil, err
	}
	s, err = concurrency.NewSession(c.st.cli, concurrency.WithLease(l.ID))
	if err != nil {
		return nil, err
	}
	c.mu.Lock()
	old := c.sess
	c.sess = s
	c.mu.Unlock()
	if old != nil {
		old.Orphan()
	}
	return s, nil
}

// release lets the next task of this node at lock name.
func (c *Certs) release(name string) {
	c.mu.Lock()
	if ch := c.held[name]; ch != nil {
		close(ch)
		delete(c.held, name)
	}
	delete(c.locks, name)
	c.mu.Unlock()
}

// Unlock frees the lock name this node holds.
func (c *Certs) Unlock(ctx context.Context, name string) error {
	c.mu.Lock()
	m := c.locks[name]
	c.mu.Unlock()
	if m == nil {
		return fmt.Errorf("unlocking %s: not held here", name)
	}
	defer c.release(name)
	uctx, cancel := c.st.opContext(ctx)
	defer cancel()
	return m.Unlock(uctx)
}

// Close ends the node's lock session, freeing the locks it holds (within 2 s; else their
// lease ends them).
func (c *Certs) Close() error {
	c.mu.Lock()
	s := c.sess
	c.sess = nil
	c.mu.Unlock()
	if s == nil {
		return nil
	}
	s.Orphan()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	_, err := c.st.cli.Revoke(ctx, s.Lease())
	return err
}

// The TXT records of ACME dns-01 challenges, shared so that every DNS node of the site
// serves the records any node adds: under challenges/, each with a lease of challengeTTL.

const challengeTTL = 10 * 60 // seconds

func (st *Store) challengeKey(name, value string) string {
	return st.key("challenges", strings.ToLower(strings.TrimSuffix(name, ".")), value)
}

// AddChallenge publishes a challenge's TXT record (name, value) for every node, for 10
// minutes at most.
func (h Keys) AddChallenge(ctx context.Context, name, value string) error {
	st := h.st
	l, err := st.cli.Grant(ctx, challengeTTL)
	if err != nil {
		return fmt.Errorf("publishing the challenge record %s: %w", name, err)
	}
	_, err = st.cli.Put(ctx, st.challengeKey(name, value), value, clientv3.WithLease(l.ID))
	return err
}

// RemoveChallenge withdraws a challenge's TXT record, and its lease.
func (h Keys) RemoveChallenge(ctx context.Context, name, value string) error {
	st := h.st
	k := st.challengeKey(name, value)
	r, err := st.cli.Get(ctx, k)
	if err != nil {
		return err
	}
	for _, kv := range r.Kvs {
		if kv.Lease != 0 {
			_, err = st.cli.Revoke(ctx, clientv3.LeaseID(kv.Lease)) // deletes the key
			return err
		}
	}
	_, err = st.cli.Delete(ctx, k)
	return err
}

// Challenge is a challenge's TXT record as WatchChallenges reports it.
type Challenge struct {
	Name, Value string
	Gone        bool // withdrawn or expired
}

// WatchChallenges calls fn with every challenge record published now and each one published
// or withdrawn later, until the store closes: the records are listed, then watched, again
// after a failure (etcd away, a compaction), so that fn may hear of a record twice.
func (h Keys) WatchChallenges(fn func(Challenge)) {
	st := h.st
	prefix := st.key("challenges") + "/"
	st.follow(prefix, func(k, _ []byte, gone bool) {
		name, value, _ := strings.Cut(strings.TrimPrefix(string(k), prefix), "/")
		name, _ = url.PathUnescape(name)
		value, _ = url.PathUnescape(value)
		fn(Challenge{Name: name, Value: value, Gone: gone})
	})
}

// Follow calls fn with the value under k now and each value stored there later (not when it
// is deleted), until the store closes; fn may hear of a value twice.
func (c *Certs) Follow(k string, fn func(value []byte)) {
	ek := c.key(k)
	c.st.follow(ek, func(key, value []byte, gone bool) {
		if gone || string(key) != ek {
			return
		}
		plain, err := unseal(c.aead, ek, value, k)
		if err != nil || len(plain) < 8 {
			return
		}
		fn(plain[8:])
	})
}

// follow calls fn with every key under prefix and its value now, and each change later,
// until the store closes: the keys are listed, then watched, again after a failure (etcd
// away, a compaction), so that fn may hear of a change twice.
func (st *Store) follow(prefix string, fn func(k, v []byte, gone bool)) {
	go func() {
		for {
			st.followOnce(prefix, fn)
			t := time.NewTimer(time.Second)
			select {
			case <-st.done:
				t.Stop()
				return
			case <-t.C:
			}
		}
	}()
}

// followOnce lists the keys under prefix, then follows them until the watch fails.
func (st *Store) followOnce(prefix string, fn func(k, v []byte, gone bool)) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go func() {
		select {
		case <-st.done:
			cancel()
		case <-ctx.Done():
		}
	}()
	lctx, lcancel := st.opContext(ctx)
	r, err := st.cli.Get(lctx, prefix, clientv3.WithPrefix())
	lcancel()
	if err != nil {
		return
	}
	for _, kv := range r.Kvs {
		fn(kv.Key, kv.Value, false)
	}
	w := st.cli.Watch(clientv3.WithRequireLeader(ctx), prefix, clientv3.WithPrefix(), clientv3.WithRev(r.Header.Revision+1))
	for resp := range w {
		if resp.Err() != nil || resp.Canceled {
			return
		}
		for _, ev := range resp.Events {
			fn(ev.Kv.Key, ev.Kv.Value, ev.Type == clientv3.EventTypeDelete)
		}
	}
}
