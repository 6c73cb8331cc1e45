package api

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"errors"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/frontdoor-vdi/frontdoor/client"
	"github.com/frontdoor-vdi/frontdoor/configs"
	"github.com/frontdoor-vdi/frontdoor/internal/testclock"
	"github.com/frontdoor-vdi/frontdoor/logins"
	"github.com/frontdoor-vdi/frontdoor/ticket"
	"github.com/pquerna/otp"
	"github.com/pquerna/otp/totp"
)

// cheapLabHash is a bcrypt hash of "lab" of cost 4.
const cheapLabHash = "$2a$04$0oosNBEwQYGXKSpwSt7CL.RI9X3WyfF4i3nqEFiU4AfmC3D7JOK9O"

// otpSite is the lab site with alice enrolled for TOTP (the enrolment writes the TOTP file),
// an access rule that asks staff for a password and a code, and a fake clock for the codes,
// the logins and the tickets. Its front doors are real launch APIs over TLS on loopback.
type otpSite struct {
	*loginSite
	secret string
	file   string
}

func newOTPSite(t *testing.T, lifetime string) *otpSite {
	t.Helper()
	file := filepath.Join(t.TempDir(), "totp-secrets")
	e, err := logins.EnrollTOTP(file, "lab", "alice")
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(e.URL, "otpauth://totp/lab:alice?") || !strings.Contains(e.URL, "secret="+e.Secret) {
		t.Fatalf("the enrolment's URL %q does not hold its secret %s", e.URL, e.Secret)
	}
	raw, err := configs.Shipped("lab.yaml")
	if err != nil {
		t.Fatal(err)
	}
	// Password hashes of bcrypt's lowest cost: the tests count logins, not bcrypt's work.
	site := strings.Replace(string(raw), "\nsite:\n", "\nsite:\n  auth: {totp_file: "+strconv.Quote(file)+", factor_lifetime: "+lifetime+", min_password_cost: 4}\n", 1)
	site = strings.ReplaceAll(site, labHash, cheapLabHash)
	site += "\naccess_rules:\n  - {name: staff-two-factors, action: allow, user_groups: [staff], factors: [password, totp]}\n"
	cfg, err := configs.Load("lab.yaml", []byte(site))
	if err != nil {
		t.Fatal(err)
	}
	clk := testclock.New(time.Date(2026, 12, 1, 9, 0, 0, 0, time.UTC))
	return &otpSite{loginSite: newLoginSite(t, cfg, clk), secret: e.Secret, file: file}
}

// code is alice's code at the site's clock plus d.
func (s *otpSite) code(d time.Duration) string {
	s.t.Helper()
	c, err := totp.GenerateCodeCustom(s.secret, s.clk.Now().Add(d), totp.ValidateOpts{Period: 30, Digits: otp.DigitsSix, Algorithm: otp.AlgorithmSHA1})
	if err != nil {
		s.t.Fatal(err)
	}
	return c
}

// launch launches the desktop as alice with password "lab" and code through the front door
// at port.
func (s *otpSite) launch(port uint16, pool *x509.CertPool, code, endpoint string) (*client.Descriptor, error) {
	l := &client.Launcher{Name: "127.0.0.1", Port: port, User: "alice", Password: "lab", OTP: code, Resource: "desktop", Endpoint: endpoint, RootCAs: pool}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	d, _, err := l.Launch(ctx)
	return d, err
}

// A TOTP login end to end: without a code the rule denies the launch and names itself; with
// alice's code the launch goes, and its tickets seal her login — user, password+totp, the
// time — with the end of its factor lifetime; the same password and code again within the
// login cache's minutes is that login (its time too); a code is good one step either side.
func TestATOTPLoginIsSealedIntoTheTickets(t *testing.T) {
	s := newOTPSite(t, "8h")
	_, port, pool := s.frontDoor()
	_, err := s.launch(port, pool, "", "pc")
	var de *client.DeniedError
	if !errors.As(err, &de) || !strings.Contains(de.Reason, `access rule "staff-two-factors"`) || !strings.Contains(de.Reason, "the login has password, lacks totp") {
		t.Fatalf("a launch with the password alone: %v, want a denial naming staff-two-factors and the lacking totp", err)
	}
	login := s.clk.Now()
	code := s.code(0)
	d, err := s.launch(port, pool, code, "pc")
	if err != nil {
		t.Fatalf("a launch with the code: %v", err)
	}
	for _, tok := range []string{d.LaunchTicket, d.ReconnectTicket} {
		c, err := s.verifier.Peek(tok)
		if err != nil {
			t.Fatal(err)
		}
		if c.User != "alice" || c.Factors != ticket.FactorPassword|ticket.FactorTOTP || !c.AuthTime.Equal(login) || !c.LoginExpires.Equal(login.Add(8*time.Hour)) {
			t.Fatalf("the %s ticket seals %s with %s at %s until %s; want alice, password+totp, %s, 8h later", c.Kind, c.User, c.Factors, c.AuthTime, c.LoginExpires, login)
		}
	}
	s.clk.Advance(20 * time.Second)
	d, err = s.launch(port, pool, code, "pc")
	if err != nil {
		t.Fatalf("the same login again (a relaunch): %v", err)
	}
	if c, _ := s.verifier.Peek(d.ReconnectTicket); !c.AuthTime.Equal(login) {
		t.Fatalf("the cached login seals %s, want its check's time %s", c.AuthTime, login)
	}
	// bob has no secret: his code is no factor but a failed login.
	bob := &client.Launcher{Name: "127.0.0.1", Port: port, User: "bob", Password: "lab", OTP: code, Resource: "desktop", RootCAs: pool}
	if _, _, err := bob.Launch(context.Background()); !errors.Is(err, client.ErrUnauthorized) {
		t.Fatalf("a code of a user without a secret: %v, want %v", err, client.ErrUnauthorized)
	}
	for _, tc := range []struct {
		name string
		at   time.Duration
		ok   bool
	}{
		{"the previous step's code is taken (clock skew)", -30 * time.Second, true},
		{"the next step's code is taken", 30 * time.Second, true},
		{"a code two steps old is refused", -60 * time.Second, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s.clk.Advance(5 * time.Minute) // past the previous logins' cache and codes
			_, err := s.launch(port, pool, s.code(tc.at), "pc")
			if tc.ok && err != nil {
				t.Fatalf("launch: %v", err)
			}
			if !tc.ok && !errors.Is(err, client.ErrUnauthorized) {
				t.Fatalf("launch: %v, want %v", err, client.ErrUnauthorized)
			}
		})
	}
}

// A code is accepted once, site-wide: another front door that did not see the login refuses
// it, as a failed login; the next code is taken, also spaced as apps show it.
func TestAOneTimeCodeIsAcceptedOnce(t *testing.T) {
	s := newOTPSite(t, "10h")
	_, port1, pool1 := s.frontDoor()
	_, port2, pool2 := s.frontDoor()
	code := s.code(0)
	if _, err := s.launch(port1, pool1, code, "pc"); err != nil {
		t.Fatalf("the first login with the code: %v", err)
	}
	s.clk.Advance(10 * time.Second)
	if _, err := s.launch(port2, pool2, code, "laptop"); !errors.Is(err, client.ErrUnauthorized) {
		t.Fatalf("the code again at another front door: %v, want %v", err, client.ErrUnauthorized)
	}
	s.clk.Advance(30 * time.Second)
	next := s.code(0)
	if _, err := s.launch(port2, pool2, next[:3]+" "+next[3:], "laptop"); err != nil {
		t.Fatalf("the next code, spaced as apps show it: %v", err)
	}
}

// Wrong codes are failed logins, throttled as wrong passwords: after a source's tokens are
// spent (one comes back every 10 s, so a slow run may make a few more tries), a login from
// it is answered 429 without a check, even with the right code.
func TestWrongCodesAreThrottledAsWrongPasswords(t *testing.T) {
	s := newOTPSite(t, "10h")
	_, port, pool := s.frontDoor()
	right := s.code(0)
	wrong := "000000"
	if wrong == right {
		wrong = "111111"
	}
	tooMany := strconv.Itoa(http.StatusTooManyRequests)
	throttled := false
	for i := 0; i < 2*logins.FailuresPerSource && !throttled; i++ {
		_, err := s.launch(port, pool, wrong, "pc")
		switch {
		case err != nil && strings.Contains(err.Error(), tooMany) && i >= logins.FailuresPerSource:
			throttled = true
		case !errors.Is(err, client.ErrUnauthorized):
			t.Fatalf("wrong code %d: %v, want %v (429 only after %d)", i, err, client.ErrUnauthorized, logins.FailuresPerSource)
		}
	}
	if !throttled {
		t.Fatalf("%d wrong codes were all checked, none throttled", 2*logins.FailuresPerSource)
	}
	if _, err := s.launch(port, pool, right, "pc"); err == nil || !strings.Contains(err.Error(), tooMany) {
		t.Fatalf("the right code once throttled: %v, want 429", err)
	}
}

// A reconnect ticket of a TOTP login, rotated as gateways do, is refused once the factor
// lifetime from the login is over, and checks until then.
func TestAReconnectAfterTheFactorLifetimeIsRefused(t *testing.T) {
	s := newOTPSite(t, "2h")
	_, port, pool := s.frontDoor()
	d, err := s.launch(port, pool, s.code(0), "pc")
	if err != nil {
		t.Fatal(err)
	}
	ch := ticket.Channel{Port: 8443, Proto: "tcp"}
	c, err := s.verifier.Check(d.ReconnectTicket, "", ch)
	if err != nil {
		t.Fatal(err)
	}
	s.clk.Advance(time.Hour)
	next, _, err := s.signer.Reissue(c, c.Expires)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.verifier.Check(next, "", ch); err != nil {
		t.Fatalf("an hour after the login: %v", err)
	}
	s.clk.Advance(time.Hour)
	if _, err := s.verifier.Check(next, "", ch); !errors.Is(err, ticket.ErrLoginExpired) {
		t.Fatalf("two hours after the login: %v, want %v", err, ticket.ErrLoginExpired)
	}
}

// The TOTP file must be its owner's alone: one that others may read is refused, and a login
// with a code is answered 503 (no failure counted) rather than checked against it.
func TestATOTPFileOthersMayReadIsRefused(t *testing.T) {
	s := newOTPSite(t, "10h")
	_, port, pool := s.frontDoor()
	if err := os.Chmod(s.file, 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := logins.ReadTOTPFile(s.file); !errors.Is(err, logins.ErrTOTPFileMode) {
		t.Fatalf("ReadTOTPFile of a 0644 file: %v, want %v", err, logins.ErrTOTPFileMode)
	}
	if _, err := logins.EnrollTOTP(s.file, "lab", "bob"); !errors.Is(err, logins.ErrTOTPFileMode) {
		t.Fatalf("EnrollTOTP into a 0644 file: %v, want %v", err, logins.ErrTOTPFileMode)
	}
	_, err := s.launch(port, pool, s.code(0), "pc")
	if err == nil || !strings.Contains(err.Error(), strconv.Itoa(http.StatusServiceUnavailable)) {
		t.Fatalf("a login with a code against a 0644 file: %v, want 503", err)
	}
}

// A client certificate is the certificate factor; a code beside it adds totp, and a wrong
// one fails the login (throttled as beside a password). The admin API's explain takes the
// factors to decide with.
func TestACodeBesideACertificate(t *testing.T) {
	s := newOTPSite(t, "10h")
	a := logins.New(s.cfg, logins.Options{Verifier: s.verifier, Now: s.clk.Now, Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	leaf := &x509.Certificate{Subject: pkix.Name{CommonName: "alice"}, ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}}
	req := func(code string) *http.Request {
		r := httptest.NewRequest(http.MethodPost, "/v1/launch", nil)
		r.TLS = &tls.ConnectionState{VerifiedChains: [][]*x509.Certificate{{leaf}}}
		if code != "" {
			r.Header.Set(logins.OTPHeader, code)
		}
		return r
	}
	if li, err := a.Authenticate(req("")); err != nil || li.Factors != ticket.FactorCertificate {
		t.Fatalf("a certificate alone: %s, %v; want the certificate factor", li.Factors, err)
	}
	wrong := "000000"
	if wrong == s.code(0) {
		wrong = "111111"
	}
	if _, err := a.Authenticate(req(wrong)); !errors.Is(err, logins.ErrNoLogin) {
		t.Fatalf("a certificate and a wrong code: %v, want %v", err, logins.ErrNoLogin)
	}
	if li, err := a.Authenticate(req(s.code(0))); err != nil || li.Factors != ticket.FactorCertificate|ticket.FactorTOTP || li.User.Name != "alice" {
		t.Fatalf("a certificate and the code: %s %s, %v; want alice with certificate+totp", li.User.Name, li.Factors, err)
	}

	ts := newTestSite(t, nil)
	ts.admin, _ = NewAdmin(AdminOptions{Config: s.cfg, Broker: s.br, Zone: "hq", Node: "fd-hq-1", Logger: ts.quiet})
	for _, tc := range []struct{ body, want string }{
		{`{"user":"alice","resource":"desktop","location_zone":"hq"}`, `"outcome": "denied"`},
		{`{"user":"alice","resource":"desktop","location_zone":"hq","factors":["password","totp"]}`, "rule staff-two-factors allows it"},
		{`{"user":"alice","resource":"desktop","factors":["sms"]}`, `\"sms\" is not a factor`},
	} {
		if rec := ts.do(t, "admin", http.MethodPost, "/v1/admin/explain", tc.body); !strings.Contains(rec.Body.String(), tc.want) {
			t.Errorf("explain %s: %d %s, want %q", tc.body, rec.Code, rec.Body, tc.want)
		}
	}
}

// The tickets' factors and the configuration's are the same names: a rule's factor is the
// bit a login seals.
func TestTicketFactorsAreTheConfigurationsFactors(t *testing.T) {
	var all ticket.Factors
	for _, n := range configs.Factors() {
		f, ok := ticket.ParseFactor(n)
		if !ok {
			t.Fatalf("configs.%s is no ticket factor", n)
		}
		all |= f
	}
	if got := strings.Join(all.Names(), ","); got != strings.Join(configs.Factors(), ",") {
		t.Fatalf("ticket factors %s, configuration factors %v", got, configs.Factors())
	}
}
