package health

import (
	"encoding/json"
	"errors"
	"net/netip"
	"testing"
	"time"
)

// TestRemoteTargetFollowsItsProber: one Checker probes a gateway (its zone's leader), another
// holds it as remote and sees the same verdict through the published reports, without
// probing; failures reported on the remote side reach the prober; a Checker that becomes the
// prober goes on from the states it observed.
func TestRemoteTargetFollowsItsProber(t *testing.T) {
	leader := newSim(t, 1, gateway("gw", gwAddr, DefaultMonitor()))
	follower := newSim(t, 2, gateway("gw", gwAddr, DefaultMonitor()))
	type fwd struct {
		port PortID
		err  error
	}
	var forwarded []fwd
	follower.c.fwd = func(name string, p PortID, err error) { forwarded = append(forwarded, fwd{p, err}) }
	if changed := follower.c.SetProbed(func(Target) bool { return false }); len(changed) != 1 || follower.c.Probed("gw") {
		t.Fatalf("SetProbed changed %v, Probed %v: want gw remote", changed, follower.c.Probed("gw"))
	}
	publish := func() {
		t.Helper()
		r, ok := leader.c.Report("gw")
		if !ok {
			t.Fatal("no report")
		}
		b, err := json.Marshal(r)
		if err != nil {
			t.Fatal(err)
		}
		var got Report
		if err := json.Unmarshal(b, &got); err != nil {
			t.Fatalf("report does not round-trip: %v (%s)", err, b)
		}
		if err := follower.c.Observe(got); err != nil {
			t.Fatal(err)
		}
		follower.c.flush()
	}
	start := leader.clk.Now()
	leader.runUntil(start.Add(2*time.Second), nil)
	follower.runUntil(start.Add(2*time.Second), nil)
	if _, definite := follower.c.Definite("gw"); definite {
		t.Fatal("a remote target is definite before its prober said so")
	}
	publish()
	if v, definite := follower.c.Definite("gw"); !definite || v != StateUp {
		t.Fatalf("follower: %v definite %v after the prober's report, want up and definite", v, definite)
	}
	if follower.net.calls != 0 {
		t.Fatalf("the follower probed a remote target %d times", follower.net.calls)
	}

	// 4172/tcp is killed: the leader's verdict goes down, and so does the follower's once
	// the report arrives, with an event naming the port.
	leader.net.set(netip.AddrPortFrom(gwAddr, 4172), refuse)
	leader.runUntil(leader.clk.Now().Add(2*time.Second), nil)
	if leader.c.Eligible("gw") {
		t.Fatal("leader: gateway still eligible")
	}
	r, _ := leader.c.Report("gw")
	before, _ := follower.c.Report("gw")
	if r.Same(before) {
		t.Fatal("Same: a changed state reads the same")
	}
	publish()
	if follower.c.Eligible("gw") {
		t.Fatal("follower: gateway eligible after the prober published it down")
	}
	ev, ok := follower.verdictEvent("gw", StateDown, start)
	if !ok || ev.Reason != "prober" || ev.Port != TCP(4172) || ev.Err == nil {
		t.Fatalf("follower's event %+v (found %v), want a prober event on 4172/tcp with its error", ev, ok)
	}
	again, _ := follower.c.Report("gw")
	if !again.Same(r) {
		t.Fatalf("follower's report %+v differs from the prober's %+v", again, r)
	}

	// A failure seen at the follower goes to the prober, not into the follower's states.
	if err := follower.c.ReportFailure("gw", TCP(443), errors.New("reset")); err != nil {
		t.Fatal(err)
	}
	if len(forwarded) != 1 || forwarded[0].port != TCP(443) {
		t.Fatalf("forwarded %+v, want one failure on 443/tcp", forwarded)
	}
	if st, _ := follower.c.Status("gw"); st.Ports[0].State != StateUp {
		t.Fatal("a forwarded failure changed the follower's own state")
	}

	// The follower becomes the prober: it probes from the observed states and brings the
	// gateway back itself once 4172 answers.
	if err := leader.c.Observe(r); !errors.Is(err, ErrProbedHere) {
		t.Fatalf("Observe on a probed target: %v, want ErrProbedHere", err)
	}
	follower.c.SetProbed(nil)
	follower.runUntil(follower.clk.Now().Add(2*time.Second), nil)
	if follower.net.calls == 0 || !follower.c.Eligible("gw") {
		t.Fatalf("new prober: %d probes, eligible %v; want probes and the gateway up", follower.net.calls, follower.c.Eligible("gw"))
	}
}

func TestParsePortID(t *testing.T) {
	for _, s := range []string{"4172/udp", "443/tcp"} {
		p, err := ParsePortID(s)
		if err != nil || p.String() != s {
			t.Errorf("ParsePortID(%q) = %v, %v", s, p, err)
		}
	}
	for _, s := range []string{"", "443", "443/sctp", "70000/tcp", "x/tcp"} {
		if _, err := ParsePortID(s); err == nil {
			t.Errorf("ParsePortID(%q): no error", s)
		}
	}
}
