package lab

import (
	"context"
	"crypto/tls"
	"net/http"
	"strings"
	"testing"
	"time"
)

// TestClientCertificateLogin: a user may present a client certificate of the site CA instead
// of a password; a certificate for a name that is no configured user is refused.
func TestClientCertificateLogin(t *testing.T) {
	l, _ := startLab(t)
	post := func(user string) int {
		t.Helper()
		c, k, err := l.CA().IssueClient(user, time.Hour)
		if err != nil {
			t.Fatal(err)
		}
		pair, err := tls.X509KeyPair(c, k)
		if err != nil {
			t.Fatal(err)
		}
		hc := &http.Client{Timeout: 30 * time.Second, Transport: &http.Transport{TLSClientConfig: &tls.Config{
			RootCAs: l.CA().Pool(), Certificates: []tls.Certificate{pair}}}}
		resp, err := hc.Post("https://127.42.0.11:9443/v1/launch", "application/json", strings.NewReader(`{"resource":"desktop","endpoint":"e"}`))
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		return resp.StatusCode
	}
	if code := post("carol"); code != http.StatusOK {
		t.Errorf("carol with her certificate: %d, want 200", code)
	}
	if code := post("mallory"); code != http.StatusUnauthorized {
		t.Errorf("a certificate for an unknown user: %d, want 401", code)
	}
	sessions, err := l.Sessions(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	var carol int
	for _, s := range sessions {
		if s.User == "carol" {
			carol++
		}
	}
	if carol != 1 {
		t.Errorf("carol has %d sessions after her certificate launch, want 1", carol)
	}
}
