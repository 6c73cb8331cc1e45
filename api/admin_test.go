package api

import (
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/frontdoor-vdi/frontdoor/configs"
	"github.com/prometheus/client_golang/prometheus"
)

// /metrics answers admins only: it names machines and gateways and shows the site's load.
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
