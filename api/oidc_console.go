package api

import (
	"errors"
	"fmt"
	"net/http"

	"github.com/frontdoor-vdi/frontdoor/configs"
	"github.com/frontdoor-vdi/frontdoor/logins"
)

// The console's single sign-on: GET ssoLoginPath sends the browser to the provider with the
// authorization code flow (state, nonce, PKCE S256), and the provider sends it back to
// configs.OIDCCallbackPath, where the code is exchanged (with the client's secret when it
// has one) and the ID token checked as the launch API checks it. The user must be one the
// configuration lists as an admin or a monitor.
const ssoLoginPath = "/console/oidc/login"

// ssoEnabled reports whether the console offers single sign-on.
func (a *Admin) ssoEnabled() bool {
	return a.authn.SSO() && a.o.Config.Site.Auth.OIDC.RedirectURL != ""
}

// routeSSO adds the console's single sign-on routes.
func (a *Admin) routeSSO() {
	a.mux.HandleFunc("GET "+ssoLoginPath, a.ssoStart)
	a.mux.HandleFunc("GET "+configs.OIDCCallbackPath, a.ssoCallback)
}

// consoleSSO is the console's flow.
func (a *Admin) consoleSSO() logins.SSOFlow {
	return logins.SSOFlow{Authn: a.authn, Redirect: a.o.Config.Site.Auth.OIDC.RedirectURL, CookiePath: "/console/oidc/",
		Accept: func(sl logins.SSOLogin) error {
			if !sl.Listed || !mayConsole(sl.User) {
				return fmt.Errorf("%w: %q may not use the console (only users the configuration lists as admins or monitors, bound by their oidc_subject)", logins.ErrNoLogin, sl.Name)
			}
			return nil
		}}
}

func (a *Admin) ssoStart(w http.ResponseWriter, r *http.Request) {
	if !a.ssoEnabled() {
		http.NotFound(w, r)
		return
	}
	if msg, code := a.consoleSSO().Start(w, r); code != 0 {
		a.renderLogin(w, msg, code)
	}
}

func (a *Admin) ssoCallback(w http.ResponseWriter, r *http.Request) {
	if !a.ssoEnabled() {
		http.NotFound(w, r)
		return
	}
	sl, err := a.consoleSSO().Finish(w, r)
	if err != nil {
		var th logins.ThrottledError
		if !errors.As(err, &th) && !errors.Is(err, logins.ErrLoginBusy) {
			a.log.Warn("console single sign-on refused", "from", logins.ClientAddr(r), "err", err)
		}
		a.renderLogin(w, err.Error(), logins.Status(w, err)) // the login page, as the portal's
		return
	}
	u := sl.User
	id, _ := a.console.start(u)
	http.SetCookie(w, &http.Cookie{Name: consoleCookie, Value: id, Path: "/", HttpOnly: true, Secure: true, SameSite: http.SameSiteStrictMode})
	a.log.Info("console login", "user", u.Name, "role", roleOf(u), "from", logins.ClientAddr(r), "via", "sso")
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
