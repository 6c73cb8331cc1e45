package api

import (
	"crypto/rand"
	"crypto/subtle"
	"embed"
	"encoding/hex"
	"errors"
	"fmt"
	"html/template"
	"io/fs"
	"net/http"
	"net/url"
	"sync"
	"time"

	"github.com/frontdoor-vdi/frontdoor/logins"

	"github.com/frontdoor-vdi/frontdoor/configs"
)

// The operator's console: web pages on the admin listener, behind a login with the site's
// admin and monitor users. A login makes a console session, kept in this front door's memory
// and named by a cookie (HttpOnly, Secure, SameSite=Strict); it ends on logout, after
// consoleIdle without a request, or after consoleMaxAge. Every write the console makes
// carries the session's CSRF token in the X-CSRF-Token header, which the admin API checks
// against the cookie's session, and comes from the console's own origin. The pages are
// html/template shells with a small embedded script that reads the admin API's JSON (the
// same the CLI reads), renders it, and reads again when the API's event stream
// (GET /v1/admin/events) says a topic changed. No build step, no CDN.

const (
	consoleCookie   = "frontdoor_console"
	consoleIdle     = 15 * time.Minute
	consoleMaxAge   = 12 * time.Hour
	consoleSessions = 1000 // at once at one front door; the least recently used goes
	// consolePerUser bounds one user's console sessions at one front door: past it the
	// user's least recently used goes, so that one account's logins (a monitor's, say)
	// cannot evict everyone else's.
	consolePerUser = 8
	// consoleLoginAudit is how often the audit log records a user's console logins from one
	// address: the first, then the next after this, with how many came between (every
	// login is in the node's log).
	consoleLoginAudit = 10 * time.Minute
)

//go:embed console
var consoleFiles embed.FS

var consolePages = template.Must(template.ParseFS(consoleFiles, "console/*.html"))

// consoleSession is one login to the console (or to the portal, which keeps its sessions the
// same way).
type consoleSession struct {
	user    configs.User
	li      logins.Login // the logins.Login that made it (the portal's: its factors go into tickets)
	csrf    string
	created time.Time
	last    time.Time
}

// consoleStore holds the console sessions of one Admin.
type consoleStore struct {
	mu   sync.Mutex // guards byID and audited
	byID map[string]*consoleSession
	// audited holds, per user and address, when a console login was last audited and how
	// many came since.
	audited map[string]auditedLogin
	now     func() time.Time
	// limit bounds the sessions at once; 0: consoleSessions.
	limit int
}

// max is the most sessions the store keeps at once.
func (cs *consoleStore) max() int {
	if cs.limit > 0 {
		return cs.limit
	}
	return consoleSessions
}

// auditedLogin is the audit log's last word on a user's console logins from one address.
type auditedLogin struct {
	at    time.Time
	since int
}

// audit reports whether a console login of user from src goes in the audit log, and how
// many logins of theirs from there since the last that did (consoleLoginAudit).
func (cs *consoleStore) audit(user, src string) (record bool, since int) {
	cs.mu.Lock()
	defer cs.mu.Unlock()
	now := cs.clock()
	if cs.audited == nil {
		cs.audited = map[string]auditedLogin{}
	}
	k := user + "\x00" + src
	if a, ok := cs.audited[k]; ok && now.Sub(a.at) < consoleLoginAudit {
		a.since++
		cs.audited[k] = a
		return false, a.since
	}
	since = cs.audited[k].since
	if len(cs.audited) >= cs.max() {
		for k, a := range cs.audited {
			if now.Sub(a.at) >= consoleLoginAudit {
				delete(cs.audited, k)
			}
		}
	}
	cs.audited[k] = auditedLogin{at: now}
	return true, since
}

func randomToken() string {
	var b [32]byte
	rand.Read(b[:])
	return hex.EncodeToString(b[:])
}

func (cs *consoleStore) clock() time.Time {
	if cs.now != nil {
		return cs.now()
	}
	return time.Now()
}

// start makes a session for u and returns its id.
func (cs *consoleStore) start(u configs.User) (string, *consoleSession) {
	return cs.startLogin(logins.Login{User: u})
}

// startLogin makes a session for the login li and returns its id.
func (cs *consoleStore) startLogin(li logins.Login) (string, *consoleSession) {
	u := li.User
	cs.mu.Lock()
	defer cs.mu.Unlock()
	if cs.byID == nil {
		cs.byID = map[string]*consoleSession{}
	}
	now := cs.clock()
	mine, oldestMine, oldest := 0, "", ""
	for id, s := range cs.byID {
		if s.user.Name == u.Name {
			mine++
			if oldestMine == "" || s.last.Before(cs.byID[oldestMine].last) {
				oldestMine = id
			}
		}
		if oldest == "" || s.last.Before(cs.byID[oldest].last) {
			oldest = id
		}
	}
	switch {
	case mine >= consolePerUser:
		delete(cs.byID, oldestMine)
	case len(cs.byID) >= cs.max():
		delete(cs.byID, oldest)
	}
	id := randomToken()
	s := &consoleSession{user: u, li: li, csrf: randomToken(), created: now, last: now}
	cs.byID[id] = s
	return id, s
}

// get returns the live session id names and marks it used.
func (cs *consoleStore) get(id string) (*consoleSession, bool) {
	cs.mu.Lock()
	defer cs.mu.Unlock()
	s, ok := cs.byID[id]
	if !ok {
		return nil, false
	}
	now := cs.clock()
	if now.Sub(s.last) > consoleIdle || now.Sub(s.created) > consoleMaxAge {
		delete(cs.byID, id)
		return nil, false
	}
	s.last = now
	return s, true
}

func (cs *consoleStore) end(id string) {
	cs.mu.Lock()
	defer cs.mu.Unlock()
	delete(cs.byID, id)
}

// Errors of a console session.
var (
	errCSRF   = errors.New("the console's CSRF token is missing or wrong: reload the page")
	errOrigin = errors.New("a console write from another origin")
)

// consoleUser returns the user of the request's console session, if it has one: ok false
// when it carries no console cookie. A write (any method but GET and HEAD) needs the
// session's CSRF token in X-CSRF-Token and the console's origin.
func (a *Admin) consoleUser(r *http.Request) (u configs.User, ok bool, err error) {
	s, ok, err := a.console.sessionOf(r, consoleCookie)
	if !ok || err != nil {
		return configs.User{}, ok, err
	}
	return s.user, true, nil
}

// sessionOf returns the live session that r's cookie names: ok false when r carries no
// such cookie, logins.ErrNoLogin when the session is over. A write (any method but GET and HEAD)
// must come from the page's own origin and carry the session's CSRF token in X-CSRF-Token
// (or, from a form of the page's own, in its csrf field).
func (cs *consoleStore) sessionOf(r *http.Request, cookie string) (*consoleSession, bool, error) {
	c, cerr := r.Cookie(cookie)
	if cerr != nil || c.Value == "" {
		return nil, false, nil
	}
	s, live := cs.get(c.Value)
	if !live {
		return nil, true, logins.ErrNoLogin
	}
	if r.Method != http.MethodGet && r.Method != http.MethodHead {
		if !sameOrigin(r) {
			return nil, true, errOrigin
		}
		token := r.Header.Get("X-CSRF-Token")
		if token == "" && r.Header.Get("Content-Type") == "application/x-www-form-urlencoded" {
			token = r.PostFormValue("csrf") // a form of the page's own (logout)
		}
		if subtle.ConstantTimeCompare([]byte(token), []byte(s.csrf)) != 1 {
			return nil, true, errCSRF
		}
	}
	return s, true, nil
}

// sameOrigin reports whether a write comes from the page it was served with: its Origin
// (else its Referer), when it sends one, names the request's host over https.
func sameOrigin(r *http.Request) bool {
	o := r.Header.Get("Origin")
	if o == "" {
		o = r.Header.Get("Referer")
	}
	if o == "" {
		return true // no browser sends a cross-site write without one; the token decides
	}
	u, err := url.Parse(o)
	return err == nil && u.Scheme == "https" && u.Host == r.Host
}

// consolePage is what a page's template gets.
type consolePage struct {
	Page, Title string
	User        string
	Role        string // "admin" or "monitor"
	CSRF        string
	Site, Zone  string
	Error       string
	Nav         []navItem
	SSO         bool // the login page offers single sign-on
}

type navItem struct{ Path, Title string }

var consoleNav = []navItem{
	{"/site", "Site"}, {"/gateways", "Gateways"}, {"/machines", "Machines"}, {"/sessions", "Sessions"},
	{"/secure-gateway", "Secure gateway"}, {"/explain", "Explain"}, {"/drills", "Drills"}, {"/audit", "Audit"},
}

// roleOf names a console user's role.
func roleOf(u configs.User) string {
	if u.Admin {
		return "admin"
	}
	return "monitor"
}

// mayConsole reports whether u may log in to the console.
func mayConsole(u configs.User) bool { return u.Admin || u.Monitor }

// routeConsole adds the console's routes to the admin mux.
func (a *Admin) routeConsole() {
	static, _ := fs.Sub(consoleFiles, "console/static")
	files := http.StripPrefix("/static/", http.FileServerFS(static))
	a.mux.Handle("GET /static/", http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Cache-Control", "no-cache")
		files.ServeHTTP(w, r)
	}))
	a.mux.HandleFunc("GET /{$}", func(w http.ResponseWriter, r *http.Request) {
		if _, ok, err := a.consoleUser(r); ok && err == nil {
			http.Redirect(w, r, "/site", http.StatusSeeOther)
			return
		}
		http.Redirect(w, r, "/login", http.StatusSeeOther)
	})
	a.mux.HandleFunc("GET /v1/admin/site", a.admin(a.site))
	a.mux.HandleFunc("GET /login", func(w http.ResponseWriter, r *http.Request) { a.renderLogin(w, "", http.StatusOK) })
	a.mux.HandleFunc("POST /login", a.consoleLogin)
	a.mux.HandleFunc("POST /logout", a.consoleLogout)
	a.routeSSO()
	for _, n := range consoleNav {
		a.mux.HandleFunc("GET "+n.Path, a.consolePageHandler(n))
	}
}

// securityHeaders are the headers of the console's and the portal's pages.
func securityHeaders(w http.ResponseWriter) {
	h := w.Header()
	h.Set("Content-Security-Policy", "default-src 'self'; script-src 'self'; style-src 'self'; img-src 'self' data:; connect-src 'self'; frame-ancestors 'none'; form-action 'self'; base-uri 'none'")
	h.Set("X-Content-Type-Options", "nosniff")
	h.Set("Referrer-Policy", "same-origin")
	h.Set("Cache-Control", "no-store")
}

func (a *Admin) renderLogin(w http.ResponseWriter, msg string, code int) {
	securityHeaders(w)
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	w.WriteHeader(code)
	consolePages.ExecuteTemplate(w, "login.html", consolePage{Title: "Log in", Site: a.o.Config.Site.Name, Zone: a.o.Zone, Error: msg, SSO: a.ssoEnabled()})
}

// consoleLogin checks a login form's user, password and one-time code (a TOTP code or a
// RADIUS passcode, sent as the API's logins.OTPHeader) as the API checks Basic credentials
// (throttled alike) and starts a console session for an admin or a monitor.
func (a *Admin) consoleLogin(w http.ResponseWriter, r *http.Request) {
	if !sameOrigin(r) {
		a.renderLogin(w, errOrigin.Error(), http.StatusForbidden)
		return
	}
	if err := r.ParseForm(); err != nil {
		a.renderLogin(w, "the login form could not be read", http.StatusBadRequest)
		return
	}
	li, err := a.authn.Authenticate(formCredentials(r, false))
	u := li.User
	if err == nil && !mayConsole(u) {
		err = logins.ErrNoLogin
	}
	if err != nil {
		code := logins.Status(w, err)
		msg := "wrong user or password, or the user may not use the console"
		if code != http.StatusUnauthorized || errors.Is(err, logins.ErrRADIUSChallenge) {
			msg = err.Error()
		}
		a.log.Warn("console login refused", "user", r.PostForm.Get("user"), "from", logins.ClientAddr(r), "err", err)
		a.renderLogin(w, msg, code)
		return
	}
	id, _ := a.console.start(u)
	http.SetCookie(w, &http.Cookie{Name: consoleCookie, Value: id, Path: "/", HttpOnly: true, Secure: true, SameSite: http.SameSiteStrictMode})
	a.log.Info("console login", "user", u.Name, "role", roleOf(u), "from", logins.ClientAddr(r))
	a.recordLogin(r, u, "")
	http.Redirect(w, r, "/site", http.StatusSeeOther)
}

// formCredentials is a login form's request (user, password and otp fields, parsed) as the
// APIs take credentials: HTTP Basic and the one-time code in logins.OTPHeader; with cert, the
// connection's client certificate instead of the user and password, else no certificate.
func formCredentials(r *http.Request, cert bool) *http.Request {
	cred := r.Clone(r.Context())
	cred.Header = r.Header.Clone()
	cred.Header.Del("Authorization")
	cred.Header.Del(logins.OTPHeader)
	if !cert {
		cred.SetBasicAuth(r.PostForm.Get("user"), r.PostForm.Get("password"))
		cred.TLS = nil // the form's credentials, not a client certificate
	}
	if code := r.PostForm.Get("otp"); code != "" {
		cred.Header.Set(logins.OTPHeader, code) // a TOTP code or a RADIUS passcode, as the API takes it
	}
	return cred
}

// recordLogin puts u's console login in the audit log, unless one of theirs from the same
// address is there from the last consoleLoginAudit; the next entry says how many came
// between. via names the way in ("" for a password).
func (a *Admin) recordLogin(r *http.Request, u configs.User, via string) {
	record, since := a.console.audit(u.Name, logins.ClientAddr(r).String())
	if !record {
		return
	}
	detail := "role " + roleOf(u)
	if via != "" {
		detail += ", via " + via
	}
	if since > 0 {
		detail += fmt.Sprintf(" (%d more logins from %s since the last entry)", since, logins.ClientAddr(r))
	}
	a.record(r.WithContext(withAdmin(r.Context(), u.Name)), "console.login", u.Name, detail)
}

// consoleLogout ends the request's console session (a write: it needs the CSRF token).
func (a *Admin) consoleLogout(w http.ResponseWriter, r *http.Request) {
	u, ok, err := a.consoleUser(r)
	if !ok || err != nil {
		http.Redirect(w, r, "/login", http.StatusSeeOther)
		return
	}
	c, _ := r.Cookie(consoleCookie)
	a.console.end(c.Value)
	http.SetCookie(w, &http.Cookie{Name: consoleCookie, Value: "", Path: "/", MaxAge: -1, HttpOnly: true, Secure: true, SameSite: http.SameSiteStrictMode})
	a.record(r.WithContext(withAdmin(r.Context(), u.Name)), "console.logout", u.Name, "")
	http.Redirect(w, r, "/login", http.StatusSeeOther)
}

// consolePageHandler serves one page's shell to a logged-in user, else the login page.
func (a *Admin) consolePageHandler(n navItem) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		c, err := r.Cookie(consoleCookie)
		var s *consoleSession
		live := false
		if err == nil {
			s, live = a.console.get(c.Value)
		}
		if !live {
			http.Redirect(w, r, "/login", http.StatusSeeOther)
			return
		}
		securityHeaders(w)
		w.Header().Set("Content-Type", "text/html; charset=utf-8")
		consolePages.ExecuteTemplate(w, "page.html", consolePage{Page: n.Path[1:], Title: n.Title, User: s.user.Name,
			Role: roleOf(s.user), CSRF: s.csrf, Site: a.o.Config.Site.Name, Zone: a.o.Zone, Nav: consoleNav})
	}
}
