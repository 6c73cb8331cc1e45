package api

import (
	"crypto/ed25519"
	"crypto/rand"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"strings"
	"testing"

	"github.com/frontdoor-vdi/frontdoor/ticket"
)

// fuzzRoutes are the JSON endpoints a body reaches once its login is taken: launch and agent
// API (user alice, the machine's token) and admin API (admin).
var fuzzRoutes = []struct{ api, path string }{
	{"launch", "/v1/launch"},
	{"launch", "/v1/sessions/s-1/logoff"},
	{"launch", "/v1/agent/heartbeat"},
	{"launch", "/v1/agent/certificate"},
	{"launch", "/v1/agent/sessions/s-1/connected"},
	{"admin", "/v1/admin/gateway"},
	{"admin", "/v1/admin/health"},
	{"admin", "/v1/admin/enrolment"},
	{"admin", "/v1/admin/machines/vda-hq-1/maintenance"},
	{"admin", "/v1/admin/explain"},
	{"admin", "/v1/admin/drills"},
}

// FuzzJSONHandlers: a logged-in client's body is still hostile; every JSON endpoint of the
// launch, agent and admin APIs answers it without a panic and without an internal error.
func FuzzJSONHandlers(f *testing.F) {
	cfg, br := labSite(f, "")
	pub, key, _ := ed25519.GenerateKey(rand.Reader)
	quiet := slog.New(slog.NewTextHandler(io.Discard, nil))
	signer, verifier := ticket.NewSigner(key, nil), ticket.NewVerifier(pub, ticket.NewMemoryLedger(0, nil), nil)
	agentKey := []byte("agent-key")
	launch := NewLaunch(LaunchOptions{Config: cfg, Broker: br, Signer: signer, Verifier: verifier, Logger: quiet,
		Gateways: func(zone string) []GatewayEndpoint {
			return []GatewayEndpoint{{Name: "gw", Zone: zone, Addresses: []netip.Addr{netip.MustParseAddr("127.0.0.1")}}}
		}})
	agents := NewAgents(AgentsOptions{Config: cfg, Broker: br, Key: agentKey, Verifier: verifier, SitePublicKey: pub, Logger: quiet})
	admin, err := NewAdmin(AdminOptions{Config: cfg, Broker: br, Logger: quiet, DrillDir: f.TempDir(),
		Audit: NewMemoryAudit(100), Override: func(string, string) (string, error) { return "", nil }, AdminKeys: AdminKeys{Signer: signer}})
	if err != nil {
		f.Fatal(err)
	}
	handlers := map[string]http.Handler{"launch": Handler(launch, agents), "admin": admin}
	for i := range fuzzRoutes {
		f.Add(uint8(i), []byte(`{"resource":"desktop","endpoint":"pc"}`))
		f.Add(uint8(i), []byte(`{"machine":"vda-hq-1","cpu":10,"memory":20,"connected":["s-1"]}`))
		f.Add(uint8(i), []byte(`{"on":false,"group":"desktops"}`))
		f.Add(uint8(i), []byte(`{"gateway":"gw-hq-1","override":"drain"}`))
		f.Add(uint8(i), []byte(`{"machine":"vda-hq-1","csr":"-----BEGIN CERTIFICATE REQUEST-----"}`))
		f.Add(uint8(i), []byte(`{"user":"alice","resource":"desktop","client_ip":"127.2.0.7"}`))
		f.Add(uint8(i), []byte(`{"started":"2026-12-01T10:00:00Z","results":[{"scenario":"s","mode":"gateway","pass":true}]}`))
	}
	f.Fuzz(func(t *testing.T, route uint8, body []byte) {
		rt := fuzzRoutes[int(route)%len(fuzzRoutes)]
		req := httptest.NewRequest(http.MethodPost, rt.path, strings.NewReader(string(body)))
		req.RemoteAddr = "127.1.0.50:40000"
		switch {
		case rt.api == "admin":
			req.SetBasicAuth("admin", "lab")
		case strings.HasPrefix(rt.path, "/v1/agent/"):
			req.Header.Set("Authorization", "Bearer "+AgentToken(agentKey, "vda-hq-1"))
		default:
			req.SetBasicAuth("alice", "lab")
		}
		rec := httptest.NewRecorder()
		handlers[rt.api].ServeHTTP(rec, req)
		if rec.Code == http.StatusInternalServerError {
			t.Fatalf("POST %s %q: %d %s", rt.path, body, rec.Code, rec.Body.String())
		}
		if rec.Code == 0 {
			t.Fatal(fmt.Sprintf("POST %s: no answer", rt.path))
		}
	})
}
