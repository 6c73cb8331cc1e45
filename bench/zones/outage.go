package main

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"sync"
	"time"

	"github.com/frontdoor-vdi/frontdoor/broker"
	"github.com/frontdoor-vdi/frontdoor/store/etcd"
	clientv3 "go.etcd.io/etcd/client/v3"
)

// The outage plan of every outage trial: planMachines machines of planMax slots, booked in an
// outage by nodes a and b, half of each machine's slots each.
const (
	planMachines = 100
	planMax      = 20
	detectEvery  = 250 * time.Millisecond // the store's outage probe interval (store/etcd/outage.go)
)

func outagePlan() map[string]etcd.MachinePlan {
	plan := map[string]etcd.MachinePlan{}
	for i := range planMachines {
		plan[machine(i)] = etcd.MachinePlan{Brokers: []string{"a", "b"}, Max: planMax, Offset: i}
	}
	return plan
}

func machine(i int) string { return fmt.Sprintf("m%03d", i) }

// outageTrial is one loss of etcd's quorum and its return. Durations of the loss are from
// the first StopMember call, those of the return from the RestartMember that brought the
// quorum back returning.
type outageTrial struct {
	sessions  int             // created in the outage, over both nodes
	allEPs    bool            // the nodes know every member (else only the member that stays up)
	stopRet   time.Duration   // the later of the two StopMember calls returned
	lost      time.Duration   // etcd stopped answering (the prober)
	lostOK    bool            // the prober saw the loss
	in        []time.Duration // each node's Outage().On(true)
	inLost    []time.Duration // each node's Outage().On(true), from etcd's loss
	inProbe   []time.Duration // the same, from the start of the node's first failed probe (estimated)
	create    time.Duration   // creating the sessions on both nodes, one after the other
	restart   time.Duration   // RestartMember, from its call to its return
	back      time.Duration   // etcd answered again (the prober), from RestartMember's return
	backOK    bool            // the prober saw it answer
	out       []time.Duration // each node's Outage().On(false)
	launches  int             // launches at a from RestartMember's return until both nodes were out
	late      time.Duration   // the longest of them
	written   int             // sessions in etcd after the write-back
	conflicts int             // reported by the nodes' outage status
	err       error
}

// outage runs outage trial k: nodes a and b of zone z1 with the outage plan, the two etcd
// members that do not lead stopped at once (the quorum is lost), sessions created in the
// outage, then one member restarted (the quorum is back) and, untimed, the other.
func (b *bench) outage(k, sessions int, allEPs bool) (tr outageTrial) {
	tr.sessions, tr.allEPs = sessions, allEPs
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	lead, err := b.leader(ctx)
	if err != nil {
		tr.err = err
		return tr
	}
	var victims []int
	for i := range b.eps {
		if i != lead {
			victims = append(victims, i)
		}
	}
	eps := []string{b.eps[lead]}
	if allEPs {
		eps = b.eps
	}
	s := &site{prefix: fmt.Sprintf("/zones/outage-%d/", k), eps: eps, log: b.log, dir: b.dir, plan: outagePlan()}
	defer func() {
		if err := s.close(b.admin); err != nil && tr.err == nil {
			tr.err = err
		}
	}()
	for _, name := range []string{"a", "b"} {
		n, err := s.open(ctx, etcd.Candidate{Node: name, Zone: "z1", Version: "1.0.0"})
		if err != nil {
			tr.err = err
			return tr
		}
		n.stand()
	}
	if _, err := waitFor(10*time.Second, "a zone leader and both candidates in both views", func() bool {
		for _, n := range s.nodes {
			if n.sees() == "" || len(n.st.Election().Candidates()["z1"]) != 2 || n.st.Outage().Active() {
				return false
			}
		}
		return true
	}); err != nil {
		tr.err = err
		return tr
	}
	time.Sleep(rand.N(detectEvery)) // a random phase against the nodes' probes

	// Both members stop at once; whatever happens, both run again before the site closes.
	stopped := make([]chan error, len(victims))
	var restarted sync.Map // member index -> true
	t0 := time.Now()
	var stopMu sync.Mutex
	var stopLast time.Time
	for j, i := range victims {
		stopped[j] = make(chan error, 1)
		go func() {
			err := b.cluster.StopMember(i)
			stopMu.Lock()
			stopLast = time.Now()
			stopMu.Unlock()
			stopped[j] <- err
		}()
	}
	defer func() {
		if err := b.restore(ctx, victims, stopped, &restarted); err != nil {
			tr.err = errors.Join(tr.err, err)
		}
	}()

	in := make([]*cond, len(s.nodes))
	for i, n := range s.nodes {
		in[i] = &cond{name: n.name + " in outage mode", fn: func() bool { _, ok := n.outage(true, t0); return ok }}
	}
	if !waitAll(20*time.Second, in, nil) {
		tr.err = fmt.Errorf("after 20s: %s", missing(in))
		return tr
	}
	var firstIn time.Time
	for _, n := range s.nodes {
		at, _ := n.outage(true, t0)
		if firstIn.IsZero() || at.Before(firstIn) {
			firstIn = at
		}
	}
	lost, lostOK := b.probe.lostAt(t0, firstIn)
	if tr.lostOK = lostOK; lostOK {
		tr.lost = lost.Sub(t0)
	}
	for _, n := range s.nodes {
		at, _ := n.outage(true, t0)
		tr.in = append(tr.in, at.Sub(t0))
		if lostOK {
			tr.inLost = append(tr.inLost, at.Sub(lost))
			// The node's first probe that failed: its probes run on a 250 ms grid from about
			// when Open returned; the first one after the loss, or the one before it if that
			// began within the own probe loop's resolution of the loss (it was in flight).
			first := n.opened.Add(lost.Sub(n.opened) / detectEvery * detectEvery)
			if lost.Sub(first) > proberEvery {
				first = first.Add(detectEvery)
			}
			tr.inProbe = append(tr.inProbe, at.Sub(first))
		}
	}

	now := time.Now()
	for j := range sessions {
		n := s.nodes[j%len(s.nodes)]
		id := fmt.Sprintf("o%d-%d", k, j)
		sess := broker.Session{ID: id, User: "u-" + id, Resource: "desk", Group: "rds", Machine: machine(j % planMachines), Zone: "z1",
			State: broker.StatePending, Mode: "gateway", Created: now, Changed: now, Expires: now.Add(time.Hour)}
		if err := n.st.CreateSession(ctx, sess, planMax); err != nil {
			tr.err = fmt.Errorf("creating session %s at %s in the outage: %w", id, n.name, err)
			return tr
		}
	}
	tr.create = time.Since(now)

	for j, i := range victims {
		select {
		case err := <-stopped[j]:
			stopped[j] <- err // for restore
			if err != nil {
				tr.err = fmt.Errorf("stopping etcd member %d: %w", i, err)
				return tr
			}
		case <-time.After(30 * time.Second):
			tr.err = fmt.Errorf("stopping etcd member %d: no return within 30s", i)
			return tr
		}
	}
	stopMu.Lock()
	tr.stopRet = stopLast.Sub(t0)
	stopMu.Unlock()

	r0 := time.Now()
	if err := b.cluster.RestartMember(ctx, victims[0]); err != nil {
		tr.err = fmt.Errorf("restarting etcd member %d: %w", victims[0], err)
		return tr
	}
	r1 := time.Now()
	restarted.Store(victims[0], true)
	tr.restart = r1.Sub(r0)
	// Launches at a, one after the other every 20 ms, from now until both nodes are out of
	// outage mode: in outage mode still, held while the outage is written back, or out of
	// it. The odd machines' sessions of the outage are b's, so a has slots there.
	stopLaunches := make(chan struct{})
	var stopOnce sync.Once
	defer stopOnce.Do(func() { close(stopLaunches) })
	launched := make(chan launchResult, 1)
	go func() { launched <- launches(ctx, s.nodes[0], k, stopLaunches) }()
	out := make([]*cond, len(s.nodes))
	for i, n := range s.nodes {
		out[i] = &cond{name: n.name + " out of outage mode", fn: func() bool { _, ok := n.outage(false, t0); return ok }}
	}
	if !waitAll(60*time.Second, out, nil) {
		tr.err = fmt.Errorf("after 60s: %s", missing(out))
		return tr
	}
	for _, n := range s.nodes {
		at, _ := n.outage(false, t0)
		tr.out = append(tr.out, at.Sub(r1))
		tr.conflicts += len(n.st.Outage().Status().Conflicts)
	}
	time.Sleep(100 * time.Millisecond) // launches after the return, too
	stopOnce.Do(func() { close(stopLaunches) })
	select {
	case l := <-launched:
		tr.launches, tr.late = l.n, l.longest
		if l.err != nil {
			tr.err = fmt.Errorf("launching as etcd came back: %w", l.err)
			return tr
		}
	case <-time.After(30 * time.Second):
		tr.err = errors.New("launching as etcd came back: no answer within 30s")
		return tr
	}
	if back, ok := b.probe.backAt(r0); ok {
		tr.back, tr.backOK = back.Sub(r1), true
	}
	r, err := b.admin.Get(ctx, s.prefix+"sessions/", clientv3.WithPrefix(), clientv3.WithCountOnly())
	if err != nil {
		tr.err = fmt.Errorf("counting the sessions written back: %w", err)
		return tr
	}
	tr.written = int(r.Count) - tr.launches
	if tr.written != sessions {
		tr.err = fmt.Errorf("%d sessions in etcd after the write-back, not the outage's %d and the %d launches after", r.Count, sessions, tr.launches)
	}
	return tr
}

// launchResult is what launches did.
type launchResult struct {
	n       int
	longest time.Duration
	err     error
}

// launches creates sessions at n every 20 ms, one at a time, on the odd machines, until stop
// is closed (at most 500, the slots n owns there).
func launches(ctx context.Context, n *node, k int, stop <-chan struct{}) (r launchResult) {
	tick := time.NewTicker(20 * time.Millisecond)
	defer tick.Stop()
	for i := range planMachines / 2 * planMax / 2 {
		id := fmt.Sprintf("o%d-late-%d", k, i)
		now := time.Now()
		sess := broker.Session{ID: id, User: "u-" + id, Resource: "desk", Group: "rds", Machine: machine(2*(i%(planMachines/2)) + 1), Zone: "z1",
			State: broker.StatePending, Mode: "gateway", Created: now, Changed: now, Expires: now.Add(time.Hour)}
		err := n.st.CreateSession(ctx, sess, planMax)
		r.longest = max(r.longest, time.Since(now))
		if err != nil {
			r.err = fmt.Errorf("session %s: %w", id, err)
			return r
		}
		r.n++
		select {
		case <-stop:
			return r
		case <-tick.C:
		}
	}
	return r
}

// restore waits for the StopMember calls of victims and restarts every one that stopped and
// is not restarted yet, so that the next trial has all members.
func (b *bench) restore(ctx context.Context, victims []int, stopped []chan error, restarted *sync.Map) error {
	var errs []error
	for j, i := range victims {
		var err error
		select {
		case err = <-stopped[j]:
		case <-time.After(30 * time.Second):
			return fmt.Errorf("etcd member %d: StopMember did not return within 30s: %w", i, errBroken)
		}
		if _, ok := restarted.Load(i); ok {
			continue
		}
		if err != nil {
			b.log.Warn("bench: StopMember failed; restarting the member anyway", "member", i, "err", err)
		}
		if err := b.cluster.RestartMember(ctx, i); err != nil {
			errs = append(errs, fmt.Errorf("restarting etcd member %d: %w: %w", i, err, errBroken))
		}
	}
	return errors.Join(errs...)
}

// leader returns the index of the etcd member that leads the cluster.
func (b *bench) leader(ctx context.Context) (int, error) {
	for range 50 {
		for i, ep := range b.eps {
			sctx, cancel := context.WithTimeout(ctx, time.Second)
			r, err := b.admin.Status(sctx, ep)
			cancel()
			if err == nil && r.Leader != 0 && r.Leader == r.Header.MemberId {
				return i, nil
			}
		}
		select {
		case <-ctx.Done():
			return 0, ctx.Err()
		case <-time.After(100 * time.Millisecond):
		}
	}
	return 0, errors.New("no etcd member leads after 50 tries")
}
