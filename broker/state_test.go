package broker_test

import (
	"context"
	"testing"
	"time"

	"github.com/frontdoor-vdi/frontdoor/broker"
	"github.com/frontdoor-vdi/frontdoor/store/memory"
)

// TestFromStateFollowsTheBrokersRules: a session of the state gets its mode from the site's
// secure_gateway default when its group sets none, and its lifetime from the site's
// disconnect timeout when its group sets none — the rules a launch follows.
func TestFromStateFollowsTheBrokersRules(t *testing.T) {
	cfg := loadConfig(t, "site: {secure_gateway: false, sessions: {disconnect_timeout: 7m}}\n"+site(
		"groups:\n  - {name: g}",
		"machines:\n  - {name: m, address: 10.0.0.1, zone: z1, group: g, max_sessions: 2}",
		"resources:\n  - {name: desk, groups: [{group: g}], entitled: {everyone: true}}",
		"users:\n  - {name: u}"))
	now := time.Date(2026, 12, 1, 9, 0, 0, 0, time.UTC)
	st := memory.New()
	b, err := broker.FromState(context.Background(), cfg, st, now,
		[]broker.StateSession{{ID: "s1", User: "u", Resource: "desk", Machine: "m", State: broker.StateDisconnected}}, nil)
	if err != nil {
		t.Fatal(err)
	}
	snap, _ := st.Load(context.Background())
	if len(snap.Sessions) != 1 {
		t.Fatalf("%d sessions in the store", len(snap.Sessions))
	}
	s := snap.Sessions[0]
	if s.Mode != "direct" || s.Group != "g" || s.Zone != "z1" || !s.Expires.Equal(now.Add(7*time.Minute)) {
		t.Fatalf("session %+v: want direct mode (the site's default), group g, zone z1, expiring in 7 min", s)
	}
	if d := b.Decide(broker.LaunchRequest{User: "u", Resource: "desk"}); d.Session != "s1" {
		t.Fatalf("the decision does not reconnect the state's session: %+v", d)
	}
	if _, err := broker.FromState(context.Background(), cfg, memory.New(), now,
		[]broker.StateSession{{ID: "x", Machine: "nope", State: broker.StatePending}}, nil); err == nil {
		t.Fatal("a session on an unknown machine was accepted")
	}
}
