package drill

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// TestCIDrill runs a CI-sized drill: a gateway powered off with the secure gateway ticked, the
// black-screen port failure, and a front door shut down with it unticked. It checks what the
// drill promises — back in the SAME session by itself, never a loop, and no cut at all in direct
// mode — and leaves the timing (≤ 3 s) to the drill's own table: timing is measured, not
// asserted in tests.
func TestCIDrill(t *testing.T) {
	if testing.Short() {
		t.Skip("drill runs whole sites; skipped with -short")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	var progress bytes.Buffer
	var results []Result
	for _, c := range []struct{ scenario, mode string }{
		{"gateway-power-off", "gateway"},
		{"port-down", "gateway"},
		{"frontdoor-shutdown", "direct"},
	} {
		rep, err := Run(ctx, Options{Scenarios: []string{c.scenario}, Modes: []string{c.mode}, Base: 81, Observe: 8 * time.Second, Progress: &progress})
		if err != nil {
			t.Fatalf("%s/%s: %v\n%s", c.scenario, c.mode, err, progress.String())
		}
		results = append(results, rep.Results...)
	}
	for _, r := range results {
		if r.Error != "" {
			t.Errorf("%s/%s: %s", r.Scenario, r.Mode, r.Error)
			continue
		}
		affected := 0
		for _, c := range r.Clients {
			if !c.Affected {
				continue
			}
			affected++
			switch r.Mode {
			case "direct":
				if c.Cut {
					t.Errorf("%s/direct: %s was cut; a direct session must not see a front door failure", r.Scenario, c.User)
				}
			case "gateway":
				if !c.Cut || !c.Back || !c.SameSession || c.Relaunched {
					t.Errorf("%s/gateway: %s cut=%v back=%v same=%v relaunched=%v; want cut, then back in the same session with its reconnect ticket",
						r.Scenario, c.User, c.Cut, c.Back, c.SameSession, c.Relaunched)
				}
				if c.ViaAfter == r.Target {
					t.Errorf("%s/gateway: %s is back through the failed gateway %s", r.Scenario, c.User, r.Target)
				}
			}
		}
		if affected == 0 {
			t.Errorf("%s/%s: no client was on the failed front door", r.Scenario, r.Mode)
		}
	}

	// The table and the report files.
	var table bytes.Buffer
	rep := Report{Started: time.Now(), Results: results}
	WriteTable(&table, rep)
	if !strings.Contains(table.String(), "CRITERION") || strings.Count(table.String(), "\n") != len(results)+1 {
		t.Errorf("table:\n%s", table.String())
	}
	dir := t.TempDir()
	if err := WriteFiles(dir, rep); err != nil {
		t.Fatal(err)
	}
	html, _ := os.ReadFile(filepath.Join(dir, "report.html"))
	if bytes.Count(html, []byte("<svg")) != len(results) || !bytes.Contains(html, []byte(`class="fault"`)) {
		t.Errorf("report.html has %d timelines for %d results", bytes.Count(html, []byte("<svg")), len(results))
	}
	t.Logf("\n%s", table.String())
}
