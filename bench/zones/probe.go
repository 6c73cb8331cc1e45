package main

import (
	"context"
	"sync"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
)

// prober asks etcd for a linearizable read every 10 ms (each bounded by 250 ms) on a client
// of its own and keeps the outcomes, so that a trial can tell when etcd stopped answering
// and when it answered again, to about 10 ms.
type prober struct {
	mu   sync.Mutex // guards recs
	recs []probeRec
}

type probeRec struct {
	start, end time.Time
	ok         bool
}

const (
	proberEvery   = 10 * time.Millisecond
	proberTimeout = 250 * time.Millisecond
	proberMax     = 200_000 // outcomes kept: over half an hour of probing
)

// run probes until ctx ends.
func (p *prober) run(ctx context.Context, cli *clientv3.Client, key string) {
	tick := time.NewTicker(proberEvery)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
		start := time.Now()
		cctx, cancel := context.WithTimeout(ctx, proberTimeout)
		_, err := cli.Get(cctx, key, clientv3.WithCountOnly())
		cancel()
		if ctx.Err() != nil {
			return
		}
		p.mu.Lock()
		if len(p.recs) < proberMax {
			p.recs = append(p.recs, probeRec{start, time.Now(), err == nil})
		}
		p.mu.Unlock()
	}
}

// lostAt returns when etcd stopped answering between from and to: the start of the first
// failed probe after which no probe that started before to succeeded. A probe in flight at
// from counts as started at from.
func (p *prober) lostAt(from, to time.Time) (time.Time, bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	var lost time.Time
	for _, r := range p.recs {
		if r.end.Before(from) || r.start.After(to) {
			continue
		}
		switch {
		case r.ok:
			lost = time.Time{}
		case lost.IsZero():
			lost = maxTime(r.start, from)
		}
	}
	return lost, !lost.IsZero()
}

func maxTime(a, b time.Time) time.Time {
	if a.After(b) {
		return a
	}
	return b
}

// backAt returns when etcd answered again after from: the end of the first successful
// probe that ended after it.
func (p *prober) backAt(from time.Time) (time.Time, bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, r := range p.recs {
		if r.ok && r.end.After(from) {
			return r.end, true
		}
	}
	return time.Time{}, false
}
