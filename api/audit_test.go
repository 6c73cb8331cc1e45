package api

import (
	"encoding/json"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"
)

// auditOf reads GET /v1/admin/audit with query as user.
func (s *testSite) auditOf(t *testing.T, user, query string) AuditList {
	t.Helper()
	rec := s.do(t, user, http.MethodGet, "/v1/admin/audit?"+query, "")
	if rec.Code != http.StatusOK {
		t.Fatalf("GET /v1/admin/audit?%s as %s: %d %s", query, user, rec.Code, rec.Body.String())
	}
	var l AuditList
	if err := json.Unmarshal(rec.Body.Bytes(), &l); err != nil {
		t.Fatal(err)
	}
	return l
}

func actions(es []AuditEntry) string {
	var out []string
	for _, e := range es {
		out = append(out, e.Action+" "+e.Target)
	}
	return strings.Join(out, ", ")
}

// Every admin write that succeeded is in the audit log — who, from where, at which front
// door, what changed — newest first; a refused one is not; monitors read the log; limit and
// before page through it.
func TestAuditLogListsWhatWasDoneNewestFirst(t *testing.T) {
	audit := NewMemoryAudit(1000)
	s := newTestSite(t, func(o *AdminOptions) {
		o.Audit = audit
		o.Override = func(string, string) (string, error) { return "set at every front door", nil }
	})
	for _, w := range []struct{ user, path, body string }{
		{"admin", "/v1/admin/gateway", `{"on": false, "group": "desktops"}`},
		{"mon", "/v1/admin/gateway", `{"on": true, "group": "desktops"}`}, // refused: not recorded
		{"admin", "/v1/admin/machines/vda-hq-1/maintenance", `{"on": true}`},
		{"admin", "/v1/admin/health", `{"gateway": "gw-hq-1", "override": "drain"}`},
		{"admin", "/v1/admin/enrolment", `{"machine": "vda-hq-2"}`},
		{"admin", "/v1/admin/machines/nope/maintenance", `{"on": true}`}, // 404: not recorded
	} {
		s.do(t, w.user, http.MethodPost, w.path, w.body)
		time.Sleep(time.Millisecond) // distinct times, for before below
	}
	l := s.auditOf(t, "mon", "")
	want := "machine.enrol vda-hq-2, health.override gw-hq-1, machine.maintenance vda-hq-1, secure-gateway desktops"
	if got := actions(l.Entries); got != want || l.More {
		t.Fatalf("audit log: %s (more %v)\nwant %s", got, l.More, want)
	}
	e := l.Entries[3]
	if e.User != "admin" || e.From != "192.0.2.10" || e.Node != "fd-hq-1" || e.Detail != "off for new launches; was on" || e.Time.IsZero() {
		t.Fatalf("the toggle's entry: %+v", e)
	}
	if d := l.Entries[1].Detail; d != "drain; set at every front door" {
		t.Fatalf("the override's detail %q", d)
	}
	page := s.auditOf(t, "admin", "limit=2")
	if got := actions(page.Entries); got != "machine.enrol vda-hq-2, health.override gw-hq-1" || !page.More {
		t.Fatalf("the first page of two: %s (more %v)", got, page.More)
	}
	next := s.auditOf(t, "admin", "limit=2&before="+url.QueryEscape(page.Entries[1].Time.Format(time.RFC3339Nano)))
	if got := actions(next.Entries); got != "machine.maintenance vda-hq-1, secure-gateway desktops" || next.More {
		t.Fatalf("the second page: %s (more %v)", got, next.More)
	}
	for _, q := range []string{"limit=0", "limit=x", "before=yesterday"} {
		if rec := s.do(t, "admin", http.MethodGet, "/v1/admin/audit?"+q, ""); rec.Code != http.StatusBadRequest {
			t.Errorf("GET /v1/admin/audit?%s: %d, want 400", q, rec.Code)
		}
	}
	if rec := s.do(t, "mon", http.MethodPost, "/v1/admin/audit", ""); rec.Code != http.StatusMethodNotAllowed {
		t.Errorf("POST /v1/admin/audit: %d, want 405: the log is append-only, by the API's own actions", rec.Code)
	}
}
