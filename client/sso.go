package client

import (
	"context"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"time"

	"github.com/coreos/go-oidc/v3/oidc"
	"golang.org/x/oauth2"
)

// SSO is a single sign-on login through the site's identity provider, as native apps sign
// in (RFC 8252): the authorization code flow with PKCE (RFC 7636, S256) and a redirect to a
// listener of its own on 127.0.0.1. The front door says which provider and client to use
// (its launch API's /v1/login/oidc); the user signs in in a browser at the URL Open is
// given, and Login returns the provider's ID token, for Launcher.Token.
type SSO struct {
	// LaunchURL is a front door's launch API, "https://host:port".
	LaunchURL string
	// RootCAs verifies the front door (nil: the system pool). The provider is verified
	// with the system pool.
	RootCAs *x509.CertPool
	// Open shows the user the provider's login page, whose URL it is given: it prints it,
	// or opens a browser. Required.
	Open func(url string) error
	// Timeout bounds the wait for the user to sign in. Default: 5 minutes.
	Timeout time.Duration
}

// ssoInfo is the front door's answer at /v1/login/oidc (logins.OIDCInfo).
type ssoInfo struct {
	Issuer   string   `json:"issuer"`
	ClientID string   `json:"client_id"`
	Scopes   []string `json:"scopes"`
}

// ErrNoSSO is Login's error at a front door whose site has no single sign-on.
var ErrNoSSO = errors.New("the site has no single sign-on")

// Login runs the login and returns the ID token.
func (s SSO) Login(ctx context.Context) (string, error) {
	info, err := s.info(ctx)
	if err != nil {
		return "", err
	}
	provider, err := oidc.NewProvider(ctx, info.Issuer)
	if err != nil {
		return "", fmt.Errorf("single sign-on: the identity provider %s: %w", info.Issuer, err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", fmt.Errorf("single sign-on: a listener for the browser's redirect: %w", err)
	}
	defer ln.Close()
	cfg := oauth2.Config{ClientID: info.ClientID, Endpoint: provider.Endpoint(), Scopes: info.Scopes,
		RedirectURL: "http://" + ln.Addr().String() + "/callback"}
	state, nonce, verifier := random(), random(), oauth2.GenerateVerifier()
	codes := make(chan callback, 1)
	srv := &http.Server{Handler: callbackHandler(state, codes), ReadHeaderTimeout: 5 * time.Second}
	go srv.Serve(ln)
	defer srv.Close()
	if err := s.Open(cfg.AuthCodeURL(state, oauth2.S256ChallengeOption(verifier), oidc.Nonce(nonce))); err != nil {
		return "", fmt.Errorf("single sign-on: %w", err)
	}
	timeout := s.Timeout
	if timeout <= 0 {
		timeout = 5 * time.Minute
	}
	wait := time.NewTimer(timeout)
	defer wait.Stop()
	var cb callback
	select {
	case cb = <-codes:
	case <-wait.C:
		return "", fmt.Errorf("single sign-on: nobody signed in within %s", timeout)
	case <-ctx.Done():
		return "", ctx.Err()
	}
	if cb.err != "" {
		return "", fmt.Errorf("single sign-on: the identity provider refused: %s", cb.err)
	}
	tok, err := cfg.Exchange(ctx, cb.code, oauth2.VerifierOption(verifier))
	if err != nil {
		return "", fmt.Errorf("single sign-on: exchanging the code: %w", err)
	}
	raw, _ := tok.Extra("id_token").(string)
	if raw == "" {
		return "", errors.New("single sign-on: the identity provider sent no ID token")
	}
	id, err := provider.Verifier(&oidc.Config{ClientID: info.ClientID}).Verify(ctx, raw)
	if err != nil {
		return "", fmt.Errorf("single sign-on: the ID token: %w", err)
	}
	if id.Nonce != nonce {
		return "", errors.New("single sign-on: the ID token is not this login's (nonce)")
	}
	return raw, nil
}

// info asks the front door which provider and client to sign in with.
func (s SSO) info(ctx context.Context) (ssoInfo, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, strings.TrimSuffix(s.LaunchURL, "/")+"/v1/login/oidc", nil)
	if err != nil {
		return ssoInfo{}, err
	}
	hc := &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{
		TLSClientConfig: &tls.Config{RootCAs: s.RootCAs, MinVersion: tls.VersionTLS12}}}
	resp, err := hc.Do(req)
	if err != nil {
		return ssoInfo{}, fmt.Errorf("single sign-on: asking %s: %w", s.LaunchURL, err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(io.LimitReader(resp.Body, 64<<10))
	switch resp.StatusCode {
	case http.StatusOK:
	case http.StatusNotFound:
		return ssoInfo{}, ErrNoSSO
	default:
		return ssoInfo{}, fmt.Errorf("single sign-on: asking %s: %s", s.LaunchURL, resp.Status)
	}
	var info ssoInfo
	if err := json.Unmarshal(b, &info); err != nil || info.Issuer == "" || info.ClientID == "" {
		return ssoInfo{}, fmt.Errorf("single sign-on: %s answered no provider", s.LaunchURL)
	}
	return info, nil
}

// callback is what the browser's redirect brought: a code, or the provider's error.
type callback struct{ code, err string }

// callbackHandler takes the first redirect that carries state, and answers the browser.
// Anything else (another path, a wrong state: another page's request) is refused without
// ending the wait.
func callbackHandler(state string, codes chan<- callback) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		q := r.URL.Query()
		if r.URL.Path != "/callback" || q.Get("state") != state {
			http.Error(w, "not this login's", http.StatusBadRequest)
			return
		}
		cb := callback{code: q.Get("code"), err: q.Get("error")}
		if cb.code == "" && cb.err == "" {
			cb.err = "no code"
		}
		select {
		case codes <- cb:
		default: // one came already
		}
		w.Header().Set("Content-Type", "text/plain; charset=utf-8")
		io.WriteString(w, "frontdoor: signed in. You may close this window and return to the terminal.\n")
	})
}

// random returns 128 random bits in hex.
func random() string {
	var b [16]byte
	rand.Read(b[:])
	return hex.EncodeToString(b[:])
}
