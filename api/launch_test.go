package api

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/frontdoor-vdi/frontdoor/configs"
)

// GET /v1/ready answers without a login: 503 while the node is not ready, 200 once it is, and
// nothing but the answer; without a Ready function the node is always ready.
func TestReadyAnswersWhetherTheNodeTakesLaunches(t *testing.T) {
	ready := false
	quiet := slog.New(slog.NewTextHandler(io.Discard, nil))
	for _, c := range []struct {
		name string
		o    LaunchOptions
		set  bool
		code int
		body string
	}{
		{"a node whose probes have not decided", LaunchOptions{Ready: func() bool { return ready }}, false, http.StatusServiceUnavailable, "false"},
		{"a node that has decided", LaunchOptions{Ready: func() bool { return ready }}, true, http.StatusOK, "true"},
		{"a node without a readiness check", LaunchOptions{}, false, http.StatusOK, "true"},
	} {
		t.Run(c.name, func(t *testing.T) {
			ready = c.set
			c.o.Config, c.o.Logger = &configs.Config{}, quiet
			rec := httptest.NewRecorder()
			NewLaunch(c.o).ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/v1/ready", nil))
			var got map[string]bool
			if err := json.Unmarshal(rec.Body.Bytes(), &got); err != nil || len(got) != 1 {
				t.Fatalf("body %q: want one field, ready (%v)", rec.Body.String(), err)
			}
			if rec.Code != c.code || fmt.Sprint(got["ready"]) != c.body {
				t.Fatalf("GET /v1/ready: %d %q, want %d %q", rec.Code, rec.Body.String(), c.code, c.body)
			}
		})
	}
}

// A site that lets in password hashes below bcrypt's default cost is told so, once, when its
// launch API starts; a site at the default is not.
func TestALoweredMinimumPasswordCostIsWarned(t *testing.T) {
	for _, c := range []struct {
		cost int
		warn bool
	}{{4, true}, {9, true}, {configs.DefaultMinPasswordCost, false}, {12, false}} {
		var logs bytes.Buffer
		cfg := &configs.Config{Site: configs.Site{Auth: configs.Auth{MinPasswordCost: c.cost}}}
		NewLaunch(LaunchOptions{Config: cfg, Logger: slog.New(slog.NewTextHandler(&logs, nil))})
		if got := strings.Count(logs.String(), "level=WARN") == 1 && strings.Contains(logs.String(), "site.auth.min_password_cost"); got != c.warn {
			t.Errorf("min_password_cost %d: warned %v, want %v; log:\n%s", c.cost, got, c.warn, logs.String())
		}
	}
}
