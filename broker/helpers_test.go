package broker_test

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/frontdoor-vdi/frontdoor/broker"
	"github.com/frontdoor-vdi/frontdoor/configs"
	"github.com/frontdoor-vdi/frontdoor/internal/testclock"
	"github.com/frontdoor-vdi/frontdoor/store/memory"
)

// newClock is the tests' clock: it moves only when advanced.
func newClock() *testclock.Clock { return testclock.New(time.Date(2025, 1, 2, 9, 0, 0, 0, time.UTC)) }

// seqIDs returns a generator of s1, s2, ...
func seqIDs() func() string {
	var mu sync.Mutex
	n := 0
	return func() string {
		mu.Lock()
		defer mu.Unlock()
		n++
		return fmt.Sprintf("s%d", n)
	}
}

func loadConfig(t testing.TB, yaml string) *configs.Config {
	t.Helper()
	cfg, err := configs.Load(t.Name()+".yaml", []byte(yaml))
	if err != nil {
		t.Fatalf("config: %v", err)
	}
	return cfg
}

type env struct {
	t     testing.TB
	b     *broker.Broker
	st    *memory.Store
	clock *testclock.Clock
}

func newEnv(t testing.TB, yaml string) *env {
	t.Helper()
	cfg := loadConfig(t, yaml)
	st := memory.New()
	c := newClock()
	b, err := broker.New(context.Background(), cfg, st, c.Now, broker.WithIDs(seqIDs()))
	if err != nil {
		t.Fatal(err)
	}
	return &env{t: t, b: b, st: st, clock: c}
}

// launch runs a launch that must not fail in the store.
func (e *env) launch(user, res, loc, endpoint string) broker.Decision {
	e.t.Helper()
	d, err := e.b.Launch(context.Background(), broker.LaunchRequest{User: user, Resource: res, LocationZone: loc, Endpoint: endpoint})
	if err != nil {
		e.t.Fatalf("launch %s %s: %v", user, res, err)
	}
	return d
}

// session creates a session in a given state on a given machine by launching it there.
func (e *env) connect(id string) {
	e.t.Helper()
	if _, err := e.b.Connected(context.Background(), id, "gw-1"); err != nil {
		e.t.Fatal(err)
	}
}

func (e *env) disconnect(id string) {
	e.t.Helper()
	if _, err := e.b.Disconnected(context.Background(), id, "gw-1"); err != nil {
		e.t.Fatal(err)
	}
}

func traceHas(d broker.Decision, sub string) bool {
	for _, l := range d.Trace {
		if strings.Contains(l, sub) {
			return true
		}
	}
	return false
}

func dump(d broker.Decision) string {
	return fmt.Sprintf("outcome=%s step=%d pz=%s(%s) machine=%s zone=%s session=%s reason=%q\n  %s",
		d.Outcome, d.Step, d.PreferredZone, d.PreferredZoneSource, d.Machine, d.Zone, d.Session, d.Reason,
		strings.Join(d.Trace, "\n  "))
}

// site prepends three zones (z1 primary, z2, z3) to the YAML parts.
func site(parts ...string) string {
	return "zones:\n  - {name: z1, primary: true}\n  - {name: z2}\n  - {name: z3}\n" + strings.Join(parts, "\n") + "\n"
}

// newEnvState is newEnv with sessions and machine states already in the store.
func newEnvState(t testing.TB, yaml string, sessions []broker.Session, machines []broker.MachineState) *env {
	t.Helper()
	return newEnvStateOpts(t, yaml, sessions, machines)
}

// newEnvStateOpts is newEnvState with broker options.
func newEnvStateOpts(t testing.TB, yaml string, sessions []broker.Session, machines []broker.MachineState, opts ...broker.Option) *env {
	t.Helper()
	cfg := loadConfig(t, yaml)
	st := memory.New()
	c := newClock()
	ctx := context.Background()
	for _, s := range sessions {
		if s.Created.IsZero() {
			s.Created = c.Now().Add(-time.Hour)
		}
		if s.Mode == "" {
			s.Mode = "gateway"
		}
		if s.Zone == "" {
			for _, m := range cfg.Machines {
				if m.Name == s.Machine {
					s.Zone, s.Group = m.Zone, m.Group
				}
			}
		}
		if s.State == broker.StateDisconnected && s.Expires.IsZero() {
			s.Expires = c.Now().Add(time.Hour)
		}
		if err := st.CreateSession(ctx, s, 1000); err != nil {
			t.Fatal(err)
		}
	}
	for _, m := range machines {
		if err := st.PutMachine(ctx, m); err != nil {
			t.Fatal(err)
		}
	}
	b, err := broker.New(ctx, cfg, st, c.Now, append([]broker.Option{broker.WithIDs(seqIDs())}, opts...)...)
	if err != nil {
		t.Fatal(err)
	}
	return &env{t: t, b: b, st: st, clock: c}
}

func loadConfigErr(yaml string) (*configs.Config, error) { return configs.Load("t.yaml", []byte(yaml)) }

func newMem() *memory.Store { return memory.New() }
