package etcd_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/frontdoor-vdi/frontdoor/broker"
	"github.com/frontdoor-vdi/frontdoor/configs"
	"github.com/frontdoor-vdi/frontdoor/internal/testkit"
	"github.com/frontdoor-vdi/frontdoor/store/etcd"
	"github.com/frontdoor-vdi/frontdoor/store/etcdembed"
	"github.com/frontdoor-vdi/frontdoor/ticket"
	"github.com/prometheus/client_golang/prometheus"
	clientv3 "go.etcd.io/etcd/client/v3"
)

// cluster starts a one-member etcd for the test.
func cluster(t *testing.T) *etcdembed.Cluster {
	t.Helper()
	testkit.SecondTier(t)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	c, err := etcdembed.Start(ctx, etcdembed.Options{Dir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

func open(t *testing.T, c *etcdembed.Cluster, node string) *etcd.Store {
	t.Helper()
	st, err := etcd.Open(t.Context(), etcd.Options{Endpoints: c.Endpoints(), Prefix: "/frontdoor/test/", Node: node})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	return st
}

// site is a site of ten machines with three slots each, in three zones, and 200 users.
func site(t *testing.T) *configs.Config {
	t.Helper()
	var b strings.Builder
	b.WriteString("zones:\n  - {name: z1, primary: true}\n  - {name: z2}\n  - {name: z3}\n")
	b.WriteString("groups:\n  - {name: rds, zone_preferences: [], load: {max_logons: 0}}\n")
	b.WriteString("machines:\n")
	for i := 0; i < 10; i++ {
		fmt.Fprintf(&b, "  - {name: m%d, address: 10.0.0.%d, zone: z%d, group: rds, max_sessions: 3}\n", i, i+1, i%3+1)
	}
	b.WriteString("resources:\n  - {name: desk, groups: [{group: rds}], entitled: {everyone: true}}\nusers:\n")
	for i := 0; i < 200; i++ {
		fmt.Fprintf(&b, "  - {name: u%d}\n", i)
	}
	cfg, err := configs.Load("site.yaml", []byte(b.String()))
	if err != nil {
		t.Fatal(err)
	}
	return cfg
}

// TestTwoNodesShareOneSite launches from two brokers on two stores of one etcd at once: no
// machine holds more than max_sessions, every slot is used, and each broker sees every
// session, whichever node created it.
func TestTwoNodesShareOneSite(t *testing.T) {
	c := cluster(t)
	cfg := site(t)
	var brokers []*broker.Broker
	for _, n := range []string{"a", "b"} {
		b, err := broker.New(t.Context(), cfg, open(t, c, n), time.Now)
		if err != nil {
			t.Fatal(err)
		}
		brokers = append(brokers, b)
	}
	const workers, each = 8, 10 // 160 launches for 30 slots, half through each node, 16 goroutines
	var wg sync.WaitGroup
	var mu sync.Mutex
	outcomes := map[broker.Outcome]int{}
	for w := 0; w < 2*workers; w++ {
		b := brokers[w%2]
		wg.Go(func() {
			for i := 0; i < each; i++ {
				d, err := b.Launch(t.Context(), broker.LaunchRequest{User: fmt.Sprint("u", w*each+i), Resource: "desk", Endpoint: "ep"})
				if err != nil {
					t.Error(err)
					return
				}
				mu.Lock()
				outcomes[d.Outcome]++
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	// A launch may be denied while another node's reservation of the last slot is in
	// flight and then refused; launches one at a time now find any slot left, and no more.
	for i := 0; i < 30; i++ {
		d, err := brokers[i%2].Launch(t.Context(), broker.LaunchRequest{User: fmt.Sprint("u", 160+i), Resource: "desk", Endpoint: "ep"})
		if err != nil {
			t.Fatal(err)
		}
		outcomes[d.Outcome]++
		if d.Outcome == broker.OutcomeDenied {
			break
		}
	}
	if outcomes[broker.OutcomeNew] != 30 {
		t.Errorf("outcomes %v, want 30 new sessions (every slot) and the rest denied", outcomes)
	}
	t.Logf("outcomes %v", outcomes)
	// What etcd holds: per machine, never more than 3 slots, each naming a session.
	cli := etcd.Client(open(t, c, "checker"))
	r, err := cli.Get(t.Context(), "/frontdoor/test/slots/", clientv3.WithPrefix())
	if err != nil {
		t.Fatal(err)
	}
	perMachine := map[string]int{}
	for _, kv := range r.Kvs {
		perMachine[strings.Split(strings.TrimPrefix(string(kv.Key), "/frontdoor/test/slots/"), "/")[0]]++
	}
	for m, n := range perMachine {
		if n > 3 {
			t.Errorf("%s holds %d slots, max_sessions is 3", m, n)
		}
	}
	if len(r.Kvs) != 30 {
		t.Errorf("%d slots taken in etcd, want 30", len(r.Kvs))
	}
	for i, b := range brokers {
		testkit.WaitFor(t, fmt.Sprintf("broker %d sees all 30 sessions (has %d)", i, len(b.Sessions())), func() bool { return len(b.Sessions()) == 30 })
		for m := 0; m < 10; m++ {
			if _, n, _ := b.MachineLoad(fmt.Sprint("m", m)); n != 3 {
				t.Errorf("broker %d counts %d sessions on m%d, want 3", i, n, m)
			}
		}
	}
}

// TestSessionLifecycleAcrossNodes: a session launched at one node is connected, disconnected
// and logged off at the other; each change reaches the first node's view, and a logoff there
// tells the hook so the node can close the session's channels.
func TestSessionLifecycleAcrossNodes(t *testing.T) {
	c := cluster(t)
	cfg := site(t)
	ended := make(chan broker.Session, 1)
	a, err := broker.New(t.Context(), cfg, open(t, c, "a"), time.Now, broker.WithOnEnd(func(s broker.Session) { ended <- s }))
	if err != nil {
		t.Fatal(err)
	}
	b, err := broker.New(t.Context(), cfg, open(t, c, "b"), time.Now)
	if err != nil {
		t.Fatal(err)
	}
	if !a.Shared() {
		t.Fatal("a broker over etcd is not Shared")
	}
	d, err := a.Launch(t.Context(), broker.LaunchRequest{User: "u1", Resource: "desk", Endpoint: "ep"})
	if err != nil || d.Session == "" {
		t.Fatalf("launch: %v %+v", err, d)
	}
	testkit.WaitFor(t, "b sees the session", func() bool { _, ok := b.Session(d.Session); return ok })
	if _, err := b.Connected(t.Context(), d.Session, "gw-1"); err != nil {
		t.Fatal(err)
	}
	testkit.WaitFor(t, "a sees it connected", func() bool { s, _ := a.Session(d.Session); return s.State == broker.StateConnected })
	if _, err := b.Disconnected(t.Context(), d.Session, "gw-1"); err != nil {
		t.Fatal(err)
	}
	testkit.WaitFor(t, "a sees it disconnected", func() bool { s, _ := a.Session(d.Session); return s.State == broker.StateDisconnected })
	// a reconnects the same user: step 2, the disconnected session, with a's view behind or not.
	d2, err := a.Launch(t.Context(), broker.LaunchRequest{User: "u1", Resource: "desk", Endpoint: "ep2"})
	if err != nil || d2.Session != d.Session || d2.Outcome != broker.OutcomeReconnect {
		t.Fatalf("relaunch: %v %+v, want a reconnect to %s", err, d2, d.Session)
	}
	if _, err := b.Logoff(t.Context(), d.Session); err != nil {
		t.Fatal(err)
	}
	select {
	case s := <-ended:
		if s.ID != d.Session || s.State != broker.StateEnded {
			t.Fatalf("ended %+v", s)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("a was not told of the logoff at b")
	}
	if _, n, _ := a.MachineLoad(d.Machine); n != 0 {
		t.Fatalf("a counts %d sessions on %s after the logoff, want 0", n, d.Machine)
	}
}

// TestStaleRevisionIsAConflict: an update on a revision that is not the stored one fails with
// ErrConflict, and on a session that does not exist with ErrNoSession.
func TestStaleRevisionIsAConflict(t *testing.T) {
	c := cluster(t)
	st := open(t, c, "a")
	s := broker.Session{ID: "s1", User: "u", Machine: "m0", State: broker.StatePending, Expires: time.Now().Add(time.Minute)}
	if err := st.CreateSession(t.Context(), s, 1); err != nil {
		t.Fatal(err)
	}
	if err := st.CreateSession(t.Context(), s, 1); !errors.Is(err, broker.ErrExists) {
		t.Fatalf("second create: %v, want ErrExists", err)
	}
	s2 := s
	s2.ID = "s2"
	if err := st.CreateSession(t.Context(), s2, 1); !errors.Is(err, broker.ErrMachineFull) {
		t.Fatalf("create on a full machine: %v, want ErrMachineFull", err)
	}
	s.State, s.Expires = broker.StateConnected, time.Time{}
	if err := st.UpdateSession(t.Context(), s, 1); err != nil {
		t.Fatal(err)
	}
	if err := st.UpdateSession(t.Context(), s, 1); !errors.Is(err, broker.ErrConflict) {
		t.Fatalf("update at a stale revision: %v, want ErrConflict", err)
	}
	got, err := st.GetSession(t.Context(), "s1")
	if err != nil || got.Rev != 2 || got.State != broker.StateConnected {
		t.Fatalf("stored %+v %v, want revision 2, connected", got, err)
	}
	if err := st.DeleteSession(t.Context(), "s1"); err != nil {
		t.Fatal(err)
	}
	if err := st.DeleteSession(t.Context(), "s1"); !errors.Is(err, broker.ErrNoSession) {
		t.Fatalf("second delete: %v, want ErrNoSession", err)
	}
	if err := st.CreateSession(t.Context(), s2, 1); err != nil {
		t.Fatalf("the freed slot: %v", err)
	}
}

// TestPendingSessionExpiresByLease: etcd deletes a pending session at its Expires time (no
// sweeping loop), frees its slot, and every follower is told.
func TestPendingSessionExpiresByLease(t *testing.T) {
	c := cluster(t)
	cfg := site(t)
	ended := make(chan broker.Session, 1)
	other, err := broker.New(t.Context(), cfg, open(t, c, "b"), time.Now, broker.WithOnEnd(func(s broker.Session) { ended <- s }))
	if err != nil {
		t.Fatal(err)
	}
	st := open(t, c, "a")
	s := broker.Session{ID: "short", User: "u1", Resource: "desk", Group: "rds", Machine: "m0", Zone: "z1",
		State: broker.StatePending, Created: time.Now(), Expires: time.Now().Add(2 * time.Second)}
	if err := st.CreateSession(t.Context(), s, 3); err != nil {
		t.Fatal(err)
	}
	testkit.WaitFor(t, "the other node sees the session", func() bool { _, ok := other.Session("short"); return ok })
	select {
	case e := <-ended:
		if e.ID != "short" {
			t.Fatalf("ended %s", e.ID)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the pending session did not expire within 10s of a 2s timeout")
	}
	r, err := etcd.Client(st).Get(t.Context(), "/frontdoor/test/slots/m0/", clientv3.WithPrefix(), clientv3.WithCountOnly())
	if err != nil || r.Count != 0 {
		t.Fatalf("slots of m0 after the expiry: %v %v, want none", r.Count, err)
	}
}

// TestLaunchTicketIsUsedOnceSiteWide: a channel of a launch ticket opens once across nodes; a
// revocation at one node reaches the other's view.
func TestLaunchTicketIsUsedOnceSiteWide(t *testing.T) {
	c := cluster(t)
	sb := open(t, c, "b")
	a, b := open(t, c, "a").Ledger(), sb.Ledger()
	id := [16]byte{1, 2, 3}
	ch := ticket.Channel{Port: 8443, Proto: "tcp"}.String()
	until := time.Now().Add(time.Minute)
	var wg sync.WaitGroup
	var mu sync.Mutex
	fresh := 0
	for i := 0; i < 20; i++ {
		l := a
		if i%2 == 1 {
			l = b
		}
		wg.Go(func() {
			ok, err := l.Use(id, ch, until)
			if err != nil {
				t.Error(err)
			}
			if ok {
				mu.Lock()
				fresh++
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	if fresh != 1 {
		t.Fatalf("the channel was admitted %d times, want once", fresh)
	}
	if ok, _ := b.Use(id, ticket.Channel{Port: 4172, Proto: "udp"}.String(), until); !ok {
		t.Fatal("another channel of the same ticket was refused")
	}
	var told []string
	var toldMu sync.Mutex
	sb.Ledger().OnRevoked(func(s string, before time.Time) {
		toldMu.Lock()
		told = append(told, s+" "+before.UTC().Format(time.RFC3339))
		toldMu.Unlock()
	})
	steal := until.Add(-time.Hour).Truncate(time.Millisecond)
	if err := a.Revoke("s1", steal, until); err != nil {
		t.Fatal(err)
	}
	testkit.WaitFor(t, "b sees the revocation", func() bool { r, _ := b.Revoked("s1"); return r.Equal(steal) })
	// A narrower revocation does not undo a wider one; a wider one widens it.
	if err := a.Revoke("s1", steal.Add(-time.Minute), until); err != nil {
		t.Fatal(err)
	}
	if r, _ := a.Revoked("s1"); !r.Equal(steal) {
		t.Fatalf("after a narrower revocation: before %v, want %v", r, steal)
	}
	// etcd keeps the wider one too, whatever the view of the node that wrote.
	kv, err := etcd.Client(sb).Get(t.Context(), "/frontdoor/test/tickets/revoked/s1")
	if err != nil || len(kv.Kvs) != 1 || string(kv.Kvs[0].Value) != fmt.Sprintf("%020d", steal.UnixMilli()) {
		t.Fatalf("stored revocation %v, %v; want %020d", kv, err, steal.UnixMilli())
	}
	if err := a.Revoke("s1", until, until); err != nil {
		t.Fatal(err)
	}
	testkit.WaitFor(t, "b sees the wider revocation", func() bool { r, _ := b.Revoked("s1"); return r.Equal(until.Truncate(time.Millisecond)) })
	testkit.WaitFor(t, "b's follower is told", func() bool {
		toldMu.Lock()
		defer toldMu.Unlock()
		return len(told) >= 2
	})
	// A reconnect ticket's generation used at one node supersedes the earlier ones at the
	// other; a lower mark does not undo a higher one.
	if err := a.Supersede("s2", 7, until); err != nil {
		t.Fatal(err)
	}
	testkit.WaitFor(t, "b sees the generation", func() bool { m, _ := b.Superseded("s2"); return m == 7 })
	if err := b.Supersede("s2", 5, until); err != nil {
		t.Fatal(err)
	}
	if kv, err := etcd.Client(sb).Get(t.Context(), "/frontdoor/test/tickets/superseded/s2"); err != nil || len(kv.Kvs) != 1 || string(kv.Kvs[0].Value) != fmt.Sprintf("%020d", 7) {
		t.Fatalf("stored mark %v, %v; want 7", kv, err)
	}
}

// TestIdentityIsCreatedOnce: nodes that start at once all get the one identity stored, and a
// wrong secret cannot read it.
func TestIdentityIsCreatedOnce(t *testing.T) {
	c := cluster(t)
	secret := make([]byte, etcd.SecretSize)
	secret[0] = 7
	var wg sync.WaitGroup
	got := make([]string, 6)
	for i := range got {
		st := open(t, c, fmt.Sprint("n", i))
		wg.Go(func() {
			b, err := st.Keys().Identity(t.Context(), secret, func() ([]byte, error) { return []byte(fmt.Sprint("identity of n", i)), nil })
			if err != nil {
				t.Error(err)
			}
			got[i] = string(b)
		})
	}
	wg.Wait()
	for i := range got {
		if got[i] != got[0] || got[i] == "" {
			t.Fatalf("identities %q: want one for all", got)
		}
	}
	wrong := make([]byte, etcd.SecretSize)
	_, err := open(t, c, "x").Keys().Identity(t.Context(), wrong, func() ([]byte, error) { return []byte("mine"), nil })
	if !errors.Is(err, etcd.ErrSecret) {
		t.Fatalf("a wrong secret: %v, want ErrSecret", err)
	}
	r, err := etcd.Client(open(t, c, "y")).Get(t.Context(), "/frontdoor/test/identity")
	if err != nil || strings.Contains(string(r.Kvs[0].Value), "identity of") {
		t.Fatalf("the stored identity is not sealed: %q %v", r.Kvs[0].Value, err)
	}
}

// TestPresenceAndStatus: a node's presence is listed while it runs and gone when it closes;
// the status names the member and its leader.
func TestPresenceAndStatus(t *testing.T) {
	c := cluster(t)
	a, b := open(t, c, "a"), open(t, c, "b")
	if err := b.Presence().Register(t.Context(), etcd.NodeInfo{Name: "b", Zone: "z1", Version: "test"}); err != nil {
		t.Fatal(err)
	}
	testkit.WaitFor(t, "a sees b", func() bool { _, ok := a.Presence().Nodes()["b"]; return ok })
	s := a.Presence().Status(t.Context())
	if len(s.Members) != 1 || !s.Members[0].Healthy || !s.Members[0].Leader || s.Revision == 0 {
		t.Fatalf("status %+v", s)
	}
	b.Close()
	testkit.WaitFor(t, "b's presence is gone once it closed", func() bool { _, ok := a.Presence().Nodes()["b"]; return !ok })
}

// TestMetricsCountTransactions: the store's transactions show on its registry by result.
func TestMetricsCountTransactions(t *testing.T) {
	c := cluster(t)
	reg := prometheus.NewRegistry()
	st, err := etcd.Open(t.Context(), etcd.Options{Endpoints: c.Endpoints(), Prefix: "/frontdoor/test/", Node: "a", Registry: reg})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	s := broker.Session{ID: "s1", User: "u", Machine: "m0", State: broker.StateConnected}
	st.CreateSession(t.Context(), s, 1)
	st.UpdateSession(t.Context(), s, 7) // a conflict
	got := map[string]uint64{}
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() != "frontdoor_store_txn_duration_seconds" {
			continue
		}
		for _, m := range mf.Metric {
			var op, res string
			for _, l := range m.Label {
				switch l.GetName() {
				case "op":
					op = l.GetValue()
				case "result":
					res = l.GetValue()
				}
			}
			got[op+" "+res] = m.GetHistogram().GetSampleCount()
		}
	}
	if got["create ok"] != 1 || got["update conflict"] != 1 {
		t.Fatalf("transactions by result %v, want one create ok and one update conflict", got)
	}
}

// TestALostNodeLeaseIsReplaced: when the node's lease ends (etcd out of reach past its TTL;
// here revoked), the store grants a new one and writes the node's presence again.
func TestALostNodeLeaseIsReplaced(t *testing.T) {
	c := cluster(t)
	a, b := open(t, c, "a"), open(t, c, "b")
	if err := a.Presence().Register(t.Context(), etcd.NodeInfo{Name: "a", Zone: "z1"}); err != nil {
		t.Fatal(err)
	}
	r, err := etcd.Client(b).Get(t.Context(), "/frontdoor/test/nodes/a")
	if err != nil || len(r.Kvs) != 1 {
		t.Fatalf("presence of a: %v %v", r, err)
	}
	old := clientv3.LeaseID(r.Kvs[0].Lease)
	if _, err := etcd.Client(b).Revoke(t.Context(), old); err != nil {
		t.Fatal(err)
	}
	testkit.WaitFor(t, "a's presence is back on a new lease", func() bool {
		r, err := etcd.Client(b).Get(t.Context(), "/frontdoor/test/nodes/a")
		return err == nil && len(r.Kvs) == 1 && clientv3.LeaseID(r.Kvs[0].Lease) != old
	})
	if err := a.PutMachine(t.Context(), broker.MachineState{Name: "m0", CPU: 10}); err != nil {
		t.Fatalf("load on the new lease: %v", err)
	}
}

// TestMachineDownStaysTheNodesOwn: one node's probes marking a machine down do not take it
// from another node's launches, while maintenance is the site's.
func TestMachineDownStaysTheNodesOwn(t *testing.T) {
	c := cluster(t)
	cfg := site(t)
	a, err := broker.New(t.Context(), cfg, open(t, c, "a"), time.Now)
	if err != nil {
		t.Fatal(err)
	}
	b, err := broker.New(t.Context(), cfg, open(t, c, "b"), time.Now)
	if err != nil {
		t.Fatal(err)
	}
	for i := 0; i < 10; i++ {
		if err := a.SetDown(t.Context(), fmt.Sprint("m", i), true); err != nil {
			t.Fatal(err)
		}
	}
	if d := a.Decide(broker.LaunchRequest{User: "u1", Resource: "desk"}); d.Outcome != broker.OutcomeDenied {
		t.Fatalf("a with every machine down decided %+v, want denied", d)
	}
	first := b.Decide(broker.LaunchRequest{User: "u1", Resource: "desk"})
	if first.Outcome != broker.OutcomeNew {
		t.Fatalf("b decided %+v: want a new session (a's down verdicts are a's)", first)
	}
	// Maintenance set at a is the site's: b moves off that machine.
	if err := a.SetMaintenance(t.Context(), first.Machine, true); err != nil {
		t.Fatal(err)
	}
	testkit.WaitFor(t, "b sees "+first.Machine+" in maintenance", func() bool {
		d := b.Decide(broker.LaunchRequest{User: "u1", Resource: "desk"})
		return d.Outcome == broker.OutcomeNew && d.Machine != first.Machine
	})
}
