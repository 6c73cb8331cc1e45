package main

import (
	"context"
	"fmt"
	"math/rand/v2"
	"time"

	"github.com/frontdoor-vdi/frontdoor/store/etcd"
)

// The three handovers of a zone's leadership.
const (
	graceful = "graceful" // the leader's Elector ctx is canceled: it resigns
	crash    = "crash"    // the leader's etcd client is closed: its lease runs out
	runoff   = "runoff"   // a candidate of a newer version joins: the leader resigns to it
)

// electionTrial is one handover, timed from its start (the cancel, the client's close, the
// new candidate's Run).
type electionTrial struct {
	took  time.Duration // the next leader's Elector leads and its own view shows it
	all   time.Duration // besides, every remaining node's view shows it
	gone  time.Duration // the old leader's key gone from the next leader's view
	old   time.Duration // the old leader's Elector stopped acting
	self  time.Duration // run-off: the joining node's view shows its own candidacy
	twice int           // samples in which two Electors acted as leader at once
	err   error
}

// election runs trial k of a handover kind on a zone of its own prefix: candidates a, b
// and c of one version (a leads by name), or a and b then n of a newer version (run-off).
func (b *bench) election(kind string, k int) (tr electionTrial) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	s := &site{prefix: fmt.Sprintf("/zones/%s-%d/", kind, k), eps: b.eps, log: b.log}
	defer func() {
		if err := s.close(b.admin); err != nil && tr.err == nil {
			tr.err = err
		}
	}()
	names := []string{"a", "b", "c"}
	if kind == runoff {
		names = names[:2]
	}
	for _, name := range names {
		n, err := s.open(ctx, etcd.Candidate{Node: name, Zone: "z", Version: "1.0.0", Preference: "default"})
		if err != nil {
			tr.err = err
			return tr
		}
		n.stand()
	}
	first := s.nodes[0]
	if _, err := waitFor(10*time.Second, "a leads, in every view", func() bool {
		for _, n := range s.nodes {
			if n.leads() != (n == first) || n.sees() != first.name || len(n.st.Election().Candidates()["z"]) != len(s.nodes) {
				return false
			}
		}
		return true
	}); err != nil {
		tr.err = err
		return tr
	}
	// A random phase against the Electors' 100 ms ticks and the lease's keep-alives.
	time.Sleep(rand.N(350 * time.Millisecond))

	next, rest := s.nodes[1], s.nodes[1:]
	var t0 time.Time
	switch kind {
	case graceful:
		t0 = time.Now()
		first.cancel()
	case crash:
		t0 = time.Now()
		first.st.Close() // its etcd client closed without a resignation: the keys stay until the lease ends
	case runoff:
		n, err := s.open(ctx, etcd.Candidate{Node: "n", Zone: "z", Version: "1.1.0", Preference: "not_preferred"})
		if err != nil {
			tr.err = err
			return tr
		}
		next, rest = n, s.nodes
		t0 = time.Now()
		n.stand()
	}
	leads := &cond{name: next.name + " leads and sees itself lead", fn: func() bool { return next.leads() && next.sees() == next.name }}
	all := &cond{name: "every view shows " + next.name, fn: func() bool {
		for _, n := range rest {
			if n.sees() != next.name {
				return false
			}
		}
		return next.leads()
	}}
	gone := &cond{name: "a's key gone from " + next.name + "'s view", fn: func() bool { return next.sees() != first.name }}
	old := &cond{name: "a stopped leading", fn: func() bool { return !first.leads() }}
	self := &cond{name: next.name + "'s view shows its candidacy", fn: func() bool {
		for _, c := range next.st.Election().Candidates()["z"] {
			if c.Node == next.name {
				return true
			}
		}
		return false
	}}
	cs := []*cond{leads, all, gone, old, self}
	ok := waitAll(10*time.Second, cs, func() {
		acting := 0
		for _, n := range s.nodes {
			if n.leads() {
				acting++
			}
		}
		if acting > 1 {
			tr.twice++
		}
	})
	since := func(c *cond) time.Duration {
		if c.at.IsZero() {
			return -1
		}
		return c.at.Sub(t0)
	}
	tr.took, tr.all, tr.gone, tr.old, tr.self = since(leads), since(all), since(gone), since(old), since(self)
	if !ok {
		tr.err = fmt.Errorf("after 10s: %s", missing(cs))
	}
	return tr
}
