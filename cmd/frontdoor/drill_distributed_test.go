package main

import (
	"bytes"
	"context"
	"net/netip"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/frontdoor-vdi/frontdoor/drill"
	"github.com/frontdoor-vdi/frontdoor/internal/testkit"
)

// TestCIDrill runs a CI-sized drill on the distributed lab (an embedded 3-member etcd, one
// serve process of this test binary per node, each front door behind its wire): a gateway
// powered off and the black-screen port failure with the secure gateway ticked, a front door
// powered off (SIGKILL behind a blackhole) ticked and shut down (SIGTERM) unticked, an etcd
// member stopped, a node killed during a launch storm, and a gateway powered off under a
// desktop in the browser (Chromium). It checks what the drill promises
// — back in the SAME session by itself through another gateway, never a loop, no cut at all
// in direct mode or when the site database loses a member, and from the storms' counts no
// machine over max_sessions, no launch ticket admitted twice and no session lost — and leaves
// the timing (≤ 3 s) to the drill's own table: timing is measured, not asserted in tests.
func TestCIDrill(t *testing.T) {
	testkit.Site(t)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	var progress bytes.Buffer
	var results []drill.Result
	for _, c := range []struct{ scenario, mode string }{
		{"gateway-power-off", "gateway"},
		{"port-down", "gateway"},
		{"frontdoor-power-off", "gateway"},
		{"frontdoor-shutdown", "direct"},
		{"etcd-member-down", "gateway"},
		{"node-killed-mid-launch", "gateway"},
		{"browser-gateway-power-off", "gateway"},
	} {
		rep, err := drill.Run(ctx, drill.Options{Scenarios: []string{c.scenario}, Modes: []string{c.mode}, Base: 81, Observe: 8 * time.Second,
			Launches: 120, Binary: os.Args[0], Env: []string{"FRONTDOOR_TEST_MAIN=1"}, Progress: &progress})
		if err != nil {
			t.Fatalf("%s/%s: %v\n%s", c.scenario, c.mode, err, progress.String())
		}
		if len(rep.Results) != 1 {
			t.Fatalf("%s/%s: %d results\n%s", c.scenario, c.mode, len(rep.Results), progress.String())
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
			switch {
			case r.Mode == "direct" || r.Quiet:
				if c.Cut {
					t.Errorf("%s/%s: %s was cut; a direct session sees no front door failure, and no session sees an etcd member go", r.Scenario, r.Mode, c.User)
				}
			default:
				if !c.Cut || !c.Back || !c.SameSession || c.Relaunched {
					t.Errorf("%s/gateway: %s cut=%v back=%v same=%v relaunched=%v; want cut, then back in the same session with its reconnect ticket",
						r.Scenario, c.User, c.Cut, c.Back, c.SameSession, c.Relaunched)
				}
				if c.ViaAfter == c.ViaBefore {
					t.Errorf("%s/gateway: %s is back through the failed gateway %s", r.Scenario, c.User, c.ViaBefore)
				}
			}
		}
		if affected == 0 {
			t.Errorf("%s/%s: no client was on the failed front door", r.Scenario, r.Mode)
		}
		if strings.HasSuffix(r.Scenario, "-launch") || r.Scenario == "etcd-member-down" {
			l := r.Launches
			switch {
			case l == nil:
				t.Errorf("%s: no launch counts", r.Scenario)
			case l.Sessions == 0 || l.OverMax != 0 || l.AdmittedTwice != 0 || l.GatewayTwice != 0 || l.Lost != 0:
				t.Errorf("%s: launches %+v; want sessions, none over max_sessions, no ticket admitted twice, none lost", r.Scenario, *l)
			case r.Scenario == "etcd-member-down" && l.Failed != 0:
				t.Errorf("%s: %d of %d launches failed after the member stopped: %v", r.Scenario, l.Failed, l.Launches, l.Failures)
			}
		}
	}

	// The table and the report files.
	var table bytes.Buffer
	rep := drill.Report{Started: time.Now(), Results: results}
	drill.WriteTable(&table, rep)
	if !strings.Contains(table.String(), "CRITERION") || strings.Count(table.String(), "\n") != len(results)+1 {
		t.Errorf("table:\n%s", table.String())
	}
	dir := t.TempDir()
	if err := drill.WriteFiles(dir, rep); err != nil {
		t.Fatal(err)
	}
	html, _ := os.ReadFile(filepath.Join(dir, "report.html"))
	if bytes.Count(html, []byte("<svg")) != len(results) || !bytes.Contains(html, []byte(`class="fault"`)) {
		t.Errorf("report.html has %d timelines for %d results", bytes.Count(html, []byte("<svg")), len(results))
	}
	t.Logf("\n%s\n%s", progress.String(), table.String())
}

// TestParseRebinds: serve's hidden --rebind flags map the configured addresses they name and
// leave the others alone; a malformed one is an error.
func TestParseRebinds(t *testing.T) {
	fn, err := parseRebinds(nil)
	if err != nil || fn != nil {
		t.Fatalf("no flags: %v, %v; want nil, nil", fn != nil, err)
	}
	fn, err = parseRebinds([]string{"127.81.0.11=127.81.0.111", "127.81.0.12=127.81.0.112"})
	if err != nil {
		t.Fatal(err)
	}
	for in, want := range map[string]string{"127.81.0.11": "127.81.0.111", "127.81.0.12": "127.81.0.112", "127.81.0.1": "127.81.0.1"} {
		if got := fn(netip.MustParseAddr(in)); got.String() != want {
			t.Errorf("rebind %s = %s, want %s", in, got, want)
		}
	}
	for _, bad := range []string{"127.0.0.1", "127.0.0.1=", "x=127.0.0.1", "127.0.0.1:80=127.0.0.2"} {
		if _, err := parseRebinds([]string{bad}); err == nil {
			t.Errorf("--rebind %q accepted", bad)
		}
	}
}
