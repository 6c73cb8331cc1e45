package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"path/filepath"
	"sync"
	"time"

	"github.com/frontdoor-vdi/frontdoor/store/etcd"
	clientv3 "go.etcd.io/etcd/client/v3"
)

// pollEvery is how often the views and the Electors are sampled while a trial waits.
const pollEvery = time.Millisecond

// node is one front door of a trial: a store of its own on the site's etcd and the Elector
// it stands with.
type node struct {
	name   string
	cand   etcd.Candidate
	st     *etcd.Store
	el     *etcd.Elector
	opened time.Time // when Open returned: about the origin of the store's 250 ms probe schedule
	cancel context.CancelFunc
	done   chan struct{} // closed when Run returned; nil until stand

	mu   sync.Mutex // guards outs
	outs []outageEvent
}

// outageEvent is one Outage().On call, timed in the callback.
type outageEvent struct {
	on bool
	at time.Time
}

// site is the nodes of one trial, on a key prefix of their own.
type site struct {
	prefix string
	eps    []string
	log    *slog.Logger
	dir    string // for the nodes' cache files; "" for none
	plan   map[string]etcd.MachinePlan
	nodes  []*node
}

// open opens a node's store (not yet standing).
func (s *site) open(ctx context.Context, c etcd.Candidate) (*node, error) {
	o := etcd.Options{Endpoints: s.eps, Prefix: s.prefix, Node: c.Node, Logger: s.log, DialTimeout: 2 * time.Second, Plan: s.plan}
	if s.dir != "" {
		o.CacheFile = filepath.Join(s.dir, fmt.Sprintf("%s-%s.lhc", filepath.Base(s.prefix), c.Node))
	}
	st, err := etcd.Open(ctx, o)
	if err != nil {
		return nil, fmt.Errorf("opening node %s: %w", c.Node, err)
	}
	n := &node{name: c.Node, cand: c, st: st, opened: time.Now()}
	st.Outage().On(func(on bool) {
		at := time.Now()
		n.mu.Lock()
		n.outs = append(n.outs, outageEvent{on, at})
		n.mu.Unlock()
	})
	n.el = st.Election().Elector(c, etcd.ElectorOptions{})
	s.nodes = append(s.nodes, n)
	return n, nil
}

// stand starts the node's Elector.
func (n *node) stand() {
	ctx, cancel := context.WithCancel(context.Background())
	n.cancel, n.done = cancel, make(chan struct{})
	go func() { defer close(n.done); n.el.Run(ctx) }()
}

// leads reports whether the node's Elector acts as its zone's leader.
func (n *node) leads() bool { _, ok := n.el.Leading(); return ok }

// sees returns the leader of the node's zone in its view ("" for none).
func (n *node) sees() string { return n.st.Election().Leaders()[n.cand.Zone].Node }

// outage returns the first Outage().On call with on after from.
func (n *node) outage(on bool, from time.Time) (time.Time, bool) {
	n.mu.Lock()
	defer n.mu.Unlock()
	for _, e := range n.outs {
		if e.on == on && !e.at.Before(from) {
			return e.at, true
		}
	}
	return time.Time{}, false
}

// stopElector ends the node's Elector (it resigns), waiting at most d.
func (n *node) stopElector(d time.Duration) error {
	if n.done == nil {
		return nil
	}
	n.cancel()
	select {
	case <-n.done:
		return nil
	case <-time.After(d):
		return fmt.Errorf("node %s: its Elector did not end within %v", n.name, d)
	}
}

// close stops every node's Elector, closes the stores and deletes the prefix, each step
// bounded.
func (s *site) close(admin *clientv3.Client) error {
	var wg sync.WaitGroup
	errs := make([]error, len(s.nodes))
	for i, n := range s.nodes {
		wg.Go(func() {
			errs[i] = n.stopElector(5 * time.Second)
			done := make(chan struct{})
			go func() { defer close(done); n.st.Close() }()
			select {
			case <-done:
			case <-time.After(10 * time.Second):
				errs[i] = errors.Join(errs[i], fmt.Errorf("node %s: its store did not close within 10s", n.name))
			}
		})
	}
	wg.Wait()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if _, err := admin.Delete(ctx, s.prefix, clientv3.WithPrefix()); err != nil {
		errs = append(errs, fmt.Errorf("deleting %s: %w", s.prefix, err))
	}
	return errors.Join(errs...)
}

// cond is a condition a trial waits for, with when it first held.
type cond struct {
	name string
	fn   func() bool
	at   time.Time
}

// waitAll samples every cond every pollEvery until all have held once, or d has passed;
// every sample also calls each (for invariants). It reports whether all held.
func waitAll(d time.Duration, cs []*cond, each func()) bool {
	deadline := time.Now().Add(d)
	tick := time.NewTicker(pollEvery)
	defer tick.Stop()
	for {
		now := time.Now()
		all := true
		for _, c := range cs {
			if c.at.IsZero() && c.fn() {
				c.at = now
			}
			all = all && !c.at.IsZero()
		}
		if each != nil {
			each()
		}
		if all {
			return true
		}
		if now.After(deadline) {
			return false
		}
		<-tick.C
	}
}

// waitFor waits at most d for fn, sampled every pollEvery, and returns when it first held.
func waitFor(d time.Duration, what string, fn func() bool) (time.Time, error) {
	c := &cond{name: what, fn: fn}
	if !waitAll(d, []*cond{c}, nil) {
		return time.Time{}, fmt.Errorf("after %v: %s", d, what)
	}
	return c.at, nil
}

// missing names the conds that never held.
func missing(cs []*cond) string {
	var out string
	for _, c := range cs {
		if c.at.IsZero() {
			if out != "" {
				out += ", "
			}
			out += c.name
		}
	}
	return out
}
