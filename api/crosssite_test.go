package api

import (
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/frontdoor-vdi/frontdoor/configs"
	"github.com/prometheus/client_golang/prometheus"
	"golang.org/x/crypto/bcrypt"
)

// A write that a browser sent from another site is refused whatever credential rides with
// it (here a cached Basic login): a form posted by another site's page, a fetch that says
// it is cross-site, a body of plain text (finding M1 of the security review: such a form
// toggled the secure gateway). A client that is no browser goes on as before.
func TestAdminWritesFromAnotherSiteAreRefused(t *testing.T) {
	hash, err := bcrypt.GenerateFromPassword([]byte("lab"), 4)
	if err != nil {
		t.Fatal(err)
	}
	cfg := &configs.Config{Users: []configs.User{{Name: "admin", Admin: true, PasswordHash: string(hash)}}}
	a, err := NewAdmin(AdminOptions{Config: cfg, Registry: prometheus.NewRegistry(), Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		name    string
		headers map[string]string
		want    int
	}{
		{"a form from another site", map[string]string{"Origin": "https://evil.example", "Content-Type": "application/x-www-form-urlencoded"}, http.StatusForbidden},
		{"a fetch that says it is cross-site", map[string]string{"Sec-Fetch-Site": "cross-site", "Content-Type": "application/json"}, http.StatusForbidden},
		{"a plain-text body without an origin", map[string]string{"Content-Type": "text/plain"}, http.StatusUnsupportedMediaType},
		{"a page of plain http on this host", map[string]string{"Origin": "http://admin.example", "Content-Type": "application/json"}, http.StatusForbidden},
	} {
		t.Run(c.name, func(t *testing.T) {
			req := httptest.NewRequest(http.MethodPost, "https://admin.example/v1/admin/gateway", strings.NewReader(`{"enabled": false}`))
			req.SetBasicAuth("admin", "lab")
			for k, v := range c.headers {
				req.Header.Set(k, v)
			}
			rec := httptest.NewRecorder()
			a.ServeHTTP(rec, req)
			if rec.Code != c.want {
				t.Fatalf("POST /v1/admin/gateway: %d %s, want %d", rec.Code, rec.Body, c.want)
			}
		})
	}
	// The CLI's request: no browser headers, a JSON body. It gets past the check (whatever
	// the handler then says of a site without gateways to switch).
	req := httptest.NewRequest(http.MethodPost, "https://admin.example/v1/admin/gateway", strings.NewReader(`{"enabled": false}`))
	req.SetBasicAuth("admin", "lab")
	req.Header.Set("Content-Type", "application/json")
	rec := httptest.NewRecorder()
	a.ServeHTTP(rec, req)
	if rec.Code == http.StatusForbidden || rec.Code == http.StatusUnsupportedMediaType {
		t.Fatalf("the CLI's write: %d %s, want it past the cross-site check", rec.Code, rec.Body)
	}
}

// The launch API refuses the same: another site's page must not launch — and so take — a
// user's session, or log one off, with the user's cached login.
func TestLaunchWritesFromAnotherSiteAreRefused(t *testing.T) {
	hash, err := bcrypt.GenerateFromPassword([]byte("lab"), 4)
	if err != nil {
		t.Fatal(err)
	}
	cfg := &configs.Config{Users: []configs.User{{Name: "alice", PasswordHash: string(hash)}}}
	l := NewLaunch(LaunchOptions{Config: cfg, Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	for _, c := range []struct {
		path    string
		headers map[string]string
		want    int
	}{
		{"/v1/launch", map[string]string{"Origin": "https://evil.example", "Content-Type": "application/x-www-form-urlencoded"}, http.StatusForbidden},
		{"/v1/launch", map[string]string{"Content-Type": "text/plain"}, http.StatusUnsupportedMediaType},
		{"/v1/sessions/s-1/logoff", map[string]string{"Sec-Fetch-Site": "cross-site"}, http.StatusForbidden},
	} {
		req := httptest.NewRequest(http.MethodPost, "https://fd.example"+c.path, strings.NewReader(`{"resource":"desktop"}`))
		req.SetBasicAuth("alice", "lab")
		for k, v := range c.headers {
			req.Header.Set(k, v)
		}
		rec := httptest.NewRecorder()
		l.ServeHTTP(rec, req)
		if rec.Code != c.want {
			t.Errorf("POST %s with %v: %d %s, want %d", c.path, c.headers, rec.Code, rec.Body, c.want)
		}
	}
}
