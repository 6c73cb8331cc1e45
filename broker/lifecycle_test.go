package broker_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/frontdoor-vdi/frontdoor/broker"
)

func TestLifecycle(t *testing.T) {
	y := site("site:\n  sessions: {pending_timeout: 90s, disconnect_timeout: 1h}",
		"groups:\n  - {name: pool}\n  - {name: quick, disconnect_timeout: 5m}",
		poolMachines, "  - {name: q1, address: 10.0.9.1, zone: z1, group: quick}", users,
		"resources:\n  - {name: desk, groups: [{group: pool}], entitled: {everyone: true}}\n  - {name: fast, groups: [{group: quick}], entitled: {everyone: true}}")
	ctx := t.Context()

	t.Run("a late disconnect from the gateway the client left is refused", func(t *testing.T) {
		e := newEnv(t, y)
		d := e.launch("homer", "desk", "", "ep")
		e.b.Connected(ctx, d.Session, "gw-1")
		e.b.Connected(ctx, d.Session, "gw-2") // the client moved before gw-1 saw its channels go
		if _, err := e.b.Disconnected(ctx, d.Session, "gw-1"); !errors.Is(err, broker.ErrNotCarrier) {
			t.Fatalf("gw-1's late disconnect: %v, want ErrNotCarrier", err)
		}
		if s, _ := e.b.Session(d.Session); s.State != broker.StateConnected || s.Via != "gw-2" {
			t.Fatalf("session after gw-1's late disconnect: %+v, want connected via gw-2", s)
		}
		if s, err := e.b.Disconnected(ctx, d.Session, "gw-2"); err != nil || s.State != broker.StateDisconnected {
			t.Fatalf("gw-2's disconnect: %+v %v", s, err)
		}
	})

	t.Run("pending → connected → disconnected → ended", func(t *testing.T) {
		e := newEnv(t, y)
		d := e.launch("homer", "desk", "", "ep")
		s, _ := e.b.Session(d.Session)
		if s.State != broker.StatePending || !s.Expires.Equal(e.clock.Now().Add(90*time.Second)) {
			t.Fatalf("new session %+v, want pending expiring in 90s", s)
		}
		if _, err := e.b.Disconnected(ctx, d.Session, "gw-1"); !errors.Is(err, broker.ErrBadTransition) {
			t.Fatalf("disconnecting a pending session: %v, want ErrBadTransition", err)
		}
		s, _ = e.b.Connected(ctx, d.Session, "gw-1")
		if s.State != broker.StateConnected || !s.Expires.IsZero() {
			t.Fatalf("connected session %+v", s)
		}
		e.clock.Advance(10 * time.Hour)
		if ended, _ := e.b.Expire(ctx); len(ended) != 0 {
			t.Fatalf("a connected session expired: %+v", ended)
		}
		s, _ = e.b.Disconnected(ctx, d.Session, "gw-1")
		if s.State != broker.StateDisconnected || !s.Expires.Equal(e.clock.Now().Add(time.Hour)) {
			t.Fatalf("disconnected session %+v, want expiry in the site's 1h", s)
		}
		// Reconnecting: the same session comes back.
		if d2 := e.launch("homer", "desk", "", "ep2"); d2.Outcome != broker.OutcomeReconnect || d2.Session != d.Session {
			t.Fatalf("relaunch %s", dump(d2))
		}
		s, _ = e.b.Connected(ctx, d.Session, "gw-1")
		if s.State != broker.StateConnected || s.Endpoint != "ep2" {
			t.Fatalf("reconnected session %+v", s)
		}
		s, err := e.b.Logoff(ctx, d.Session)
		if err != nil || s.State != broker.StateEnded {
			t.Fatalf("logoff: %+v %v", s, err)
		}
		if _, ok := e.b.Session(d.Session); ok || e.st.Count(s.Machine) != 0 {
			t.Fatalf("ended session still held")
		}
		if _, err := e.b.Logoff(ctx, d.Session); !errors.Is(err, broker.ErrNoSession) {
			t.Fatalf("second logoff: %v, want ErrNoSession", err)
		}
	})

	t.Run("a pending launch that never connects expires and frees its slot", func(t *testing.T) {
		e := newEnv(t, y)
		d := e.launch("homer", "fast", "", "ep")
		if d2 := e.launch("nomad", "fast", "", "ep"); d2.Outcome != broker.OutcomeDenied {
			t.Fatalf("q1 holds one session; got %s", dump(d2))
		}
		e.clock.Advance(89 * time.Second)
		if ended, _ := e.b.Expire(ctx); len(ended) != 0 {
			t.Fatalf("expired early: %+v", ended)
		}
		e.clock.Advance(time.Second)
		ended, _ := e.b.Expire(ctx)
		if len(ended) != 1 || ended[0].ID != d.Session || ended[0].State != broker.StateEnded {
			t.Fatalf("expired %+v, want the pending session", ended)
		}
		if d3 := e.launch("nomad", "fast", "", "ep"); d3.Outcome != broker.OutcomeNew || d3.Machine != "q1" {
			t.Fatalf("slot not freed: %s", dump(d3))
		}
	})

	t.Run("disconnected sessions expire after the group's timeout", func(t *testing.T) {
		e := newEnv(t, y)
		d := e.launch("homer", "fast", "", "ep")
		e.connect(d.Session)
		e.disconnect(d.Session)
		e.clock.Advance(5*time.Minute - time.Second)
		if ended, _ := e.b.Expire(ctx); len(ended) != 0 {
			t.Fatalf("expired early: %+v", ended)
		}
		e.clock.Advance(time.Second)
		if ended, _ := e.b.Expire(ctx); len(ended) != 1 {
			t.Fatalf("expired %+v, want the disconnected session after the group's 5m", ended)
		}
	})

	t.Run("running sessions keep their gateway mode when ops switch it", func(t *testing.T) {
		e := newEnv(t, y)
		d := e.launch("homer", "desk", "", "ep")
		if d.Mode != "gateway" {
			t.Fatalf("mode %s", d.Mode)
		}
		e.b.SetSecureGateway("pool", false)
		if d2 := e.launch("nomad", "desk", "", "ep"); d2.Mode != "direct" {
			t.Fatalf("new launch mode %s, want direct", d2.Mode)
		}
		if d3 := e.launch("homer", "desk", "", "ep"); d3.Outcome != broker.OutcomeReconnect || d3.Mode != "gateway" {
			t.Fatalf("reconnect %s mode %s, want gateway", d3.Outcome, d3.Mode)
		}
	})
}

// TestRunExpiryEndsSessionsAtTheTick: each tick expires what is due and tells of it; the loop
// ends with its context.
func TestRunExpiryEndsSessionsAtTheTick(t *testing.T) {
	y := site("site:\n  sessions: {pending_timeout: 90s}", "groups:\n  - {name: pool}", poolMachines, users,
		"resources:\n  - {name: desk, groups: [{group: pool}], entitled: {everyone: true}}")
	e := newEnv(t, y)
	d := e.launch("homer", "desk", "", "ep")
	tick := make(chan time.Time)
	ended := make(chan broker.Session, 1)
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan error, 1)
	go func() {
		done <- e.b.RunExpiry(ctx, tick, func(s broker.Session) { ended <- s }, func(err error) { t.Error(err) })
	}()
	tick <- e.clock.Now() // nothing due yet
	e.clock.Advance(91 * time.Second)
	tick <- e.clock.Now()
	tick <- e.clock.Now() // the second tick has run the first one's expiry
	select {
	case s := <-ended:
		if s.ID != d.Session || s.State != broker.StateEnded {
			t.Fatalf("ended %+v, want %s ended", s, d.Session)
		}
	default:
		t.Fatal("the pending session past its timeout did not end at the tick")
	}
	cancel()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
}

// SessionsOn lists a machine's live sessions, and a session leaves the list when it ends.
func TestSessionsOnListsAMachinesLiveSessions(t *testing.T) {
	y := site("", "groups:\n  - {name: pool}", poolMachines, users,
		"resources:\n  - {name: desk, groups: [{group: pool}], entitled: {everyone: true}}")
	e := newEnv(t, y)
	d := e.launch("homer", "desk", "", "ep")
	on := e.b.SessionsOn(d.Machine)
	if len(on) != 1 || on[0].ID != d.Session {
		t.Fatalf("SessionsOn(%s) = %+v, want the one session", d.Machine, on)
	}
	if _, err := e.b.Logoff(t.Context(), d.Session); err != nil {
		t.Fatal(err)
	}
	if on := e.b.SessionsOn(d.Machine); len(on) != 0 {
		t.Fatalf("after the logoff SessionsOn = %+v, want none", on)
	}
}
