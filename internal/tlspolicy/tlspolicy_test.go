package tlspolicy

import (
	"crypto/tls"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"testing"
)

func TestHandlerKeepsBrowsersOnHTTPS(t *testing.T) {
	h := Handler(http.NotFoundHandler())
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "https://fd.test/nowhere", nil))
	if got := rec.Header().Get("Strict-Transport-Security"); rec.Code != http.StatusNotFound || got != HSTS {
		t.Fatalf("a 404: %d with Strict-Transport-Security %q, want %q on every answer", rec.Code, got, HSTS)
	}
	if got := rec.Header().Get("X-Content-Type-Options"); got != "nosniff" {
		t.Fatalf("a 404: X-Content-Type-Options %q, want nosniff", got)
	}
}

func TestServerOffersAEADSuitesOnly(t *testing.T) {
	var c tls.Config
	Server(&c)
	if c.MinVersion != tls.VersionTLS12 {
		t.Errorf("MinVersion %x, want TLS 1.2", c.MinVersion)
	}
	if len(c.CipherSuites) == 0 || slices.Equal(c.CipherSuites, nil) {
		t.Fatal("no suites set: Go's defaults offer CBC ones")
	}
	for _, id := range c.CipherSuites {
		if s := tls.CipherSuiteName(id); aeadOf(s) == "" {
			t.Errorf("%s offered: not an AEAD suite", s)
		}
	}
}

// aeadOf returns the AEAD cipher a TLS 1.2 suite's name carries, or "".
func aeadOf(name string) string {
	for _, a := range []string{"AES_128_GCM", "AES_256_GCM", "CHACHA20_POLY1305"} {
		if strings.Contains(name, "_WITH_"+a) {
			return a
		}
	}
	return ""
}
