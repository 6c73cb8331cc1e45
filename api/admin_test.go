package api

import (
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/frontdoor-vdi/frontdoor/configs"
	"github.com/frontdoor-vdi/frontdoor/logins"
	"github.com/prometheus/client_golang/prometheus"
	"golang.org/x/crypto/bcrypt"
)

// /metrics answers admins and monitors only: it names machines and gateways and shows the
// site's load.
func TestMetricsNeedAnAdmin(t *testing.T) {
	cfg := &configs.Config{Users: []configs.User{
		{Name: "admin", Admin: true, PasswordHash: "$2a$10$hmIm37EQl2GI6WzyFg.kUe2OoNhztKxrxmbZEcRHkzoi.ekBqG9n2"},
		{Name: "alice", PasswordHash: "$2a$10$hmIm37EQl2GI6WzyFg.kUe2OoNhztKxrxmbZEcRHkzoi.ekBqG9n2"},
	}}
	a, err := NewAdmin(AdminOptions{Config: cfg, Registry: prometheus.NewRegistry(), Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		name, user string
		want       int
	}{
		{"without a login", "", http.StatusUnauthorized},
		{"as a user who is no admin", "alice", http.StatusUnauthorized},
		{"as an admin", "admin", http.StatusOK},
	} {
		t.Run(c.name, func(t *testing.T) {
			req := httptest.NewRequest(http.MethodGet, "/metrics", nil)
			if c.user != "" {
				req.SetBasicAuth(c.user, "lab")
			}
			rec := httptest.NewRecorder()
			a.ServeHTTP(rec, req)
			if rec.Code != c.want {
				t.Fatalf("GET /metrics: %d, want %d", rec.Code, c.want)
			}
		})
	}
}

// Guessing passwords is throttled: after logins.FailuresPerSource wrong passwords from one address
// the next try is answered 429 with a Retry-After, without a comparison; another address may
// still log in, and the right password is still let in from elsewhere.
func TestPasswordGuessingIsThrottled(t *testing.T) {
	cfg := &configs.Config{Users: []configs.User{{Name: "admin", Admin: true}}}
	hash, err := bcrypt.GenerateFromPassword([]byte("lab"), 4)
	if err != nil {
		t.Fatal(err)
	}
	cfg.Users[0].PasswordHash = string(hash)
	a, err := NewAdmin(AdminOptions{Config: cfg, Registry: prometheus.NewRegistry(), Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	if err != nil {
		t.Fatal(err)
	}
	try := func(from, pass string) *httptest.ResponseRecorder {
		req := httptest.NewRequest(http.MethodGet, "/metrics", nil)
		req.RemoteAddr = from + ":40000"
		req.SetBasicAuth("admin", pass)
		rec := httptest.NewRecorder()
		a.ServeHTTP(rec, req)
		return rec
	}
	for i := range logins.FailuresPerSource {
		if rec := try("192.0.2.7", "guess"); rec.Code != http.StatusUnauthorized {
			t.Fatalf("wrong password %d: %d, want 401", i, rec.Code)
		}
	}
	rec := try("192.0.2.7", "lab")
	if rec.Code != http.StatusTooManyRequests || rec.Header().Get("Retry-After") == "" {
		t.Fatalf("after %d wrong passwords, the right one from the same address: %d (Retry-After %q), want 429 with Retry-After", logins.FailuresPerSource, rec.Code, rec.Header().Get("Retry-After"))
	}
	if rec := try("192.0.2.8", "lab"); rec.Code != http.StatusOK {
		t.Fatalf("the right password from another address: %d, want 200", rec.Code)
	}
}

// A body past its endpoint's limit is refused with 413 before it is read whole, one that is
// not the JSON asked for with 400.
func TestOversizedBodiesAreRefused(t *testing.T) {
	cfg := &configs.Config{Users: []configs.User{{Name: "admin", Admin: true, PasswordHash: "$2a$10$hmIm37EQl2GI6WzyFg.kUe2OoNhztKxrxmbZEcRHkzoi.ekBqG9n2"}}}
	quiet := slog.New(slog.NewTextHandler(io.Discard, nil))
	a, err := NewAdmin(AdminOptions{Config: cfg, Logger: quiet})
	if err != nil {
		t.Fatal(err)
	}
	l := NewLaunch(LaunchOptions{Config: cfg, Logger: quiet})
	for _, c := range []struct {
		name string
		h    http.Handler
		path string
		body string
		want int
	}{
		{"a launch of 1 MiB", l, "/v1/launch", `{"resource":"` + strings.Repeat("x", 1<<20) + `"}`, http.StatusRequestEntityTooLarge},
		{"a toggle of 64 KiB", a, "/v1/admin/gateway", `{"group":"` + strings.Repeat("x", 64<<10) + `"}`, http.StatusRequestEntityTooLarge},
		{"a toggle that is no JSON", a, "/v1/admin/gateway", `on`, http.StatusBadRequest},
	} {
		t.Run(c.name, func(t *testing.T) {
			req := httptest.NewRequest(http.MethodPost, c.path, strings.NewReader(c.body))
			req.SetBasicAuth("admin", "lab")
			rec := httptest.NewRecorder()
			c.h.ServeHTTP(rec, req)
			if rec.Code != c.want {
				t.Fatalf("POST %s: %d %s, want %d", c.path, rec.Code, rec.Body.String(), c.want)
			}
		})
	}
}

// APIs that share a Logins share its budget: guesses at the admin API leave the launch API
// of the same process throttled for that address too.
func TestAPIsShareTheirLoginThrottle(t *testing.T) {
	cfg := &configs.Config{Users: []configs.User{{Name: "admin", Admin: true}}}
	hash, err := bcrypt.GenerateFromPassword([]byte("lab"), 4)
	if err != nil {
		t.Fatal(err)
	}
	cfg.Users[0].PasswordHash = string(hash)
	quiet := slog.New(slog.NewTextHandler(io.Discard, nil))
	throttle := &logins.Throttle{}
	a, err := NewAdmin(AdminOptions{Config: cfg, Logins: throttle, Registry: prometheus.NewRegistry(), Logger: quiet})
	if err != nil {
		t.Fatal(err)
	}
	l := NewLaunch(LaunchOptions{Config: cfg, Logins: throttle, Logger: quiet})
	for range logins.FailuresPerSource {
		req := httptest.NewRequest(http.MethodGet, "/metrics", nil)
		req.RemoteAddr = "192.0.2.7:40000"
		req.SetBasicAuth("admin", "guess")
		a.ServeHTTP(httptest.NewRecorder(), req)
	}
	req := httptest.NewRequest(http.MethodGet, "/v1/sessions", nil)
	req.RemoteAddr = "192.0.2.7:40001"
	req.SetBasicAuth("admin", "lab")
	rec := httptest.NewRecorder()
	l.ServeHTTP(rec, req)
	if rec.Code != http.StatusTooManyRequests {
		t.Fatalf("the launch API after %d wrong passwords at the admin API from the same address: %d, want 429", logins.FailuresPerSource, rec.Code)
	}
}
