package drill

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/netip"
	"net/url"
	"os"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/frontdoor-vdi/frontdoor/configs"
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
	l, ok := r.lab.Site().Election().Leaders()[zone]
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
				if l, ok := r.lab.Site().Election().Leaders()[zone]; ok && l.Node != fd.node {
					lt.leader, lt.leaderAfter = l.Node, time.Since(start)
				}
			}
			if lt.downAfter == 0 && publishedDown(r.lab.Site().Election().HealthRecords()[fd.gateway]) {
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
		cli, prefix := r.lab.SiteDB()
		_, err := cli.Get(ctx, prefix+"identity")
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
	if err := r.api.Get(ctx, "/v1/admin/status", &during); err != nil {
		return fmt.Errorf("the admin status in the outage: %w", err)
	}
	if err := r.storm.wait(ctx); err != nil {
		return err
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
		err := r.api.Get(ctx, "/v1/admin/status", &after)
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

// storeEndpoints gives every node the etcd endpoints of its zone's wire toward the site
// database (lab.Options.StoreEndpoints): the zone's address 127.<block>.250.1, port for port
// in front of the members.
func (r *run) storeEndpoints(n configs.Node, members []string) []string {
	zi := slices.IndexFunc(r.cfg.Zones, func(z configs.Zone) bool { return z.Name == n.Zone })
	if zi < 0 {
		return nil
	}
	if r.etcdWires == nil {
		r.etcdWires = map[string]*Wire{}
	}
	public := netip.AddrFrom4([4]byte{127, byte(r.o.Base + zi), 250, 1})
	var ports []uint16
	var out []string
	for _, m := range members {
		u, err := url.Parse(m)
		if err != nil {
			return nil
		}
		ap, err := netip.ParseAddrPort(u.Host)
		if err != nil {
			return nil
		}
		ports = append(ports, ap.Port())
		out = append(out, u.Scheme+"://"+netip.AddrPortFrom(public, ap.Port()).String())
	}
	if r.etcdWires[n.Zone] == nil {
		w, err := NewWire(public, netip.MustParseAddr("127.0.0.1"), ports, nil)
		if err != nil {
			r.o.Logger.Error("drill: the wire toward etcd", "zone", n.Zone, "err", err)
			return nil // the node reaches etcd directly; cutZone then fails
		}
		r.etcdWires[n.Zone] = w
	}
	return out
}

// cutZone blackholes the wire toward the site database of the satellite zone of fd.
func (r *run) cutZone(_ context.Context, fd *frontDoor) (string, error) {
	zone := r.zoneOf(fd.node)
	for _, z := range r.cfg.Zones {
		if z.Name == zone && z.Primary {
			return "", fmt.Errorf("the first client's zone %s is the primary zone, not a satellite", zone)
		}
	}
	w := r.etcdWires[zone]
	if w == nil {
		return "", fmt.Errorf("zone %s reaches etcd through no wire", zone)
	}
	w.Blackhole(true)
	r.cut = zone
	return zone, nil
}

// logged returns when the node's log first has a line with msg at or after since; zero when
// it has none.
func (r *run) logged(node, msg string, since time.Time) time.Time {
	p, ok := r.lab.Proc(node)
	if !ok {
		return time.Time{}
	}
	b, err := os.ReadFile(p.Log)
	if err != nil {
		return time.Time{}
	}
	for line := range strings.Lines(string(b)) {
		if !strings.Contains(line, msg) {
			continue
		}
		ts, _, _ := strings.Cut(strings.TrimPrefix(line, "time="), " ")
		if t, err := time.Parse(time.RFC3339Nano, ts); err == nil && !t.Before(since) {
			return t
		}
	}
	return time.Time{}
}

// zoneNodes returns the nodes of zone that serve launches.
func (r *run) zoneNodes(zone string) []string {
	var out []string
	for _, n := range r.cfg.Nodes {
		if n.Zone == zone && slices.ContainsFunc(n.Listeners, func(l configs.Listener) bool { return l.Kind == "launch" }) {
			out = append(out, n.Name)
		}
	}
	return out
}

// finishCut waits for the storm, mends the wire, waits until the cut zone's nodes have
// written their outage back, and counts what the storm did in the site database.
func (r *run) finishCut(ctx context.Context, res *Result) error {
	if err := r.storm.wait(ctx); err != nil {
		return err
	}
	nodes := r.zoneNodes(r.cut)
	var entered []string
	for _, n := range nodes {
		t := r.logged(n, "outage mode: the site database is out of reach", res.FaultAt)
		if t.IsZero() {
			res.Pass = false
			entered = append(entered, n+" never")
			continue
		}
		entered = append(entered, fmt.Sprintf("%s %.2f s", n, t.Sub(res.FaultAt).Seconds()))
	}
	r.etcdWires[r.cut].Blackhole(false)
	back := time.Now()
	var written []string
	for _, n := range nodes {
		var t time.Time
		for deadline := back.Add(maxWriteBack); t.IsZero() && time.Now().Before(deadline); time.Sleep(100 * time.Millisecond) {
			t = r.logged(n, "outage mode ended", back)
		}
		if t.IsZero() {
			res.Pass = false
			written = append(written, n+" not within "+maxWriteBack.String())
			continue
		}
		written = append(written, fmt.Sprintf("%s %.2f s", n, t.Sub(back).Seconds()))
	}
	res.Actual += fmt.Sprintf("; zone %s in outage mode after the cut: %s; written back after the wire was mended: %s",
		r.cut, strings.Join(entered, ", "), strings.Join(written, ", "))
	for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); time.Sleep(200 * time.Millisecond) {
		if c, err := r.storm.count(ctx); err == nil && c.Lost == 0 {
			break
		}
	}
	if err := r.finishStorm(ctx, res); err != nil {
		return err
	}
	for _, n := range nodes {
		if !r.logged(n, "outage write-back: conflict", back).IsZero() {
			res.Pass = false
			res.Actual += "; " + n + " reported a write-back conflict"
		}
	}
	return nil
}
