// Package testidp is a small OpenID Connect provider for tests, served on loopback: discovery,
// its signing keys (JWKS), the authorization endpoint and the token endpoint of the
// authorization code flow with PKCE (S256 only). The authorization endpoint asks nothing: it
// logs in the user the test set with Login and redirects at once, as a browser would be
// redirected once its user signed in. Codes are single use and expire after a minute.
package testidp

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"net/url"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	jose "github.com/go-jose/go-jose/v4"
	"github.com/go-jose/go-jose/v4/jwt"
)

// Identity is who the provider logs in: the claims of its ID tokens.
type Identity struct {
	Subject  string   // sub
	Username string   // preferred_username
	Email    string   // email
	Groups   []string // groups
	AMR      []string // amr: the methods of the login, e.g. "pwd", "mfa"
}

// Provider is a running test provider.
type Provider struct {
	// Issuer is the provider's issuer URL (http on loopback).
	Issuer string
	// ClientID is the one client it knows; ClientSecret its secret ("" accepts a public
	// client, which proves itself with PKCE alone).
	ClientID, ClientSecret string

	srv *httptest.Server
	key *ecdsa.PrivateKey
	kid string

	mu       sync.Mutex
	who      Identity
	codes    map[string]grant
	now      func() time.Time
	lifetime time.Duration
	redirect []string // registered redirect URIs; loopback URIs match any port (RFC 8252)
}

// grant is an issued code: what it was asked for.
type grant struct {
	who       Identity
	redirect  string
	challenge string
	nonce     string
	expires   time.Time
}

// Start starts a provider for clientID (and secret, "" for a public client) that accepts the
// given redirect URIs; cleanup stops it. It logs in the Identity named "alice" until Login
// says otherwise.
func Start(t testing.TB, clientID, secret string, redirects ...string) *Provider {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	var b [8]byte
	rand.Read(b[:])
	p := &Provider{ClientID: clientID, ClientSecret: secret, key: key, kid: hex.EncodeToString(b[:]),
		who: Identity{Subject: "alice-id", Username: "alice"}, codes: map[string]grant{},
		now: time.Now, lifetime: time.Hour, redirect: redirects}
	mux := http.NewServeMux()
	mux.HandleFunc("GET /.well-known/openid-configuration", p.discovery)
	mux.HandleFunc("GET /jwks", p.jwks)
	mux.HandleFunc("GET /authorize", p.authorize)
	mux.HandleFunc("POST /token", p.token)
	p.srv = httptest.NewServer(mux)
	p.Issuer = p.srv.URL
	t.Cleanup(p.srv.Close)
	return p
}

// Login sets who the provider logs in from now on.
func (p *Provider) Login(who Identity) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.who = who
}

// SetClock sets the provider's clock (the ID tokens' iat, auth_time and exp).
func (p *Provider) SetClock(now func() time.Time) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.now = now
}

// Token returns a signed ID token for who, with the audience aud and the given nonce, as the
// token endpoint would issue it: for tests that need a token without the flow.
func (p *Provider) Token(t testing.TB, who Identity, aud, nonce string) string {
	t.Helper()
	tok, err := p.sign(who, aud, nonce)
	if err != nil {
		t.Fatal(err)
	}
	return tok
}

func (p *Provider) discovery(w http.ResponseWriter, _ *http.Request) {
	json.NewEncoder(w).Encode(map[string]any{
		"issuer":                                p.Issuer,
		"authorization_endpoint":                p.Issuer + "/authorize",
		"token_endpoint":                        p.Issuer + "/token",
		"jwks_uri":                              p.Issuer + "/jwks",
		"response_types_supported":              []string{"code"},
		"subject_types_supported":               []string{"public"},
		"id_token_signing_alg_values_supported": []string{"ES256"},
		"code_challenge_methods_supported":      []string{"S256"},
	})
}

func (p *Provider) jwks(w http.ResponseWriter, _ *http.Request) {
	json.NewEncoder(w).Encode(jose.JSONWebKeySet{Keys: []jose.JSONWebKey{
		{Key: &p.key.PublicKey, KeyID: p.kid, Algorithm: string(jose.ES256), Use: "sig"}}})
}

// redirectOK reports whether uri is registered; a loopback http URI matches one registered
// with any port.
func (p *Provider) redirectOK(uri string) bool {
	u, err := url.Parse(uri)
	if err != nil {
		return false
	}
	for _, r := range p.redirect {
		ru, err := url.Parse(r)
		if err != nil {
			continue
		}
		if r == uri || (ru.Scheme == "http" && u.Scheme == "http" && ru.Hostname() == "127.0.0.1" &&
			u.Hostname() == "127.0.0.1" && ru.Path == u.Path) {
			return true
		}
	}
	return false
}

func (p *Provider) authorize(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	redirect := q.Get("redirect_uri")
	switch {
	case q.Get("client_id") != p.ClientID:
		http.Error(w, "unknown client", http.StatusBadRequest)
		return
	case !p.redirectOK(redirect):
		http.Error(w, "redirect_uri not registered", http.StatusBadRequest)
		return
	case q.Get("response_type") != "code" || !slices.Contains(splitScope(q.Get("scope")), "openid"):
		http.Error(w, "want response_type=code and scope openid", http.StatusBadRequest)
		return
	case q.Get("code_challenge_method") != "S256" || q.Get("code_challenge") == "":
		http.Error(w, "PKCE S256 required", http.StatusBadRequest)
		return
	}
	var b [16]byte
	rand.Read(b[:])
	code := hex.EncodeToString(b[:])
	p.mu.Lock()
	p.codes[code] = grant{who: p.who, redirect: redirect, challenge: q.Get("code_challenge"),
		nonce: q.Get("nonce"), expires: p.now().Add(time.Minute)}
	p.mu.Unlock()
	to, _ := url.Parse(redirect)
	rq := to.Query()
	rq.Set("code", code)
	rq.Set("state", q.Get("state"))
	to.RawQuery = rq.Encode()
	http.Redirect(w, r, to.String(), http.StatusFound)
}

func splitScope(s string) []string { return strings.Fields(s) }

func (p *Provider) token(w http.ResponseWriter, r *http.Request) {
	if err := r.ParseForm(); err != nil {
		tokenError(w, "invalid_request")
		return
	}
	id, secret, basic := r.BasicAuth()
	if !basic {
		id, secret = r.PostForm.Get("client_id"), r.PostForm.Get("client_secret")
	}
	if id != p.ClientID || (p.ClientSecret != "" && secret != p.ClientSecret) {
		tokenError(w, "invalid_client")
		return
	}
	code := r.PostForm.Get("code")
	p.mu.Lock()
	g, ok := p.codes[code]
	delete(p.codes, code)
	now := p.now()
	p.mu.Unlock()
	sum := sha256.Sum256([]byte(r.PostForm.Get("code_verifier")))
	switch {
	case r.PostForm.Get("grant_type") != "authorization_code" || !ok || now.After(g.expires):
		tokenError(w, "invalid_grant")
		return
	case r.PostForm.Get("redirect_uri") != g.redirect:
		tokenError(w, "invalid_grant")
		return
	case base64.RawURLEncoding.EncodeToString(sum[:]) != g.challenge:
		tokenError(w, "invalid_grant") // the PKCE verifier does not match
		return
	}
	tok, err := p.sign(g.who, p.ClientID, g.nonce)
	if err != nil {
		http.Error(w, err.Error(), http.StatusInternalServerError)
		return
	}
	w.Header().Set("Content-Type", "application/json")
	json.NewEncoder(w).Encode(map[string]any{"access_token": "at-" + code, "token_type": "Bearer",
		"expires_in": int(p.lifetime / time.Second), "id_token": tok})
}

func tokenError(w http.ResponseWriter, code string) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(http.StatusBadRequest)
	json.NewEncoder(w).Encode(map[string]string{"error": code})
}

func (p *Provider) sign(who Identity, aud, nonce string) (string, error) {
	sig, err := jose.NewSigner(jose.SigningKey{Algorithm: jose.ES256, Key: p.key},
		(&jose.SignerOptions{}).WithType("JWT").WithHeader("kid", p.kid))
	if err != nil {
		return "", err
	}
	p.mu.Lock()
	now, life := p.now(), p.lifetime
	p.mu.Unlock()
	claims := map[string]any{
		"iss": p.Issuer, "sub": who.Subject, "aud": aud,
		"iat": now.Unix(), "exp": now.Add(life).Unix(), "auth_time": now.Unix(),
	}
	if nonce != "" {
		claims["nonce"] = nonce
	}
	if who.Username != "" {
		claims["preferred_username"] = who.Username
	}
	if who.Email != "" {
		claims["email"] = who.Email
	}
	if who.Groups != nil {
		claims["groups"] = who.Groups
	}
	if who.AMR != nil {
		claims["amr"] = who.AMR
	}
	return jwt.Signed(sig).Claims(claims).Serialize()
}
