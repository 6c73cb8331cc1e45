package api

import (
	"context"
	"crypto/ed25519"
	"crypto/rand"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/frontdoor-vdi/frontdoor/broker"
	"github.com/frontdoor-vdi/frontdoor/configs"
	"github.com/frontdoor-vdi/frontdoor/store/memory"
	"github.com/frontdoor-vdi/frontdoor/ticket"
)

// labHash is the bcrypt hash of "lab" that the lab's users have.
const labHash = "$2a$10$hmIm37EQl2GI6WzyFg.kUe2OoNhztKxrxmbZEcRHkzoi.ekBqG9n2"

// testSite is the lab site's admin API over a broker of a memory store, with a monitor user
// "mon" beside the lab's "admin" (both with the password "lab").
type testSite struct {
	cfg      *configs.Config
	br       *broker.Broker
	verifier *ticket.Verifier
	signer   *ticket.Signer
	admin    *Admin
	quiet    *slog.Logger
}

// newTestSite builds the site; edit, when set, changes the admin's options first.
func newTestSite(t *testing.T, edit func(*AdminOptions)) *testSite {
	t.Helper()
	raw, err := configs.Shipped("lab.yaml")
	if err != nil {
		t.Fatal(err)
	}
	cfg, err := configs.Load("lab.yaml", raw)
	if err != nil {
		t.Fatal(err)
	}
	cfg.Users = append(cfg.Users, configs.User{Name: "mon", Monitor: true, PasswordHash: labHash})
	br, err := broker.New(context.Background(), cfg, memory.New(), time.Now)
	if err != nil {
		t.Fatal(err)
	}
	pub, key, _ := ed25519.GenerateKey(rand.Reader)
	s := &testSite{cfg: cfg, br: br, quiet: slog.New(slog.NewTextHandler(io.Discard, nil)),
		signer: ticket.NewSigner(key, nil), verifier: ticket.NewVerifier(pub, ticket.NewMemoryLedger(0, nil), nil)}
	o := AdminOptions{Config: cfg, Broker: br, Zone: "hq", Node: "fd-hq-1", Logger: s.quiet, AdminKeys: AdminKeys{Signer: s.signer}}
	if edit != nil {
		edit(&o)
	}
	if s.admin, err = NewAdmin(o); err != nil {
		t.Fatal(err)
	}
	return s
}

// do makes a request of the admin API as user (password "lab"; "" for none).
func (s *testSite) do(t *testing.T, user, method, path, body string) *httptest.ResponseRecorder {
	t.Helper()
	req := httptest.NewRequest(method, path, strings.NewReader(body))
	req.RemoteAddr = "192.0.2.10:40000"
	if user != "" {
		req.SetBasicAuth(user, "lab")
	}
	rec := httptest.NewRecorder()
	s.admin.ServeHTTP(rec, req)
	return rec
}

// launch launches resource for user from endpoint and returns the session's id.
func (s *testSite) launch(t *testing.T, user, resource, endpoint string) string {
	t.Helper()
	d, err := s.br.Launch(context.Background(), broker.LaunchRequest{User: user, Resource: resource, Endpoint: endpoint, LocationZone: "hq"})
	if err != nil || d.Outcome == broker.OutcomeDenied {
		t.Fatalf("launching %s for %s: %v %s", resource, user, err, d.Reason)
	}
	return d.Session
}

// console starts a console session of user and returns a request maker that carries its
// cookie and, when csrf is set, its CSRF token.
func (s *testSite) console(t *testing.T, user string) func(method, path, body string, csrf bool) *httptest.ResponseRecorder {
	t.Helper()
	u, ok := s.admin.users[user]
	if !ok {
		t.Fatalf("no user %s", user)
	}
	id, cs := s.admin.console.start(u)
	return func(method, path, body string, csrf bool) *httptest.ResponseRecorder {
		req := httptest.NewRequest(method, path, strings.NewReader(body))
		req.RemoteAddr = "192.0.2.11:40000"
		req.AddCookie(&http.Cookie{Name: consoleCookie, Value: id})
		if csrf {
			req.Header.Set("X-CSRF-Token", cs.csrf)
		}
		rec := httptest.NewRecorder()
		s.admin.ServeHTTP(rec, req)
		return rec
	}
}
