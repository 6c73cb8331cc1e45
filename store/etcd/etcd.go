// Package etcd is the distributed broker.Store: the site database of a site of several nodes,
// on an etcd cluster (go.etcd.io/etcd/client/v3). Every node opens it, keeps an in-memory
// view of the site's live state fed by one watch of the site's prefix, and commits each change
// with one transaction that compares what it read: a launch decision reads the view (no etcd
// read on the decision path) and a conflict makes the broker decide again.
//
// # Key layout
//
// Every key lives under the site's prefix P (site.store.prefix, default
// "/frontdoor/<site name>/"); names are path-escaped.
//
//	P sessions/<id>              JSON session and its slot. The key's Version is Session.Rev:
//	                             UpdateSession compares it. Pending and disconnected sessions
//	                             are attached to a lease that ends at their Expires time, so
//	                             etcd deletes them (and their slot) when they expire.
//	P slots/<machine>/<i>        the session id holding slot i (0 ≤ i < max_sessions) of a
//	                             machine; created with If(Version == 0) in the session's own
//	                             transaction, and on the session's lease: a machine never
//	                             holds more than max_sessions sessions, whichever node
//	                             launches.
//	P machines/<name>/load       JSON CPU, memory and report time from the machine's agent,
//	                             on the lease of the node it reports to: a node that dies
//	                             takes its agents' load with it until they report elsewhere.
//	P machines/<name>/flags      JSON maintenance override (health's down flag is each
//	                             node's, from the verdicts under health/).
//	P tickets/used/<id>/<chan>   a launch ticket's channel that was admitted, created with
//	                             If(CreateRevision == 0), on a lease that ends when the ticket
//	                             expires: each channel of a launch ticket opens once, site-wide.
//	P tickets/revoked/<session>  the Unix milliseconds before which the session's tickets were
//	                             issued are revoked (a logoff: all; a steal: the old
//	                             endpoint's), on a lease that ends with them; followers of
//	                             OnRevoked cut the channels those tickets opened.
//	P tickets/superseded/<session> the mark (ticket.Claims.Mark: the chain's issue time, then
//	                             the generation) of the session's last reconnect ticket used,
//	                             zero-padded: tickets of lower marks are refused.
//	P modes/<group>              "on" or "off": a delivery group's secure-gateway switch.
//	P overrides/<gateway>        an operator's health override of a gateway at every front
//	                             door: "up", "down" or "drain" (absent: follow the probes).
//	P nodes/<name>               JSON presence of a running node (zone, version, start), on
//	                             the node's lease (TTL 5 s, kept alive): gone when it dies.
//	P candidates/<zone>/<node>   JSON Candidate of a node standing for its zone's leader, on
//	                             the node's election lease (TTL 1 s): see election.go.
//	P leaders/<zone>             JSON Leader of the zone, on its election lease; the key's
//	                             CreateRevision fences the leader's writes.
//	P health/<target>            JSON health.Report of a gateway or machine, written by the
//	                             leader that probes it (fenced); the other nodes follow it.
//	P passive/<target>/<node>    JSON Passive: a failure a node saw on a target's port, on
//	                             the node's lease, for the target's prober.
//	P identity                   the site identity (site key, CA), sealed with the operator's
//	                             store secret (AES-256-GCM): see Identity.
//	P audit/<nanos>-<node>       JSON entry of the admin audit log (who, when, from where,
//	                             what): the Unix nanoseconds zero-padded to 20 digits, created
//	                             with If(CreateRevision == 0), never changed or deleted; read
//	                             newest first with a ranged Get, and held by no view (audit.go).
//
// Leases expire keys on etcd's clock: no node runs a sweeping loop. Keys that end at the same
// second share one lease, so a burst of launches grants one lease a second, not one each.
//
// Each family's change is applied to the view beside the operations that write its keys
// (families): sessions.go, machines.go, ledger.go, modes.go (the settings sections),
// election.go, audit.go and presence.go; leases.go grants the shared leases.
//
// # Zones
//
// election.go elects each zone's leader (seed 003's data collector) on lease keys of its own —
// the order, the run-off, the fence and the handover arithmetic are in its doc — and carries
// the health verdicts the leaders publish. outage.go is the Local Host Cache (seed 001): how a
// node goes on brokering its share of its zone when etcd is out of reach, and the rules that
// reconcile the outage when it is back; cache.go keeps the view in a bolt file a node can start
// from.
package etcd

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"log/slog"
	"net/url"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/frontdoor-vdi/frontdoor/broker"
	"github.com/frontdoor-vdi/frontdoor/store/settings"
	"github.com/prometheus/client_golang/prometheus"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"
)

// Options configure Open.
type Options struct {
	// Endpoints are the etcd client URLs. Required.
	Endpoints []string
	// DialTimeout bounds connecting to etcd. Default: 5s.
	DialTimeout time.Duration
	// Prefix is the site's key prefix; it ends with "/". Required.
	Prefix string
	// TLS is the client TLS configuration for https endpoints. Default: nil (plain, for
	// http endpoints).
	TLS *tls.Config
	// Node is the name of this node: its presence key and the lease of the load its agents
	// report. Required.
	Node string
	// NodeTTL is the lifetime of the node's lease without a keep-alive. Default: 5s.
	NodeTTL time.Duration
	// Logger receives the store's logs. Default: slog.Default().
	Logger *slog.Logger
	// Now is the clock of lease lifetimes. Default: time.Now.
	Now func() time.Time
	// Registry receives the store's metrics. Default: none.
	Registry prometheus.Registerer
	// Plan names, by machine, the nodes that book it while etcd is out of reach and its
	// max_sessions (outage.go). Default: nil (no outage mode: operations fail while etcd is
	// away, and no machine is left to a zone cut off).
	Plan map[string]MachinePlan
	// CacheFile is the node's local host cache, a bolt file that mirrors the view at its
	// revision (cache.go). Default: "" (none).
	CacheFile string
}

// loadTimeout bounds reading the whole site into a view, at start and after a compaction.
const loadTimeout = 5 * time.Minute

// Store is a broker.Store, a ticket.Ledger and the site's shared settings on etcd.
type Store struct {
	o      Options
	cli    *clientv3.Client
	log    *slog.Logger
	now    func() time.Time
	met    *metrics
	cancel context.CancelFunc
	done   chan struct{} // closed when the watch loop has ended

	ownLease            // the node's lease and what Register wrote on it (presence.go)
	leases   leaseTable // the leases that keys ending in the same second share (leases.go)

	mu            sync.Mutex // guards the view, its followers and what waits for them
	view                     // the site as the watch last applied it
	viewFollowers            // who is told of the view's changes
	pending                  // what was applied since the last dispatch to the followers
	watchErr      error

	outage    atomic.Bool // brokering from the view: etcd is out of reach (outage.go)
	out       outageState
	audit     auditQueue    // audit entries kept while etcd is out of reach (audit.go)
	cache     *cache        // the local host cache file; nil without CacheFile
	cacheDone chan struct{} // closed when the cache's writer has ended
}

// view is a node's copy of the site, one part for each key family (families), at one
// revision; guarded by Store.mu. loadAll replaces it whole.
type view struct {
	rev int64 // the revision the view reflects
	sessionsView
	machinesView
	ticketsView
	electionView
	settings map[string]map[string]string // by section (modes, overrides), then name
	nodes    map[string]NodeInfo
}

// newView returns an empty view.
func newView() view {
	v := view{
		sessionsView: sessionsView{sessions: map[string]broker.Session{}, slotOf: map[string]slotRef{}, used: map[string]map[int]string{}},
		machinesView: machinesView{loads: map[string]machineLoad{}, flags: map[string]machineFlags{}},
		ticketsView:  ticketsView{revoked: map[string]time.Time{}, superseded: map[string]uint64{}, usedTickets: map[string]bool{}},
		electionView: electionView{leaders: map[string]Leader{}, candidates: map[string]map[string]Candidate{}, healthRecs: map[string][]byte{}},
		settings:     map[string]map[string]string{},
		nodes:        map[string]NodeInfo{},
	}
	for _, sec := range settings.Sections() {
		v.settings[sec] = map[string]string{}
	}
	return v
}

// viewFollowers are the functions told of the view's changes, by kind; guarded by Store.mu.
type viewFollowers struct {
	followers    []func(broker.Change)
	onRevoked    []func(string, time.Time)
	onSettings   map[string][]func(map[string]string) // by section
	onElection   []func()
	electionSigs []chan struct{}
	onHealth     []func(string, []byte)
	onPassive    []func(string, Passive)
}

// pending is what the view applied since the last dispatch, for the followers; guarded by
// Store.mu.
type pending struct {
	newRevoked      []revocation
	newRaw          []rawEvent
	electionChanged bool
}

var _ broker.Shared = (*Store)(nil)

// Open connects to etcd, reads the site's state under the prefix into the view, grants the
// node's lease and starts following the prefix. It fails when etcd cannot be reached within
// DialTimeout, unless the node has a local host cache (CacheFile) with a view and a Plan: it
// then starts in outage mode from the cache.
func Open(ctx context.Context, o Options) (*Store, error) {
	if len(o.Endpoints) == 0 || o.Prefix == "" || o.Node == "" {
		return nil, errors.New("etcd store: Endpoints, Prefix and Node are required")
	}
	if !strings.HasSuffix(o.Prefix, "/") {
		o.Prefix += "/"
	}
	if o.DialTimeout == 0 {
		o.DialTimeout = 5 * time.Second
	}
	if o.NodeTTL == 0 {
		o.NodeTTL = 5 * time.Second
	}
	if o.Logger == nil {
		o.Logger = slog.Default()
	}
	if o.Now == nil {
		o.Now = time.Now
	}
	cli, err := clientv3.New(clientv3.Config{Endpoints: o.Endpoints, DialTimeout: o.DialTimeout, TLS: o.TLS,
		Logger: zap.NewNop(), DialKeepAliveTime: 5 * time.Second, DialKeepAliveTimeout: 2 * time.Second})
	if err != nil {
		return nil, fmt.Errorf("connecting to etcd %s: %w", strings.Join(o.Endpoints, ","), err)
	}
	st := &Store{o: o, cli: cli, log: o.Logger, now: o.Now, done: make(chan struct{}), view: newView(),
		ownLease: ownLease{presence: map[string]NodeInfo{}}, leases: leaseTable{byEnd: map[int64]*leaseGrant{}}}
	st.initOutage()
	fail := func(err error) (*Store, error) {
		cli.Close()
		if st.cache != nil {
			st.cache.db.Close()
		}
		return nil, err
	}
	if st.met, err = newMetrics(st, o.Registry); err != nil {
		return fail(err)
	}
	if o.CacheFile != "" {
		if st.cache, err = openCache(o.CacheFile); err != nil {
			return fail(err)
		}
	}
	// DialTimeout bounds reaching etcd; reading the site, which grows with it (about 1 s for
	// 250,000 sessions here), gets loadTimeout.
	octx, cancel := context.WithTimeout(ctx, o.DialTimeout)
	defer cancel()
	if _, err := cli.Get(octx, st.key("identity"), clientv3.WithCountOnly()); err != nil {
		if st.cache != nil && o.Plan != nil {
			if lerr := st.loadCache(); lerr == nil {
				st.serve(nil)
				st.enterOutage(fmt.Errorf("at start: %w", err))
				return st, nil
			} else if !errors.Is(lerr, errNoCache) {
				st.log.Warn("etcd: the local host cache cannot be read", "err", lerr)
			}
		}
		if errors.Is(err, context.DeadlineExceeded) {
			return fail(fmt.Errorf("reaching etcd %s: no answer within site.store.dial_timeout (%s): %w", strings.Join(o.Endpoints, ","), o.DialTimeout, err))
		}
		return fail(fmt.Errorf("reaching etcd %s: %w", strings.Join(o.Endpoints, ","), err))
	}
	lctx, lcancel := context.WithTimeout(ctx, loadTimeout)
	defer lcancel()
	if err := st.loadAll(lctx); err != nil {
		return fail(fmt.Errorf("reading the site state from etcd %s: %w", strings.Join(o.Endpoints, ","), err))
	}
	gctx, gcancel := context.WithTimeout(ctx, o.DialTimeout)
	defer gcancel()
	g, err := cli.Grant(gctx, int64(o.NodeTTL/time.Second))
	if err != nil {
		return fail(fmt.Errorf("granting the node lease: %w", err))
	}
	st.lease.Store(int64(g.ID))
	st.serve(&g.ID)
	return st, nil
}

// serve starts following the site: the node's lease kept alive (granted again when lease is
// nil: a start in outage mode), the watch, the outage check, the local changes' dispatch and
// the cache file's writer.
func (st *Store) serve(lease *clientv3.LeaseID) {
	wctx, wcancel := context.WithCancel(context.Background())
	st.cancel = wcancel
	var ka <-chan *clientv3.LeaseKeepAliveResponse
	if lease != nil {
		ka, _ = st.cli.KeepAlive(wctx, *lease)
	}
	if ka == nil { // no lease yet, or it could not be kept: keepAlive grants one
		closed := make(chan *clientv3.LeaseKeepAliveResponse)
		close(closed)
		ka = closed
	}
	st.kaDone = make(chan struct{})
	go st.keepAlive(wctx, ka)
	go st.watch(wctx)
	go st.detect(wctx)
	go st.runLocal(wctx)
	st.cacheDone = make(chan struct{})
	if st.cache != nil {
		go func() { defer close(st.cacheDone); st.runCache(wctx.Done()) }()
	} else {
		close(st.cacheDone)
	}
}

func esc(s string) string { return url.PathEscape(s) }

// opContext bounds one store operation by DialTimeout: with etcd unreachable, a launch or a
// transition fails in that time instead of waiting on its caller's deadline.
// An outage that begins ends it at once, so that the operation can be done from the view.
func (st *Store) opContext(ctx context.Context) (context.Context, context.CancelFunc) {
	return st.opContextD(ctx, st.o.DialTimeout)
}

// opContextD is opContext bounded by d.
func (st *Store) opContextD(ctx context.Context, d time.Duration) (context.Context, context.CancelFunc) {
	ctx, cancel := context.WithTimeout(ctx, d)
	stop := context.AfterFunc(st.out.alive.Load().ctx, cancel)
	return ctx, func() { stop(); cancel() }
}

func (st *Store) key(parts ...string) string {
	for i, p := range parts {
		parts[i] = esc(p)
	}
	return st.o.Prefix + strings.Join(parts, "/")
}

// Load implements broker.Store: the view's sessions and machine states.
func (st *Store) Load(context.Context) (broker.Snapshot, error) {
	st.mu.Lock()
	defer st.mu.Unlock()
	return st.snapshotLocked(), nil
}

func (st *Store) snapshotLocked() broker.Snapshot {
	var snap broker.Snapshot
	for _, s := range st.sessions {
		snap.Sessions = append(snap.Sessions, s)
	}
	names := map[string]bool{}
	for n := range st.loads {
		names[n] = true
	}
	for n := range st.flags {
		names[n] = true
	}
	for n := range names {
		snap.Machines = append(snap.Machines, st.machineLocked(n))
	}
	return snap
}

// Follow implements broker.Shared.
func (st *Store) Follow(_ context.Context, fn func(broker.Change)) (broker.Snapshot, error) {
	st.mu.Lock()
	defer st.mu.Unlock()
	st.followers = append(st.followers, fn)
	return st.snapshotLocked(), nil
}

// revision returns the revision the view reflects.
func (st *Store) revision() int64 {
	st.mu.Lock()
	defer st.mu.Unlock()
	return st.rev
}

// Close stops following, revokes the node's lease (its presence and its agents' load go at
// once) and closes the client.
func (st *Store) Close() error {
	if st.cancel == nil {
		return st.cli.Close()
	}
	st.cancel()
	<-st.done
	<-st.kaDone
	<-st.cacheDone
	if st.cache != nil {
		st.cache.db.Close()
	}
	if !st.outage.Load() {
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		st.cli.Revoke(ctx, st.nodeLease())
		cancel()
	}
	st.cancel = nil
	return st.cli.Close()
}
