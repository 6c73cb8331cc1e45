package api

import (
	"embed"
	"errors"
	"fmt"
	"html/template"
	"io/fs"
	"net/http"
	"net/url"
	"time"

	"github.com/frontdoor-vdi/frontdoor/configs"
	"github.com/frontdoor-vdi/frontdoor/logins"
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
