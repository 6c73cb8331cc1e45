package etcd_test

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/frontdoor-vdi/frontdoor/internal/testkit"
	"github.com/frontdoor-vdi/frontdoor/store/etcd"
)

// elector runs one node's election on its own store until the test ends or stop is called.
type elector struct {
	st     *etcd.Store
	e      *etcd.Elector
	cancel context.CancelFunc
	done   chan struct{}
	mu     sync.Mutex
	log    []int64 // every OnChange
}

func stand(t *testing.T, st *etcd.Store, c etcd.Candidate) *elector {
	t.Helper()
	el := &elector{st: st, done: make(chan struct{})}
	el.e = st.Election().Elector(c, etcd.ElectorOptions{OnChange: func(rev int64) {
		el.mu.Lock()
		el.log = append(el.log, rev)
		el.mu.Unlock()
	}})
	ctx, cancel := context.WithCancel(context.Background())
	el.cancel = cancel
	go func() { defer close(el.done); el.e.Run(ctx) }()
	t.Cleanup(el.stop)
	return el
}

func (el *elector) stop() { el.cancel(); <-el.done }

func (el *elector) leading() bool { _, ok := el.e.Leading(); return ok }

// leaderIs waits until every store's view shows node as the zone's leader, node's elector
// leads and no other one does; it returns how long that took.
func leaderIs(t *testing.T, zone, node string, els map[string]*elector) time.Duration {
	t.Helper()
	start := time.Now()
	testkit.WaitFor(t, "zone "+zone+" led by "+node, func() bool {
		for name, el := range els {
			if el.leading() != (name == node) {
				return false
			}
			if l, ok := el.st.Election().Leaders()[zone]; !ok || l.Node != node {
				return false
			}
		}
		return true
	})
	return time.Since(start)
}

// TestZoneLeaderElection follows seed 003's election: the newest version leads, then the
// election preference; a better candidate joining makes the leader resign (the run-off); a
// graceful shutdown hands over at once, a crash within the lease's bound; a leader that lost
// its key writes nothing.
func TestZoneLeaderElection(t *testing.T) {
	c := cluster(t)
	a := stand(t, open(t, c, "a"), etcd.Candidate{Node: "a", Zone: "z1", Version: "1.0.0", Preference: "default"})
	b := stand(t, open(t, c, "b"), etcd.Candidate{Node: "b", Zone: "z1", Version: "1.0.0", Preference: "preferred"})
	other := stand(t, open(t, c, "x"), etcd.Candidate{Node: "x", Zone: "z2", Version: "0.9.0", Preference: "not_preferred"})
	z1 := map[string]*elector{"a": a, "b": b}
	leaderIs(t, "z1", "b", z1) // preferred before default
	leaderIs(t, "z2", "x", map[string]*elector{"x": other})
	old, _ := b.e.Leading()

	// A newer version joins: the run-off makes b resign and n lead.
	n := stand(t, open(t, c, "n"), etcd.Candidate{Node: "n", Zone: "z1", Version: "1.1.0", Preference: "not_preferred"})
	z1["n"] = n
	d := leaderIs(t, "z1", "n", z1)
	t.Logf("run-off: n leads %v after joining", d)
	if err := b.st.Election().PutHealth(t.Context(), "z1", old, map[string][]byte{"gw": []byte(`{}`)}); !errors.Is(err, etcd.ErrNotLeader) {
		t.Fatalf("a write fenced on the resigned leadership: %v, want ErrNotLeader", err)
	}
	rev, _ := n.e.Leading()
	if err := n.st.Election().PutHealth(t.Context(), "z1", rev, map[string][]byte{"gw": []byte(`{"target":"gw"}`)}); err != nil {
		t.Fatalf("the leader's fenced write: %v", err)
	}
	testkit.WaitFor(t, "the record reaches every view", func() bool { return string(a.st.Election().HealthRecords()["gw"]) == `{"target":"gw"}` })

	// Graceful shutdown: n resigns and b leads within 0.5 s.
	start := time.Now()
	n.stop()
	delete(z1, "n")
	leaderIs(t, "z1", "b", z1)
	d = time.Since(start)
	t.Logf("handover after a shutdown: %v", d)
	if d > 500*time.Millisecond {
		t.Errorf("handover after a shutdown took %v, want ≤ 0.5 s", d)
	}

	// Crash: b's client vanishes without resigning; a leads once b's lease expires.
	start = time.Now()
	etcd.Client(b.st).Close()
	delete(z1, "b")
	testkit.WaitFor(t, "a leads after b's crash", func() bool {
		l, ok := a.st.Election().Leaders()["z1"]
		return a.leading() && ok && l.Node == "a"
	})
	d = time.Since(start)
	t.Logf("handover after a crash: %v", d)
	if d > 2*time.Second {
		t.Errorf("handover after a crash took %v, want ≤ 2 s", d)
	}
	testkit.WaitFor(t, "b stops acting as leader once its session is gone", func() bool { return !b.leading() })
	if l := a.st.Election().Leaders()["z2"]; l.Node != "x" {
		t.Errorf("zone z2's leader changed to %+v", l)
	}
}

func TestCandidateOrder(t *testing.T) {
	order := []etcd.Candidate{
		{Node: "n3", Version: "v2.0.0", Preference: "not_preferred"},
		{Node: "n1", Version: "1.10.0", Preference: "most_preferred"},
		{Node: "n0", Version: "1.9.1", Preference: "most_preferred"},
		{Node: "n2", Version: "1.9.1", Preference: "preferred"},
		{Node: "a", Version: "1.9.1", Preference: "default"},
		{Node: "b", Version: "1.9.1", Preference: "default"},
		{Node: "c", Version: "1.9.1-rc1", Preference: "most_preferred"},
		{Node: "d", Version: "1.9.1-rc1", Preference: "not_preferred"},
		{Node: "e", Version: "dev", Preference: "most_preferred"},
	}
	for i := range order {
		for j := range order {
			if got := etcd.Before(order[i], order[j]); got != (i < j) {
				t.Errorf("Before(%+v, %+v) = %v, want %v", order[i], order[j], got, i < j)
			}
		}
	}
}

// TestPassiveReportsReachTheProber: a failure one node reports on a target reaches every
// node's OnPassive followers (the prober among them), with the reporter's name.
func TestPassiveReportsReachTheProber(t *testing.T) {
	c := cluster(t)
	seer, prober := open(t, c, "seer"), open(t, c, "prober")
	got := make(chan etcd.Passive, 4)
	prober.Election().OnPassive(func(target string, p etcd.Passive) {
		if target == "gw-1" {
			got <- p
		}
	})
	for range 2 { // the same key twice: each report is its own event
		if err := seer.Election().ReportPassive(t.Context(), "gw-1", etcd.Passive{Port: "443/tcp", Err: "connection refused"}); err != nil {
			t.Fatal(err)
		}
	}
	for i := range 2 {
		select {
		case p := <-got:
			if p.Node != "seer" || p.Port != "443/tcp" || p.Err != "connection refused" {
				t.Fatalf("report %d: %+v", i, p)
			}
		case <-time.After(5 * time.Second):
			t.Fatalf("report %d did not reach the prober", i)
		}
	}
}

// TestAnElectorStopsWhileEtcdIsAway: a node stopping while the site database is out of
// reach stops its election at once, whether its session was lost or it still stands,
// instead of waiting for etcd to answer a new session's lease.
func TestAnElectorStopsWhileEtcdIsAway(t *testing.T) {
	c := cluster(t)
	st := open(t, c, "a")
	el := stand(t, st, etcd.Candidate{Node: "a", Zone: "z1", Version: "1.0.0"})
	leaderIs(t, "z1", "a", map[string]*elector{"a": el})
	if err := c.StopMember(0); err != nil {
		t.Fatal(err)
	}
	// Having lost it, the elector at once asks etcd for a new session, which cannot come.
	testkit.WaitFor(t, "the leader to lose its session", func() bool { return !el.leading() })
	start := time.Now()
	stopped := make(chan struct{})
	go func() { el.stop(); close(stopped) }()
	select {
	case <-stopped:
		// Giving up is at once; the bound leaves room for a loaded machine.
		if d := time.Since(start); d > 5*time.Second {
			t.Errorf("the elector took %v to stop while etcd is away, want ≤ 5 s", d)
		}
	case <-time.After(10 * time.Second):
		etcd.Client(st).Close() // what ends the wait, so that the test can end
		<-stopped
		t.Fatalf("the elector did not stop within 10 s while etcd is away")
	}
}
