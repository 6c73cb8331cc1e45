package etcd_test

import (
	"context"
	"errors"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/frontdoor-vdi/frontdoor/broker"
	"github.com/frontdoor-vdi/frontdoor/internal/testkit"
	"github.com/frontdoor-vdi/frontdoor/store/etcd"
	"github.com/frontdoor-vdi/frontdoor/store/etcdembed"
)

// openPlanned opens a store of node with the outage plan and a cache file in dir.
func openPlanned(t *testing.T, c *etcdembed.Cluster, node string, plan map[string]etcd.MachinePlan, dir string) *etcd.Store {
	t.Helper()
	st, err := etcd.Open(t.Context(), etcd.Options{Endpoints: c.Endpoints(), Prefix: "/frontdoor/test/", Node: node,
		Plan: plan, CacheFile: filepath.Join(dir, node+".lhc"), DialTimeout: 2 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	return st
}

func pending(id, machine string, now time.Time) broker.Session {
	return broker.Session{ID: id, User: "u-" + id, Resource: "desk", Group: "rds", Machine: machine, Zone: "z1",
		State: broker.StatePending, Mode: "gateway", Created: now, Changed: now, Expires: now.Add(time.Hour)}
}

// TestOutageBrokersFromTheCacheAndWritesBack: with etcd gone, two nodes of a zone go on
// creating sessions from their views within their shares — together never more than a
// machine's max_sessions, never the same slot — and a launch ticket opens a channel only at
// the node that holds its session's slot; when etcd is back, every outage change is in the
// site, with no machine over its max.
func TestOutageBrokersFromTheCacheAndWritesBack(t *testing.T) {
	c := cluster(t)
	dir := t.TempDir()
	plan := map[string]etcd.MachinePlan{
		"m": {Brokers: []string{"a", "b"}, Max: 4},
		"n": {Brokers: []string{"a", "b"}, Max: 1},
	}
	a, b := openPlanned(t, c, "a", plan, dir), openPlanned(t, c, "b", plan, dir)
	stand(t, a, etcd.Candidate{Node: "a", Zone: "z1"})
	stand(t, b, etcd.Candidate{Node: "b", Zone: "z1"})
	now := time.Now()
	testkit.WaitFor(t, "both nodes standing", func() bool { return len(a.Election().Candidates()["z1"]) == 2 })
	if err := a.CreateSession(t.Context(), pending("before", "m", now), 4); err != nil {
		t.Fatal(err)
	}
	testkit.WaitFor(t, "b sees the session", func() bool { _, err := b.GetSession(t.Context(), "before"); return err == nil })
	cached(t, "before", a, b)

	entered := make(chan time.Time, 2)
	for _, st := range []*etcd.Store{a, b} {
		st.Outage().On(func(on bool) {
			if on {
				entered <- time.Now()
			}
		})
	}
	lost := time.Now() // etcd's graceful stop takes a while; it stops answering at once
	if err := c.StopMember(0); err != nil {
		t.Fatal(err)
	}
	testkit.WaitFor(t, "both nodes in outage mode", func() bool { return a.Outage().Active() && b.Outage().Active() })
	for range 2 {
		d := (<-entered).Sub(lost)
		t.Logf("outage mode %v after etcd began to stop", d)
		if d > 2500*time.Millisecond {
			t.Errorf("outage mode after %v, want within 1 s of noticing (2.5 s in all)", d)
		}
	}

	// Each node books what it can on m (3 slots left) and n (1 slot).
	made := map[string]string{} // session -> node
	for _, st := range []struct {
		name string
		s    *etcd.Store
	}{{"a", a}, {"b", b}} {
		for i := range 4 {
			id := st.name + "-m" + string(rune('0'+i))
			if err := st.s.CreateSession(t.Context(), pending(id, "m", now), 4); err == nil {
				made[id] = st.name
			} else if !errors.Is(err, broker.ErrMachineFull) {
				t.Fatalf("%s: %v", id, err)
			}
		}
		if err := st.s.CreateSession(t.Context(), pending(st.name+"-n", "n", now), 1); err == nil {
			made[st.name+"-n"] = st.name
		}
	}
	onM, onN := 0, 0
	for id := range made {
		if id[len(id)-1] == 'n' {
			onN++
		} else {
			onM++
		}
	}
	if onM > 3 || onN != 1 {
		t.Fatalf("in the outage: %d new sessions on m (3 slots free), %d on n (1 slot): %v", onM, onN, made)
	}
	if onM < 1 {
		t.Fatalf("in the outage no node could book m: %v", made)
	}
	// A launch ticket of a session a booked opens at a only, once.
	var mine string
	for id, n := range made {
		if n == "a" {
			mine = id
		}
	}
	if mine == "" {
		t.Fatal("a booked nothing")
	}
	id := [16]byte{1, 2, 3}
	if ok, err := b.Ledger().UseFor(id, mine, "443/tcp", now.Add(time.Minute)); ok || !errors.Is(err, etcd.ErrOutage) {
		t.Fatalf("b admitted a's outage session's ticket: %v %v", ok, err)
	}
	if ok, err := a.Ledger().UseFor(id, mine, "443/tcp", now.Add(time.Minute)); !ok || err != nil {
		t.Fatalf("a refused its own session's ticket: %v %v", ok, err)
	}
	if ok, _ := a.Ledger().UseFor(id, mine, "443/tcp", now.Add(time.Minute)); ok {
		t.Fatal("a admitted a launch ticket's channel twice")
	}
	// The session from before is connected and the outage's first one ends.
	s, _ := a.GetSession(t.Context(), "before")
	s.State, s.Changed, s.Expires = broker.StateConnected, time.Now(), time.Time{}
	if err := a.UpdateSession(t.Context(), s, s.Rev); err != nil {
		t.Fatal(err)
	}
	if err := a.DeleteSession(t.Context(), mine); err != nil {
		t.Fatal(err)
	}
	delete(made, mine)
	// A reconnect ticket rotates and a session is revoked in the outage: the journal holds
	// both, and the write-back (whose last pass holds the outage's gate) takes them to etcd.
	if err := a.Ledger().Supersede("before", 7, now.Add(time.Hour)); err != nil {
		t.Fatal(err)
	}
	if err := a.Ledger().Revoke("gone", now, now.Add(time.Hour)); err != nil {
		t.Fatal(err)
	}
	if st := a.Outage().Status(); !st.Active || st.Pending == 0 {
		t.Fatalf("outage status %+v, want active with changes pending", st)
	}
	if err := a.Settings().SetModes(t.Context(), map[string]bool{"rds": false}); !errors.Is(err, etcd.ErrOutage) {
		t.Errorf("a settings change in the outage: %v, want ErrOutage", err)
	}

	// etcd is back: both write back, and the site holds every session, none over max.
	if err := c.RestartMember(context.Background(), 0); err != nil {
		t.Fatal(err)
	}
	testkit.WaitFor(t, "both nodes out of outage mode", func() bool { return !a.Outage().Active() && !b.Outage().Active() })
	for sid := range made {
		if _, err := b.GetSession(t.Context(), sid); err != nil {
			t.Errorf("session %s of the outage is not in the site: %v", sid, err)
		}
	}
	if _, err := b.GetSession(t.Context(), mine); !errors.Is(err, broker.ErrNoSession) {
		t.Errorf("the session ended in the outage is still in the site: %v", err)
	}
	if s, err := b.GetSession(t.Context(), "before"); err != nil || s.State != broker.StateConnected {
		t.Errorf("the session connected in the outage reads %v, %v", s.State, err)
	}
	if ok, err := b.Ledger().Use(id, "443/tcp", now.Add(time.Minute)); ok || err != nil {
		t.Errorf("the launch ticket channel used in the outage opens again after it: %v %v", ok, err)
	}
	testkit.WaitFor(t, "the outage's rotation and revocation at b", func() bool {
		mark, err1 := b.Ledger().Superseded("before")
		before, err2 := b.Ledger().Revoked("gone")
		return err1 == nil && err2 == nil && mark == 7 && !before.IsZero()
	})
	snap, _ := b.Load(t.Context())
	per := map[string]int{}
	for _, s := range snap.Sessions {
		per[s.Machine]++
	}
	if per["m"] > 4 || per["n"] > 1 {
		t.Errorf("after the write-back: %v sessions per machine, max m 4, n 1", per)
	}
	if st := a.Outage().Status(); st.Active || st.Outages != 1 || len(st.Conflicts) != 0 {
		t.Errorf("outage status after: %+v", st)
	}
}

// cached waits until the view of each store holds session id, and then writes each one's
// local host cache file.
func cached(t *testing.T, id string, stores ...*etcd.Store) {
	t.Helper()
	for _, st := range stores {
		testkit.WaitFor(t, "the view holds "+id, func() bool {
			snap, _ := st.Load(t.Context())
			return slices.ContainsFunc(snap.Sessions, func(s broker.Session) bool { return s.ID == id })
		})
		if err := etcd.FlushCache(st); err != nil {
			t.Fatal(err)
		}
	}
}

// TestStartInAnOutageFromTheCache: a node that starts while etcd is down opens from its cache
// file in outage mode, with the view it had, and brokers.
func TestStartInAnOutageFromTheCache(t *testing.T) {
	c := cluster(t)
	dir := t.TempDir()
	plan := map[string]etcd.MachinePlan{"m": {Brokers: []string{"a"}, Max: 2}}
	a := openPlanned(t, c, "a", plan, dir)
	stand(t, a, etcd.Candidate{Node: "a", Zone: "z1"})
	testkit.WaitFor(t, "a standing", func() bool { return len(a.Election().Candidates()["z1"]) == 1 })
	now := time.Now()
	if err := a.CreateSession(t.Context(), pending("s1", "m", now), 2); err != nil {
		t.Fatal(err)
	}
	cached(t, "s1", a)
	a.Close()
	if err := c.StopMember(0); err != nil {
		t.Fatal(err)
	}
	again := openPlanned(t, c, "a", plan, dir)
	if !again.Outage().Active() {
		t.Fatal("a node started without etcd is not in outage mode")
	}
	if _, err := again.GetSession(t.Context(), "s1"); err != nil {
		t.Fatalf("the cached view lacks s1: %v", err)
	}
	if err := again.CreateSession(t.Context(), pending("s2", "m", now), 2); err != nil {
		t.Fatalf("brokering from the cache: %v", err)
	}
	if err := again.CreateSession(t.Context(), pending("s3", "m", now), 2); !errors.Is(err, broker.ErrMachineFull) {
		t.Fatalf("a third session on a machine of two: %v", err)
	}
	if err := c.RestartMember(context.Background(), 0); err != nil {
		t.Fatal(err)
	}
	testkit.WaitFor(t, "out of outage mode", func() bool { return !again.Outage().Active() })
	if _, err := again.GetSession(t.Context(), "s2"); err != nil {
		t.Fatalf("the outage's session was not written back: %v", err)
	}
}

// TestCutOffZoneAndTheWriteBackConflict: a node cut off from etcd (its member stopped, the
// other two a quorum) books its machine from its cache; the rest of the site refuses that
// machine once the node's candidacy is gone (cut off), but a node that booked it before it
// saw that makes the machine full twice over: the write-back keeps both sessions, puts the
// outage's on an overflow slot, reports the conflict, and the machine takes nothing new
// until it is back under its max.
func TestCutOffZoneAndTheWriteBackConflict(t *testing.T) {
	testkit.SecondTier(t)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	c, err := etcdembed.Start(ctx, etcdembed.Options{Dir: t.TempDir(), Members: 3, UnsafeNoFsync: true})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	eps := c.Endpoints()
	plan := map[string]etcd.MachinePlan{"x": {Brokers: []string{"sat"}, Max: 1}}
	open := func(node string, endpoints []string, plan map[string]etcd.MachinePlan) *etcd.Store {
		st, err := etcd.Open(t.Context(), etcd.Options{Endpoints: endpoints, Prefix: "/frontdoor/test/", Node: node,
			Plan: plan, DialTimeout: 2 * time.Second})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { st.Close() })
		return st
	}
	sat := open("sat", eps[:1], plan)     // the satellite zone's node, on member 0 only
	aware := open("hq", eps[1:], plan)    // a node of the rest of the site
	unaware := open("hq-2", eps[1:], nil) // one that books before it sees the cut
	stand(t, sat, etcd.Candidate{Node: "sat", Zone: "sat"})
	testkit.WaitFor(t, "sat standing", func() bool { return len(aware.Election().Candidates()["sat"]) == 1 })
	now := time.Now()
	if err := c.StopMember(0); err != nil {
		t.Fatal(err)
	}
	testkit.WaitFor(t, "sat in outage mode", func() bool { return sat.Outage().Active() })
	if err := sat.CreateSession(t.Context(), pending("outage", "x", now), 1); err != nil {
		t.Fatalf("the cut-off node books its own machine: %v", err)
	}
	testkit.WaitFor(t, "the rest of the site sees sat's candidacy gone", func() bool { return len(aware.Election().Candidates()["sat"]) == 0 })
	if err := aware.CreateSession(t.Context(), pending("refused", "x", now), 1); !errors.Is(err, broker.ErrMachineFull) {
		t.Fatalf("the rest of the site booked a machine of a zone cut off: %v", err)
	}
	if err := unaware.CreateSession(t.Context(), pending("site", "x", now), 1); err != nil {
		t.Fatal(err)
	}
	if err := c.RestartMember(context.Background(), 0); err != nil {
		t.Fatal(err)
	}
	testkit.WaitFor(t, "sat out of outage mode", func() bool { return !sat.Outage().Active() })
	for _, id := range []string{"outage", "site"} {
		if _, err := aware.GetSession(t.Context(), id); err != nil {
			t.Errorf("session %s lost: %v", id, err)
		}
	}
	st := sat.Outage().Status()
	if len(st.Conflicts) != 1 || st.Conflicts[0].Machine != "x" {
		t.Fatalf("conflicts %+v, want one on x", st.Conflicts)
	}
	t.Logf("conflict: %s", st.Conflicts[0].What)
	testkit.WaitFor(t, "the rest of the site sees both sessions", func() bool {
		snap, _ := unaware.Load(t.Context())
		return len(snap.Sessions) == 2
	})
	if err := unaware.CreateSession(t.Context(), pending("more", "x", now), 1); !errors.Is(err, broker.ErrMachineFull) {
		t.Fatalf("a machine over its max took a new session: %v", err)
	}
}
