package api

import (
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/frontdoor-vdi/frontdoor/configs"
	"github.com/frontdoor-vdi/frontdoor/internal/testclock"
	"github.com/frontdoor-vdi/frontdoor/logins/radiustest"
)

// consoleAdmin is an Admin of one admin and one monitor (password "lab" both) whose console
// sessions run on clk.
func consoleAdmin(t *testing.T, clk *testclock.Clock) *Admin {
	t.Helper()
	cfg, br := labSite(t, "") // admin, operator (monitor) and alice, all "lab"
	a, err := NewAdmin(AdminOptions{Config: cfg, Broker: br, Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	if err != nil {
		t.Fatal(err)
	}
	a.console.now = clk.Now
	return a
}

// consoleLogin posts the login form and returns the session cookie ("" when refused) and
// the answer's status.
func consoleLoginAs(t *testing.T, a *Admin, user, pass string) (*http.Cookie, int) {
	t.Helper()
	return consoleLoginFrom(t, a, "", user, pass)
}

// consoleLoginFrom is consoleLoginAs from the address from ("": httptest's).
func consoleLoginFrom(t *testing.T, a *Admin, from, user, pass string) (*http.Cookie, int) {
	t.Helper()
	form := url.Values{"user": {user}, "password": {pass}}
	req := httptest.NewRequest(http.MethodPost, "https://fd.test/login", strings.NewReader(form.Encode()))
	if from != "" {
		req.RemoteAddr = from
	}
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	req.Header.Set("Origin", "https://fd.test")
	rec := httptest.NewRecorder()
	a.ServeHTTP(rec, req)
	for _, c := range rec.Result().Cookies() {
		if c.Name == consoleCookie && c.Value != "" {
			if !c.HttpOnly || !c.Secure || c.SameSite != http.SameSiteStrictMode {
				t.Fatalf("console cookie %+v: want HttpOnly, Secure, SameSite=Strict", c)
			}
			return c, rec.Code
		}
	}
	return nil, rec.Code
}

// csrfOf reads a page's CSRF token.
func csrfOf(t *testing.T, a *Admin, c *http.Cookie) string {
	t.Helper()
	req := httptest.NewRequest(http.MethodGet, "https://fd.test/site", nil)
	req.AddCookie(c)
	rec := httptest.NewRecorder()
	a.ServeHTTP(rec, req)
	body := rec.Body.String()
	_, rest, ok := strings.Cut(body, `<meta name="csrf" content="`)
	if rec.Code != http.StatusOK || !ok {
		t.Fatalf("the site page: %d, no CSRF token", rec.Code)
	}
	tok, _, _ := strings.Cut(rest, `"`)
	return tok
}

// TestConsoleSessions: admins and monitors log in, other users do not; a write needs the
// session's CSRF token and the console's origin; a session ends after 15 minutes without a
// request, and on logout.
func TestConsoleSessions(t *testing.T) {
	clk := testclock.New(time.Date(2026, 12, 1, 9, 0, 0, 0, time.UTC))
	a := consoleAdmin(t, clk)
	if c, code := consoleLoginAs(t, a, "alice", "lab"); c != nil || code != http.StatusUnauthorized {
		t.Fatalf("a user who is neither admin nor monitor: cookie %v, %d", c, code)
	}
	// From an address of its own: a failure makes its source's next comparisons suspect,
	// which wait for their share of the CPU, and on a loaded host the logins below would
	// wait past bcryptWait.
	if c, code := consoleLoginFrom(t, a, "192.0.2.99:4321", "admin", "wrong"); c != nil || code != http.StatusUnauthorized {
		t.Fatalf("a wrong password: cookie %v, %d", c, code)
	}
	c, code := consoleLoginAs(t, a, "admin", "lab")
	if c == nil || code != http.StatusSeeOther {
		t.Fatalf("admin's login: %d", code)
	}
	tok := csrfOf(t, a, c)
	write := func(c *http.Cookie, token, origin string) int {
		req := httptest.NewRequest(http.MethodPost, "https://fd.test/v1/admin/gateway", strings.NewReader(`{"on": true}`))
		req.AddCookie(c)
		if token != "" {
			req.Header.Set("X-CSRF-Token", token)
		}
		if origin != "" {
			req.Header.Set("Origin", origin)
		}
		rec := httptest.NewRecorder()
		a.ServeHTTP(rec, req)
		return rec.Code
	}
	for _, w := range []struct {
		what          string
		token, origin string
		want          int
	}{
		{"without the token", "", "https://fd.test", http.StatusForbidden},
		{"with another session's token", strings.Repeat("0", len(tok)), "https://fd.test", http.StatusForbidden},
		{"from another origin", tok, "https://evil.test", http.StatusForbidden},
		{"with the token, from the console", tok, "https://fd.test", http.StatusOK},
	} {
		if got := write(c, w.token, w.origin); got != w.want {
			t.Errorf("a write %s: %d, want %d", w.what, got, w.want)
		}
	}
	m, _ := consoleLoginAs(t, a, "operator", "lab")
	if m == nil {
		t.Fatal("the monitor's login refused")
	}
	if got := write(m, csrfOf(t, a, m), "https://fd.test"); got != http.StatusForbidden {
		t.Errorf("a monitor's write with its token: %d, want 403", got)
	}

	// 14 minutes idle: still in; 16 more: out, to the login page.
	clk.Advance(14 * time.Minute)
	if got := write(c, tok, ""); got != http.StatusOK {
		t.Fatalf("after 14 minutes idle: %d, want 200", got)
	}
	clk.Advance(16 * time.Minute)
	req := httptest.NewRequest(http.MethodGet, "https://fd.test/site", nil)
	req.AddCookie(c)
	rec := httptest.NewRecorder()
	a.ServeHTTP(rec, req)
	if rec.Code != http.StatusSeeOther || rec.Header().Get("Location") != "/login" {
		t.Fatalf("after 16 minutes idle the site page: %d to %q, want the login page", rec.Code, rec.Header().Get("Location"))
	}
	if got := write(c, tok, ""); got != http.StatusUnauthorized {
		t.Fatalf("a write on an expired session: %d, want 401", got)
	}

	// Logout ends a session at once.
	c, _ = consoleLoginAs(t, a, "admin", "lab")
	tok = csrfOf(t, a, c)
	form := url.Values{"csrf": {tok}}
	req = httptest.NewRequest(http.MethodPost, "https://fd.test/logout", strings.NewReader(form.Encode()))
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	req.AddCookie(c)
	a.ServeHTTP(httptest.NewRecorder(), req)
	if got := write(c, tok, ""); got != http.StatusUnauthorized {
		t.Fatalf("a write after logout: %d, want 401", got)
	}
}

// The console's login form takes a one-time code (field otp) as the API takes logins.OTPHeader: a
// RADIUS passcode of the admin logs in, a challenged one is refused saying what is not
// supported, and with the RADIUS servers down the form answers 503.
func TestConsoleLoginTakesAOneTimeCode(t *testing.T) {
	rs := radiustest.Start(t, radiustest.SecretText, false)
	for _, tc := range []struct {
		name   string
		server func() netip.AddrPort
		code   string
		status int
		says   string
	}{
		{"a challenged passcode is refused", func() netip.AddrPort { return rs.Addr }, "999999", http.StatusUnauthorized, "does not support"},
		{"the servers down is 503", func() netip.AddrPort { return radiustest.ClosedUDP(t) }, "123456", http.StatusServiceUnavailable, "RADIUS servers cannot be asked"},
		{"the accepted passcode logs in", func() netip.AddrPort { return rs.Addr }, "123 456", http.StatusSeeOther, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := newRADIUSSite(t, "role: factor, users: [admin]", tc.server())
			a, err := NewAdmin(AdminOptions{Config: s.cfg, Broker: s.br, Logins: s.throttle, Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
			if err != nil {
				t.Fatal(err)
			}
			form := url.Values{"user": {"admin"}, "password": {"lab"}, "otp": {tc.code}}
			req := httptest.NewRequest(http.MethodPost, "https://fd.test/login", strings.NewReader(form.Encode()))
			req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
			req.Header.Set("Origin", "https://fd.test")
			rec := httptest.NewRecorder()
			a.ServeHTTP(rec, req)
			if rec.Code != tc.status || !strings.Contains(rec.Body.String(), tc.says) {
				t.Fatalf("the login form: %d %s; want %d saying %q", rec.Code, rec.Body, tc.status, tc.says)
			}
		})
	}
}

// Finding L1 of the security review: a monitor's repeated console logins evicted every
// admin's console session (one least-recently-used list of 1,000 for everyone), and each
// added an entry to the audit log. A user's logins now evict only that user's own sessions,
// and the audit log records a user's logins from one address once per consoleLoginAudit,
// the next entry counting those between.
func TestOneUsersConsoleLoginsEvictOnlyTheirOwn(t *testing.T) {
	clk := testclock.New(time.Date(2026, 12, 1, 9, 0, 0, 0, time.UTC))
	cs := &consoleStore{now: clk.Now}
	admin, _ := cs.start(configs.User{Name: "admin", Admin: true})
	monitor := configs.User{Name: "operator", Monitor: true}
	var last string
	for range consoleSessions + 10 {
		clk.Advance(time.Millisecond)
		last, _ = cs.start(monitor)
	}
	if _, ok := cs.get(admin); !ok {
		t.Fatal("the admin's console session was evicted by the monitor's logins")
	}
	if _, ok := cs.get(last); !ok {
		t.Fatal("the monitor's newest session is gone")
	}
	mine := 0
	for _, s := range cs.byID {
		if s.user.Name == monitor.Name {
			mine++
		}
	}
	if mine != consolePerUser {
		t.Fatalf("the monitor holds %d sessions, want %d", mine, consolePerUser)
	}

	if rec, _ := cs.audit("operator", "192.0.2.7"); !rec {
		t.Fatal("a first console login is not audited")
	}
	for i := range 5 {
		clk.Advance(time.Minute)
		if rec, n := cs.audit("operator", "192.0.2.7"); rec || n != i+1 {
			t.Fatalf("a repeated login within %s: audited %v, %d since; want not audited, %d", consoleLoginAudit, rec, n, i+1)
		}
	}
	if rec, _ := cs.audit("operator", "192.0.2.8"); !rec {
		t.Fatal("a login from another address is not audited")
	}
	clk.Advance(consoleLoginAudit)
	if rec, n := cs.audit("operator", "192.0.2.7"); !rec || n != 5 {
		t.Fatalf("a login after %s: audited %v, %d since; want audited, with the 5 between", consoleLoginAudit, rec, n)
	}
}
