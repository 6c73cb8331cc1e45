package etcd

import (
	"context"
	"slices"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
)

// alive is a context that lives until the next outage begins; read without a lock by every
// operation (opContext) and the watch.
type alive struct {
	ctx    context.Context
	cancel context.CancelFunc
}

func newAlive() *alive {
	ctx, cancel := context.WithCancel(context.Background())
	return &alive{ctx, cancel}
}

func (st *Store) initOutage() {
	st.out.alive.Store(newAlive())
	st.out.up = make(chan struct{})
	close(st.out.up)
	st.out.localKick = make(chan struct{}, 1)
}

// detect checks etcd every outageEvery and enters or leaves outage mode.
func (st *Store) detect(ctx context.Context) {
	fails := 0
	tick := time.NewTicker(outageEvery)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
		cctx, cancel := context.WithTimeout(ctx, outageTimeout)
		_, err := st.cli.Get(cctx, st.key("identity"), clientv3.WithCountOnly())
		cancel()
		if ctx.Err() != nil {
			return
		}
		if err == nil {
			fails = 0
			if st.outage.Load() {
				st.leaveOutage(ctx)
			}
			continue
		}
		if fails++; fails >= outageFails && !st.outage.Load() && st.o.Plan != nil {
			st.enterOutage(err)
		}
	}
}

// enterOutage switches to brokering from the view.
func (st *Store) enterOutage(cause error) {
	st.mu.Lock()
	st.out.since = st.now()
	st.out.count++
	if st.out.journal == nil {
		st.out.journal = newJournal()
	}
	st.out.up = make(chan struct{})
	st.outage.Store(true)
	st.out.alive.Load().cancel() // operations in flight and the watch end now
	fns := slices.Clone(st.out.onChange)
	rev := st.rev
	st.mu.Unlock()
	st.met.outages.Inc()
	st.log.Error("etcd unreachable: outage mode — brokering this node's share from the local host cache",
		"err", cause, "revision", rev, "node", st.o.Node)
	for _, fn := range fns {
		fn(true)
	}
}

// leaveOutage writes back what the outage changed, reloads the view and follows etcd again.
//
// The journal is written back in passes while the node goes on brokering locally, so that a
// long outage's write-back holds no launch; only the last pass, of what came meanwhile, holds
// the local operations until the view is reloaded.
func (st *Store) leaveOutage(ctx context.Context) {
	for range writeBackPasses {
		j := st.takeJournal()
		if err := st.writeBack(ctx, j); err != nil {
			st.log.Warn("etcd is back but the outage's changes could not all be written; retrying", "err", err)
			st.mergeJournal(j) // retried at the next check; writeBack skipped what it wrote
			return
		}
		st.mu.Lock()
		left := st.out.journal.size()
		st.mu.Unlock()
		if left < writeBackLast {
			break
		}
	}
	st.out.gate.Lock() // no local operation meanwhile
	defer st.out.gate.Unlock()
	st.tellQueued() // the outage's changes reach the followers before the reloaded view
	j := st.takeJournal()
	st.mu.Lock()
	st.out.journal = nil
	st.mu.Unlock()
	if err := st.writeBack(ctx, j); err != nil {
		st.log.Warn("etcd is back but the outage's changes could not all be written; retrying", "err", err)
		st.mu.Lock()
		st.out.journal = newJournal()
		st.mu.Unlock()
		st.mergeJournal(j)
		return
	}
	st.resync(ctx)
	st.mu.Lock()
	st.out.last = st.now().Sub(st.out.since)
	st.out.alive.Store(newAlive())
	st.outage.Store(false)
	close(st.out.up)
	fns := slices.Clone(st.out.onChange)
	last, conflicts := st.out.last, len(st.out.conflicts)
	st.mu.Unlock()
	st.log.Warn("etcd is back: outage mode ended, the outage's changes are written back", "outage", last.Round(time.Millisecond), "conflicts", conflicts)
	for _, fn := range fns {
		fn(false)
	}
}

// waitUp waits until no outage is on, or ctx ends.
func (st *Store) waitUp(ctx context.Context) {
	st.mu.Lock()
	up := st.out.up
	st.mu.Unlock()
	select {
	case <-up:
	case <-ctx.Done():
	}
}
