package node

import (
	"context"
	"sync"

	"github.com/frontdoor-vdi/frontdoor/store/etcd"
)

// election is the zones' leader election and what the leaders publish, as a node takes
// part: etcd's on a site of several nodes (etcdElection), an election of one on a site of
// one node (electionOfOne).
type election interface {
	Elector(c etcd.Candidate, o etcd.ElectorOptions) elector
	Candidates() map[string][]etcd.Candidate
	Leaders() map[string]etcd.Leader
	HealthRecords() map[string][]byte
	OnElection(fn func())
	OnHealth(fn func(target string, record []byte))
	OnPassive(fn func(target string, p etcd.Passive))
	PutHealth(ctx context.Context, zone string, rev int64, records map[string][]byte) error
	ReportPassive(ctx context.Context, target string, p etcd.Passive) error
}

// elector runs one node's part in its zone's election (etcd.Elector).
type elector interface {
	Run(ctx context.Context) error
	Leading() (rev int64, leading bool)
}

var (
	_ election = etcdElection{}
	_ election = (*electionOfOne)(nil)
	_ elector  = (*etcd.Elector)(nil)
	_ elector  = oneElector{}
)

// etcdElection is etcd's election as an election.
type etcdElection struct{ etcd.Election }

// Elector implements election.
func (e etcdElection) Elector(c etcd.Candidate, o etcd.ElectorOptions) elector {
	return e.Election.Elector(c, o)
}

// electionOfOne is the election of a site of one node: its only candidate leads its zone
// from the start, and so probes every zone (no other zone has a node); what it publishes
// has no one to read it, and no other node reports failures.
type electionOfOne struct {
	mu sync.Mutex     // guards me
	me etcd.Candidate // the one candidate, once Elector was called
}

// Elector implements election.
func (e *electionOfOne) Elector(c etcd.Candidate, _ etcd.ElectorOptions) elector {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.me = c
	return oneElector{}
}

// Candidates implements election.
func (e *electionOfOne) Candidates() map[string][]etcd.Candidate {
	e.mu.Lock()
	defer e.mu.Unlock()
	return map[string][]etcd.Candidate{e.me.Zone: {e.me}}
}

// Leaders implements election.
func (e *electionOfOne) Leaders() map[string]etcd.Leader {
	e.mu.Lock()
	defer e.mu.Unlock()
	return map[string]etcd.Leader{e.me.Zone: {Candidate: e.me, Rev: oneElector{}.rev()}}
}

func (*electionOfOne) HealthRecords() map[string][]byte                                  { return nil }
func (*electionOfOne) OnElection(func())                                                 {}
func (*electionOfOne) OnHealth(func(string, []byte))                                     {}
func (*electionOfOne) OnPassive(func(string, etcd.Passive))                              {}
func (*electionOfOne) PutHealth(context.Context, string, int64, map[string][]byte) error { return nil }
func (*electionOfOne) ReportPassive(context.Context, string, etcd.Passive) error         { return nil }

// oneElector leads from the start until its node stops.
type oneElector struct{}

func (oneElector) rev() int64 { return 1 }

// Run implements elector.
func (oneElector) Run(ctx context.Context) error { <-ctx.Done(); return nil }

// Leading implements elector.
func (o oneElector) Leading() (int64, bool) { return o.rev(), true }
