package api

import (
	"context"
	"crypto/sha256"
	"encoding/base64"
	"io"
	"log/slog"
	"net/http/httptest"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
)

// consoleBrowser starts a headless Chromium that trusts srv's certificate (its public key,
// pinned), closed when the test ends.
func consoleBrowser(t *testing.T, srv *httptest.Server) context.Context {
	t.Helper()
	exe := ""
	for _, name := range []string{"chromium", "chromium-browser", "google-chrome"} {
		if p, err := exec.LookPath(name); err == nil {
			exe = p
			break
		}
	}
	if exe == "" {
		t.Fatal("the console's browser tests need Chromium: apt-get install chromium")
	}
	spki := sha256.Sum256(srv.Certificate().RawSubjectPublicKeyInfo)
	opts := append(chromedp.DefaultExecAllocatorOptions[:], chromedp.ExecPath(exe), chromedp.NoSandbox,
		chromedp.WindowSize(1280, 900), chromedp.UserDataDir(t.TempDir()),
		chromedp.Flag("ignore-certificate-errors-spki-list", base64.StdEncoding.EncodeToString(spki[:])))
	actx, cancelA := chromedp.NewExecAllocator(context.Background(), opts...)
	bctx, cancelB := chromedp.NewContext(actx)
	ctx, cancel := context.WithTimeout(bctx, 2*time.Minute)
	t.Cleanup(func() { cancel(); cancelB(); cancelA() })
	if err := chromedp.Do(ctx); err != nil {
		t.Fatalf("starting %s: %v", exe, err)
	}
	return ctx
}

// TestConsoleLoginWithAOneTimeCodeInABrowser drives the console's login form in Chromium
// against an admin API over TLS on loopback whose site asks a RADIUS server for the admin's
// second factor: a challenged passcode leaves the browser on the login page saying what is
// not supported; the passcode the server accepts, typed in the one-time code field, logs
// in to the site page.
func TestConsoleLoginWithAOneTimeCodeInABrowser(t *testing.T) {
	if testing.Short() {
		t.Skip("a browser: not under -short")
	}
	rs := startRADIUS(t, radiusSecretText, false)
	s := newRADIUSSite(t, "role: factor, users: [admin]", rs.addr)
	a, err := NewAdmin(AdminOptions{Config: s.cfg, Broker: s.br, Zone: "hq", Node: "fd-hq-1", Logins: s.logins,
		Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewUnstartedServer(a)
	srv.Config.ErrorLog = slog.NewLogLogger(slog.New(slog.NewTextHandler(io.Discard, nil)).Handler(), slog.LevelDebug)
	srv.StartTLS()
	t.Cleanup(srv.Close)
	ctx := consoleBrowser(t, srv)

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
	if n := rs.count(); n != 2 {
		t.Fatalf("the RADIUS server was asked %d times, want 2 (the challenged passcode, the accepted one)", n)
	}
}
