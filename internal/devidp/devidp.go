// Package devidp is a small OpenID Connect provider for development: the lab's (`frontdoor
// lab --sso`) and the tests' (internal/testidp). It serves, over plain HTTP on a loopback
// address, discovery, its signing keys (JWKS), and the authorization and token endpoints of
// the authorization code flow with PKCE (S256 only). It checks no password: its login page
// lists the users it was given, and whoever opens it signs in as the one picked; a test sets
// the user with Login instead, and the page then redirects at once. Never put it in front of
// a real site. Codes are single use and expire after a minute.
package devidp

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"html/template"
	"net"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"sync"
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

// Client is a client the provider knows.
type Client struct {
	// ID is the client's id.
	ID string
	// Secret is its secret; "" for a public client, which proves itself with PKCE alone.
	Secret string
	// Redirects are its redirect URIs; an http one on 127.0.0.1 matches any port (RFC 8252).
	Redirects []string
}

// Provider is a running provider.
type Provider struct {
	// Issuer is the provider's issuer URL (http on loopback).
	Issuer string

	srv     *http.Server
	ln      net.Listener
	key     *ecdsa.PrivateKey
	kid     string
	clients []Client
	users   []Identity // the login page's

	mu       sync.Mutex
	who      *Identity // set by Login: no page, this user
	codes    map[string]grant
	now      func() time.Time
	lifetime time.Duration
}

// grant is an issued code: what it was asked for.
type grant struct {
	client    string
	who       Identity
	redirect  string
	challenge string
	nonce     string
	expires   time.Time
}

// New starts a provider listening on addr (host:port, a loopback address) for clients. Its
// login page lists users; until Login sets one, whoever opens the page picks who signs in.
func New(addr string, clients []Client, users []Identity) (*Provider, error) {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, err
	}
	if a, ok := ln.Addr().(*net.TCPAddr); !ok || !a.IP.IsLoopback() {
		ln.Close()
		return nil, fmt.Errorf("devidp listens on loopback addresses only, not %s", addr)
	}
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		ln.Close()
		return nil, err
	}
	var b [8]byte
	rand.Read(b[:])
	p := &Provider{Issuer: "http://" + ln.Addr().String(), ln: ln, key: key, kid: hex.EncodeToString(b[:]),
		clients: clients, users: users, codes: map[string]grant{}, now: time.Now, lifetime: time.Hour}
	mux := http.NewServeMux()
	mux.HandleFunc("GET /.well-known/openid-configuration", p.discovery)
	mux.HandleFunc("GET /jwks", p.jwks)
	mux.HandleFunc("GET /authorize", p.authorize)
	mux.HandleFunc("POST /authorize", p.authorize)
	mux.HandleFunc("POST /token", p.token)
	p.srv = &http.Server{Handler: http.MaxBytesHandler(mux, 64<<10), ReadHeaderTimeout: 5 * time.Second}
	go p.srv.Serve(ln)
	return p, nil
}

// Close stops the provider.
func (p *Provider) Close() error { return p.srv.Shutdown(context.Background()) }

// Login sets who the provider logs in from now on, without its page.
func (p *Provider) Login(who Identity) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.who = &who
}

// SetClock sets the provider's clock (the ID tokens' iat, auth_time and exp).
func (p *Provider) SetClock(now func() time.Time) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.now = now
}

// Token returns a signed ID token for who, with the audience aud and the given nonce, as the
// token endpoint would issue it: for tests that need a token without the flow.
func (p *Provider) Token(who Identity, aud, nonce string) (string, error) {
	return p.sign(who, aud, nonce)
}

// client returns the client of id.
func (p *Provider) client(id string) (Client, bool) {
	i := slices.IndexFunc(p.clients, func(c Client) bool { return c.ID == id })
	if i < 0 {
		return Client{}, false
	}
	return p.clients[i], true
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

// redirectOK reports whether uri is one of c's; a loopback http URI matches one registered
// with any port.
func (c Client) redirectOK(uri string) bool {
	u, err := url.Parse(uri)
	if err != nil {
		return false
	}
	for _, r := range c.Redirects {
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

// loginPage lists the users to sign in as; the form posts the request's parameters back.
var loginPage = template.Must(template.New("login").Parse(`<!doctype html>
<html lang="en"><head><meta charset="utf-8"><title>Lab identity provider</title>
<style>body{font-family:system-ui,sans-serif;max-width:32rem;margin:3rem auto}button{display:block;margin:.4rem 0;padding:.4rem .8rem;font:inherit}</style>
</head><body><h1>Lab identity provider</h1>
<p>Sign in to <strong>{{.Client}}</strong> as (no password: this provider is for the lab only):</p>
<form method="post">{{range $k, $v := .Query}}<input type="hidden" name="{{$k}}" value="{{$v}}">{{end}}
{{range .Users}}<button name="login_as" value="{{.Username}}">{{.Username}}{{if .Groups}} ({{range $i, $g := .Groups}}{{if $i}}, {{end}}{{$g}}{{end}}){{end}}</button>{{end}}
</form></body></html>`))

func (p *Provider) authorize(w http.ResponseWriter, r *http.Request) {
	if err := r.ParseForm(); err != nil {
		http.Error(w, "bad request", http.StatusBadRequest)
		return
	}
	q := r.Form
	redirect := q.Get("redirect_uri")
	c, known := p.client(q.Get("client_id"))
	switch {
	case !known:
		http.Error(w, "unknown client", http.StatusBadRequest)
		return
	case !c.redirectOK(redirect):
		http.Error(w, "redirect_uri not registered", http.StatusBadRequest)
		return
	case q.Get("response_type") != "code" || !slices.Contains(splitScope(q.Get("scope")), "openid"):
		http.Error(w, "want response_type=code and scope openid", http.StatusBadRequest)
		return
	case q.Get("code_challenge_method") != "S256" || q.Get("code_challenge") == "":
		http.Error(w, "PKCE S256 required", http.StatusBadRequest)
		return
	}
	p.mu.Lock()
	preset := p.who
	p.mu.Unlock()
	var who Identity
	switch {
	case preset != nil:
		who = *preset
	case r.Method == http.MethodPost && q.Get("login_as") != "":
		i := slices.IndexFunc(p.users, func(u Identity) bool { return u.Username == q.Get("login_as") })
		if i < 0 {
			http.Error(w, "no such user", http.StatusBadRequest)
			return
		}
		who = p.users[i]
	default:
		query := map[string]string{}
		for k := range q {
			if k != "login_as" {
				query[k] = q.Get(k)
			}
		}
		w.Header().Set("Content-Type", "text/html; charset=utf-8")
		loginPage.Execute(w, map[string]any{"Client": c.ID, "Query": query, "Users": p.users})
		return
	}
	var b [16]byte
	rand.Read(b[:])
	code := hex.EncodeToString(b[:])
	p.mu.Lock()
	if len(p.codes) > 10000 {
		clear(p.codes) // a flood of unused codes: they are a minute's work to ask again
	}
	p.codes[code] = grant{client: c.ID, who: who, redirect: redirect, challenge: q.Get("code_challenge"),
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
	c, known := p.client(id)
	if !known || (c.Secret != "" && secret != c.Secret) {
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
	case r.PostForm.Get("grant_type") != "authorization_code" || !ok || now.After(g.expires) || g.client != c.ID:
		tokenError(w, "invalid_grant")
		return
	case r.PostForm.Get("redirect_uri") != g.redirect:
		tokenError(w, "invalid_grant")
		return
	case base64.RawURLEncoding.EncodeToString(sum[:]) != g.challenge:
		tokenError(w, "invalid_grant") // the PKCE verifier does not match
		return
	}
	tok, err := p.sign(g.who, c.ID, g.nonce)
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
