package lab

import (
	"context"
	"crypto/tls"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	chrome "github.com/frontdoor-vdi/frontdoor/internal/browser"
	"github.com/frontdoor-vdi/frontdoor/internal/testbrowser"
	"github.com/frontdoor-vdi/frontdoor/internal/testkit"
)

// browser starts a headless Chromium that trusts the lab's admin listener (its certificate's
// public key, pinned; nothing else is trusted), closed when the test ends.
func browser(t *testing.T, l *Lab, admin string) context.Context {
	t.Helper()
	c, err := tls.Dial("tcp", strings.TrimPrefix(admin, "https://"), l.TLSClientConfig())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	return testbrowser.Start(t, c.ConnectionState().PeerCertificates[0])
}

// shot saves a screenshot of the page as name.png in the test's directory, and in
// $FRONTDOOR_SCREENSHOTS when set.
func shot(t *testing.T, ctx context.Context, name string) {
	t.Helper()
	png, err := chromedp.Run(ctx, chromedp.FullScreenshot(100))
	if err != nil {
		t.Fatalf("screenshot %s: %v", name, err)
	}
	dirs := []string{t.TempDir()}
	if d := os.Getenv("FRONTDOOR_SCREENSHOTS"); d != "" {
		dirs = append(dirs, d)
	}
	for _, d := range dirs {
		if err := os.WriteFile(filepath.Join(d, name+".png"), png, 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

// stepTimeout bounds each browser step: a selector that never shows fails the test then.
const stepTimeout = 20 * time.Second

// do runs browser steps, each group bounded by stepTimeout.
func do(ctx context.Context, steps ...chromedp.Action[chromedp.Void]) error {
	sctx, cancel := context.WithTimeout(ctx, stepTimeout)
	defer cancel()
	return chromedp.Do(sctx, steps...)
}

// login logs in to the console at admin as user.
func login(t *testing.T, ctx context.Context, admin, user string) {
	t.Helper()
	err := do(ctx,
		chromedp.Navigate(admin+"/login"),
		chromedp.WaitVisible(chromedp.ID("user")),
		chromedp.SendKeys(chromedp.ID("user"), user),
		chromedp.SendKeys(chromedp.ID("password"), "lab"),
		chromedp.Click(chromedp.ID("login")),
		chromedp.WaitVisible(chromedp.CSS(`tr[data-zone="hq"]`)))
	if err != nil {
		t.Fatalf("logging in as %s: %v", user, err)
	}
}

// fetchStatus runs a fetch in the page and returns the answer's status.
func fetchStatus(t *testing.T, ctx context.Context, js string) int {
	t.Helper()
	status, err := chromedp.Run(ctx, chromedp.Evaluate[int](js+`.then(r => r.status)`, chromedp.EvalAwaitPromise))
	if err != nil {
		t.Fatal(err)
	}
	return status
}

// confirm clicks an action's button and confirms it in the dialog.
func confirm(sel string) chromedp.Action[chromedp.Void] {
	return chromedp.Steps(
		chromedp.WaitVisible(chromedp.CSS(sel)),
		clickNow(sel),
		chromedp.WaitVisible(chromedp.ID("confirm-ok")),
		clickNow("#confirm-ok"))
}

// clickNow clicks the element sel selects, found and clicked by one script in the page (the
// console redraws a table when a live event comes).
func clickNow(sel string) chromedp.Action[chromedp.Void] { return chrome.ClickNow(sel) }

// TestConsoleInABrowser drives the operator's console in Chromium against the lab: an admin
// logs in, switches the secure gateway off for a group and sees the next launch come back
// direct, drains a gateway and sees its row turn draining while new launches avoid it, runs
// an explain; a write without the CSRF token is refused; a monitor sees no buttons and the
// API refuses its writes.
func TestConsoleInABrowser(t *testing.T) {
	testkit.Site(t)
	l, _ := startLab(t)
	admin := adminURL(t, l)
	ctx := browser(t, l, admin)
	login(t, ctx, admin, "admin")
	shot(t, ctx, "console-site")

	// The secure gateway off for the desktops group: the next desktop launch is direct.
	err := do(ctx,
		chromedp.Navigate(admin+"/secure-gateway"),
		chromedp.WaitVisible(chromedp.CSS(`tr[data-group="desktops"] .state-ok`)),
		confirm(`tr[data-group="desktops"] button[data-action="off"]`),
		chromedp.WaitVisible(chromedp.CSS(`tr[data-group="desktops"] .state-bad`)))
	if err != nil {
		t.Fatalf("switching the secure gateway off: %v", err)
	}
	shot(t, ctx, "console-secure-gateway")
	if d, code := launch(t, l, "127.41.0.9", "https://127.41.0.11:9443", "dave", "desktop"); code != http.StatusOK || d.Mode != "direct" {
		t.Fatalf("launch after switching the secure gateway off: %d, mode %q, want direct", code, d.Mode)
	}
	if err := do(ctx, confirm(`tr[data-group="desktops"] button[data-action="on"]`),
		chromedp.WaitVisible(chromedp.CSS(`tr[data-group="desktops"] .state-ok`))); err != nil {
		t.Fatalf("switching it on again: %v", err)
	}

	// Drain gw-hq-1: its row reads draining, and hq's next launch is offered it last or not at all.
	err = do(ctx,
		chromedp.Navigate(admin+"/gateways"),
		chromedp.WaitVisible(chromedp.CSS(`tr[data-gateway="gw-hq-1"] td.verdict .state-ok`)),
		confirm(`tr[data-gateway="gw-hq-1"] button[data-action="drain"]`),
		chromedp.WaitVisible(chromedp.CSS(`tr[data-gateway="gw-hq-1"] td.verdict .state-warn`)))
	if err != nil {
		t.Fatalf("draining gw-hq-1: %v", err)
	}
	shot(t, ctx, "console-gateways")
	d, code := launch(t, l, "127.41.0.9", "https://127.41.0.11:9443", "bob", "browser")
	if code != http.StatusOK || d.Mode != "gateway" {
		t.Fatalf("launch while gw-hq-1 drains: %d %+v", code, d)
	}
	for _, g := range d.Gateways {
		if g.Name == "gw-hq-1" {
			t.Fatalf("a new session was offered the draining gw-hq-1: %+v", d.Gateways)
		}
	}
	if err := do(ctx, confirm(`tr[data-gateway="gw-hq-1"] button[data-action="auto"]`),
		chromedp.WaitVisible(chromedp.CSS(`tr[data-gateway="gw-hq-1"] td.verdict .state-ok`))); err != nil {
		t.Fatalf("lifting the drain: %v", err)
	}

	// An explain: carol's browser from west's range.
	err = do(ctx,
		chromedp.Navigate(admin+"/explain"),
		chromedp.WaitVisible(chromedp.ID("explain-user")),
		chromedp.SendKeys(chromedp.ID("explain-user"), "carol"),
		chromedp.SendKeys(chromedp.ID("explain-resource"), "browser"),
		chromedp.SendKeys(chromedp.ID("explain-client_ip"), "127.43.0.9"),
		chromedp.Click(chromedp.ID("explain-run")),
		chromedp.WaitVisible(chromedp.CSS(`#explain-result ol.trace li`)))
	if err != nil {
		t.Fatalf("explain: %v", err)
	}
	trace, err := chromedp.Run(ctx, chromedp.Text(chromedp.ID("explain-result")))
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(trace, "west") {
		t.Errorf("the explain of carol's browser from west names no west: %q", trace)
	}
	shot(t, ctx, "console-explain")

	// At a tablet's width the machines page fits: wide tables scroll in their frame, the page
	// itself does not.
	if err := do(ctx, chromedp.EmulateViewport(820, 1180), chromedp.Navigate(admin+"/machines"),
		chromedp.WaitVisible(chromedp.CSS(`tr[data-machine="vda-hq-1"]`))); err != nil {
		t.Fatalf("the machines page at a tablet's width: %v", err)
	}
	over, err := chromedp.Run(ctx, chromedp.Evaluate[int](`document.documentElement.scrollWidth - window.innerWidth`))
	if err != nil {
		t.Fatal(err)
	}
	if over > 0 {
		t.Errorf("at 820 px the machines page is %d px wider than the window", over)
	}
	shot(t, ctx, "console-machines-tablet")
	if err := do(ctx, chromedp.EmulateReset()); err != nil {
		t.Fatal(err)
	}

	// A write without the CSRF token, from the console's own page, is refused.
	if s := fetchStatus(t, ctx, `fetch('/v1/admin/gateway', {method: 'POST', credentials: 'same-origin', headers: {'Content-Type': 'application/json'}, body: '{"on": false}'})`); s != http.StatusForbidden {
		t.Fatalf("a write without the CSRF token: %d, want 403", s)
	}

	// The audit page lists what was done.
	if err := do(ctx, chromedp.Navigate(admin+"/audit"),
		chromedp.WaitVisible(chromedp.CSS(`table.audit tbody tr`))); err != nil {
		t.Fatalf("the audit page: %v", err)
	}
	shot(t, ctx, "console-audit")

	// A monitor: no buttons, and the API refuses its writes even with the token.
	if err := do(ctx, chromedp.Click(chromedp.ID("logout")), chromedp.WaitVisible(chromedp.ID("user"))); err != nil {
		t.Fatalf("logging out: %v", err)
	}
	login(t, ctx, admin, "operator")
	err = do(ctx, chromedp.Navigate(admin+"/gateways"),
		chromedp.WaitVisible(chromedp.CSS(`tr[data-gateway="gw-hq-1"]`)))
	if err != nil {
		t.Fatal(err)
	}
	buttons, err := chromedp.Run(ctx, chromedp.Evaluate[int](`document.querySelectorAll('button[data-action]').length`))
	if err != nil {
		t.Fatal(err)
	}
	if buttons != 0 {
		t.Fatalf("a monitor's gateways page shows %d action buttons", buttons)
	}
	js := `fetch('/v1/admin/health', {method: 'POST', credentials: 'same-origin', headers: {'Content-Type': 'application/json', 'X-CSRF-Token': document.querySelector('meta[name=csrf]').content}, body: '{"gateway": "gw-hq-1", "override": "down"}'})`
	if s := fetchStatus(t, ctx, js); s != http.StatusForbidden {
		t.Fatalf("a monitor's write: %d, want 403", s)
	}
	if v := verdict(t, l, "gw-hq-1"); v != "up" {
		t.Fatalf("gw-hq-1 reads %q after a monitor's refused write", v)
	}
}
