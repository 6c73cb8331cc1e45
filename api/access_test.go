package api

import (
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/frontdoor-vdi/frontdoor/zonemap"
)

// A launch an access rule denies is answered 403 with the rule's name; the rule sees the
// client's address (here its PROXY-less remote address), and explain names the rule too.
func TestAccessRuleDenialNamesTheRule(t *testing.T) {
	cfg, br := labSite(t, `
access_rules:
  - {name: no-kiosk-subnet, action: deny, everyone: true, client_ranges: [127.2.9.0/24]}
`)
	quiet := slog.New(slog.NewTextHandler(io.Discard, nil))
	launch, signer := labLaunch(cfg, br)
	zm, err := zonemap.FromConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	admin, err := NewAdmin(AdminOptions{Config: cfg, Broker: br, Logger: quiet, DrillDir: t.TempDir(), Locate: zm.Lookup,
		Audit: NewMemoryAudit(10), Override: func(string, string) (string, error) { return "", nil }, AdminKeys: AdminKeys{Signer: signer}})
	if err != nil {
		t.Fatal(err)
	}
	post := func(h http.Handler, path, from, user, body string) *httptest.ResponseRecorder {
		req := httptest.NewRequest(http.MethodPost, path, strings.NewReader(body))
		req.RemoteAddr = from
		req.SetBasicAuth(user, "lab")
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, req)
		return rec
	}
	rec := post(launch, "/v1/launch", "127.2.9.7:40000", "alice", `{"resource":"desktop","endpoint":"kiosk"}`)
	if rec.Code != http.StatusForbidden || !strings.Contains(rec.Body.String(), "no-kiosk-subnet") {
		t.Fatalf("a launch from the denied range: %d %s, want 403 naming no-kiosk-subnet", rec.Code, rec.Body)
	}
	if rec := post(launch, "/v1/launch", "127.2.8.7:40000", "alice", `{"resource":"desktop","endpoint":"desk"}`); rec.Code != http.StatusOK {
		t.Fatalf("a launch from another address: %d %s, want 200", rec.Code, rec.Body)
	}
	rec = post(admin, "/v1/admin/explain", "127.0.0.1:40000", "admin", `{"user":"alice","resource":"desktop","client_ip":"127.2.9.7"}`)
	var ex struct {
		Outcome string `json:"outcome"`
		Reason  string `json:"reason"`
	}
	if err := json.Unmarshal(rec.Body.Bytes(), &ex); err != nil || ex.Outcome != "denied" || !strings.Contains(ex.Reason, "no-kiosk-subnet") {
		t.Fatalf("explain from the denied range: %d %s (%v), want denied naming the rule", rec.Code, rec.Body, err)
	}
}
