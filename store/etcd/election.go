package etcd

import (
	"context"
	"encoding/json"
	"errors"
	"maps"
	"slices"
	"sync"
	"time"

	"github.com/frontdoor-vdi/frontdoor/broker"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.etcd.io/etcd/client/v3/concurrency"
)

// Election is the zones' leader election and what the leaders publish: the health verdicts of
// their zone's targets and the passive reports of the other nodes.
type Election struct{ st *Store }

// Election returns the store's election and published health.
func (st *Store) Election() Election { return Election{st} }

// Zone leaders (seed 003's zone data collector).
//
// Each node of a zone stands for election with a candidate key, P candidates/<zone>/<node>,
// on a lease of its own (a concurrency.Session of ElectorOptions.TTL, 1 s by default, kept
// alive every TTL/3), and the leader holds P leaders/<zone> on that same lease. The order of
// candidates is the seed's: the newest software version first, then election_preference
// (most_preferred > preferred > default > not_preferred), then the name.
//
//   - Election: when the view shows no leader key, the first candidate of the order claims
//     it with one transaction, If(CreateRevision == 0); the others wait a second per place
//     behind it before they try, so that a first candidate that cannot act is passed over.
//   - Run-off: a leader that sees a candidate before it in the order deletes its key
//     (resigns) and the better one claims it.
//   - Fence: the leader key's CreateRevision is the leadership's fence: a leader's writes
//     (PutHealth) compare it in their transaction, so a leader that lost its key writes
//     nothing.
//   - Loss: a leader stops acting at once when its session ends (Session.Done: the lease
//     expired or could not be kept alive), when the view shows its key gone or another's, or
//     when a fenced write fails. It never trusts a claim it made earlier.
//   - Shutdown: Run resigns (deletes the key, then revokes the lease) when its ctx ends.
//
// Handover. After a graceful shutdown the next candidate sees the key deleted in its watch
// and claims it at once: one watch event and one transaction, a few milliseconds. After a
// crash the key goes with the lease. The lease was last renewed at most TTL/3 before the
// crash (the client renews every TTL/3), so it expires between 2/3·TTL and TTL after it;
// the etcd leader revokes expired leases every 500 ms; then one watch event and one
// transaction. With TTL = 1 s:
//
//	worst = TTL + 500 ms + ε ≈ 1.5 s        best = 2/3·TTL + ε ≈ 0.7 s
//
// etcd grants no lease shorter than 1.5 × its election timeout, rounded up to whole seconds
// (3·election-ticks/2 heartbeats): 1 s needs an election timeout of at most 666 ms (the
// embedded etcd of store/etcdembed runs 50 ms ticks, 600 ms elections). etcd's default
// (1 s elections) makes it 2 s, and the worst case 2.5 s. A node cut off from etcd stops
// acting as leader when its client gives the lease up (TTL after the last renewal, checked
// every 500 ms), at about the instant etcd revokes it.

// Leader is a zone's leader as the view shows it.
type Leader struct {
	Candidate
	// Since is when it claimed the leadership, by its clock.
	Since time.Time `json:"since"`
	// Rev is the leader key's CreateRevision: the fence of its writes.
	Rev int64 `json:"rev"`
}

// ElectorOptions configure an Elector.
type ElectorOptions struct {
	// TTL is the election lease's lifetime: how long a crashed leader holds the zone.
	// Default: 1s (etcd may raise it: see the package doc).
	TTL time.Duration
	// OnChange is told, from the Elector's goroutine, when this node starts (rev > 0, the
	// fence) or stops (rev 0) acting as its zone's leader. It must return quickly.
	OnChange func(rev int64)
}

// ErrNotLeader is returned by a fenced write of a node that no longer leads its zone.
var ErrNotLeader = errors.New("not the zone's leader")

// Elector runs one node's part in its zone's election.
type Elector struct {
	st *Store
	c  Candidate
	o  ElectorOptions

	mu  sync.Mutex
	rev int64 // the fence while leading; 0 otherwise
}

// Elector returns the Elector of candidate c; it stands once Run runs.
func (h Election) Elector(c Candidate, o ElectorOptions) *Elector {
	st := h.st
	if o.TTL <= 0 {
		o.TTL = time.Second
	}
	return &Elector{st: st, c: c, o: o}
}

// Leading returns the fence of this node's leadership and whether it leads.
func (e *Elector) Leading() (int64, bool) {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.rev, e.rev > 0
}

func (e *Elector) set(rev int64) {
	e.mu.Lock()
	if e.rev == rev {
		e.mu.Unlock()
		return
	}
	e.rev = rev
	e.mu.Unlock()
	if e.o.OnChange != nil {
		e.o.OnChange(rev)
	}
}

func (st *Store) leaderKey(zone string) string { return st.key("leaders", zone) }

// Run stands for election until ctx ends, then resigns; it returns nil then. A session that
// ends (its lease lost) is replaced as soon as etcd answers.
func (e *Elector) Run(ctx context.Context) error {
	sig := e.st.electionSignal()
	defer e.st.dropElectionSignal(sig)
	ttl := max(1, int((e.o.TTL+time.Second-1)/time.Second))
	// The session outlives ctx by its Close, which revokes the lease on the way out.
	sctx, scancel := context.WithCancel(context.WithoutCancel(ctx))
	defer scancel()
	for ctx.Err() == nil {
		// A session not yet made is given up when ctx ends: with etcd out of reach, its
		// lease's grant would wait for etcd, and the node could not stop.
		give := context.AfterFunc(ctx, scancel)
		sess, err := concurrency.NewSession(e.st.cli, concurrency.WithTTL(ttl), concurrency.WithContext(sctx))
		if !give() {
			if err == nil {
				sess.Orphan() // its lease ends with its TTL
			}
			return nil
		}
		if err != nil {
			if ctx.Err() == nil {
				e.st.log.Warn("etcd: standing for zone leader", "zone", e.c.Zone, "err", err)
			}
			select {
			case <-ctx.Done():
			case <-time.After(250 * time.Millisecond):
			}
			continue
		}
		e.campaign(ctx, sess, sig)
	}
	return nil
}

// campaign stands on one session until it ends or ctx does.
func (e *Elector) campaign(ctx context.Context, sess *concurrency.Session, sig <-chan struct{}) {
	me, key := e.c, e.st.leaderKey(e.c.Zone)
	cand, _ := json.Marshal(me)
	var rev int64
	var absent time.Time // since when the view shows no leader
	tick := time.NewTicker(100 * time.Millisecond)
	defer tick.Stop()
	stand := func() bool {
		cctx, cancel := e.st.opContext(ctx)
		defer cancel()
		_, err := e.st.cli.Put(cctx, e.st.key("candidates", me.Zone, me.Node), string(cand), clientv3.WithLease(sess.Lease()))
		return err == nil
	}
	stood := stand()
	for {
		select {
		case <-ctx.Done():
			e.resign(rev, "shutting down", true)
			sess.Close() // and what else is on the lease
			return
		case <-sess.Done():
			if rev > 0 {
				e.set(0)
				e.st.log.Warn("etcd: the election lease is lost; stopped acting as zone leader", "zone", me.Zone)
			}
			return
		case <-sig:
		case <-tick.C:
		}
		if !stood {
			if stood = stand(); !stood {
				continue
			}
		}
		if rev > 0 && e.st.revision() < rev {
			continue // the view has not yet seen the claim
		}
		ldr, ok, cands := e.st.election(me.Zone)
		if rev > 0 {
			switch {
			case !ok || ldr.Rev != rev:
				e.set(0)
				rev = 0
				e.st.log.Warn("etcd: the zone leader key is gone; stopped acting as zone leader", "zone", me.Zone)
			case len(cands) > 0 && cands[0].Node != me.Node && Before(cands[0], me):
				e.resign(rev, "run-off: "+cands[0].Node+" ranks before", false)
				rev = 0
			}
			continue
		}
		if ok {
			absent = time.Time{}
			continue
		}
		if absent.IsZero() {
			absent = time.Now()
		}
		rank := slices.IndexFunc(cands, func(c Candidate) bool { return c.Node == me.Node })
		if rank < 0 || time.Since(absent) < time.Duration(rank)*time.Second {
			continue
		}
		l, _ := json.Marshal(Leader{Candidate: me, Since: time.Now().UTC()})
		cctx, cancel := e.st.opContext(ctx)
		r, err := e.st.cli.Txn(cctx).If(clientv3.Compare(clientv3.CreateRevision(key), "=", 0)).
			Then(clientv3.OpPut(key, string(l), clientv3.WithLease(sess.Lease()))).Commit()
		cancel()
		if err != nil || !r.Succeeded {
			continue
		}
		rev = r.Header.Revision
		e.st.log.Info("etcd: became zone leader", "zone", me.Zone, "node", me.Node, "fence", rev)
		e.set(rev)
	}
}

// resign stops acting as leader, then deletes the leader key if it is still this
// leadership's, and the candidate key too when the node leaves (in the same transaction, so
// that the next candidate sees itself first at once).
func (e *Elector) resign(rev int64, why string, leaving bool) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	cand := e.st.key("candidates", e.c.Zone, e.c.Node)
	if rev == 0 {
		if leaving {
			e.st.cli.Delete(ctx, cand)
		}
		return
	}
	e.set(0)
	key := e.st.leaderKey(e.c.Zone)
	ops := []clientv3.Op{clientv3.OpDelete(key)}
	if leaving {
		ops = append(ops, clientv3.OpDelete(cand))
	}
	_, err := e.st.cli.Txn(ctx).If(clientv3.Compare(clientv3.CreateRevision(key), "=", rev)).Then(ops...).Commit()
	e.st.log.Info("etcd: resigned as zone leader", "zone", e.c.Zone, "why", why, "err", err)
}

// election returns a zone's leader and its candidates in the order, from the view.
func (st *Store) election(zone string) (Leader, bool, []Candidate) {
	st.mu.Lock()
	defer st.mu.Unlock()
	l, ok := st.leaders[zone]
	cands := make([]Candidate, 0, len(st.candidates[zone]))
	for _, c := range st.candidates[zone] {
		cands = append(cands, c)
	}
	slices.SortFunc(cands, compareCandidates)
	return l, ok, cands
}

// Leaders returns every zone's leader, from the view.
func (h Election) Leaders() map[string]Leader {
	st := h.st
	st.mu.Lock()
	defer st.mu.Unlock()
	return maps.Clone(st.leaders)
}

// Candidates returns the zones that have a live candidate, from the view.
func (h Election) Candidates() map[string][]Candidate {
	st := h.st
	st.mu.Lock()
	zones := make([]string, 0, len(st.candidates))
	for z := range st.candidates {
		zones = append(zones, z)
	}
	st.mu.Unlock()
	out := map[string][]Candidate{}
	for _, z := range zones {
		if _, _, cs := st.election(z); len(cs) > 0 {
			out[z] = cs
		}
	}
	return out
}

// OnElection calls fn, from the watch, whenever a leader or a candidate changes.
func (h Election) OnElection(fn func()) {
	st := h.st
	st.mu.Lock()
	defer st.mu.Unlock()
	st.onElection = append(st.onElection, fn)
}

func (st *Store) electionSignal() chan struct{} {
	ch := make(chan struct{}, 1)
	st.mu.Lock()
	st.electionSigs = append(st.electionSigs, ch)
	st.mu.Unlock()
	return ch
}

func (st *Store) dropElectionSignal(ch chan struct{}) {
	st.mu.Lock()
	st.electionSigs = slices.DeleteFunc(st.electionSigs, func(c chan struct{}) bool { return c == ch })
	st.mu.Unlock()
}

// dispatchElection tells the election's followers that it changed, without mu.
func (st *Store) dispatchElection() {
	st.mu.Lock()
	fns := slices.Clone(st.onElection)
	for _, ch := range st.electionSigs {
		select {
		case ch <- struct{}{}:
		default:
		}
	}
	st.mu.Unlock()
	for _, fn := range fns {
		fn()
	}
}

// applyLeader applies leaders/<zone>.
func (st *Store) applyLeader(parts []string, x kv, deleted bool) broker.Change {
	st.electionChanged = true
	if deleted {
		delete(st.leaders, parts[1])
		return broker.Change{}
	}
	var l Leader
	if json.Unmarshal(x.value, &l) == nil {
		l.Zone, l.Rev = parts[1], x.createRev
		if st.met != nil && st.leaders[parts[1]].Rev != l.Rev {
			st.met.leaders.WithLabelValues(parts[1]).Inc()
		}
		st.leaders[parts[1]] = l
	}
	return broker.Change{}
}

// applyCandidate applies candidates/<zone>/<node>.
func (st *Store) applyCandidate(parts []string, x kv, deleted bool) broker.Change {
	st.electionChanged = true
	zone, node := parts[1], parts[2]
	if deleted {
		delete(st.candidates[zone], node)
		if len(st.candidates[zone]) == 0 {
			delete(st.candidates, zone)
		}
		return broker.Change{}
	}
	var c Candidate
	if json.Unmarshal(x.value, &c) == nil {
		c.Zone, c.Node = zone, node
		if st.candidates[zone] == nil {
			st.candidates[zone] = map[string]Candidate{}
		}
		st.candidates[zone][node] = c
	}
	return broker.Change{}
}

// electionView is the view's part of the leaders, candidates and health families.
type electionView struct {
	leaders    map[string]Leader               // by zone
	candidates map[string]map[string]Candidate // by zone, then node
	healthRecs map[string][]byte               // by target
}
