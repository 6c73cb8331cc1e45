// Package testidp starts the development OpenID Connect provider (internal/devidp) for a
// test, on 127.0.0.1, with one client.
package testidp

import (
	"testing"

	"github.com/frontdoor-vdi/frontdoor/internal/devidp"
)

// Identity is who the provider logs in (devidp.Identity).
type Identity = devidp.Identity

// Provider is a test's provider: a devidp.Provider and its one client.
type Provider struct {
	*devidp.Provider
	// ClientID is the client it knows; ClientSecret its secret ("" for a public client).
	ClientID, ClientSecret string
}

// Start starts a provider for clientID (and secret, "" for a public client) that accepts the
// given redirect URIs; cleanup stops it. It logs in the Identity named "alice" until Login
// says otherwise, without its login page.
func Start(t testing.TB, clientID, secret string, redirects ...string) *Provider {
	t.Helper()
	p, err := devidp.New("127.0.0.1:0", []devidp.Client{{ID: clientID, Secret: secret, Redirects: redirects}}, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { p.Close() })
	p.Login(Identity{Subject: "alice-id", Username: "alice"})
	return &Provider{Provider: p, ClientID: clientID, ClientSecret: secret}
}

// Token returns a signed ID token for who, with the audience aud and the given nonce.
func (p *Provider) Token(t testing.TB, who Identity, aud, nonce string) string {
	t.Helper()
	tok, err := p.Provider.Token(who, aud, nonce)
	if err != nil {
		t.Fatal(err)
	}
	return tok
}
