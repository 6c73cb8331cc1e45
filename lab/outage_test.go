package lab

import (
	"context"
	"syscall"
	"testing"
	"time"

	"github.com/frontdoor-vdi/frontdoor/broker"
	"github.com/frontdoor-vdi/frontdoor/client"
)

// allInOutage reports whether every running node of this process is in outage mode (on).
func allInOutage(l *Lab, on bool) bool {
	for _, m := range l.members {
		if st := m.n.Outage(); st.Active != on {
			return false
		}
	}
	return true
}

// loseSiteDB stops the lab's etcd and waits, up to 10 s, until every node is in outage
// mode; it returns when etcd began to stop.
func loseSiteDB(t *testing.T, l *Lab) time.Time {
	t.Helper()
	lost := time.Now()
	if err := l.Etcd.StopMember(0); err != nil {
		t.Fatal(err)
	}
	for !allInOutage(l, true) {
		if time.Since(lost) > 10*time.Second {
			t.Fatal("not every node is in outage mode 10 s after etcd stopped")
		}
		time.Sleep(20 * time.Millisecond)
	}
	return lost
}

// TestSiteDatabaseLostAndBack: the lab's etcd stops. Within about a second every node
// brokers from its local host cache: a running session goes on, a new launch succeeds in
// its zone through its front door's own gateway. When etcd is back the outage's sessions are
// in the site, no machine is over its max_sessions and no session was lost.
func TestSiteDatabaseLostAndBack(t *testing.T) {
	l, _ := startLab(t)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	launcher := func(user string) *client.Launcher {
		return &client.Launcher{Name: "desktop.vdi.lab.test", DNSServer: "127.41.0.1:5353", User: user, Password: "lab",
			Resource: "desktop", Endpoint: user + "-laptop", RootCAs: l.CA().Pool()}
	}
	alice, before, _, events := openSession(ctx, t, l, launcher("alice"), client.Options{})
	if _, err := alice.CheckDesktop(ctx); err != nil {
		t.Fatal(err)
	}
	waitState(t, l, before.SessionID, broker.StateConnected)

	lost := loseSiteDB(t, l)
	t.Logf("every node in outage mode %v after etcd began to stop", time.Since(lost))

	// The running session goes on; a new one launches and carries data.
	if _, err := alice.CheckDesktop(ctx); err != nil {
		t.Fatalf("alice's session in the outage: %v", err)
	}
	bob, during, _, _ := openSession(ctx, t, l, launcher("bob"), client.Options{})
	if _, err := bob.CheckDesktop(ctx); err != nil {
		t.Fatalf("a session launched in the outage: %v", err)
	}
	t.Logf("launched %s on %s in the outage", during.SessionID, during.Machine)

	if err := l.Etcd.RestartMember(ctx, 0); err != nil {
		t.Fatal(err)
	}
	back := time.Now()
	for !allInOutage(l, false) {
		if time.Since(back) > 15*time.Second {
			t.Fatal("a node is still in outage mode 15 s after etcd is back")
		}
		time.Sleep(20 * time.Millisecond)
	}
	for _, id := range []string{before.SessionID, during.SessionID} {
		if _, err := l.Session(ctx, id); err != nil {
			t.Errorf("session %s is not in the site after the outage: %v", id, err)
		}
	}
	all, err := l.Sessions(ctx)
	if err != nil {
		t.Fatal(err)
	}
	per := map[string]int{}
	for _, s := range all {
		per[s.Machine]++
	}
	for _, m := range l.Config.Machines {
		if per[m.Name] > m.MaxSessions {
			t.Errorf("machine %s holds %d sessions, max %d", m.Name, per[m.Name], m.MaxSessions)
		}
	}
	for _, m := range l.members {
		if st := m.n.Outage(); len(st.Conflicts) > 0 {
			t.Errorf("node %s reports conflicts: %+v", m.name, st.Conflicts)
		}
	}
	for len(events) > 0 {
		if e := <-events; e.Kind == client.EventCut {
			t.Errorf("alice's session was cut during the outage: %+v", e)
		}
	}
	if _, err := alice.CheckDesktop(ctx); err != nil {
		t.Fatalf("alice's session after the outage: %v", err)
	}
}

// TestANodeStopsInAnOutage: with the site database out of reach, a front door that is shut
// down (SIGTERM) stops, as it does with etcd up; it once waited for etcd for ever, its
// zone election asking for a new session.
func TestANodeStopsInAnOutage(t *testing.T) {
	l, _ := startLab(t)
	loseSiteDB(t, l)
	m := l.members[0]
	start := time.Now()
	if err := l.Signal(m.name, syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	select {
	case <-m.done:
		t.Logf("node %s stopped %v after SIGTERM in the outage", m.name, time.Since(start))
	case <-time.After(30 * time.Second):
		t.Fatalf("node %s has not stopped 30 s after SIGTERM in the outage", m.name)
	}
}
