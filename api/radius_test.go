package api

import (
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/frontdoor-vdi/frontdoor/client"
	"github.com/frontdoor-vdi/frontdoor/configs"
	"github.com/frontdoor-vdi/frontdoor/internal/testclock"
	"github.com/frontdoor-vdi/frontdoor/logins"
	"github.com/frontdoor-vdi/frontdoor/logins/radiustest"
	"github.com/frontdoor-vdi/frontdoor/ticket"
)

// radiusSite is the lab site whose site.auth.radius asks servers, on a fake clock, with an
// access rule that asks staff for the radius factor (and, in role factor, a password).
type radiusSite struct {
	*loginSite
	secret string // the secret file
	logs   *syncBuffer
}

// syncBuffer is a bytes.Buffer for a logger that goroutines share.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.b.Write(p)
}

func (b *syncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.b.String()
}

// newRADIUSSite builds the site; radius is the YAML of site.auth.radius beside its servers
// and secret file (e.g. "role: factor, users: [alice]"). In role primary alice has no
// password hash.
func newRADIUSSite(t *testing.T, radiusYAML string, servers ...netip.AddrPort) *radiusSite {
	t.Helper()
	secret := filepath.Join(t.TempDir(), "radius-secret")
	if err := os.WriteFile(secret, []byte(radiustest.SecretText+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	raw, err := configs.Shipped("lab.yaml")
	if err != nil {
		t.Fatal(err)
	}
	var list []string
	for _, s := range servers {
		list = append(list, strconv.Quote(s.String()))
	}
	rule := "factors: [password, radius]"
	site := string(raw)
	if strings.Contains(radiusYAML, "primary") {
		rule = "factors: [radius]"
		site = strings.Replace(site, `{name: alice, home_zone: east, password_hash: "`+labHash+`"}`, "{name: alice, home_zone: east}", 1)
	}
	site = strings.Replace(site, "\nsite:\n", "\nsite:\n  auth: {min_password_cost: 4, radius: {servers: ["+strings.Join(list, ", ")+"], secret_file: "+strconv.Quote(secret)+", timeout: 300ms, "+radiusYAML+"}}\n", 1)
	site = strings.ReplaceAll(site, labHash, cheapLabHash)
	site += "\naccess_rules:\n  - {name: staff-radius, action: allow, user_groups: [staff], " + rule + "}\n"
	cfg, err := configs.Load("lab.yaml", []byte(site))
	if err != nil {
		t.Fatal(err)
	}
	clk := testclock.New(time.Date(2026, 12, 1, 9, 0, 0, 0, time.UTC))
	s := &radiusSite{loginSite: newLoginSite(t, cfg, clk), secret: secret, logs: &syncBuffer{}}
	s.loginSite.logs = s.logs
	return s
}

// launch posts a launch of the desktop as user with pass and code (logins.OTPHeader; "" for none)
// and returns the status and the answer's error text, and its tickets' claims when it went.
func (s *radiusSite) launch(url string, pool *x509.CertPool, user, pass, code string) (int, string, *ticket.Claims) {
	s.t.Helper()
	req, _ := http.NewRequest(http.MethodPost, url+"/v1/launch", strings.NewReader(`{"resource":"desktop","endpoint":"pc"}`))
	req.Header.Set("Content-Type", "application/json")
	req.SetBasicAuth(user, pass)
	if code != "" {
		req.Header.Set(logins.OTPHeader, code)
	}
	hc := &http.Client{Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool}}, Timeout: 20 * time.Second}
	defer hc.CloseIdleConnections()
	resp, err := hc.Do(req)
	if err != nil {
		s.t.Fatal(err)
	}
	defer resp.Body.Close()
	var answer struct {
		Error           string `json:"error"`
		Reason          string `json:"reason"`
		ReconnectTicket string `json:"reconnect_ticket"`
	}
	json.NewDecoder(resp.Body).Decode(&answer)
	if resp.StatusCode != http.StatusOK {
		return resp.StatusCode, answer.Error + answer.Reason, nil
	}
	c, err := s.verifier.Peek(answer.ReconnectTicket)
	if err != nil {
		s.t.Fatalf("the reconnect ticket: %v", err)
	}
	return resp.StatusCode, "", &c
}

// Role factor end to end: alice's password and a passcode the RADIUS server accepts launch,
// sealing password+radius; the request carried the NAS-Identifier, the client's address and
// a Message-Authenticator; the same password and passcode again within the login cache's
// minutes is that login (the server is not asked again), and past them the server refuses
// the used passcode; the password alone lacks the radius factor the rule requires; a
// challenge is refused with a 401 that says what is not supported; rejected passcodes are
// failed logins, throttled (401, then 429).
func TestARADIUSPasscodeIsASecondFactor(t *testing.T) {
	srv := radiustest.Start(t, radiustest.SecretText, false)
	s := newRADIUSSite(t, "role: factor, users: [alice]", srv.Addr)
	url, _, pool := s.frontDoor()

	if code, msg, _ := s.launch(url, pool, "alice", "lab", ""); code != http.StatusForbidden || !strings.Contains(msg, "lacks radius") {
		t.Fatalf("the password alone: %d %q, want 403 naming the lacking radius factor", code, msg)
	}
	login := s.clk.Now()
	code, msg, c := s.launch(url, pool, "alice", "lab", "123 456")
	if code != http.StatusOK {
		t.Fatalf("the password and the passcode: %d %q", code, msg)
	}
	if c.User != "alice" || c.Factors != ticket.FactorPassword|ticket.FactorRADIUS || !c.AuthTime.Equal(login) {
		t.Fatalf("the ticket seals %s with %s at %s; want alice, password+radius, %s", c.User, c.Factors, c.AuthTime, login)
	}
	attrs := strings.Join(srv.Attrs(), ",")
	if attrs != "lab,127.0.0.1,Virtual" {
		t.Fatalf("the request's NAS-Identifier, Calling-Station-Id, NAS-Port-Type: %s; want lab,127.0.0.1,Virtual", attrs)
	}
	asked := srv.Count()
	s.clk.Advance(time.Minute)
	if code, msg, _ := s.launch(url, pool, "alice", "lab", "123456"); code != http.StatusOK || srv.Count() != asked {
		t.Fatalf("the same login a minute later: %d %q, the server asked %d times more; want 200 from the cache", code, msg, srv.Count()-asked)
	}
	s.clk.Advance(5 * time.Minute)
	if code, _, _ := s.launch(url, pool, "alice", "lab", "123456"); code != http.StatusUnauthorized || srv.Count() != asked+1 {
		t.Fatalf("the used passcode past the cache's minutes: %d after %d more requests; want 401 from the server", code, srv.Count()-asked)
	}
	if code, _, _ := s.launch(url, pool, "alice", "wrong", "123456"); code != http.StatusUnauthorized || srv.Count() != asked+1 {
		t.Fatalf("a wrong password: %d, the server asked %d more times; want 401 without asking it", code, srv.Count()-asked-1)
	}

	code, msg, _ = s.launch(url, pool, "alice", "lab", "999999")
	if code != http.StatusUnauthorized || !strings.Contains(msg, "Access-Challenge") || !strings.Contains(msg, "does not support") || !strings.Contains(msg, "Enter the next tokencode") {
		t.Fatalf("a challenged passcode: %d %q; want 401 saying the challenge is not supported, with the server's words", code, msg)
	}
	if !strings.Contains(s.logs.String(), "challenge") {
		t.Errorf("the challenge was not logged:\n%s", s.logs)
	}

	// Rejected passcodes: 401 while the source has tokens (the wrong password and the
	// challenge above took two of its 10), then 429 without asking the server.
	tooMany := false
	for i := 0; i < 2*logins.FailuresPerSource && !tooMany; i++ {
		switch code, msg, _ := s.launch(url, pool, "alice", "lab", fmt.Sprintf("%06d", 200000+i)); {
		case code == http.StatusTooManyRequests && i >= logins.FailuresPerSource-3:
			tooMany = true
		case code != http.StatusUnauthorized:
			t.Fatalf("rejected passcode %d: %d %q; want 401 (429 only after %d)", i, code, msg, logins.FailuresPerSource)
		}
	}
	if !tooMany {
		t.Fatalf("%d rejected passcodes were all asked, none throttled", 2*logins.FailuresPerSource)
	}
	before := srv.Count()
	if code, _, _ := s.launch(url, pool, "alice", "lab", "123456"); code != http.StatusTooManyRequests || srv.Count() != before {
		t.Fatalf("a login once throttled: %d, the server asked %d more times; want 429 without asking", code, srv.Count()-before)
	}
}

// The servers are asked in order: one that is down (its port refuses) or silent (no answer
// within the timeout, retries included) gives way to the next; with none answering — down,
// silent, keyed with another secret (its answers fail the Response Authenticator), or
// unsigned while the site requires a Message-Authenticator — a login is answered 503,
// logged, and counts no failure; a site that takes unsigned answers takes them.
func TestRADIUSServersFailOverAndNoAnswerIs503(t *testing.T) {
	// Registered first, so checked last: after the servers and the front doors closed, no
	// exchange (its socket, its cancel hook) is left behind.
	before := goleak.IgnoreCurrent()
	t.Cleanup(func() { goleak.VerifyNone(t, before) })
	good := radiustest.Start(t, radiustest.SecretText, false)
	for _, tt := range []struct {
		name    string
		extra   string
		servers func() []netip.AddrPort
		want    int
		log     string
	}{
		{"a server that refuses gives way to the next", "retries: 1", func() []netip.AddrPort { return []netip.AddrPort{radiustest.ClosedUDP(t), good.Addr} }, http.StatusOK, "asking the next"},
		{"a silent server gives way to the next after its timeouts", "retries: 1", func() []netip.AddrPort { return []netip.AddrPort{radiustest.SilentUDP(t), good.Addr} }, http.StatusOK, "no answer to 2 sends"},
		{"no server up is 503", "retries: 0", func() []netip.AddrPort { return []netip.AddrPort{radiustest.ClosedUDP(t), radiustest.SilentUDP(t)} }, http.StatusServiceUnavailable, "no RADIUS server answered"},
		{"a server of another secret is no answer", "retries: 0", func() []netip.AddrPort { return []netip.AddrPort{radiustest.StartNoCheck(t, "another-secret").Addr} }, http.StatusServiceUnavailable, "not authentic (is the shared secret the server's?)"},
		{"an unsigned answer is no answer", "retries: 0", func() []netip.AddrPort {
			return []netip.AddrPort{radiustest.Start(t, radiustest.SecretText, true).Addr}
		}, http.StatusServiceUnavailable, "no Message-Authenticator"},
		{"a site may take unsigned answers", "retries: 0, require_message_authenticator: false", func() []netip.AddrPort {
			return []netip.AddrPort{radiustest.Start(t, radiustest.SecretText, true).Addr}
		}, http.StatusOK, "RADIUS accepted"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			good.Forget() // each case logs in with 123456 afresh
			s := newRADIUSSite(t, "role: factor, users: [alice], "+tt.extra, tt.servers()...)
			url, _, pool := s.frontDoor()
			code, msg, _ := s.launch(url, pool, "alice", "lab", "123456")
			if code != tt.want {
				t.Fatalf("a login: %d %q, want %d", code, msg, tt.want)
			}
			if !strings.Contains(s.logs.String(), tt.log) {
				t.Fatalf("the log does not say %q:\n%s", tt.log, s.logs)
			}
			if !strings.HasPrefix(tt.name, "no server") {
				return
			}
			// No failure counted: more logins than the source's tokens are all 503, none 429.
			for i := range logins.FailuresPerSource + 1 {
				if code, msg, _ := s.launch(url, pool, "alice", "lab", "123456"); code != http.StatusServiceUnavailable {
					t.Fatalf("login %d with the servers down: %d %q; want 503 (no failure counted)", i, code, msg)
				}
			}
		})
	}
}

// Role primary: alice has no password hash, and her password is the RADIUS server's to
// check: accepted, the login's factor is radius (not password, which names a bcrypt check);
// a wrong one is a failed login; bob, whom the role does not cover, logs in with his bcrypt
// password as before; the same password again within the cache's minutes is not asked
// again. frontdoor connect's launcher logs in so too.
func TestRADIUSAsThePrimaryCheckOfThePassword(t *testing.T) {
	srv := radiustest.Start(t, radiustest.SecretText, false)
	s := newRADIUSSite(t, "role: primary, users: [alice]", srv.Addr)
	url, _, pool := s.frontDoor()
	code, msg, c := s.launch(url, pool, "alice", "radius-pw", "")
	if code != http.StatusOK || c.Factors != ticket.FactorRADIUS {
		t.Fatalf("alice's RADIUS password: %d %q, factors %v; want 200 with radius", code, msg, c)
	}
	asked := srv.Count()
	if code, _, _ := s.launch(url, pool, "alice", "radius-pw", ""); code != http.StatusOK || srv.Count() != asked {
		t.Fatalf("the same login again: %d after %d more requests; want 200 from the cache", code, srv.Count()-asked)
	}
	if code, _, _ := s.launch(url, pool, "alice", "lab", ""); code != http.StatusUnauthorized || srv.Count() != asked+1 {
		t.Fatalf("a wrong password: %d after %d more requests; want 401 from the server", code, srv.Count()-asked)
	}
	// bob is not covered: his bcrypt password, which the staff rule's radius factor then
	// lacks (a 403, after a login that went).
	if code, msg, _ := s.launch(url, pool, "bob", "lab", ""); code != http.StatusForbidden || !strings.Contains(msg, "lacks radius") || srv.Count() != asked+1 {
		t.Fatalf("bob's bcrypt password: %d %q; want 403 lacking radius, without asking the server", code, msg)
	}

	host, port, _ := net.SplitHostPort(strings.TrimPrefix(url, "https://"))
	p, _ := strconv.Atoi(port)
	l := &client.Launcher{Name: host, Port: uint16(p), User: "alice", Password: "radius-pw", Resource: "desktop", Endpoint: "laptop", RootCAs: pool}
	s.clk.Advance(10 * time.Minute)
	if _, _, err := l.Launch(context.Background()); err != nil {
		t.Fatalf("the launcher with alice's RADIUS password: %v", err)
	}
}

// The secret file must be its owner's alone, and not empty: a login that needs RADIUS is
// then answered 503 rather than asked with it.
func TestARADIUSSecretFileOthersMayReadIsRefused(t *testing.T) {
	srv := radiustest.Start(t, radiustest.SecretText, false)
	s := newRADIUSSite(t, "role: factor, users: [alice]", srv.Addr)
	url, _, pool := s.frontDoor()
	if b, err := logins.ReadRADIUSSecret(s.secret); err != nil || string(b) != radiustest.SecretText {
		t.Fatalf("ReadRADIUSSecret: %q %v; want the secret without its newline", b, err)
	}
	if err := os.Chmod(s.secret, 0o640); err != nil {
		t.Fatal(err)
	}
	if _, err := logins.ReadRADIUSSecret(s.secret); !errors.Is(err, logins.ErrRADIUSSecretMode) {
		t.Fatalf("ReadRADIUSSecret of a 0640 file: %v, want %v", err, logins.ErrRADIUSSecretMode)
	}
	if code, msg, _ := s.launch(url, pool, "alice", "lab", "123456"); code != http.StatusServiceUnavailable || srv.Count() != 0 {
		t.Fatalf("a login against a 0640 secret file: %d %q after %d requests; want 503 without asking", code, msg, srv.Count())
	}
	if err := os.Chmod(s.secret, 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(s.secret, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := logins.ReadRADIUSSecret(s.secret); err == nil || !strings.Contains(err.Error(), "empty") {
		t.Fatalf("ReadRADIUSSecret of an empty file: %v, want an error", err)
	}
}

// A passcode beside a client certificate is checked by RADIUS for a user role factor
// covers: certificate+radius; a rejected one fails the login.
func TestARADIUSPasscodeBesideACertificate(t *testing.T) {
	srv := radiustest.Start(t, radiustest.SecretText, false)
	s := newRADIUSSite(t, "role: factor, users: [alice]", srv.Addr)
	a := logins.New(s.cfg, logins.Options{Verifier: s.verifier, Now: s.clk.Now, Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	leaf := &x509.Certificate{Subject: pkix.Name{CommonName: "alice"}, ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}}
	req := func(code string) *http.Request {
		r := httptest.NewRequest(http.MethodPost, "/v1/launch", nil)
		r.TLS = &tls.ConnectionState{VerifiedChains: [][]*x509.Certificate{{leaf}}}
		r.Header.Set(logins.OTPHeader, code)
		return r
	}
	if _, err := a.Authenticate(req("654321")); !errors.Is(err, logins.ErrNoLogin) {
		t.Fatalf("a certificate and a rejected passcode: %v, want %v", err, logins.ErrNoLogin)
	}
	if li, err := a.Authenticate(req("123456")); err != nil || li.Factors != ticket.FactorCertificate|ticket.FactorRADIUS {
		t.Fatalf("a certificate and the passcode: %s, %v; want certificate+radius", li.Factors, err)
	}
	if _, err := a.Authenticate(req("999999")); !errors.Is(err, logins.ErrRADIUSChallenge) {
		t.Fatalf("a certificate and a challenged passcode: %v, want %v", err, logins.ErrRADIUSChallenge)
	}
}
