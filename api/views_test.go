package api

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/netip"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/frontdoor-vdi/frontdoor/broker"
	"github.com/frontdoor-vdi/frontdoor/health"
	"github.com/frontdoor-vdi/frontdoor/ticket"
	"github.com/frontdoor-vdi/frontdoor/zonemap"
)

// decode reads rec's JSON body into v, or fails with want's status.
func decode(t *testing.T, rec interface {
	Result() *http.Response
}, want int, v any) {
	t.Helper()
	res := rec.Result()
	defer res.Body.Close()
	var raw json.RawMessage
	json.NewDecoder(res.Body).Decode(&raw)
	if res.StatusCode != want {
		t.Fatalf("status %d %s, want %d", res.StatusCode, raw, want)
	}
	if v != nil {
		if err := json.Unmarshal(raw, v); err != nil {
			t.Fatalf("%v in %s", err, raw)
		}
	}
}

// checker builds a health checker of the lab's targets that is not run: every port as it
// starts, until a test overrides a target.
func checker(t *testing.T, s *testSite) *health.Checker {
	t.Helper()
	targets, err := health.TargetsFromConfig(s.cfg)
	if err != nil {
		t.Fatal(err)
	}
	c, err := health.New(targets, health.Deps{Probe: func(context.Context, netip.AddrPort, *health.Check) error { return nil }})
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// GET /v1/admin/gateways lists every gateway in the configuration's order with its verdict,
// override, ports and transitions, newest first.
func TestGatewaysShowPortsAndTransitions(t *testing.T) {
	var c *health.Checker
	s := newTestSite(t, func(o *AdminOptions) {})
	c = checker(t, s)
	s.admin.o.Checker = c
	if err := c.SetOverride("gw-hq-1", health.OverrideDown); err != nil {
		t.Fatal(err)
	}
	if err := c.SetOverride("gw-hq-1", health.OverrideDrain); err != nil {
		t.Fatal(err)
	}
	var gws []GatewayView
	decode(t, s.do(t, "mon", http.MethodGet, "/v1/admin/gateways", ""), http.StatusOK, &gws)
	if len(gws) != len(s.cfg.Gateways) {
		t.Fatalf("%d gateways, want the site's %d", len(gws), len(s.cfg.Gateways))
	}
	g := gws[0]
	if g.Name != s.cfg.Gateways[0].Name || g.Name != "gw-hq-1" || g.Zone != "hq" || g.Address == "" || g.Node == "" {
		t.Fatalf("the first gateway: %+v", g)
	}
	if g.Override != "drain" || g.Verdict != "draining" || g.Probed != "up" {
		t.Fatalf("gw-hq-1: verdict %s, probed %s, override %s; want draining, up, drain", g.Verdict, g.Probed, g.Override)
	}
	if len(g.Ports) == 0 || g.Ports[0].Port != "10443/tcp" || g.Ports[0].State != "up" || g.Ports[0].Kind != "https" || g.Ports[0].Since.IsZero() {
		t.Fatalf("gw-hq-1's ports: %+v", g.Ports)
	}
	if len(g.Transitions) != 2 || g.Transitions[0].To != "draining" || g.Transitions[0].From != "down" ||
		g.Transitions[0].Reason != "admin" || g.Transitions[0].Port != "" || g.Transitions[1].To != "down" {
		t.Fatalf("gw-hq-1's transitions: %+v, want the drain then the down override, newest first", g.Transitions)
	}
	if gws[1].Override != "none" || len(gws[1].Transitions) != 0 || gws[1].Transitions == nil {
		t.Fatalf("the second gateway: %+v, want no override and an empty list of transitions", gws[1])
	}
	s.admin.o.Checker = nil
	decode(t, s.do(t, "admin", http.MethodGet, "/v1/admin/gateways", ""), http.StatusNotImplemented, nil)
}

// GET /v1/admin/machines tells each machine's load index with its evaluators, maintenance,
// health and registration.
func TestMachinesShowLoadHealthAndRegistration(t *testing.T) {
	var c *health.Checker
	s := newTestSite(t, func(o *AdminOptions) {
		o.Registrations = func() map[string]Registration {
			return map[string]Registration{"vda-hq-1": {Node: "fd-hq-2", Zone: "hq", Reported: time.Unix(1e9, 0)}}
		}
	})
	c = checker(t, s)
	s.admin.o.Checker = c
	c.SetOverride("vda-hq-2", health.OverrideDown)
	s.launch(t, "dave", "desktop", "pc-1")
	if err := s.br.ReportLoad(context.Background(), "vda-hq-1", 50, 30); err != nil {
		t.Fatal(err)
	}
	if err := s.br.SetMaintenance(context.Background(), "vda-east-1", true); err != nil {
		t.Fatal(err)
	}
	var ms []MachineView
	decode(t, s.do(t, "mon", http.MethodGet, "/v1/admin/machines", ""), http.StatusOK, &ms)
	by := map[string]MachineView{}
	sessions := 0
	for _, m := range ms {
		by[m.Name] = m
		sessions += m.Sessions
	}
	if len(ms) != len(s.cfg.Machines) || sessions != 1 {
		t.Fatalf("%d machines with %d sessions, want %d with 1", len(ms), sessions, len(s.cfg.Machines))
	}
	m := by["vda-hq-1"]
	if m.Evaluators.CPU == nil || *m.Evaluators.CPU != 5000 || m.Evaluators.Memory == nil || *m.Evaluators.Memory != 3000 || m.LoadIndex < 5000 {
		t.Fatalf("vda-hq-1: %+v (cpu %v memory %v), want cpu 5000, memory 3000, index ≥ 5000", m, m.Evaluators.CPU, m.Evaluators.Memory)
	}
	if m.Registered == nil || m.Registered.Node != "fd-hq-2" || m.Health != "up" || m.Group == "" || m.MaxSessions == 0 {
		t.Fatalf("vda-hq-1: %+v", m)
	}
	if m := by["vda-hq-2"]; m.Health != "down" || m.Registered != nil {
		t.Fatalf("vda-hq-2: health %q, registered %v; want down, none", m.Health, m.Registered)
	}
	if m := by["vda-east-1"]; !m.Maintenance || m.Unavailable != "maintenance" {
		t.Fatalf("vda-east-1: %+v, want in maintenance", m)
	}
}

// sessionsOf reads GET /v1/admin/sessions?query.
func (s *testSite) sessionsOf(t *testing.T, query string) SessionList {
	t.Helper()
	var l SessionList
	decode(t, s.do(t, "mon", http.MethodGet, "/v1/admin/sessions?"+query, ""), http.StatusOK, &l)
	return l
}

// GET /v1/admin/sessions filters by user, machine, state, mode and gateway, newest first,
// and says when it lists fewer than match.
func TestSessionsAreSearched(t *testing.T) {
	s := newTestSite(t, nil)
	a := s.launch(t, "alice", "desktop", "pc-a")
	time.Sleep(time.Millisecond)
	b := s.launch(t, "bob", "desktop", "pc-b")
	if _, err := s.br.Connected(context.Background(), a, "gw-hq-1"); err != nil {
		t.Fatal(err)
	}
	sa, _ := s.br.Session(a)
	for _, c := range []struct {
		name, query, want string
	}{
		{"all of them, newest first", "", b + " " + a},
		{"a part of a user's name, in any case", "user=LIC", a},
		{"a state", "state=pending", b},
		{"the gateway that carries it", "gateway=gw-hq-1", a},
		{"a machine", "machine=" + sa.Machine, a},
		{"a mode no session has", "mode=direct", ""},
	} {
		t.Run(c.name, func(t *testing.T) {
			l := s.sessionsOf(t, c.query)
			var ids []string
			for _, x := range l.Sessions {
				ids = append(ids, x.ID)
			}
			if got := strings.Join(ids, " "); got != c.want || l.Matched != len(ids) || l.Truncated {
				t.Fatalf("?%s: %q (matched %d, truncated %v), want %q", c.query, got, l.Matched, l.Truncated, c.want)
			}
		})
	}
	x := s.sessionsOf(t, "user=alice").Sessions[0]
	if x.State != "connected" || x.Via != "gw-hq-1" || x.Mode != "gateway" || x.Endpoint != "pc-a" || x.Group == "" || x.Created.IsZero() || !x.Expires.IsZero() {
		t.Fatalf("alice's session: %+v", x)
	}
	for _, q := range []string{"state=gone", "mode=tunnel"} {
		decode(t, s.do(t, "mon", http.MethodGet, "/v1/admin/sessions?"+q, ""), http.StatusBadRequest, nil)
	}
}

// listBroker is a Broker of the given sessions.
type listBroker struct {
	Broker
	ss []broker.Session
}

func (b listBroker) Sessions() []broker.Session { return b.ss }

// More sessions than a list holds: the newest 500, Matched all, Truncated.
func TestSessionListsAreCapped(t *testing.T) {
	s := newTestSite(t, nil)
	var ss []broker.Session
	now := time.Now()
	for i := range maxListedSessions + 20 {
		ss = append(ss, broker.Session{ID: fmt.Sprintf("s%04d", i), User: "u", Machine: "m", State: broker.StateConnected, Created: now.Add(time.Duration(i) * time.Second)})
	}
	s.admin.o.Broker = listBroker{Broker: s.br, ss: ss}
	l := s.sessionsOf(t, "")
	if len(l.Sessions) != maxListedSessions || l.Matched != maxListedSessions+20 || !l.Truncated || l.Sessions[0].ID != fmt.Sprintf("s%04d", maxListedSessions+19) {
		t.Fatalf("%d listed of %d matched, truncated %v, first %s", len(l.Sessions), l.Matched, l.Truncated, l.Sessions[0].ID)
	}
}

// An admin logs a session off as the launch API does — slot freed, tickets revoked, the
// node told to cut its channels — and disconnects a connected one: kept, its tickets until
// then revoked; both are in the audit log; a monitor may do neither.
func TestAdminsLogOffAndDisconnectSessions(t *testing.T) {
	audit := NewMemoryAudit(100)
	var cut []string
	s := newTestSite(t, func(o *AdminOptions) {
		o.Audit = audit
		o.OnLogoff = func(s broker.Session) { cut = append(cut, s.ID) }
	})
	s.admin.o.Verifier = s.verifier
	ttl := s.cfg.Site.Tickets.ReconnectTTL.D()
	ticketOf := func(id string) ticket.Claims {
		_, c, err := s.signer.Issue(ticket.Claims{Kind: ticket.Reconnect, Session: id}, ttl)
		if err != nil {
			t.Fatal(err)
		}
		return c
	}
	a, b := s.launch(t, "alice", "desktop", "pc-a"), s.launch(t, "bob", "desktop", "pc-b")
	ta, tb := ticketOf(a), ticketOf(b)
	time.Sleep(2 * time.Millisecond) // the tickets are issued before the actions, to the ms
	if _, err := s.br.Connected(context.Background(), b, "gw-hq-1"); err != nil {
		t.Fatal(err)
	}

	decode(t, s.do(t, "mon", http.MethodPost, "/v1/admin/sessions/"+a+"/logoff", ""), http.StatusForbidden, nil)
	decode(t, s.do(t, "admin", http.MethodPost, "/v1/admin/sessions/nope/logoff", ""), http.StatusNotFound, nil)
	decode(t, s.do(t, "admin", http.MethodPost, "/v1/admin/sessions/"+a+"/disconnect", ""), http.StatusConflict, nil) // pending

	var got SessionAction
	decode(t, s.do(t, "admin", http.MethodPost, "/v1/admin/sessions/"+a+"/logoff", ""), http.StatusOK, &got)
	if got.State != "ended" || got.User != "alice" {
		t.Fatalf("logoff: %+v", got)
	}
	if _, ok := s.br.Session(a); ok || len(cut) != 1 || cut[0] != a || !s.verifier.Revoked(ta) {
		t.Fatalf("after the logoff: session kept %v, channels cut for %v, tickets revoked %v", ok, cut, s.verifier.Revoked(ta))
	}

	decode(t, s.do(t, "admin", http.MethodPost, "/v1/admin/sessions/"+b+"/disconnect", ""), http.StatusOK, &got)
	sb, ok := s.br.Session(b)
	if got.State != "disconnected" || !ok || sb.State != broker.StateDisconnected || sb.Expires.IsZero() {
		t.Fatalf("disconnect: %+v, session %+v", got, sb)
	}
	if !s.verifier.Revoked(tb) {
		t.Fatal("the disconnected session's ticket still opens channels")
	}
	if fresh := ticketOf(b); s.verifier.Revoked(fresh) {
		t.Fatal("a ticket issued after the disconnect (the client's next launch) is refused")
	}
	if len(cut) != 1 {
		t.Fatalf("a disconnect ended the session at the node: %v", cut)
	}
	l, _ := audit.List(context.Background(), 10, time.Time{})
	if got := actions(l); got != "session.disconnect "+b+", session.logoff "+a {
		t.Fatalf("audit log: %s", got)
	}
	if !strings.Contains(l[1].Detail, "alice") || !strings.Contains(l[0].Detail, "gw-hq-1") {
		t.Fatalf("audit details: %q, %q", l[1].Detail, l[0].Detail)
	}
}

// POST /v1/admin/explain answers the broker's decision for a launch without making it, with
// the trace explain prints and where the client's address puts it; monitors may ask.
func TestExplainAnswersTheDecisionAndItsTrace(t *testing.T) {
	s := newTestSite(t, nil)
	zm, err := zonemap.FromConfig(s.cfg)
	if err != nil {
		t.Fatal(err)
	}
	s.admin.o.Locate = zm.Lookup
	existing := s.launch(t, "bob", "desktop", "pc-b")
	var e Explanation
	decode(t, s.do(t, "mon", http.MethodPost, "/v1/admin/explain", `{"user": "dave", "resource": "desktop", "client_ip": "127.2.0.7", "endpoint": "pc-d"}`), http.StatusOK, &e)
	if e.Outcome != broker.OutcomeNew || e.Session != "" || e.Machine == "" || e.StepLabel == "" || e.LocationZone != "east" {
		t.Fatalf("explain: %+v", e)
	}
	if len(e.Trace) < 2 || e.Trace[0] != "client 127.2.0.7: location zone east (range 127.2.0.0/16)" || !strings.Contains(e.Text, "trace:\n  "+e.Trace[0]) {
		t.Fatalf("trace %q\ntext %s", e.Trace, e.Text)
	}
	if n := len(s.br.Sessions()); n != 1 {
		t.Fatalf("the explain made a session: %d sessions", n)
	}
	decode(t, s.do(t, "admin", http.MethodPost, "/v1/admin/explain", `{"user": "bob", "resource": "desktop", "location_zone": "hq", "endpoint": "pc-b"}`), http.StatusOK, &e)
	if e.Outcome != broker.OutcomeReconnect || e.Session != existing || !strings.Contains(e.Text, "session: "+existing) {
		t.Fatalf("bob's explain: %+v", e)
	}
	decode(t, s.do(t, "admin", http.MethodPost, "/v1/admin/explain", `{"user": "nobody", "resource": "desktop"}`), http.StatusOK, &e)
	if e.Outcome != broker.OutcomeDenied || e.Reason == "" {
		t.Fatalf("an unknown user's explain: %+v", e)
	}
	for _, body := range []string{`{"user": "dave"}`, `{"user": "dave", "resource": "desktop", "client_ip": "x"}`,
		`{"user": "dave", "resource": "desktop", "client_ip": "127.2.0.7", "location_zone": "hq"}`} {
		decode(t, s.do(t, "admin", http.MethodPost, "/v1/admin/explain", body), http.StatusBadRequest, nil)
	}
}

const drillJSON = `{"started": "2026-12-01T10:00:00Z", "results": [
 {"scenario": "gateway-power-off", "mode": "gateway", "criterion": "gateway powered off", "expected": "back within 3 s", "actual": "back after 1.2 s", "pass": true, "clients": []},
 {"scenario": "gateway-power-off", "mode": "direct", "criterion": "gateway powered off", "expected": "remains connected", "actual": "remained connected", "pass": true}]}`

// Drill reports: an admin uploads one (kept once however often), everyone lists and reads
// them, what is no drill report or too large is refused, and the upload is audited.
func TestDrillReportsAreUploadedListedAndRead(t *testing.T) {
	audit := NewMemoryAudit(100)
	dir := filepath.Join(t.TempDir(), "drills")
	s := newTestSite(t, func(o *AdminOptions) { o.Audit, o.DrillDir = audit, dir })
	var list []DrillSummary
	decode(t, s.do(t, "mon", http.MethodGet, "/v1/admin/drills", ""), http.StatusOK, &list)
	if len(list) != 0 || list == nil {
		t.Fatalf("before any upload: %v, want an empty list", list)
	}
	decode(t, s.do(t, "mon", http.MethodPost, "/v1/admin/drills", drillJSON), http.StatusForbidden, nil)
	var sum DrillSummary
	decode(t, s.do(t, "admin", http.MethodPost, "/v1/admin/drills", drillJSON), http.StatusCreated, &sum)
	if !sum.Passed || sum.Rows != 2 || !strings.HasPrefix(sum.ID, "20261201T100000Z-") || sum.Received.IsZero() {
		t.Fatalf("upload: %+v", sum)
	}
	decode(t, s.do(t, "admin", http.MethodPost, "/v1/admin/drills", drillJSON), http.StatusOK, nil) // the same again
	failed := strings.Replace(strings.Replace(drillJSON, `"pass": true}]`, `"pass": false}]`, 1), "10:00:00", "11:00:00", 1)
	decode(t, s.do(t, "admin", http.MethodPost, "/v1/admin/drills", failed), http.StatusCreated, nil)
	decode(t, s.do(t, "mon", http.MethodGet, "/v1/admin/drills", ""), http.StatusOK, &list)
	if len(list) != 2 || list[0].Passed || !list[1].Passed || list[1].ID != sum.ID {
		t.Fatalf("list: %+v, want the failed 11:00 drill, then the passed one", list)
	}
	rec := s.do(t, "mon", http.MethodGet, "/v1/admin/drills/"+sum.ID, "")
	if rec.Code != http.StatusOK || rec.Body.String() != drillJSON || rec.Header().Get("Content-Type") != "application/json" {
		t.Fatalf("GET the report: %d %q", rec.Code, rec.Body.String())
	}
	decode(t, s.do(t, "mon", http.MethodGet, "/v1/admin/drills/..%2f..%2fetc", ""), http.StatusNotFound, nil)
	decode(t, s.do(t, "mon", http.MethodGet, "/v1/admin/drills/20261201T100000Z-000000000000", ""), http.StatusNotFound, nil)
	for _, body := range []string{`{}`, `[]`, `{"started": "2026-12-01T10:00:00Z", "results": []}`,
		`{"started": "2026-12-01T10:00:00Z", "results": [{"scenario": "x", "mode": "both"}]}`, drillJSON + drillJSON} {
		decode(t, s.do(t, "admin", http.MethodPost, "/v1/admin/drills", body), http.StatusBadRequest, nil)
	}
	big := `{"started": "2026-12-01T10:00:00Z", "pad": "` + strings.Repeat("x", maxDrillReport) + `", "results": []}`
	decode(t, s.do(t, "admin", http.MethodPost, "/v1/admin/drills", big), http.StatusRequestEntityTooLarge, nil)
	if n, _ := os.ReadDir(dir); len(n) != 2 {
		t.Fatalf("%d files kept, want 2", len(n))
	}
	l, _ := audit.List(context.Background(), 10, time.Time{})
	if len(l) != 2 || l[0].Action != "drill.upload" || !strings.Contains(l[0].Detail, "failed") {
		t.Fatalf("audit: %+v", l)
	}
	// A list parses only the reports that came or changed since the last (the review found
	// every stored report parsed at each call: up to 200 of 4 MiB).
	s.admin.drills.mu.Lock()
	parsed := s.admin.drills.parses
	s.admin.drills.mu.Unlock()
	decode(t, s.do(t, "mon", http.MethodGet, "/v1/admin/drills", ""), http.StatusOK, &list)
	s.admin.drills.mu.Lock()
	again := s.admin.drills.parses - parsed
	s.admin.drills.mu.Unlock()
	if len(list) != 2 || again != 0 {
		t.Fatalf("a list again: %d reports, %d parsed; want 2 and none parsed", len(list), again)
	}
}
