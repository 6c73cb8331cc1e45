package api

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

	"github.com/frontdoor-vdi/frontdoor/configs"
)

// The console's single sign-on: GET ssoLoginPath sends the browser to the provider with the
// authorization code flow (state, nonce, PKCE S256), and the provider sends it back to
// configs.OIDCCallbackPath, where the code is exchanged (with the client's secret when it
// has one) and the ID token checked as the launch API checks it. The user must be one the
// configuration lists as an admin or a monitor.
const ssoLoginPath = "/console/oidc/login"

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

// ssoEnabled reports whether the console offers single sign-on.
func (a *Admin) ssoEnabled() bool {
	return a.logins.sso != nil && a.o.Config.Site.Auth.OIDC.RedirectURL != ""
}

// routeSSO adds the console's single sign-on routes.
func (a *Admin) routeSSO() {
	a.mux.HandleFunc("GET "+ssoLoginPath, a.ssoStart)
	a.mux.HandleFunc("GET "+configs.OIDCCallbackPath, a.ssoCallback)
}

// consoleSSO is the console's flow.
func (a *Admin) consoleSSO() ssoFlow {
	return ssoFlow{logins: a.logins, redirect: a.o.Config.Site.Auth.OIDC.RedirectURL, cookiePath: "/console/oidc/",
		accept: func(sl ssoLogin) error {
			if !sl.listed || !mayConsole(sl.user) {
				return fmt.Errorf("%w: %q may not use the console (only users the configuration lists as admins or monitors, bound by their oidc_subject)", errNoLogin, sl.name)
			}
			return nil
		}}
}

func (a *Admin) ssoStart(w http.ResponseWriter, r *http.Request) {
	if !a.ssoEnabled() {
		http.NotFound(w, r)
		return
	}
	if msg, code := a.consoleSSO().start(w, r); code != 0 {
		a.renderLogin(w, msg, code)
	}
}

func (a *Admin) ssoCallback(w http.ResponseWriter, r *http.Request) {
	if !a.ssoEnabled() {
		http.NotFound(w, r)
		return
	}
	sl, err := a.consoleSSO().finish(w, r)
	if err != nil {
		var th throttledError
		if !errors.As(err, &th) && !errors.Is(err, errLoginBusy) {
			a.log.Warn("console single sign-on refused", "from", clientAddr(r), "err", err)
		}
		a.renderLogin(w, err.Error(), loginStatus(w, err)) // the login page, as the portal's
		return
	}
	u := sl.user
	id, _ := a.console.start(u)
	http.SetCookie(w, &http.Cookie{Name: consoleCookie, Value: id, Path: "/", HttpOnly: true, Secure: true, SameSite: http.SameSiteStrictMode})
	a.log.Info("console login", "user", u.Name, "role", roleOf(u), "from", clientAddr(r), "via", "sso")
	a.recordLogin(r, u, "single sign-on")
	continuePage(w, "/site", "Continue to the console")
}

// continuePage takes the browser on to to with a page of this site: the navigation that
// brought it here came from the provider's site, and a Strict session cookie is not sent with
// the redirects of such a navigation, so a redirect from here would arrive without it.
func continuePage(w http.ResponseWriter, to, what string) {
	securityHeaders(w)
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	fmt.Fprint(w, `<!doctype html><html lang="en"><head><meta charset="utf-8"><meta http-equiv="refresh" content="0;url=`+to+`">`+
		`<title>frontdoor · signed in</title></head><body><p>Signed in. <a href="`+to+`" id="continue">`+what+`</a>.</p></body></html>`)
}

// errSSOState: a callback without the login under way that its state names, or from another
// browser than the one that started it.
var errSSOState = errors.New("this sign-in was not started here, or took too long: start it again")

// ssoFlow is the authorization code flow of a web page's single sign-on (the console's, the
// portal's): start sends the browser to the provider (state, nonce, PKCE S256), finish takes
// its answer at the redirect URI, exchanges the code (with the client's secret when it has
// one) and checks the ID token as the launch API checks it.
type ssoFlow struct {
	logins     *authenticator
	redirect   string // the redirect URI registered at the provider
	cookiePath string // the redirect URI's directory: the state cookie is sent there only
	// accept refuses a login the provider vouched for that may not sign in here; its refusal
	// counts against the source as a wrong password does.
	accept func(ssoLogin) error
}

// start sends the browser to the provider; it returns what to tell the user, and the status,
// when it cannot (code 0: sent).
func (f ssoFlow) start(w http.ResponseWriter, r *http.Request) (string, int) {
	p, _, err := f.logins.sso.ready(r.Context())
	if err != nil {
		return err.Error(), http.StatusServiceUnavailable
	}
	cfg, err := f.logins.sso.oauth2Config(p, f.redirect)
	if err != nil {
		f.logins.log.Error("the OIDC client secret cannot be read", "err", err)
		return "single sign-on is not available: the client secret cannot be read", http.StatusServiceUnavailable
	}
	pl := pendingLogin{state: randomHex(), nonce: randomHex(), verifier: oauth2.GenerateVerifier()}
	http.SetCookie(w, &http.Cookie{Name: ssoStateCookie, Value: pl.cookie(), Path: f.cookiePath, MaxAge: int(ssoStateTTL / time.Second),
		HttpOnly: true, Secure: true, SameSite: http.SameSiteLaxMode})
	http.Redirect(w, r, cfg.AuthCodeURL(pl.state, oauth2.S256ChallengeOption(pl.verifier), oidc.Nonce(pl.nonce)), http.StatusFound)
	return "", 0
}

// finish checks the provider's answer r, throttled as the APIs' logins (failures count
// against the source), and returns the login it vouches for.
func (f ssoFlow) finish(w http.ResponseWriter, r *http.Request) (ssoLogin, error) {
	q := r.URL.Query()
	http.SetCookie(w, &http.Cookie{Name: ssoStateCookie, Value: "", Path: f.cookiePath, MaxAge: -1, HttpOnly: true, Secure: true, SameSite: http.SameSiteLaxMode})
	src := clientAddr(r)
	key := ssoKey(src)
	if _, err := f.logins.guard.admit(r.Context(), src, key); err != nil {
		return ssoLogin{}, err
	}
	sl, err := f.check(r.Context(), r, q.Get("state"), q.Get("code"), q.Get("error"))
	if err == nil {
		err = f.accept(sl)
	}
	f.logins.guard.done(src, key, err != nil && !errors.Is(err, errSSOUnavailable))
	return sl, err
}

// check checks a callback: its state against the sign-in this browser started (its cookie),
// then exchanges the code and checks the ID token.
func (f ssoFlow) check(ctx context.Context, r *http.Request, state, code, providerErr string) (ssoLogin, error) {
	c, err := r.Cookie(ssoStateCookie)
	if err != nil {
		return ssoLogin{}, errSSOState
	}
	pl, ok := parsePending(c.Value)
	if !ok || state == "" || subtle.ConstantTimeCompare([]byte(pl.state), []byte(state)) != 1 {
		return ssoLogin{}, errSSOState
	}
	if providerErr != "" {
		return ssoLogin{}, fmt.Errorf("the identity provider refused: %.100s", providerErr)
	}
	p, _, err := f.logins.sso.ready(ctx)
	if err != nil {
		return ssoLogin{}, err
	}
	cfg, err := f.logins.sso.oauth2Config(p, f.redirect)
	if err != nil {
		return ssoLogin{}, errSSOUnavailable
	}
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	tok, err := cfg.Exchange(ctx, code, oauth2.VerifierOption(pl.verifier))
	if err != nil {
		return ssoLogin{}, fmt.Errorf("%w: exchanging the code: %v", errNoLogin, err)
	}
	raw, _ := tok.Extra("id_token").(string)
	return f.logins.sso.verify(ctx, raw, pl.nonce)
}

// randomHex returns 128 random bits in hex.
func randomHex() string {
	var b [16]byte
	rand.Read(b[:])
	return hex.EncodeToString(b[:])
}
