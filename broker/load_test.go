package broker_test

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"

	"github.com/frontdoor-vdi/frontdoor/broker"
)

func rdsSite(policy string, maxLogons int, machines string) string {
	return site(fmt.Sprintf("groups:\n  - {name: rds, zone_preferences: [], load: {policy: %s, max_logons: %d}}", policy, maxLogons),
		"machines:\n"+machines, manyUsers(200), "resources:\n  - {name: desk, groups: [{group: rds}], entitled: {everyone: true}}")
}

func manyUsers(n int) string {
	var b strings.Builder
	b.WriteString("users:\n  - {name: u}\n")
	for i := 0; i < n; i++ {
		fmt.Fprintf(&b, "  - {name: u%d}\n", i)
	}
	return b.String()
}

func TestLoadIndex(t *testing.T) {
	// index = largest evaluator + 0.05 × mean of the others (CTX202150).
	e := newEnv(t, rdsSite("horizontal", 2, "  - {name: a, address: 10.0.0.1, zone: z1, group: rds, max_sessions: 4}\n"))
	d := e.launch("u", "desk", "", "ep") // 1 of 4 sessions (2500), 1 logon of 2 in flight (5000)
	if err := e.b.ReportLoad(t.Context(), "a", 40, 20); err != nil {
		t.Fatal(err)
	}
	load, n, _ := e.b.MachineLoad("a")
	if want := 5000 + (2500+4000+2000)/3/20; load != want || n != 1 {
		t.Fatalf("load %d with %d sessions, want %d with 1", load, n, want)
	}
	e.connect(d.Session) // the logon completes: 2500, 4000, 2000, 0
	if load, _, _ = e.b.MachineLoad("a"); load != 4000+(2500+2000+0)/3/20 {
		t.Fatalf("after connect load %d, want %d", load, 4000+(2500+2000)/3/20)
	}
}

func TestLeastLoadedAndTies(t *testing.T) {
	ms := "  - {name: a, address: 10.0.0.1, zone: z1, group: rds, max_sessions: 10}\n" +
		"  - {name: b, address: 10.0.0.2, zone: z2, group: rds, max_sessions: 10}\n" +
		"  - {name: c, address: 10.0.0.3, zone: z3, group: rds, max_sessions: 10}\n"
	rev := "  - {name: c, address: 10.0.0.3, zone: z3, group: rds, max_sessions: 10}\n" +
		"  - {name: b, address: 10.0.0.2, zone: z2, group: rds, max_sessions: 10}\n" +
		"  - {name: a, address: 10.0.0.1, zone: z1, group: rds, max_sessions: 10}\n"
	t.Run("ties are broken by a stable hash, not by config or map order", func(t *testing.T) {
		first := newEnv(t, rdsSite("horizontal", 0, ms)).b.Decide(broker.LaunchRequest{User: "u", Resource: "desk"}).Machine
		for i := 0; i < 20; i++ {
			y := ms
			if i%2 == 1 {
				y = rev
			}
			if got := newEnv(t, rdsSite("horizontal", 0, y)).b.Decide(broker.LaunchRequest{User: "u", Resource: "desk"}).Machine; got != first {
				t.Fatalf("tie broken differently: %s then %s", first, got)
			}
		}
	})
	t.Run("the least loaded machine wins and launches spread horizontally", func(t *testing.T) {
		e := newEnv(t, rdsSite("horizontal", 0, ms))
		e.b.ReportLoad(t.Context(), "a", 0, 0)
		e.b.ReportLoad(t.Context(), "b", 90, 0)
		e.b.ReportLoad(t.Context(), "c", 0, 0)
		count := map[string]int{}
		for i := 0; i < 6; i++ {
			count[e.launch(fmt.Sprint("u", i), "desk", "", "ep").Machine]++
		}
		if count["a"] != 3 || count["c"] != 3 || count["b"] != 0 {
			t.Fatalf("placements %v, want 3 on a, 3 on c, none on the busy b", count)
		}
	})
	t.Run("vertical packs the most loaded machine that still has room", func(t *testing.T) {
		e := newEnv(t, rdsSite("vertical", 0, ms))
		e.b.ReportLoad(t.Context(), "b", 10, 0)
		count := map[string]int{}
		for i := 0; i < 12; i++ {
			count[e.launch(fmt.Sprint("u", i), "desk", "", "ep").Machine]++
		}
		if count["b"] != 10 {
			t.Fatalf("placements %v, want b filled to its 10 sessions first", count)
		}
	})
	t.Run("concurrent logons protect a fresh machine from the black hole", func(t *testing.T) {
		e := newEnv(t, rdsSite("horizontal", 2, ms))
		e.b.ReportLoad(t.Context(), "a", 30, 30)
		e.b.ReportLoad(t.Context(), "b", 30, 30)
		// c is empty; after 2 logons in flight it is full until they connect.
		var got []string
		for i := 0; i < 3; i++ {
			got = append(got, e.launch(fmt.Sprint("u", i), "desk", "", "ep").Machine)
		}
		// One logon in flight of max_logons 2 puts c at 5000+: the next launches go to the
		// busier but settled machines instead of piling onto c.
		if strings.Join(got, " ") != "c a b" {
			t.Fatalf("placements %v, want c, then a and b", got)
		}
		if load, _, _ := e.b.MachineLoad("c"); load < 5000 {
			t.Fatalf("c load %d with a logon in flight, want ≥ 5000", load)
		}
	})
}

// TestMaxSessionsUnderConcurrency launches from many goroutines at once; the store must never
// hold more than max_sessions on a machine and every slot must be used.
func TestMaxSessionsUnderConcurrency(t *testing.T) {
	var ms strings.Builder
	for i := 0; i < 10; i++ {
		fmt.Fprintf(&ms, "  - {name: m%d, address: 10.0.0.%d, zone: z%d, group: rds, max_sessions: 3}\n", i, i+1, i%3+1)
	}
	e := newEnv(t, rdsSite("horizontal", 0, ms.String()))
	const workers, each = 16, 10 // 160 launches for 30 slots
	var wg sync.WaitGroup
	var mu sync.Mutex
	outcomes := map[broker.Outcome]int{}
	for w := 0; w < workers; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; i < each; i++ {
				d, err := e.b.Launch(context.Background(), broker.LaunchRequest{User: fmt.Sprint("u", w*each+i), Resource: "desk", Endpoint: "ep"})
				if err != nil {
					t.Error(err)
					return
				}
				mu.Lock()
				outcomes[d.Outcome]++
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	for i := 0; i < 10; i++ {
		if n := e.st.Count(fmt.Sprintf("m%d", i)); n > 3 {
			t.Errorf("m%d holds %d sessions, max_sessions is 3", i, n)
		}
	}
	if n := len(e.b.Sessions()); n != 30 || outcomes[broker.OutcomeNew] != 30 || outcomes[broker.OutcomeDenied] != workers*each-30 {
		t.Errorf("%d sessions, outcomes %v; want all 30 slots used and the rest denied", n, outcomes)
	}
	t.Logf("outcomes %v", outcomes)
}

// TestStoreRefusesOverCapacity races CreateSession directly: the store's check-and-create is
// one atomic step.
func TestStoreRefusesOverCapacity(t *testing.T) {
	st := newMem()
	var wg sync.WaitGroup
	for i := 0; i < 64; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			st.CreateSession(context.Background(), broker.Session{ID: fmt.Sprint(i), Machine: "m", State: broker.StatePending}, 5)
		}()
	}
	wg.Wait()
	if n := st.Count("m"); n != 5 {
		t.Fatalf("store holds %d sessions on m, want exactly max_sessions 5", n)
	}
}
