package api

import (
	"embed"
	"errors"
	"fmt"
	"html/template"
	"io/fs"
	"net/http"
	"net/netip"
	"strings"

	"github.com/frontdoor-vdi/frontdoor/broker"
	"github.com/frontdoor-vdi/frontdoor/configs"
	"github.com/frontdoor-vdi/frontdoor/logins"
)

// The user's portal: web pages at / on the launch listener. A user signs in with the site's
// logins (a password with a one-time code, or a client certificate), which makes a portal
// session as the console makes its own (a cookie: HttpOnly, Secure, SameSite=Strict; ends on
// logout, after consoleIdle without a request or consoleMaxAge; the login's factors and time
// go into every ticket it gets). The page's script calls the launch API with that cookie —
// GET /v1/resources, POST /v1/launch, GET /v1/sessions, POST /v1/sessions/{id}/logoff —, a
// write with the session's CSRF token in X-CSRF-Token, from the portal's own origin. It shows
// the desktop in the page with noVNC over a WebSocket channel to a gateway (package gateway,
// ChannelPath), which it resumes through another gateway when its own dies.

// portalCookie names the portal's session. The __Host- prefix binds it to the portal's own
// host (Secure, Path=/, no Domain): a sibling host cannot plant one.
const portalCookie = "__Host-frontdoor_portal"

// portalSessions bounds the portal's sessions at one front door (each a few hundred bytes):
// every user of a site signs in there, not a few operators; past it the least recently
// used goes. A user keeps at most consolePerUser.
const portalSessions = 20000

// launchFilesPerMinute bounds the launch files one user has made a minute, at one front door.
const launchFilesPerMinute = 10

//go:embed portal
var portalFiles embed.FS

var portalPages = template.Must(template.ParseFS(portalFiles, "portal/*.html"))

// portalPage is what the portal's templates get.
type portalPage struct {
	Site  string
	User  string
	CSRF  string
	Error string
	Cert  bool // the connection presents a client certificate the site may log in with
	SSO   bool // the portal offers single sign-on
}

// routePortal adds the portal's routes to the launch mux.
func (l *Launch) routePortal() {
	static, _ := fs.Sub(portalFiles, "portal/static")
	files := http.StripPrefix("/portal/", http.FileServerFS(static))
	l.mux.Handle("GET /portal/", http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Cache-Control", "no-cache")
		w.Header().Set("X-Content-Type-Options", "nosniff")
		files.ServeHTTP(w, r)
	}))
	l.mux.HandleFunc("GET /{$}", l.portalHome)
	l.mux.HandleFunc("POST /login", l.portalLogin)
	l.mux.HandleFunc("POST /logout", l.portalLogout)
	l.mux.HandleFunc("GET /v1/resources", l.auth(l.resources))
	l.mux.HandleFunc("POST /v1/launch-file", l.auth(l.launchFile))
	l.mux.HandleFunc("GET "+portalSSOPath, l.portalSSOStart)
	l.mux.HandleFunc("GET "+configs.PortalOIDCCallbackPath, l.portalSSOCallback)
}

// portalSSOPath starts the portal's single sign-on (site.auth.oidc.portal_redirect_url).
const portalSSOPath = "/portal/oidc/login"

// portalSSO is the portal's single sign-on flow; ok false when the site has none.
func (l *Launch) portalSSO() (logins.SSOFlow, bool) {
	u := l.o.Config.Site.Auth.OIDC.PortalRedirectURL
	return logins.SSOFlow{Authn: l.authn, Redirect: u, CookiePath: "/portal/oidc/", Accept: logins.SSOLogin.OfTheSite}, l.authn.SSO() && u != ""
}

func (l *Launch) portalSSOStart(w http.ResponseWriter, r *http.Request) {
	f, ok := l.portalSSO()
	if !ok {
		http.NotFound(w, r)
		return
	}
	if msg, code := f.Start(w, r); code != 0 {
		l.renderPortalLogin(w, r, msg, code)
	}
}

// portalSSOCallback takes the provider's answer: the token's user — one the configuration
// binds by oidc_subject, or one of the site's by the groups the token names — signs in to
// the portal with the token's factors.
func (l *Launch) portalSSOCallback(w http.ResponseWriter, r *http.Request) {
	f, ok := l.portalSSO()
	if !ok {
		http.NotFound(w, r)
		return
	}
	sl, err := f.Finish(w, r)
	if err != nil {
		l.log.Warn("portal single sign-on refused", "from", logins.ClientAddr(r), "err", err)
		l.renderPortalLogin(w, r, err.Error(), logins.Status(w, err))
		return
	}
	li := logins.Login{User: sl.User, Factors: sl.Factors, At: sl.At, Groups: sl.Groups}
	l.startPortal(w, r, li, "single sign-on")
	continuePage(w, "/", "Continue to your desktops")
}

// portalHeaders are the console's security headers, with the portal's WebSocket channels:
// the page opens them to the site's gateways (wss, the origins of their HTTPS ports).
func (l *Launch) portalHeaders(w http.ResponseWriter) {
	securityHeaders(w)
	w.Header().Set("Content-Security-Policy", l.csp)
}

// portalCSP is the portal's Content-Security-Policy, with webSockets (gatewayWebSockets).
func portalCSP(webSockets string) string {
	return "default-src 'self'; script-src 'self'; style-src 'self'; img-src 'self' data:; connect-src 'self'" + webSockets +
		"; frame-ancestors 'none'; form-action 'self'; base-uri 'none'"
}

// gatewayWebSockets lists, each after a space, the wss:// origins of the site's gateways'
// HTTPS ports, at their public addresses.
func gatewayWebSockets(c *configs.Config) string {
	var b strings.Builder
	for _, g := range c.Gateways {
		p := g.HTTPSPort()
		if p == 0 {
			continue
		}
		for _, a := range g.PublicAddresses { // (configs.SetDefaults: the address when none)
			b.WriteString(" wss://" + netip.AddrPortFrom(a.Unmap(), uint16(p)).String())
		}
	}
	return b.String()
}

func (l *Launch) portalHome(w http.ResponseWriter, r *http.Request) {
	l.portalHeaders(w)
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	if s, ok := l.portalSession(r); ok {
		portalPages.ExecuteTemplate(w, "portal.html", portalPage{Site: l.o.Config.Site.Name, User: s.user.Name, CSRF: s.csrf})
		return
	}
	l.renderPortalLogin(w, r, "", http.StatusOK)
}

func (l *Launch) renderPortalLogin(w http.ResponseWriter, r *http.Request, msg string, code int) {
	l.portalHeaders(w)
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	w.WriteHeader(code)
	cert := r.TLS != nil && len(r.TLS.PeerCertificates) > 0
	_, sso := l.portalSSO()
	portalPages.ExecuteTemplate(w, "login.html", portalPage{Site: l.o.Config.Site.Name, Error: msg, Cert: cert, SSO: sso})
}

// portalSession returns the request's live portal session.
func (l *Launch) portalSession(r *http.Request) (*consoleSession, bool) {
	c, err := r.Cookie(portalCookie)
	if err != nil || c.Value == "" {
		return nil, false
	}
	return l.portal.get(c.Value)
}

// portalLogin checks the sign-in form (user, password and a one-time code, as the API checks
// Basic credentials and logins.OTPHeader, throttled alike; or, with "certificate" set, the client
// certificate the connection presented) and starts a portal session.
func (l *Launch) portalLogin(w http.ResponseWriter, r *http.Request) {
	if !sameOrigin(r) || r.Header.Get("Sec-Fetch-Site") == "cross-site" {
		l.renderPortalLogin(w, r, errCrossSite.Error(), http.StatusForbidden)
		return
	}
	if err := r.ParseForm(); err != nil {
		l.renderPortalLogin(w, r, "the sign-in form could not be read", http.StatusBadRequest)
		return
	}
	li, err := l.authn.Authenticate(formCredentials(r, r.PostForm.Get("certificate") != ""))
	if err != nil {
		code := logins.Status(w, err)
		msg := "wrong user name or password, or a wrong or missing one-time code"
		switch {
		case code == http.StatusTooManyRequests:
			msg = "too many sign-ins: " + err.Error()
		case code != http.StatusUnauthorized || errors.Is(err, logins.ErrRADIUSChallenge):
			msg = err.Error()
		}
		l.log.Warn("portal sign-in refused", "user", r.PostForm.Get("user"), "from", logins.ClientAddr(r), "err", err)
		l.renderPortalLogin(w, r, msg, code)
		return
	}
	l.startPortal(w, r, li, "")
	http.Redirect(w, r, "/", http.StatusSeeOther)
}

// startPortal starts a portal session for the login li (made via a way in: "" for the form)
// and sets its cookie.
func (l *Launch) startPortal(w http.ResponseWriter, r *http.Request, li logins.Login, via string) {
	id, _ := l.portal.startLogin(li)
	http.SetCookie(w, &http.Cookie{Name: portalCookie, Value: id, Path: "/", HttpOnly: true, Secure: true, SameSite: http.SameSiteStrictMode})
	l.log.Info("portal sign-in", "user", li.User.Name, "factors", li.Factors.String(), "from", logins.ClientAddr(r), "via", via)
	if record, since := l.portal.audit(li.User.Name, logins.ClientAddr(r).String()); record {
		detail := "factors " + li.Factors.String()
		if via != "" {
			detail += ", via " + via
		}
		if since > 0 {
			detail += fmt.Sprintf(" (%d more sign-ins from %s since the last entry)", since, logins.ClientAddr(r))
		}
		l.audit(r, li.User.Name, "portal.signin", li.User.Name, detail)
	}
}

// portalLogout ends the request's portal session (a write: it needs the CSRF token).
func (l *Launch) portalLogout(w http.ResponseWriter, r *http.Request) {
	if s, ok, err := l.portal.sessionOf(r, portalCookie); ok && err == nil {
		c, _ := r.Cookie(portalCookie)
		l.portal.end(c.Value)
		l.log.Info("portal sign-out", "user", s.user.Name, "from", logins.ClientAddr(r))
		l.audit(r, s.user.Name, "portal.signout", s.user.Name, "")
	}
	http.SetCookie(w, &http.Cookie{Name: portalCookie, Value: "", Path: "/", MaxAge: -1, HttpOnly: true, Secure: true, SameSite: http.SameSiteStrictMode})
	http.Redirect(w, r, "/", http.StatusSeeOther)
}

// BrowserEndpoint begins the endpoint of every launch from the portal's page: the console
// tells those sessions, whose desktop is in a browser, from a native client's.
const BrowserEndpoint = "browser:"

// portalKey marks, in a request's context, a call of the portal's page.
type portalKey struct{}

// fromPortal reports whether r is a call of the portal's page (its session cookie).
func fromPortal(r *http.Request) bool { return r.Context().Value(portalKey{}) != nil }

// audit puts a portal user's action in the site's audit log.
func (l *Launch) audit(r *http.Request, user, action, target, detail string) {
	appendAudit(l.o.Audit, l.o.Events, l.o.Node, l.log, r, user, action, target, detail)
}

// errPortalExpired answers an API call whose portal session is over.
var errPortalExpired = errors.New("your sign-in has ended: sign in again")

// portalLoginOf returns the login of the request's portal session: ok false when it carries
// no portal cookie. A write needs the session's CSRF token (consoleStore.sessionOf).
func (l *Launch) portalLoginOf(r *http.Request) (li logins.Login, ok bool, err error) {
	s, ok, err := l.portal.sessionOf(r, portalCookie)
	switch {
	case !ok:
		return logins.Login{}, false, nil
	case errors.Is(err, logins.ErrNoLogin):
		return logins.Login{}, true, errPortalExpired
	case err != nil:
		return logins.Login{}, true, err
	}
	return s.li, true, nil
}

// ResourceView is a resource as GET /v1/resources shows it to its user: where a launch
// would land now, and why, or why it would be denied.
type ResourceView struct {
	Name string `json:"name"`
	Kind string `json:"kind"`
	// Zone is the zone a launch would land in; "" when it would be denied.
	Zone string `json:"zone,omitempty"`
	// Why says, in one line, why there: the preferred zone and its source, or a reconnect.
	Why string `json:"why,omitempty"`
	// Denied says why a launch would be denied now; "" when it would not.
	Denied string `json:"denied,omitempty"`
	// Session is the session a launch would reconnect; "" for a new one.
	Session string `json:"session,omitempty"`
	// Mode is gateway or direct: a desktop opens in the browser only through a gateway.
	Mode string `json:"mode,omitempty"`
	// Protocol is the machine's desktop protocol (builtin, vnc, rdp): the browser shows VNC.
	Protocol string `json:"protocol,omitempty"`
}

// resources serves GET /v1/resources: the resources the user is entitled to, each with the
// broker's dry run of a launch from here (no session made, nothing reserved).
func (l *Launch) resources(w http.ResponseWriter, r *http.Request, li logins.Login) {
	client, zone := l.locate(r)
	out := []ResourceView{}
	for _, res := range l.o.Config.Resources {
		d := l.o.Broker.Decide(broker.LaunchRequest{User: li.User.Name, Resource: res.Name, LocationZone: zone, Client: client,
			Factors: li.FactorNames(), Groups: li.Groups})
		if errors.Is(d.Err, broker.ErrNotEntitled) || errors.Is(d.Err, broker.ErrUnknownUser) {
			continue
		}
		v := ResourceView{Name: res.Name, Kind: res.Kind, Session: d.Session}
		if d.Outcome == broker.OutcomeDenied {
			v.Denied = deniedInWords(d)
		} else {
			v.Zone, v.Mode, v.Why = d.Zone, d.Mode, whyThere(d, zone)
			if dk := l.desk[d.Machine]; dk != nil {
				v.Protocol = dk.Protocol
			}
		}
		out = append(out, v)
	}
	writeJSON(w, http.StatusOK, out)
}
