package api

import (
	"net/http"
	"strings"
	"testing"
)

// Admins read and write the admin API; monitors read it and are refused every write with
// 403 and a message that says why, by password as through a console session; a user who is
// neither is not let in.
func TestMonitorsReadButCannotWrite(t *testing.T) {
	s := newTestSite(t, nil)
	const toggle = `{"on": false, "group": "desktops"}`
	for _, c := range []struct {
		name, user, method, path, body string
		want                           int
	}{
		{"an admin reads the status", "admin", http.MethodGet, "/v1/admin/status", "", http.StatusOK},
		{"a monitor reads the status", "mon", http.MethodGet, "/v1/admin/status", "", http.StatusOK},
		{"a user who is neither is not let in", "alice", http.MethodGet, "/v1/admin/status", "", http.StatusUnauthorized},
		{"nobody is not let in", "", http.MethodGet, "/v1/admin/status", "", http.StatusUnauthorized},
		{"an admin switches the secure gateway", "admin", http.MethodPost, "/v1/admin/gateway", toggle, http.StatusOK},
		{"a monitor may not switch the secure gateway", "mon", http.MethodPost, "/v1/admin/gateway", toggle, http.StatusForbidden},
		{"a monitor may not put a machine in maintenance", "mon", http.MethodPost, "/v1/admin/machines/vda-hq-1/maintenance", `{"on": true}`, http.StatusForbidden},
		{"a monitor may not override health", "mon", http.MethodPost, "/v1/admin/health", `{"gateway": "gw-hq-1", "override": "drain"}`, http.StatusForbidden},
		{"a monitor may not rotate the key", "mon", http.MethodPost, "/v1/admin/rotate-key", ``, http.StatusForbidden},
		{"a monitor may not issue enrolment tickets", "mon", http.MethodPost, "/v1/admin/enrolment", `{"machine": "vda-hq-1"}`, http.StatusForbidden},
		{"a monitor may not revoke a machine", "mon", http.MethodPost, "/v1/admin/machines/vda-hq-1/revoke", ``, http.StatusForbidden},
		{"a monitor's write with a body that is no JSON is refused for the role first", "mon", http.MethodPost, "/v1/admin/gateway", `on`, http.StatusForbidden},
	} {
		t.Run(c.name, func(t *testing.T) {
			rec := s.do(t, c.user, c.method, c.path, c.body)
			if rec.Code != c.want {
				t.Fatalf("%s %s as %q: %d %s, want %d", c.method, c.path, c.user, rec.Code, rec.Body.String(), c.want)
			}
			if c.want == http.StatusForbidden && !strings.Contains(rec.Body.String(), "monitor") {
				t.Fatalf("the refusal does not say why: %s", rec.Body.String())
			}
		})
	}
	if on, _ := s.admin.modes["desktops"]; on {
		t.Fatal("the admin's toggle did not take")
	}
}

// A console session takes its user's role: a monitor's session reads and is refused writes
// (even with the CSRF token), an admin's writes with the token.
func TestConsoleSessionsKeepTheirRole(t *testing.T) {
	s := newTestSite(t, nil)
	mon, adm := s.console(t, "mon"), s.console(t, "admin")
	if rec := mon(http.MethodGet, "/v1/admin/status", "", false); rec.Code != http.StatusOK {
		t.Fatalf("a monitor's console reads the status: %d %s", rec.Code, rec.Body.String())
	}
	if rec := mon(http.MethodPost, "/v1/admin/gateway", `{"on": false}`, true); rec.Code != http.StatusForbidden || !strings.Contains(rec.Body.String(), "monitor") {
		t.Fatalf("a monitor's console switches the secure gateway: %d %s, want 403 naming the role", rec.Code, rec.Body.String())
	}
	if rec := adm(http.MethodPost, "/v1/admin/gateway", `{"on": false}`, false); rec.Code != http.StatusForbidden || !strings.Contains(rec.Body.String(), "CSRF") {
		t.Fatalf("an admin's console write without the CSRF token: %d %s, want 403", rec.Code, rec.Body.String())
	}
	if rec := adm(http.MethodPost, "/v1/admin/gateway", `{"on": false}`, true); rec.Code != http.StatusOK {
		t.Fatalf("an admin's console write with the token: %d %s", rec.Code, rec.Body.String())
	}
}
