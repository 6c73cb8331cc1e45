package drill

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"sync"
	"time"

	"github.com/frontdoor-vdi/frontdoor/health"
	"github.com/frontdoor-vdi/frontdoor/store/etcd"
)

// The drills of the distributed site's zones: a zone leader killed, the site database's
// quorum lost and back.

// Goals of the zone rows.
const (
	maxLeaderHandover = 2 * time.Second
	maxProbesResumed  = 3 * time.Second
	maxWriteBack      = 20 * time.Second
)

// zoneOf returns the zone of a configured node.
func (r *run) zoneOf(node string) string {
	for _, n := range r.cfg.Nodes {
		if n.Name == node {
			return n.Zone
		}
	}
	return ""
}

// pickZoneLeader returns the front door of the node that leads the first client's zone.
func pickZoneLeader(_ context.Context, r *run, first *frontDoor) (*frontDoor, error) {
	zone := r.zoneOf(first.node)
	l, ok := r.lab.Site().Leaders()[zone]
	if !ok {
		return nil, fmt.Errorf("zone %s has no leader", zone)
	}
	for _, fd := range r.doors {
		if fd.node == l.Node {
			return fd, nil
		}
	}
	return nil, fmt.Errorf("the leader %s of zone %s hosts no front door of the drill", l.Node, zone)
}

// leaderTimes is what the zone-leader-killed row measured.
type leaderTimes struct {
	leader      string
	leaderAfter time.Duration
	downAfter   time.Duration
	err         error
}

// watchLeader measures, from now, until another node leads the killed node's zone and until
// the site's published verdict on its gateway is down.
func (r *run) watchLeader(fd *frontDoor) <-chan leaderTimes {
	out := make(chan leaderTimes, 1)
	zone, start := r.zoneOf(fd.node), time.Now()
	go func() {
		var lt leaderTimes
		for deadline := start.Add(15 * time.Second); time.Now().Before(deadline); time.Sleep(10 * time.Millisecond) {
			if lt.leader == "" {
				if l, ok := r.lab.Site().Leaders()[zone]; ok && l.Node != fd.node {
					lt.leader, lt.leaderAfter = l.Node, time.Since(start)
				}
			}
			if lt.downAfter == 0 && publishedDown(r.lab.Site().HealthRecords()[fd.gateway]) {
				lt.downAfter = time.Since(start)
			}
			if lt.leader != "" && lt.downAfter > 0 {
				out <- lt
				return
			}
		}
		lt.err = fmt.Errorf("after 15 s: new leader %q, gateway %s down after %v", lt.leader, fd.gateway, lt.downAfter)
		out <- lt
	}()
	return out
}

// publishedDown reports whether a published health record shows a required port down.
func publishedDown(b []byte) bool {
	var rep health.Report
	if json.Unmarshal(b, &rep) != nil {
		return false
	}
	for _, p := range rep.Ports {
		if p.State == health.StateDown {
			return true
		}
	}
	return false
}

// finishLeader adds the leader's handover to the row.
func (r *run) finishLeader(ctx context.Context, res *Result) error {
	var lt leaderTimes
	select {
	case lt = <-r.leaderWatch:
	case <-ctx.Done():
		return ctx.Err()
	}
	if lt.err != nil {
		res.Pass = false
		res.Actual += "; " + lt.err.Error()
		return nil
	}
	res.Actual += fmt.Sprintf("; new zone leader %s after %.2f s, the killed node's gateway published down after %.2f s",
		lt.leader, lt.leaderAfter.Seconds(), lt.downAfter.Seconds())
	if lt.leaderAfter > maxLeaderHandover || lt.downAfter > maxProbesResumed {
		res.Pass = false
	}
	return nil
}

// stopEtcdQuorum stops two of the three etcd members at once.
func (r *run) stopEtcdQuorum() ([]string, error) {
	n := len(r.lab.Etcd.Endpoints())
	if n < 3 {
		return nil, fmt.Errorf("the site database has %d members, want 3", n)
	}
	r.stopped = []int{n - 2, n - 1}
	errs := make([]error, len(r.stopped))
	var wg sync.WaitGroup
	for i, m := range r.stopped {
		wg.Go(func() { errs[i] = r.lab.Etcd.StopMember(m) })
	}
	wg.Wait()
	var names []string
	for _, m := range r.stopped {
		names = append(names, r.lab.Etcd.Member(m))
	}
	if err := errors.Join(errs...); err != nil {
		return names, err
	}
	// The quorum is gone when a linearizable read fails.
	for deadline := time.Now().Add(3 * time.Second); time.Now().Before(deadline); time.Sleep(100 * time.Millisecond) {
		ctx, cancel := context.WithTimeout(context.Background(), 500*time.Millisecond)
		_, err := r.lab.Site().Client().Get(ctx, r.lab.Site().Prefix()+"identity")
		cancel()
		if err != nil {
			return names, nil
		}
	}
	return names, fmt.Errorf("the site database still answers 3 s after %v stopped", names)
}

// outageStatus is what the drill reads of the admin status's store.
type outageStatus struct {
	Store struct {
		Outage etcd.OutageStatus `json:"outage"`
	} `json:"store"`
}

// finishQuorum waits for the storm, starts the stopped members again, waits until the admin
// node has written its outage back, and counts what the storm did in the site database.
func (r *run) finishQuorum(ctx context.Context, res *Result) error {
	var during outageStatus
	if err := r.adminCall(ctx, http.MethodGet, "/v1/admin/status", nil, &during); err != nil {
		return fmt.Errorf("the admin status in the outage: %w", err)
	}
	select {
	case <-r.storm.finished:
	case <-ctx.Done():
		return ctx.Err()
	case <-time.After(2 * time.Minute):
		return errors.New("the launch storm did not end within 2 minutes")
	}
	errs := make([]error, len(r.stopped))
	var wg sync.WaitGroup
	for i, m := range r.stopped {
		wg.Go(func() { errs[i] = r.lab.Etcd.RestartMember(ctx, m) })
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		return err
	}
	back := time.Now()
	var after outageStatus
	for {
		err := r.adminCall(ctx, http.MethodGet, "/v1/admin/status", nil, &after)
		if err == nil && !after.Store.Outage.Active {
			break
		}
		if time.Since(back) > maxWriteBack {
			res.Pass = false
			res.Actual += fmt.Sprintf("; the admin node still in outage mode %v after etcd was back (%v)", maxWriteBack, err)
			return nil
		}
		time.Sleep(100 * time.Millisecond)
	}
	written := time.Since(back)
	took := "the admin node was not in outage mode during the observation"
	if during.Store.Outage.Active {
		took = fmt.Sprintf("the admin node in outage mode %.2f s after the stop", during.Store.Outage.Since.Sub(res.FaultAt).Seconds())
	} else {
		res.Pass = false
	}
	res.Actual += fmt.Sprintf("; %s; written back %.2f s after etcd was back, %d conflicts", took, written.Seconds(), len(after.Store.Outage.Conflicts))
	if len(after.Store.Outage.Conflicts) > 0 {
		res.Pass = false
	}
	// The other nodes write theirs back at about the same time: the storm's sessions are
	// counted once they are all in the site database, or after a while.
	for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); time.Sleep(200 * time.Millisecond) {
		if c, err := r.storm.count(ctx); err == nil && c.Lost == 0 {
			break
		}
	}
	return r.finishStorm(ctx, res)
}
