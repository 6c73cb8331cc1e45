package api

import (
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/chromedp/chromedp"

	"github.com/frontdoor-vdi/frontdoor/broker"
	"github.com/frontdoor-vdi/frontdoor/configs"
	"github.com/frontdoor-vdi/frontdoor/internal/testbrowser"
	"github.com/frontdoor-vdi/frontdoor/internal/testidp"
	"github.com/frontdoor-vdi/frontdoor/internal/testkit"
)

// webSSOSite is the lab site signing in through a provider of its own as the confidential
// client frontdoor (secret in a 0600 file), whose redirect — the site's key redirectKey
// (redirect_url, portal_redirect_url) — is path on a listener of 127.0.0.1; subjects bind
// users to the provider's subjects. It returns the provider, the listener and its base URL,
// the site and its broker.
func webSSOSite(t *testing.T, redirectKey, path string, subjects map[string]string) (*testidp.Provider, net.Listener, string, *configs.Config, *broker.Broker) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	base := "https://" + ln.Addr().String()
	idp := testidp.Start(t, "frontdoor", "client-secret", base+path)
	secret := filepath.Join(t.TempDir(), "oidc-secret")
	if err := os.WriteFile(secret, []byte("client-secret\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	_, br := labSite(t, "")
	raw, _ := configs.Shipped("lab.yaml")
	site := strings.Replace(string(raw), "\nsite:\n", "\nsite:\n  auth:\n    oidc: {issuer: "+strconv.Quote(idp.Issuer)+
		", client_id: frontdoor, client_secret_file: "+strconv.Quote(secret)+", "+redirectKey+": "+strconv.Quote(base+path)+"}\n", 1)
	cfg, err := configs.Load("lab.yaml", []byte(bindSubjects(site, subjects)))
	if err != nil {
		t.Fatal(err)
	}
	return idp, ln, base, cfg, br
}

// serveTLS serves h over TLS on ln until the test ends.
func serveTLS(t *testing.T, ln net.Listener, h http.Handler) *httptest.Server {
	t.Helper()
	quiet := slog.New(slog.NewTextHandler(io.Discard, nil))
	srv := httptest.NewUnstartedServer(h)
	srv.Listener.Close()
	srv.Listener = ln
	srv.Config.ErrorLog = slog.NewLogLogger(quiet.Handler(), slog.LevelDebug)
	srv.StartTLS()
	t.Cleanup(srv.Close)
	return srv
}

// ssoConsole serves the admin API and console of the lab site over TLS on 127.0.0.1, signing
// in through idp; it returns the console's URL and its server.
func ssoConsole(t *testing.T) (*testidp.Provider, string, *httptest.Server) {
	t.Helper()
	idp, ln, base, cfg, br := webSSOSite(t, "redirect_url", configs.OIDCCallbackPath, map[string]string{"admin": "admin-1", "alice": "alice-1"})
	a, err := NewAdmin(AdminOptions{Config: cfg, Broker: br, Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	if err != nil {
		t.Fatal(err)
	}
	return idp, base, serveTLS(t, ln, a)
}

// An admin signs in to the console in Chromium through the identity provider: the login
// page's single sign-on button, the provider, the callback (code, PKCE, the client's
// secret, the ID token's nonce) and the console's pages as that admin. A user the provider
// vouches for but the configuration does not list as an admin or a monitor gets the login
// page again, saying why; so does a callback that this browser did not start.
func TestConsoleSingleSignOnInABrowser(t *testing.T) {
	testkit.Site(t)
	idp, base, srv := ssoConsole(t)
	ctx := testbrowser.Start(t, srv.Certificate())
	idp.Login(testidp.Identity{Subject: "admin-1", Username: "admin", AMR: []string{"pwd", "mfa"}})
	err := chromedp.Do(ctx,
		chromedp.Navigate(base+"/login"),
		chromedp.WaitVisible(chromedp.ID("sso")),
		chromedp.Click(chromedp.ID("sso")),
		chromedp.WaitVisible(chromedp.CSS(`body[data-role="admin"]`)))
	if err != nil {
		t.Fatalf("signing in through the provider: %v", err)
	}
	who, _ := chromedp.Run(ctx, chromedp.Text(chromedp.CSS("header")))
	if loc, _ := chromedp.Run(ctx, chromedp.Location()); !strings.HasSuffix(loc, "/site") || !strings.Contains(who, "admin") {
		t.Fatalf("after the sign-in: at %s, header %q; want the site page as admin", loc, who)
	}

	// alice is listed but neither an admin nor a monitor.
	idp.Login(testidp.Identity{Subject: "alice-1", Username: "alice"})
	err = chromedp.Do(ctx,
		chromedp.Navigate(base+ssoLoginPath),
		chromedp.WaitVisible(chromedp.ID("login-error")))
	msg, _ := chromedp.Run(ctx, chromedp.Text(chromedp.ID("login-error")))
	if err != nil || !strings.Contains(msg, `"alice" may not use the console`) {
		t.Fatalf("alice's sign-in: %v, %q; want the login page saying she may not use the console", err, msg)
	}

	// A callback this browser did not start (its state unknown here) is refused.
	err = chromedp.Do(ctx,
		chromedp.Navigate(base+configs.OIDCCallbackPath+"?state=forged&code=x"),
		chromedp.WaitVisible(chromedp.ID("login-error")))
	msg, _ = chromedp.Run(ctx, chromedp.Text(chromedp.ID("login-error")))
	if err != nil || !strings.Contains(msg, "not started here") {
		t.Fatalf("a forged callback: %v, %q; want the login page saying it was not started here", err, msg)
	}
	resp, err := srv.Client().Get(base + configs.OIDCCallbackPath + "?state=forged&code=x")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusUnauthorized {
		t.Fatalf("a forged callback: %s, want 401", resp.Status)
	}
}
