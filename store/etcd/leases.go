package etcd

// Leases that expire keys on etcd's clock: keys that end in the same second share one.

import (
	"context"
	"fmt"
	"sync"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
)

// leaseTable is the leases granted, by the second they end, with its own lock.
type leaseTable struct {
	mu    sync.Mutex
	byEnd map[int64]*leaseGrant
}

func leaseOpt(id clientv3.LeaseID) []clientv3.OpOption {
	if id == clientv3.NoLease {
		return nil
	}
	return []clientv3.OpOption{clientv3.WithLease(id)}
}

// leaseUntil returns a lease that ends at t, rounded up to the second and shared by every
// key that ends in that second; NoLease for a zero t. The first caller for a second grants
// it; the others of that second wait for that grant only, not for the lock.
func (st *Store) leaseUntil(ctx context.Context, t time.Time) (clientv3.LeaseID, error) {
	if t.IsZero() {
		return clientv3.NoLease, nil
	}
	now := st.now()
	sec := t.Unix()
	if t.Nanosecond() > 0 {
		sec++
	}
	st.leases.mu.Lock()
	if g, ok := st.leases.byEnd[sec]; ok {
		st.leases.mu.Unlock()
		select {
		case <-g.done:
		case <-ctx.Done():
			return clientv3.NoLease, ctx.Err()
		}
		if g.err == nil {
			return g.id, nil
		}
		return clientv3.NoLease, g.err
	}
	for s := range st.leases.byEnd {
		if s < now.Unix() {
			delete(st.leases.byEnd, s)
		}
	}
	g := &leaseGrant{done: make(chan struct{})}
	st.leases.byEnd[sec] = g
	st.leases.mu.Unlock()
	ttl := max(sec-now.Unix(), 2)
	r, err := st.cli.Grant(ctx, ttl)
	if err != nil {
		g.err = fmt.Errorf("granting a lease of %ds: %w", ttl, err)
		st.leases.mu.Lock()
		delete(st.leases.byEnd, sec) // the next caller tries again
		st.leases.mu.Unlock()
	} else {
		g.id = r.ID
	}
	close(g.done)
	return g.id, g.err
}

// leaseGrant is the lease of one second: granted once, then shared.
type leaseGrant struct {
	done chan struct{} // closed once id or err is set
	id   clientv3.LeaseID
	err  error
}
