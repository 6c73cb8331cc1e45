package logins

import (
	"context"
	"crypto/rand"
	"crypto/subtle"
	"encoding/hex"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"time"

	"github.com/coreos/go-oidc/v3/oidc"
	"golang.org/x/oauth2"
)

// ssoStateCookie binds a login under way to the browser that started it. SameSite=Lax: the
// provider's redirect back is a top-level navigation from another site, which a Strict
// cookie would not be sent with.
const ssoStateCookie = "frontdoor_sso_state"

// ssoStateTTL bounds a sign-in from the button to the provider's answer.
const ssoStateTTL = 10 * time.Minute

// pendingLogin is a sign-in under way, kept in the browser's ssoStateCookie (HttpOnly, so no
// script reads it): the state the provider must send back, the ID token's nonce, and the
// PKCE verifier. Nothing is kept here, so no flood of started sign-ins can crowd out a real
// one; the provider takes a code once, and the verifier proves it to the one that asked.
type pendingLogin struct{ state, nonce, verifier string }

func (p pendingLogin) cookie() string { return p.state + "." + p.nonce + "." + p.verifier }

func parsePending(v string) (pendingLogin, bool) {
	parts := strings.Split(v, ".")
	if len(parts) != 3 || parts[0] == "" || parts[1] == "" || parts[2] == "" {
		return pendingLogin{}, false
	}
	return pendingLogin{state: parts[0], nonce: parts[1], verifier: parts[2]}, true
}

// errSSOState: a callback without the login under way that its state names, or from another
// browser than the one that started it.
var errSSOState = errors.New("this sign-in was not started here, or took too long: start it again")

// SSOFlow is the authorization code flow of a web page's single sign-on (the console's, the
// portal's): start sends the browser to the provider (state, nonce, PKCE S256), finish takes
// its answer at the redirect URI, exchanges the code (with the client's secret when it has
// one) and checks the ID token as the launch API checks it.
type SSOFlow struct {
	// Authn checks the ID token and throttles the sign-ins.
	Authn      *Authenticator
	Redirect   string // the redirect URI registered at the provider
	CookiePath string // the redirect URI's directory: the state cookie is sent there only
	// Accept refuses a login the provider vouched for that may not sign in here; its refusal
	// counts against the source as a wrong password does.
	Accept func(SSOLogin) error
}

// Start sends the browser to the provider; it returns what to tell the user, and the status,
// when it cannot (code 0: sent).
func (f SSOFlow) Start(w http.ResponseWriter, r *http.Request) (string, int) {
	p, _, err := f.Authn.sso.ready(r.Context())
	if err != nil {
		return err.Error(), http.StatusServiceUnavailable
	}
	cfg, err := f.Authn.sso.oauth2Config(p, f.Redirect)
	if err != nil {
		f.Authn.log.Error("the OIDC client secret cannot be read", "err", err)
		return "single sign-on is not available: the client secret cannot be read", http.StatusServiceUnavailable
	}
	pl := pendingLogin{state: randomHex(), nonce: randomHex(), verifier: oauth2.GenerateVerifier()}
	http.SetCookie(w, &http.Cookie{Name: ssoStateCookie, Value: pl.cookie(), Path: f.CookiePath, MaxAge: int(ssoStateTTL / time.Second),
		HttpOnly: true, Secure: true, SameSite: http.SameSiteLaxMode})
	http.Redirect(w, r, cfg.AuthCodeURL(pl.state, oauth2.S256ChallengeOption(pl.verifier), oidc.Nonce(pl.nonce)), http.StatusFound)
	return "", 0
}

// Finish checks the provider's answer r, throttled as the APIs' logins (failures count
// against the source), and returns the login it vouches for.
func (f SSOFlow) Finish(w http.ResponseWriter, r *http.Request) (SSOLogin, error) {
	q := r.URL.Query()
	http.SetCookie(w, &http.Cookie{Name: ssoStateCookie, Value: "", Path: f.CookiePath, MaxAge: -1, HttpOnly: true, Secure: true, SameSite: http.SameSiteLaxMode})
	src := ClientAddr(r)
	key := ssoKey(src)
	if _, err := f.Authn.guard.admit(r.Context(), src, key); err != nil {
		return SSOLogin{}, err
	}
	sl, err := f.check(r.Context(), r, q.Get("state"), q.Get("code"), q.Get("error"))
	if err == nil {
		err = f.Accept(sl)
	}
	f.Authn.guard.done(src, key, err != nil && !errors.Is(err, ErrSSOUnavailable))
	return sl, err
}

// check checks a callback: its state against the sign-in this browser started (its cookie),
// then exchanges the code and checks the ID token.
func (f SSOFlow) check(ctx context.Context, r *http.Request, state, code, providerErr string) (SSOLogin, error) {
	c, err := r.Cookie(ssoStateCookie)
	if err != nil {
		return SSOLogin{}, errSSOState
	}
	pl, ok := parsePending(c.Value)
	if !ok || state == "" || subtle.ConstantTimeCompare([]byte(pl.state), []byte(state)) != 1 {
		return SSOLogin{}, errSSOState
	}
	if providerErr != "" {
		return SSOLogin{}, fmt.Errorf("the identity provider refused: %.100s", providerErr)
	}
	p, _, err := f.Authn.sso.ready(ctx)
	if err != nil {
		return SSOLogin{}, err
	}
	cfg, err := f.Authn.sso.oauth2Config(p, f.Redirect)
	if err != nil {
		return SSOLogin{}, ErrSSOUnavailable
	}
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	tok, err := cfg.Exchange(ctx, code, oauth2.VerifierOption(pl.verifier))
	if err != nil {
		return SSOLogin{}, fmt.Errorf("%w: exchanging the code: %v", ErrNoLogin, err)
	}
	raw, _ := tok.Extra("id_token").(string)
	return f.Authn.sso.verify(ctx, raw, pl.nonce)
}

// randomHex returns 128 random bits in hex.
func randomHex() string {
	var b [16]byte
	rand.Read(b[:])
	return hex.EncodeToString(b[:])
}
