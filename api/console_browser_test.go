package api

import (
	"context"
	"io"
	"log/slog"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/frontdoor-vdi/frontdoor/internal/testbrowser"
	"github.com/frontdoor-vdi/frontdoor/internal/testkit"
	"github.com/frontdoor-vdi/frontdoor/logins/radiustest"
)

// TestConsoleLoginWithAOneTimeCodeInABrowser drives the console's login form in Chromium
// against an admin API over TLS on loopback whose site asks a RADIUS server for the admin's
// second factor: a challenged passcode leaves the browser on the login page saying what is
// not supported; the passcode the server accepts, typed in the one-time code field, logs
// in to the site page.
func TestConsoleLoginWithAOneTimeCodeInABrowser(t *testing.T) {
	testkit.Site(t)
	rs := radiustest.Start(t, radiustest.SecretText, false)
	s := newRADIUSSite(t, "role: factor, users: [admin]", rs.Addr)
	a, err := NewAdmin(AdminOptions{Config: s.cfg, Broker: s.br, Zone: "hq", Node: "fd-hq-1", Logins: s.throttle,
		Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewUnstartedServer(a)
	srv.Config.ErrorLog = slog.NewLogLogger(slog.New(slog.NewTextHandler(io.Discard, nil)).Handler(), slog.LevelDebug)
	srv.StartTLS()
	t.Cleanup(srv.Close)
	ctx := testbrowser.Start(t, srv.Certificate())

	login := func(code string) chromedp.Action[chromedp.Void] {
		return chromedp.Steps(
			chromedp.Navigate(srv.URL+"/login"),
			chromedp.WaitVisible(chromedp.ID("otp")),
			chromedp.SendKeys(chromedp.ID("user"), "admin"),
			chromedp.SendKeys(chromedp.ID("password"), "lab"),
			chromedp.SendKeys(chromedp.ID("otp"), code),
			chromedp.Click(chromedp.ID("login")))
	}
	step, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	if err := chromedp.Do(step, login("999999"), chromedp.WaitVisible(chromedp.ID("login-error"))); err != nil {
		t.Fatalf("a challenged passcode: %v", err)
	}
	msg, err := chromedp.Run(step, chromedp.Text(chromedp.ID("login-error")))
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(msg, "Access-Challenge") || !strings.Contains(msg, "does not support") {
		t.Fatalf("the login page says %q after a challenge; want what is not supported", msg)
	}
	if err := chromedp.Do(step, login("123456"), chromedp.WaitVisible(chromedp.CSS(`tr[data-zone="hq"]`))); err != nil {
		t.Fatalf("logging in with the passcode: %v", err)
	}
	if n := rs.Count(); n != 2 {
		t.Fatalf("the RADIUS server was asked %d times, want 2 (the challenged passcode, the accepted one)", n)
	}
}
