package api

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"testing"

	"github.com/frontdoor-vdi/frontdoor/configs"
	"github.com/frontdoor-vdi/frontdoor/pki"
	"github.com/frontdoor-vdi/frontdoor/wire"
)

// fakeDNSSEC answers the admin API's DNSSEC calls as a node does for one signed domain whose
// rollover step is refused.
type fakeDNSSEC struct{}

func (fakeDNSSEC) DNSSECDomains(context.Context) ([]wire.DNSSECDomain, error) { return nil, nil }
func (fakeDNSSEC) DNSSECRollover(_ context.Context, domain string, _ bool) (wire.DNSSECDomain, error) {
	if domain != "vdi.example.com" {
		return wire.DNSSECDomain{}, fmt.Errorf("%s: %w", domain, ErrNotSigned)
	}
	return wire.DNSSECDomain{}, fmt.Errorf("%w: %w", ErrRefused, errors.New("one is under way"))
}

// Bad requests to rotate the CA or roll a DNSSEC key over get clear answers: a step that does
// not exist 400 (never reaching the node), a domain not signed 404, a step that does not
// fit the rotation's state 409.
func TestRotationRequestsAreAnsweredClearly(t *testing.T) {
	cfg := &configs.Config{Users: []configs.User{{Name: "admin", Admin: true, PasswordHash: "$2a$10$hmIm37EQl2GI6WzyFg.kUe2OoNhztKxrxmbZEcRHkzoi.ekBqG9n2"}}}
	var steps []string
	a, err := NewAdmin(AdminOptions{Config: cfg, Logger: slog.New(slog.DiscardHandler), AdminKeys: AdminKeys{DNSSEC: fakeDNSSEC{}, RotateCA: func(_ context.Context, step string) (pki.CAStatus, error) {
		steps = append(steps, step)
		return pki.CAStatus{}, fmt.Errorf("%w: %w", ErrRefused, pki.ErrCARotation)
	}}})
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		name, path, body string
		want             int
		wantIn           string
	}{
		{"a step that does not exist", "/v1/admin/rotate-ca", `{"step": "finish"}`, http.StatusBadRequest, "want start, issue or retire"},
		{"a step the rotation refuses", "/v1/admin/rotate-ca", `{"step": "issue"}`, http.StatusConflict, "CA rotation"},
		{"a rollover without a domain", "/v1/admin/dnssec/rollover", `{}`, http.StatusBadRequest, "domain"},
		{"a rollover of a domain not signed", "/v1/admin/dnssec/rollover", `{"domain": "example.org"}`, http.StatusNotFound, "not a GSLB domain signed"},
		{"a rollover refused", "/v1/admin/dnssec/rollover", `{"domain": "vdi.example.com"}`, http.StatusConflict, "under way"},
	} {
		t.Run(c.name, func(t *testing.T) {
			req := httptest.NewRequest(http.MethodPost, c.path, strings.NewReader(c.body))
			req.Header.Set("Content-Type", "application/json")
			req.SetBasicAuth("admin", "lab")
			rec := httptest.NewRecorder()
			a.ServeHTTP(rec, req)
			if rec.Code != c.want || !strings.Contains(rec.Body.String(), c.wantIn) {
				t.Fatalf("POST %s %s: %d %s, want %d with %q", c.path, c.body, rec.Code, rec.Body.String(), c.want, c.wantIn)
			}
		})
	}
	if !slices.Equal(steps, []string{"issue"}) {
		t.Fatalf("the node was asked for steps %q, want only issue", steps)
	}
}
