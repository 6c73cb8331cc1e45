package logins

import (
	"crypto/rand"
	"crypto/sha256"
	"errors"
	"log/slog"
	"net/http"
	"net/netip"
	"strings"
	"sync"
	"time"

	"github.com/frontdoor-vdi/frontdoor/configs"
	"github.com/frontdoor-vdi/frontdoor/pki"
	"github.com/frontdoor-vdi/frontdoor/ticket"
	"golang.org/x/crypto/bcrypt"
)

// Login is an authenticated request's login: who, with which factors, and when they were
// checked (a login the cache remembers keeps the time of its check).
type Login struct {
	User    configs.User
	Factors ticket.Factors
	At      time.Time
	// Groups are user groups the login vouches for beyond the configuration's (an ID
	// token's groups claim, mapped to the site's user groups).
	Groups []string
}

// FactorNames are the login's factors as the configuration names them (configs.Factor*).
func (l Login) FactorNames() []string { return l.Factors.Names() }

// Authenticator checks the logins of one API: client certificates, passwords (throttled by
// guard), and one-time codes beside passwords or certificates (OTPHeader).
//
// Every call of the APIs carries its credentials (HTTP Basic, and the code when the user
// sends one), so a login is not a session: the cache remembers, for five minutes, a
// credential that passed — user, password and code together — with the factors it proved
// and the time it was checked. A call with the same password and code within those minutes
// is that login again (the client's next calls, a relaunch after a cut); the same password
// without the code, or with another code, is another login, checked afresh, and without a
// code it has no totp factor. A code is accepted by one login only: its check records it
// site-wide (once), and a second login with it fails like a wrong password. So nothing new
// is handed to the client (no session token to steal or expire), and the cache can neither
// lend a factor to a login that did not prove it nor stretch a login: the time sealed into
// tickets is the check's.
type Authenticator struct {
	users map[string]configs.User
	guard *loginGuard
	cache authCache
	// certs are the CAs of client certificates (LaunchOptions.ClientCAs); nil: the site CA.
	certs *pki.ClientCAs
	// operatorCAs: the configuration names operator CAs, so a nil certs is a wiring
	// mistake and no certificate logs in (it might be an operator CA's, not the site's).
	operatorCAs bool
	// totp reads the users' TOTP secrets; nil when the site has none (site.auth.totp_file).
	totp *totpSecrets
	// radius asks the site's RADIUS servers; nil when it has none (site.auth.radius).
	radius *radiusClient
	// sso verifies ID tokens of the site's OpenID Connect provider; nil when it has none
	// (site.auth.oidc).
	sso *OIDC
	// once records a used code site-wide (ticket.Verifier.Once), else in memory here.
	once func(id [16]byte, what string, until time.Time) (bool, error)
	// lifetime (site.auth.factor_lifetime) bounds the cache's entries to a quarter of it.
	lifetime time.Duration
	now      func() time.Time
	log      *slog.Logger
	// dummy is compared for unknown users: a hash at the cost most of the users' hashes have,
	// so that an unknown name takes as long as a known one (made on first use).
	dummy     string
	dummyOnce sync.Once
}

// dummyFor returns the hash compared for unknown users: dummyHash at cost 10, or a hash at
// the cost most of the site's users' hashes have (the highest of those as common), made once.
func (a *Authenticator) dummyFor() string {
	a.dummyOnce.Do(func() {
		a.dummy = dummyHash
		count := map[int]int{}
		for _, u := range a.users {
			if c, err := bcrypt.Cost([]byte(u.PasswordHash)); err == nil {
				count[c]++
			}
		}
		best := bcrypt.DefaultCost
		for c, n := range count {
			if n > count[best] || (n == count[best] && c > best) {
				best = c
			}
		}
		if best == bcrypt.DefaultCost {
			return
		}
		pass := make([]byte, 16)
		rand.Read(pass)
		if h, err := bcrypt.GenerateFromPassword(pass, best); err == nil {
			a.dummy = string(h)
		}
	})
	return a.dummy
}

// Options are what an API's Authenticator takes beside the configuration.
type Options struct {
	// Throttle is shared by the node's APIs, so that they take turns on its CPUs. Default:
	// one of the Authenticator's own.
	Throttle *Throttle
	// ClientCAs are the CAs of client certificates that log users in. Default: nil, the
	// site CA alone.
	ClientCAs *pki.ClientCAs
	// Verifier records used one-time codes site-wide. Default: nil, in memory.
	Verifier *ticket.Verifier
	// Now is the clock. Default: time.Now.
	Now func() time.Time
	// Logger tells of refused logins and of what cannot be checked. Default: slog.Default().
	Logger *slog.Logger
}

// New builds the Authenticator of an API over cfg's users.
func New(cfg *configs.Config, o Options) *Authenticator {
	if o.Logger == nil {
		o.Logger = slog.Default()
	}
	a := newAuthenticator(cfg, guardOf(o.Throttle), o.Verifier, o.Now, o.Logger)
	a.certs = o.ClientCAs
	return a
}

// newAuthenticator builds the authenticator of an API over cfg's users; v (optional)
// records used codes site-wide.
func newAuthenticator(cfg *configs.Config, guard *loginGuard, v *ticket.Verifier, now func() time.Time, log *slog.Logger) *Authenticator {
	if now == nil {
		now = time.Now
	}
	a := &Authenticator{users: map[string]configs.User{}, guard: guard, lifetime: cfg.Site.Auth.FactorLifetime.D(), now: now, log: log,
		operatorCAs: len(cfg.Site.Auth.ClientCertificates) > 0}
	for _, u := range cfg.Users {
		a.users[u.Name] = u
	}
	if p := cfg.Site.Auth.TOTPFile; p != "" {
		a.totp = &totpSecrets{path: p}
	}
	a.radius = newRADIUSClient(cfg, log)
	if cfg.Site.Auth.OIDC.Enabled() {
		a.sso = newOIDCLogins(cfg, now, log)
	}
	if v != nil {
		a.once = v.Once
	} else {
		l := ticket.NewMemoryLedger(0, now)
		a.once = func(id [16]byte, what string, until time.Time) (bool, error) {
			return l.Use(id, ticket.Channel{Proto: what}, until)
		}
	}
	return a
}

// dummyHash is a valid bcrypt hash at cost 10 (bcrypt.DefaultCost), compared for unknown users
// where the users' hashes have that cost.
const dummyHash = "$2a$10$hmIm37EQl2GI6WzyFg.kUe2OoNhztKxrxmbZEcRHkzoi.ekBqG9n2"

// radiusHash stands for the hash in the cache's key of a login whose password the RADIUS
// servers checked (site.auth.radius, role primary): no bcrypt hash is one.
const radiusHash = "radius"

// authCache remembers logins that passed for a few minutes, so that a client's repeated
// calls do not each pay bcrypt's deliberate cost. It keys them by a SHA-256 of user,
// password, one-time code and hash (never the password itself), keeps the factors they
// proved and when, and is bounded.
type authCache struct {
	mu   sync.Mutex // guards seen
	seen map[[32]byte]cached
}

// cached is a login in the authCache.
type cached struct {
	expires time.Time
	factors ticket.Factors
	at      time.Time
}

const (
	authCacheTTL  = 5 * time.Minute
	authCacheSize = 10000
)

func (c *authCache) key(user, pass, code, hash string) [32]byte {
	return sha256.Sum256([]byte(user + "\x00" + pass + "\x00" + code + "\x00" + hash))
}

func (c *authCache) get(k [32]byte, now time.Time) (cached, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	e, hit := c.seen[k]
	return e, hit && now.Before(e.expires)
}

func (c *authCache) add(k [32]byte, e cached, now time.Time) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.seen == nil {
		c.seen = map[[32]byte]cached{}
	}
	if len(c.seen) >= authCacheSize {
		for k, e := range c.seen {
			if !now.Before(e.expires) {
				delete(c.seen, k)
			}
		}
		if len(c.seen) >= authCacheSize {
			clear(c.seen)
		}
	}
	c.seen[k] = e
}

// Authenticate accepts a bearer ID token of the site's identity provider (site.auth.oidc),
// else a verified client certificate that names a configured user (certificateUser: of the
// site CA by its common name, a gateway's or a machine's being no user's; of an operator CA
// as its entry says, unless revoked), else HTTP Basic credentials checked against the
// configured bcrypt hashes, throttled by the guard (loginGuard); a one-time code in OTPHeader
// adds the totp factor (the radius factor for a user that site.auth.radius of role factor
// covers), and the RADIUS servers check the password of a user without a password_hash that
// role primary covers. The error is ErrNoLogin, a ThrottledError, ErrLoginBusy,
// errCodeUnchecked, errCertUnchecked, errRADIUSUnavailable or a challengeError.
func (a *Authenticator) Authenticate(r *http.Request) (Login, error) {
	if raw := bearer(r); raw != "" && a.sso != nil {
		return a.SSOLogin(r, raw)
	}
	code := strings.ReplaceAll(strings.TrimSpace(r.Header.Get(OTPHeader)), " ", "") // apps show "123 456"
	if r.TLS != nil && len(r.TLS.VerifiedChains) > 0 && len(r.TLS.VerifiedChains[0]) > 0 {
		u, err := a.certificateUser(r)
		if err != nil {
			return Login{}, err
		}
		l := Login{User: u, Factors: ticket.FactorCertificate, At: a.now()}
		if code == "" {
			return l, nil
		}
		// A code beside a certificate is checked, and throttled, as beside a password.
		src := ClientAddr(r)
		if _, err := a.guard.admit(r.Context(), src, u.Name); err != nil {
			return Login{}, err
		}
		f, err := a.checkSecond(r, u.Name, code)
		a.guard.done(src, u.Name, f == 0 && (err == nil || countsAsFailure(err)))
		switch {
		case err != nil:
			return Login{}, err
		case f == 0:
			return Login{}, ErrNoLogin
		}
		l.Factors |= f
		return l, nil
	}
	name, pass, ok := r.BasicAuth()
	if !ok {
		return Login{}, ErrNoLogin
	}
	u, known := a.users[name]
	hash := u.PasswordHash
	viaRADIUS := known && a.radiusPrimary(u)
	switch {
	case viaRADIUS:
		hash = radiusHash // keys the cache: a login the RADIUS servers checked
	case !known || hash == "":
		// Compare anyway so that unknown users take as long as known ones.
		hash = a.dummyFor()
	}
	k := a.cache.key(name, pass, code, hash)
	if e, hit := a.cache.get(k, a.now()); hit && known && (u.PasswordHash != "" || viaRADIUS) {
		return Login{User: u, Factors: e.factors, At: e.at}, nil
	}
	src := ClientAddr(r)
	suspect, err := a.guard.admit(r.Context(), src, name)
	if err != nil {
		return Login{}, err
	}
	factors := ticket.FactorPassword
	if viaRADIUS {
		factors, err = ticket.FactorRADIUS, a.checkPrimary(r, name, pass)
	} else {
		err = a.guard.compare(r.Context(), hash, pass, suspect)
	}
	busy := errors.Is(err, ErrLoginBusy)
	failed := !busy && (err != nil || !known || (u.PasswordHash == "" && !viaRADIUS))
	var unchecked error
	if errors.Is(err, errRADIUSUnavailable) || errors.Is(err, ErrRADIUSChallenge) {
		unchecked, failed = err, countsAsFailure(err)
	}
	if !busy && !failed && unchecked == nil && code != "" {
		// The code is checked only behind a right password: a guess of it costs the
		// guesser a password's guess too, and a wrong one fails the login.
		f, err := a.checkSecond(r, name, code)
		switch {
		case err != nil:
			unchecked, failed = err, countsAsFailure(err)
		case f == 0:
			failed = true
		default:
			factors |= f
		}
	}
	a.guard.done(src, name, failed)
	switch {
	case busy:
		return Login{}, ErrLoginBusy
	case unchecked != nil:
		return Login{}, unchecked
	case failed:
		return Login{}, ErrNoLogin
	}
	now := a.now()
	ttl := authCacheTTL
	if a.lifetime > 0 {
		// A cached login's age comes off the lifetime of what it launches: at most a
		// quarter of it, so that a short lifetime still leaves a launch its tickets' time.
		ttl = min(ttl, a.lifetime/4)
	}
	a.cache.add(k, cached{expires: now.Add(ttl), factors: factors, at: now}, now)
	return Login{User: u, Factors: factors, At: now}, nil
}

// ssoKey is the name the login throttle counts a single sign-on's failures under: an ID
// token (or a console callback) names no user until it is checked, so its failures count
// against its source alone. No user name can take it: it starts with a NUL byte.
func ssoKey(src netip.Addr) string { return "\x00sso " + src.String() }

// SSOLogin checks an ID token of the site's provider sent as a bearer credential. A token
// names no user until it is verified, so a failure counts against its source alone. Its user
// is the configuration's when the token's subject is bound to it (oidc_subject: roles, home
// zone, groups), else one of the site's for the groups the token names (through group_map);
// a token naming an unlisted user in none of the site's user groups is no login.
func (a *Authenticator) SSOLogin(r *http.Request, raw string) (Login, error) {
	src := ClientAddr(r)
	key := ssoKey(src)
	if _, err := a.guard.admit(r.Context(), src, key); err != nil {
		return Login{}, err
	}
	sl, err := a.sso.verify(r.Context(), raw, "")
	if err == nil {
		err = sl.OfTheSite()
	}
	a.guard.done(src, key, err != nil && !errors.Is(err, ErrSSOUnavailable))
	if err != nil {
		if !errors.Is(err, ErrSSOUnavailable) {
			a.log.Info("ID token refused", "from", src, "err", err)
		}
		return Login{}, err
	}
	return Login{User: sl.User, Factors: sl.Factors, At: sl.At, Groups: sl.Groups}, nil
}

// checkCode checks user's one-time code: false for a wrong code, one of a user without a
// secret, and one accepted already; errCodeUnchecked when the secrets cannot be read or the
// use not recorded.
func (a *Authenticator) checkCode(user, code string) (bool, error) {
	if a.totp == nil {
		return false, nil
	}
	secret, ok, err := a.totp.secret(user)
	if err != nil {
		a.log.Error("reading the TOTP secrets: logins with a one-time code fail", "file", a.totp.path, "err", err)
		return false, errCodeUnchecked
	}
	if !ok {
		return false, nil
	}
	now := a.now()
	step, ok := checkCode(secret, code, now)
	if !ok {
		return false, nil
	}
	fresh, err := a.once(codeID(user, step), "totp", codeUntil(step))
	if err != nil {
		a.log.Error("recording a one-time code's use: the login fails", "user", user, "err", err)
		return false, errCodeUnchecked
	}
	if !fresh {
		a.log.Warn("a one-time code used again refused", "user", user)
	}
	return fresh, nil
}

// User returns the configuration's user of that name.
func (a *Authenticator) User(name string) (configs.User, bool) {
	u, ok := a.users[name]
	return u, ok
}

// SSO reports whether the site has single sign-on (site.auth.oidc).
func (a *Authenticator) SSO() bool { return a.sso != nil }
