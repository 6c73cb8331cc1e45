package api

import (
	"io"
	"log/slog"
	"net/http"
	"strings"
	"testing"

	"github.com/chromedp/chromedp"

	"github.com/frontdoor-vdi/frontdoor/configs"
	"github.com/frontdoor-vdi/frontdoor/internal/testbrowser"
	"github.com/frontdoor-vdi/frontdoor/internal/testidp"
	"github.com/frontdoor-vdi/frontdoor/internal/testkit"
)

// A user signs in to the portal in Chromium through the identity provider: the sign-in
// page's single sign-on button, the provider, the portal's callback (code, PKCE, the
// client's secret, the ID token's nonce), then the user's desktops. A token naming a user
// the site does not know, in none of its groups, gets the sign-in page again saying why;
// so does a callback this browser did not start.
func TestPortalSingleSignOnInABrowser(t *testing.T) {
	testkit.Site(t)
	idp, ln, base, cfg, br := webSSOSite(t, "portal_redirect_url", configs.PortalOIDCCallbackPath, map[string]string{"alice": "alice-1"})
	srv := serveTLS(t, ln, NewLaunch(LaunchOptions{Config: cfg, Broker: br, Logger: slog.New(slog.NewTextHandler(io.Discard, nil))}))

	ctx := testbrowser.Start(t, srv.Certificate())
	idp.Login(testidp.Identity{Subject: "alice-1", Username: "alice", AMR: []string{"pwd", "mfa"}})
	err := chromedp.Do(ctx,
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
