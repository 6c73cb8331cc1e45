package proxy

import (
	"net/netip"
	"sync"
	"time"
)

// affinity binds client addresses to a backend name across listeners, for a TTL.
type affinity struct {
	now func() time.Time

	mu  sync.Mutex // guards ttl, max and m
	ttl time.Duration
	max int
	m   map[netip.Addr]affinityEntry
}

type affinityEntry struct {
	backend string
	expires time.Time
}

func newAffinity(ttl time.Duration, max int, now func() time.Time) *affinity {
	return &affinity{ttl: ttl, max: max, now: now, m: make(map[netip.Addr]affinityEntry)}
}

// resize sets a new TTL, for bindings made from now on, and a new bound on the table, which
// the next binding enforces.
func (a *affinity) resize(ttl time.Duration, max int) {
	if a == nil {
		return
	}
	a.mu.Lock()
	a.ttl, a.max = ttl, max
	a.mu.Unlock()
}

// get returns the backend client is bound to, if the binding has not expired.
func (a *affinity) get(client netip.Addr) (string, bool) {
	if a == nil {
		return "", false
	}
	client = client.Unmap()
	a.mu.Lock()
	defer a.mu.Unlock()
	e, ok := a.m[client]
	if !ok {
		return "", false
	}
	if !a.now().Before(e.expires) {
		delete(a.m, client)
		return "", false
	}
	return e.backend, true
}

// set binds client to backend for the TTL, evicting expired entries (or, when none has
// expired, an arbitrary one) when the table is full.
func (a *affinity) set(client netip.Addr, backend string) {
	if a == nil {
		return
	}
	client = client.Unmap()
	now := a.now()
	a.mu.Lock()
	defer a.mu.Unlock()
	if _, ok := a.m[client]; !ok && len(a.m) >= a.max {
		a.sweepLocked(now)
		for k := range a.m {
			if len(a.m) < a.max {
				break
			}
			delete(a.m, k)
		}
	}
	a.m[client] = affinityEntry{backend: backend, expires: now.Add(a.ttl)}
}

// forget drops every binding to backend (its health went down).
func (a *affinity) forget(backend string) {
	if a == nil {
		return
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	for k, e := range a.m {
		if e.backend == backend {
			delete(a.m, k)
		}
	}
}

// sweep drops expired bindings.
func (a *affinity) sweep() {
	if a == nil {
		return
	}
	now := a.now()
	a.mu.Lock()
	defer a.mu.Unlock()
	a.sweepLocked(now)
}

func (a *affinity) sweepLocked(now time.Time) {
	for k, e := range a.m {
		if !now.Before(e.expires) {
			delete(a.m, k)
		}
	}
}

func (a *affinity) len() int {
	if a == nil {
		return 0
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	return len(a.m)
}
