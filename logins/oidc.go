package logins

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/coreos/go-oidc/v3/oidc"
	"golang.org/x/oauth2"
	"golang.org/x/text/secure/precis"

	"github.com/frontdoor-vdi/frontdoor/configs"
	"github.com/frontdoor-vdi/frontdoor/ticket"
)

// OIDCPath is where the launch API says, without a login, which OpenID Connect provider and
// client a client signs in with (OIDCInfo); 404 when the site has none.
const OIDCPath = "/v1/login/oidc"

// OIDCInfo is the answer of OIDCPath: what `frontdoor connect --sso` needs to get an ID
// token (the authorization code flow with PKCE through a loopback redirect).
type OIDCInfo struct {
	Issuer   string   `json:"issuer"`
	ClientID string   `json:"client_id"`
	Scopes   []string `json:"scopes"`
}

// errOIDCSecretMode refuses a client secret file that others than its owner may read.
var errOIDCSecretMode = errors.New("the OIDC client secret file may be read by others than its owner (want mode 0600)")

// ErrSSOUnavailable: the provider's discovery document or keys cannot be had now; a login
// with an ID token is answered 503 and counts as no failure.
var ErrSSOUnavailable = errors.New("the identity provider cannot be reached now")

// OIDC verifies the ID tokens of the site's OpenID Connect provider (site.auth.oidc)
// and runs the console's side of the authorization code flow. The provider's discovery
// document is read at the first use, and again after a failure at most every ten seconds, so
// a node starts while its provider is down.
type OIDC struct {
	cfg        configs.OIDC
	userGroups map[string]bool
	// bySubject holds the listed users bound to a subject (oidc_subject); listed maps the
	// listed users' canonical names (canonicalUser) to their names.
	bySubject map[string]configs.User
	listed    map[string]string
	now       func() time.Time
	log       *slog.Logger

	mu       sync.Mutex // guards provider, verifier, failedAt
	provider *oidc.Provider
	verifier *oidc.IDTokenVerifier
	failedAt time.Time
}

func newOIDCLogins(cfg *configs.Config, now func() time.Time, log *slog.Logger) *OIDC {
	o := &OIDC{cfg: cfg.Site.Auth.OIDC, userGroups: map[string]bool{}, now: now, log: log,
		bySubject: map[string]configs.User{}, listed: map[string]string{}}
	for _, g := range cfg.UserGroups {
		o.userGroups[g.Name] = true
	}
	for _, u := range cfg.Users {
		if u.OIDCSubject != "" {
			o.bySubject[u.OIDCSubject] = u
		}
		if c, err := canonicalUser(u.Name); err == nil {
			o.listed[c] = u.Name
		}
		o.listed[u.Name] = u.Name
	}
	return o
}

// discoveryRetry is how long a failed discovery is not tried again.
const discoveryRetry = 10 * time.Second

// ready returns the provider and a verifier of its ID tokens for either of the site's
// clients (their audience is checked in verify).
func (o *OIDC) ready(ctx context.Context) (*oidc.Provider, *oidc.IDTokenVerifier, error) {
	o.mu.Lock()
	defer o.mu.Unlock()
	if o.provider != nil {
		return o.provider, o.verifier, nil
	}
	if !o.failedAt.IsZero() && o.now().Sub(o.failedAt) < discoveryRetry {
		return nil, nil, ErrSSOUnavailable
	}
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	p, err := oidc.NewProvider(ctx, o.cfg.Issuer)
	if err != nil {
		o.failedAt = o.now()
		o.log.Error("reading the identity provider's discovery document: logins with it fail", "issuer", o.cfg.Issuer, "err", err)
		return nil, nil, ErrSSOUnavailable
	}
	o.provider = p
	o.verifier = p.VerifierContext(context.WithoutCancel(ctx), &oidc.Config{SkipClientIDCheck: true, Now: o.now})
	return o.provider, o.verifier, nil
}

// SSOLogin is what an ID token says of a login.
type SSOLogin struct {
	Name string
	// User is the listed user the token's subject is bound to (Listed), else a user of
	// that name alone, whose groups come from the token.
	User    configs.User
	Listed  bool
	Groups  []string // the site's user groups among the token's, mapped
	Factors ticket.Factors
	At      time.Time // auth_time, else iat
}

// OfTheSite refuses a login of a user the configuration does not list and who is in none of
// the site's user groups: no user of the site.
func (sl SSOLogin) OfTheSite() error {
	if !sl.Listed && len(sl.Groups) == 0 {
		return fmt.Errorf("%w: %q is not a user of the site, nor in any of its user groups", ErrNoLogin, sl.Name)
	}
	return nil
}

// verify checks raw, an ID token, and returns its login. The token must be signed by the
// provider, unexpired, for one of the site's clients (aud) and name a user; nonce, when not
// "", must be the token's.
func (o *OIDC) verify(ctx context.Context, raw, nonce string) (SSOLogin, error) {
	_, v, err := o.ready(ctx)
	if err != nil {
		return SSOLogin{}, err
	}
	tok, err := v.Verify(ctx, raw)
	if err != nil {
		return SSOLogin{}, fmt.Errorf("%w: %v", ErrNoLogin, err)
	}
	if !slices.Contains(tok.Audience, o.cfg.ClientID) && !slices.Contains(tok.Audience, o.cfg.Native()) {
		return SSOLogin{}, fmt.Errorf("%w: the ID token is for another client (aud %v)", ErrNoLogin, tok.Audience)
	}
	if nonce != "" && tok.Nonce != nonce {
		return SSOLogin{}, fmt.Errorf("%w: the ID token's nonce is not the login's", ErrNoLogin)
	}
	var claims map[string]any
	if err := tok.Claims(&claims); err != nil {
		return SSOLogin{}, fmt.Errorf("%w: %v", ErrNoLogin, err)
	}
	l := SSOLogin{Factors: ticket.FactorOIDC, At: tok.IssuedAt}
	if u, ok := o.bySubject[tok.Subject]; ok && tok.Subject != "" {
		l.Name, l.User, l.Listed = u.Name, u, true
	} else {
		claim, _ := claims[o.cfg.UserClaim].(string)
		if claim == "" {
			return SSOLogin{}, fmt.Errorf("%w: the ID token has no %s claim", ErrNoLogin, o.cfg.UserClaim)
		}
		name, err := canonicalUser(claim)
		if err != nil {
			return SSOLogin{}, fmt.Errorf("%w: the ID token's %s %q is no user name: %v", ErrNoLogin, o.cfg.UserClaim, claim, err)
		}
		if listed, ok := o.listed[name]; ok {
			return SSOLogin{}, fmt.Errorf("%w: the ID token's %s %q is the local account %q, which single sign-on reaches only through its oidc_subject (this token's subject is %q)",
				ErrNoLogin, o.cfg.UserClaim, claim, listed, tok.Subject)
		}
		l.Name, l.User = name, configs.User{Name: name}
	}
	if at, ok := claims["auth_time"].(float64); ok && at > 0 {
		l.At = time.Unix(int64(at), 0)
	}
	for _, g := range claimList(claims[o.cfg.GroupsClaim]) {
		m, ok := o.cfg.GroupMap[g]
		if ok && o.userGroups[m] && !slices.Contains(l.Groups, m) {
			l.Groups = append(l.Groups, m)
		}
	}
	for _, m := range claimList(claims["amr"]) {
		if slices.Contains(o.cfg.MFAMethods, m) {
			l.Factors |= ticket.FactorMFA
		}
	}
	return l, nil
}

// canonicalUser returns a user name as RFC 8265 compares them (UsernameCaseMapped: width
// and case folded, normalised to NFC), so that "Admin", "ＡＤＭＩＮ" and "admin" are one
// name; an error for a string that is no user name.
func canonicalUser(name string) (string, error) {
	return precis.UsernameCaseMapped.String(name)
}

// claimList returns a claim that is a list of strings (or one string) as a list.
func claimList(v any) []string {
	switch v := v.(type) {
	case string:
		return []string{v}
	case []any:
		out := make([]string, 0, len(v))
		for _, e := range v {
			if s, ok := e.(string); ok {
				out = append(out, s)
			}
		}
		return out
	}
	return nil
}

// bearer returns the token of an "Authorization: Bearer" header, or "".
func bearer(r *http.Request) string {
	h := r.Header.Get("Authorization")
	if len(h) > 7 && strings.EqualFold(h[:7], "bearer ") {
		return h[7:]
	}
	return ""
}

// oauth2Config is the console client's side of the code flow.
func (o *OIDC) oauth2Config(p *oidc.Provider, redirect string) (*oauth2.Config, error) {
	c := &oauth2.Config{ClientID: o.cfg.ClientID, Endpoint: p.Endpoint(), RedirectURL: redirect,
		Scopes: append([]string{oidc.ScopeOpenID}, o.cfg.Scopes...)}
	if f := o.cfg.ClientSecretFile; f != "" {
		b, err := readSecret(f, errOIDCSecretMode)
		if err != nil {
			return nil, err
		}
		c.ClientSecret = string(b)
	}
	return c, nil
}
