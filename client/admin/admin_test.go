package admin

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/frontdoor-vdi/frontdoor/internal/testkit"
	"github.com/frontdoor-vdi/frontdoor/wire"
)

func TestMain(m *testing.M) { testkit.Main(m) }

// A call signs in, sends JSON and reads JSON; an answer other than 2xx is an *Error with the
// answer's status and text; an answer is read up to MaxAnswer.
func TestTheClientSpeaksTheAdminAPI(t *testing.T) {
	srv := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if u, p, ok := r.BasicAuth(); !ok || u != "admin" || p != "secret" {
			http.Error(w, "who are you", http.StatusUnauthorized)
			return
		}
		switch r.URL.Path {
		case "/v1/admin/gateway":
			var req wire.ToggleRequest
			if r.Method != http.MethodPost || r.Header.Get("Content-Type") != "application/json" || json.NewDecoder(r.Body).Decode(&req) != nil {
				http.Error(w, "bad request", http.StatusBadRequest)
				return
			}
			if req.Group == "busy" {
				http.Error(w, "the group is being changed", http.StatusConflict)
				return
			}
			json.NewEncoder(w).Encode(map[string]bool{"on": req.On})
		case "/v1/admin/big":
			w.Write([]byte(strings.Repeat("x", MaxAnswer+10)))
		default:
			http.NotFound(w, r)
		}
	}))
	defer srv.Close()
	ctx := context.Background()
	c := &Client{URL: srv.URL, User: "admin", Password: "secret", TLS: srv.Client().Transport.(*http.Transport).TLSClientConfig}

	var got map[string]bool
	if err := c.Post(ctx, "/v1/admin/gateway", wire.ToggleRequest{On: true}, &got); err != nil || !got["on"] {
		t.Fatalf("toggle: %v, %v", got, err)
	}
	var ae *Error
	if err := c.SecureGateway(ctx, "busy", false); !errors.As(err, &ae) || ae.Status != http.StatusConflict || ae.Body != "the group is being changed" {
		t.Fatalf("a refused toggle: %v", err)
	}
	if b, err := c.Call(ctx, http.MethodGet, "/v1/admin/big", nil); err != nil || len(b) != MaxAnswer {
		t.Fatalf("a big answer: %d bytes, %v; want %d", len(b), err, MaxAnswer)
	}
	wrong := &Client{URL: srv.URL, User: "admin", Password: "guess", TLS: c.TLS}
	if err := wrong.Get(ctx, "/v1/admin/status", nil); !errors.As(err, &ae) || ae.Status != http.StatusUnauthorized {
		t.Fatalf("a wrong password: %v", err)
	}
}
