package etcdembed

import (
	"context"
	"errors"
	"fmt"
	"net/url"
	"time"

	"go.etcd.io/etcd/server/v3/embed"
)

func (c *Cluster) member(i int) (*member, error) {
	if i < 0 || i >= len(c.members) {
		return nil, fmt.Errorf("etcdembed: no member %d in a cluster of %d", i, len(c.members))
	}
	return c.members[i], nil
}

// startMember starts m for the first time; Start waits for it.
func (c *Cluster) startMember(m *member) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	e, err := c.newEtcd(m)
	if err != nil {
		return fmt.Errorf("%s: %w", m.name, err)
	}
	m.etcd = e
	return nil
}

// waitReady waits until every one of ms is ready and they all report the same leader.
func (c *Cluster) waitReady(ctx context.Context, ms []*member) error {
	etcds := make([]*embed.Etcd, len(ms))
	for i, m := range ms {
		m.mu.Lock()
		etcds[i] = m.etcd
		m.mu.Unlock()
		if err := waitMember(ctx, m.name, etcds[i]); err != nil {
			return err
		}
	}
	tick := time.NewTicker(10 * time.Millisecond)
	defer tick.Stop()
	for {
		lead := etcds[0].Server.Leader()
		agreed := lead != 0
		for _, e := range etcds[1:] {
			agreed = agreed && e.Server.Leader() == lead
		}
		if agreed {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("members agree on no leader: %w", context.Cause(ctx))
		case <-tick.C:
		}
	}
}

// waitMember waits until e is ready to serve and knows a leader.
func waitMember(ctx context.Context, name string, e *embed.Etcd) error {
	select {
	case <-e.Server.ReadyNotify():
	case <-e.Server.StopNotify():
		return fmt.Errorf("%s stopped while starting", name)
	case err := <-e.Err():
		return fmt.Errorf("%s failed while starting: %w", name, err)
	case <-ctx.Done():
		return fmt.Errorf("%s not ready: %w", name, context.Cause(ctx))
	}
	tick := time.NewTicker(10 * time.Millisecond)
	defer tick.Stop()
	for e.Server.Leader() == 0 {
		select {
		case <-ctx.Done():
			return fmt.Errorf("%s knows no leader: %w", name, context.Cause(ctx))
		case <-tick.C:
		}
	}
	return nil
}

// newEtcd starts the etcd server of m, without waiting for it. m.mu is held.
func (c *Cluster) newEtcd(m *member) (*embed.Etcd, error) {
	m.stopping.Store(false)
	cfg := embed.NewConfig()
	cfg.Name = m.name
	cfg.Dir = m.dir
	cfg.ListenClientUrls = []url.URL{m.clientURL}
	cfg.AdvertiseClientUrls = []url.URL{m.clientURL}
	cfg.ListenPeerUrls = []url.URL{m.peerURL}
	cfg.AdvertisePeerUrls = []url.URL{m.peerURL}
	cfg.InitialCluster = c.initialCluster
	cfg.InitialClusterToken = clusterToken
	// Ignored once the member has data, so a restart needs no "existing".
	cfg.ClusterState = embed.ClusterStateFlagNew

	// Light for small machines and tests: etcd keeps the raft log since the last snapshot
	// in memory, 10000 entries by default.
	cfg.SnapshotCount = 2000
	cfg.SnapshotCatchUpEntries = 1000
	// Elections in 600 ms (heartbeats every 50 ms) instead of 1 s: etcd grants no lease
	// shorter than 1.5 elections rounded up to a second, and the zone leaders' 1 s lease
	// (store/etcd's election) is what bounds a zone's handover after a crash to 1.5 s.
	cfg.TickMs = 50
	cfg.ElectionMs = 600
	cfg.AutoCompactionMode = embed.CompactorModePeriodic
	cfg.AutoCompactionRetention = "5m"
	cfg.UnsafeNoFsync = c.opts.UnsafeNoFsync
	// No REST gateway (one internal gRPC connection per member less); clients use gRPC.
	cfg.EnableGRPCGateway = false
	cfg.ListenMetricsUrls = nil

	cfg.Logger = "zap"
	cfg.LogLevel = "error"
	if c.opts.Debug {
		cfg.LogLevel = "debug"
	}
	cfg.ZapLoggerBuilder = embed.NewZapLoggerBuilder(c.zapLogger(m.name, &m.stopping))

	e, err := embed.StartEtcd(cfg)
	if err != nil {
		return nil, err
	}
	return e, nil
}

// close stops m.etcd, which is running, and returns the errors its serving loops reported
// before. m.mu is held.
func (m *member) close() error {
	e := m.etcd
	m.etcd = nil
	var errs []error
	for drained := false; !drained; {
		select {
		case err := <-e.Err():
			if err != nil {
				errs = append(errs, err)
			}
		default:
			drained = true
		}
	}
	m.stopping.Store(true)
	// Etcd.Close waits for the client servers, which wait until the member is ready or
	// stopping: a member that never got ready (no quorum) has to be stopping first, or
	// Close hangs (etcd issue 9533).
	select {
	case <-e.Server.ReadyNotify():
	default:
		e.Server.Stop()
	}
	e.Close()
	return errors.Join(errs...)
}

// serveEndedMsg is what etcd logs, as an error, when a serving loop ends, which it does
// on every stop.
const serveEndedMsg = "setting up serving from embedded etcd failed."

// storageVersionMsg is what etcd logs, as an error, when it cannot write the storage
// version of the cluster version just decided. On a new member it fails once with
// errNoTermYet: the cluster version is applied (and the storage version monitor woken at
// once) before the backend's first batch commit, and only that commit writes the raft term
// the monitor looks for. The monitor tries again 4 s later and succeeds; etcd's own tests
// ignore this error as harmless (etcd-io/etcd#18978, #19040).
const storageVersionMsg = "failed to update storage version"

// errNoTermYet is the error of storageVersionMsg before the backend's first commit.
const errNoTermYet = "missing term information"
