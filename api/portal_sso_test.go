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

	"github.com/frontdoor-vdi/frontdoor/configs"
	"github.com/frontdoor-vdi/frontdoor/internal/testbrowser"
	"github.com/frontdoor-vdi/frontdoor/internal/testidp"
)

// A user signs in to the portal in Chromium through the identity provider: the sign-in
// page's single sign-on button, the provider, the portal's callback (code, PKCE, the
// client's secret, the ID token's nonce), then the user's desktops. A token naming a user
// the site does not know, in none of its groups, gets the sign-in page again saying why;
// so does a callback this browser did not start.
func TestPortalSingleSignOnInABrowser(t *testing.T) {
	if testing.Short() {
		t.Skip("a browser: not under -short")
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	base := "https://" + ln.Addr().String()
	idp := testidp.Start(t, "frontdoor", "portal-secret", base+configs.PortalOIDCCallbackPath)
	secret := filepath.Join(t.TempDir(), "oidc-secret")
	if err := os.WriteFile(secret, []byte("portal-secret\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	_, br := labSite(t, "")
	raw, _ := configs.Shipped("lab.yaml")
	site := strings.Replace(string(raw), "\nsite:\n", "\nsite:\n  auth:\n    oidc: {issuer: "+strconv.Quote(idp.Issuer)+
		", client_id: frontdoor, client_secret_file: "+strconv.Quote(secret)+", portal_redirect_url: "+strconv.Quote(base+configs.PortalOIDCCallbackPath)+"}\n", 1)
	site = bindSubjects(site, map[string]string{"alice": "alice-1"})
	cfg, err := configs.Load("lab.yaml", []byte(site))
	if err != nil {
		t.Fatal(err)
	}
	quiet := slog.New(slog.NewTextHandler(io.Discard, nil))
	srv := httptest.NewUnstartedServer(NewLaunch(LaunchOptions{Config: cfg, Broker: br, Logger: quiet}))
	srv.Listener.Close()
	srv.Listener = ln
	srv.Config.ErrorLog = slog.NewLogLogger(quiet.Handler(), slog.LevelDebug)
	srv.StartTLS()
	t.Cleanup(srv.Close)

	ctx := testbrowser.Start(t, srv.Certificate())
	idp.Login(testidp.Identity{Subject: "alice-1", Username: "alice", AMR: []string{"pwd", "mfa"}})
	err = chromedp.Do(ctx,
		chromedp.Navigate(base+"/"),
		chromedp.WaitVisible(chromedp.ID("sso")),
		chromedp.Click(chromedp.ID("sso")),
		chromedp.WaitVisible(chromedp.CSS(`li[data-resource="desktop"]`)))
	if err != nil {
		t.Fatalf("signing in to the portal through the provider: %v", err)
	}
	who, _ := chromedp.Run(ctx, chromedp.Text(chromedp.CSS("header")))
	if !strings.Contains(who, "alice") {
		t.Fatalf("after the sign-in the header reads %q, want alice", who)
	}

	// A user the site does not know, in none of its groups.
	idp.Login(testidp.Identity{Subject: "mallory-1", Username: "mallory"})
	err = chromedp.Do(ctx, chromedp.Navigate(base+portalSSOPath), chromedp.WaitVisible(chromedp.ID("login-error")))
	msg, _ := chromedp.Run(ctx, chromedp.Text(chromedp.ID("login-error")))
	if err != nil || !strings.Contains(msg, "not a user of the site") {
		t.Fatalf("mallory's sign-in: %v, %q; want the sign-in page saying she is not a user of the site", err, msg)
	}

	// A callback this browser did not start is refused.
	resp, err := srv.Client().Get(base + configs.PortalOIDCCallbackPath + "?state=forged&code=x")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusUnauthorized {
		t.Fatalf("a forged callback: %s, want 401", resp.Status)
	}
}
