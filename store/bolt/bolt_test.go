package bolt_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/frontdoor-vdi/frontdoor/broker"
	"github.com/frontdoor-vdi/frontdoor/configs"
	"github.com/frontdoor-vdi/frontdoor/store/bolt"
)

const siteYAML = `
zones: [{name: z1, primary: true}, {name: z2}]
groups: [{name: pool}]
machines:
  - {name: m1, address: 10.0.0.1, zone: z1, group: pool, max_sessions: 2}
  - {name: m2, address: 10.0.0.2, zone: z2, group: pool, max_sessions: 2}
users: [{name: alice, home_zone: z1}, {name: bob, home_zone: z1}]
resources: [{name: desk, groups: [{group: pool}], entitled: {everyone: true}}]
`

func now() time.Time { return time.Date(2025, 1, 2, 9, 0, 0, 0, time.UTC) }

func TestStateSurvivesRestart(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "fd.db")
	cfg, err := configs.Load("site.yaml", []byte(siteYAML))
	if err != nil {
		t.Fatal(err)
	}
	st, err := bolt.Open(path, bolt.Options{})
	if err != nil {
		t.Fatal(err)
	}
	b, err := broker.New(ctx, cfg, st, now)
	if err != nil {
		t.Fatal(err)
	}
	d, err := b.Launch(ctx, broker.LaunchRequest{User: "alice", Resource: "desk", Endpoint: "ep"})
	if err != nil || d.Machine != "m1" {
		t.Fatalf("launch %+v %v", d, err)
	}
	b.Connected(ctx, d.Session, "gw-1")
	b.Disconnected(ctx, d.Session, "gw-1")
	if err := b.SetMaintenance(ctx, "m1", true); err != nil {
		t.Fatal(err)
	}
	st.Close()

	st2, err := bolt.Open(path, bolt.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer st2.Close()
	b2, err := broker.New(ctx, cfg, st2, now)
	if err != nil {
		t.Fatal(err)
	}
	s, ok := b2.Session(d.Session)
	if !ok || s.State != broker.StateDisconnected || s.Machine != "m1" {
		t.Fatalf("after restart session %+v %v", s, ok)
	}
	// The session is still there to reconnect, even on a machine now in maintenance...
	if d2, _ := b2.Launch(ctx, broker.LaunchRequest{User: "alice", Resource: "desk", Endpoint: "ep"}); d2.Outcome != broker.OutcomeReconnect || d2.Session != d.Session {
		t.Fatalf("relaunch after restart: %+v", d2)
	}
	// ...and maintenance survived: bob's new session avoids m1.
	if d3, _ := b2.Launch(ctx, broker.LaunchRequest{User: "bob", Resource: "desk", Endpoint: "ep"}); d3.Machine != "m2" || d3.Step != 5 {
		t.Fatalf("bob: %+v", d3)
	}
	if n := st2.Count("m1"); n != 1 {
		t.Fatalf("m1 count %d after restart, want 1", n)
	}
}

func TestLockedFileIsAClearError(t *testing.T) {
	path := filepath.Join(t.TempDir(), "fd.db")
	st, err := bolt.Open(path, bolt.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	_, err = bolt.Open(path, bolt.Options{LockTimeout: 100 * time.Millisecond})
	if !errors.Is(err, bolt.ErrLocked) || !strings.Contains(err.Error(), path) {
		t.Fatalf("second open: %v, want ErrLocked naming the file", err)
	}
}

func TestCorruptFileIsAClearError(t *testing.T) {
	for name, damage := range map[string]func(string) error{
		"garbage file": func(p string) error { return os.WriteFile(p, []byte(strings.Repeat("not a bolt file ", 1024)), 0o600) },
		"damaged meta pages": func(p string) error {
			st, err := bolt.Open(p, bolt.Options{})
			if err != nil {
				return err
			}
			st.Close()
			f, err := os.OpenFile(p, os.O_RDWR, 0)
			if err != nil {
				return err
			}
			defer f.Close()
			for _, off := range []int64{16, 4096 + 16} {
				if _, err := f.WriteAt(bytes.Repeat([]byte{0x5a}, 16), off); err != nil {
					return err
				}
			}
			return nil
		},
	} {
		t.Run(name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "fd.db")
			if err := damage(path); err != nil {
				t.Fatal(err)
			}
			before, _ := os.ReadFile(path)
			_, err := bolt.Open(path, bolt.Options{})
			if !errors.Is(err, bolt.ErrCorrupt) || !strings.Contains(err.Error(), path) {
				t.Fatalf("open: %v, want ErrCorrupt naming the file", err)
			}
			if after, _ := os.ReadFile(path); string(after) != string(before) {
				t.Fatal("the damaged file was changed: no silent loss allowed")
			}
		})
	}
}

func TestCreateSessionIsAtomic(t *testing.T) {
	st, err := bolt.Open(filepath.Join(t.TempDir(), "fd.db"), bolt.Options{NoSync: true})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	var wg sync.WaitGroup
	var mu sync.Mutex
	ok := 0
	for i := 0; i < 32; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if st.CreateSession(context.Background(), broker.Session{ID: fmt.Sprint(i), Machine: "m"}, 4) == nil {
				mu.Lock()
				ok++
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	if ok != 4 || st.Count("m") != 4 {
		t.Fatalf("%d creates succeeded, count %d; want exactly 4", ok, st.Count("m"))
	}
	snap, _ := st.Load(context.Background())
	err = st.UpdateSession(context.Background(), broker.Session{ID: snap.Sessions[0].ID, Machine: "m", Rev: 9}, 7)
	if !errors.Is(err, broker.ErrConflict) {
		t.Fatalf("update at a wrong revision: %v", err)
	}
}
