package api

import (
	"context"
	"crypto/ed25519"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"errors"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/netip"
	"net/url"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/frontdoor-vdi/frontdoor/broker"
	"github.com/frontdoor-vdi/frontdoor/client"
	"github.com/frontdoor-vdi/frontdoor/configs"
	"github.com/frontdoor-vdi/frontdoor/internal/siteid"
	"github.com/frontdoor-vdi/frontdoor/internal/testbuf"
	"github.com/frontdoor-vdi/frontdoor/internal/testclock"
	"github.com/frontdoor-vdi/frontdoor/logins"
	"github.com/frontdoor-vdi/frontdoor/pki"
	"github.com/frontdoor-vdi/frontdoor/pki/pkitest"
	"github.com/frontdoor-vdi/frontdoor/store/memory"
	"github.com/frontdoor-vdi/frontdoor/ticket"
)

// certSite is the lab site with three operator CAs — cards (smart cards: UPN, an issuing CA
// and its CRL), mail (email SAN) and dept (common name) — beside the site CA, served by a
// real launch API over TLS on loopback.
type certSite struct {
	t                *testing.T
	cards, mail, dep *pkitest.CA
	crl              string // the cards issuing CA's CRL file
	rootCRL          string // the cards root CA's
	clk              *testclock.Clock
	site             *pki.CA
	verifier         *ticket.Verifier
	logs             *testbuf.Buffer
	port             uint16 // the launch API's
	cfg              *configs.Config
	br               *broker.Broker
	cas              *pki.ClientCAs
	tls              *tls.Config
}

func newCertSite(t *testing.T) *certSite {
	t.Helper()
	dir := t.TempDir()
	s := &certSite{t: t, clk: testclock.New(time.Now()), logs: &testbuf.Buffer{}}
	s.cards, s.mail, s.dep = pkitest.NewCA(t, dir, "cards", true), pkitest.NewCA(t, dir, "mail", false), pkitest.NewCA(t, dir, "dept", false)
	s.crl = filepath.Join(dir, "cards-issuing.crl")
	s.cards.WriteCRL(s.crl, 1, s.clk.Now(), s.clk.Now().Add(time.Hour))
	s.rootCRL = filepath.Join(dir, "cards-root.crl")
	s.cards.WriteRootCRL(s.rootCRL, 1, s.clk.Now(), s.clk.Now().Add(24*time.Hour))
	auth := "  auth:\n    min_password_cost: 4\n    client_certificates:\n" +
		"      - {ca_file: " + strconv.Quote(s.cards.File) + ", user_from: upn, strip_domain: corp.example, crl_files: [" + strconv.Quote(s.crl) + ", " + strconv.Quote(s.rootCRL) + "]}\n" +
		"      - {ca_file: " + strconv.Quote(s.mail.File) + ", user_from: email, strip_domain: Corp.Example}\n" +
		"      - {ca_file: " + strconv.Quote(s.dep.File) + "}\n"
	raw, err := configs.Shipped("lab.yaml")
	if err != nil {
		t.Fatal(err)
	}
	src := strings.Replace(string(raw), "\nsite:\n", "\nsite:\n"+auth, 1)
	src = strings.ReplaceAll(src, labHash, cheapLabHash)
	cfg, err := configs.Load("lab.yaml", []byte(src))
	if err != nil {
		t.Fatal(err)
	}
	br, err := broker.New(context.Background(), cfg, memory.New(), s.clk.Now)
	if err != nil {
		t.Fatal(err)
	}
	names := []string{"127.0.0.1", "localhost"}
	caDir := t.TempDir()
	site, err := pki.LoadOrCreateCA(caDir, "test", slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	certs, err := pki.NewCerts(ctx, caDir, names, site)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(certs.Close)
	s.site = site
	log := slog.New(slog.NewTextHandler(s.logs, &slog.HandlerOptions{Level: slog.LevelInfo}))
	cas, err := pki.LoadClientCAs(cfg.Site.Auth, site, log)
	if err != nil {
		t.Fatal(err)
	}
	pub, key, _ := ed25519.GenerateKey(rand.Reader)
	s.verifier = ticket.NewVerifier(pub, ticket.NewMemoryLedger(0, s.clk.Now), s.clk.Now)
	l := NewLaunch(LaunchOptions{Config: cfg, Broker: br, Signer: ticket.NewSigner(key, s.clk.Now), Verifier: s.verifier, Logins: &logins.Throttle{}, Logger: log, Now: s.clk.Now,
		ClientCAs: cas, Gateways: func(zone string) []GatewayEndpoint {
			return []GatewayEndpoint{{Name: "gw", Zone: zone, Addresses: []netip.Addr{netip.MustParseAddr("127.0.0.1")}}}
		}})
	s.cfg, s.br, s.cas, s.tls = cfg, br, cas, pki.ServerTLS(certs, site, names, nil, cas)
	s.port = s.serve(l)
	return s
}

// serve serves h over the site's TLS (as a node's listeners: ServerTLS) on 127.0.0.1 until
// the test ends, and returns its port.
func (s *certSite) serve(h http.Handler) uint16 {
	t := s.t
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := &http.Server{Handler: h, TLSConfig: s.tls.Clone(), ErrorLog: slog.NewLogLogger(slog.New(slog.NewTextHandler(io.Discard, nil)).Handler(), slog.LevelDebug)}
	done := make(chan error, 1)
	go func() { done <- srv.ServeTLS(ln, "", "") }()
	t.Cleanup(func() {
		srv.Close()
		if err := <-done; !errors.Is(err, http.ErrServerClosed) {
			t.Errorf("Serve: %v", err)
		}
	})
	return uint16(ln.Addr().(*net.TCPAddr).Port)
}

// launch launches the desktop with cert (and user and password when given).
func (s *certSite) launch(cert *tls.Certificate, user, password string) (*client.Descriptor, error) {
	l := &client.Launcher{Name: "127.0.0.1", Port: s.port, Certificate: cert, User: user, Password: password, Resource: "desktop", Endpoint: "pc", RootCAs: s.site.Pool()}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	d, _, err := l.Launch(ctx)
	return d, err
}

// loggedIn checks that cert launches, as user with the certificate factor alone.
func (s *certSite) loggedIn(cert *tls.Certificate, user string) {
	s.t.Helper()
	d, err := s.launch(cert, "", "")
	if err != nil {
		s.t.Fatalf("a launch with the certificate of %q: %v, want it to log in %s", cert.Leaf.Subject, err, user)
	}
	c, err := s.verifier.Peek(d.LaunchTicket)
	if err != nil {
		s.t.Fatal(err)
	}
	if c.User != user || c.Factors != ticket.FactorCertificate {
		s.t.Fatalf("the certificate of %q logged in %s with %s, want %s with certificate", cert.Leaf.Subject, c.User, c.Factors, user)
	}
}

// Certificates of each operator CA log their users in with the certificate factor, the
// name taken from the UPN, the email address or the common name, less the domain; the site
// CA's users' certificates still do, and its parties' still do not.
func TestOperatorCACertificatesLogUsersIn(t *testing.T) {
	s := newCertSite(t)
	s.loggedIn(s.cards.User(x509.Certificate{Subject: pkix.Name{CommonName: "Alice Smith"}, ExtraExtensions: []pkix.Extension{pkitest.UPNSAN("alice@corp.example")}}), "alice")
	s.loggedIn(s.mail.User(x509.Certificate{Subject: pkix.Name{CommonName: "Bob"}, EmailAddresses: []string{"bob@corp.example"}}), "bob")
	s.loggedIn(s.dep.User(x509.Certificate{Subject: pkix.Name{CommonName: "carol"}}), "carol")

	certPEM, keyPEM, err := s.site.IssueClient("dave", time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	dave, err := tls.X509KeyPair(certPEM, keyPEM)
	if err != nil {
		t.Fatal(err)
	}
	s.loggedIn(&dave, "dave")
	party, err := s.site.PartyCertificate(siteid.RoleMachine, "vda-1", []netip.Addr{netip.MustParseAddr("127.0.0.1")})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.launch(party, "", ""); !errors.Is(err, client.ErrUnauthorized) {
		t.Fatalf("a machine's certificate of the site CA: %v, want %v", err, client.ErrUnauthorized)
	}
	// A site CA certificate's common name is its user: a card's CN is no user of the site CA.
	if _, err := s.launch(s.cards.User(x509.Certificate{Subject: pkix.Name{CommonName: "alice"}}), "", ""); !errors.Is(err, client.ErrUnauthorized) {
		t.Fatalf("a card without a UPN, its CN a user's: %v, want %v", err, client.ErrUnauthorized)
	}
}

// A certificate whose serial its issuer's CRL lists is refused (401) and logged with its
// serial and CA; a CRL replaced on disk is read again, so a revocation takes effect at the
// next login, and its lifting too; a root's CRL that lists the issuing CA refuses all of its
// certificates.
func TestARevokedCertificateIsRefused(t *testing.T) {
	s := newCertSite(t)
	alice := s.cards.User(x509.Certificate{ExtraExtensions: []pkix.Extension{pkitest.UPNSAN("alice@corp.example")}})
	bob := s.cards.User(x509.Certificate{ExtraExtensions: []pkix.Extension{pkitest.UPNSAN("bob@corp.example")}})
	s.loggedIn(alice, "alice")

	s.cards.WriteCRL(s.crl, 2, s.clk.Now(), s.clk.Now().Add(time.Hour), alice)
	if _, err := s.launch(alice, "", ""); !errors.Is(err, client.ErrUnauthorized) {
		t.Fatalf("a revoked certificate: %v, want %v", err, client.ErrUnauthorized)
	}
	logs := s.logs.String()
	if !strings.Contains(logs, "level=INFO msg=\"a revoked client certificate was refused\" serial="+pki.SerialHex(alice.Leaf)) || !strings.Contains(logs, `ca="CN=cards issuing CA,O=cards"`) {
		t.Fatalf("the refusal is not logged at info with the serial and the CA:\n%s", logs)
	}
	s.loggedIn(bob, "bob") // the CRL revokes alice's certificate alone

	s.cards.WriteCRL(s.crl, 3, s.clk.Now(), s.clk.Now().Add(time.Hour))
	s.loggedIn(alice, "alice")

	// The root's CRL revokes the issuing CA, and so every certificate it issued.
	s.cards.WriteRootCRL(s.rootCRL, 2, s.clk.Now(), s.clk.Now().Add(24*time.Hour), s.cards.Signer)
	for _, c := range []*tls.Certificate{alice, bob} {
		if _, err := s.launch(c, "", ""); !errors.Is(err, client.ErrUnauthorized) {
			t.Fatalf("a certificate of a revoked issuing CA: %v, want %v", err, client.ErrUnauthorized)
		}
	}
	if !strings.Contains(s.logs.String(), `msg="a revoked client certificate was refused" serial=2 ca="CN=cards root CA,O=cards" subject="CN=cards issuing CA,O=cards"`) {
		t.Fatalf("the revoked issuing CA is not logged with its serial and the root:\n%s", s.logs)
	}
}

// A CRL past its next update refuses every certificate of its CA (503: the site must renew
// it) and is warned of once, until a fresh CRL is there; a CRL signed by another key is no
// CRL of the CA, and refuses its certificates too.
func TestAStaleCRLRefusesAllItsCertificates(t *testing.T) {
	s := newCertSite(t)
	alice := s.cards.User(x509.Certificate{ExtraExtensions: []pkix.Extension{pkitest.UPNSAN("alice@corp.example")}})
	bob := s.cards.User(x509.Certificate{ExtraExtensions: []pkix.Extension{pkitest.UPNSAN("bob@corp.example")}})
	s.loggedIn(alice, "alice")

	s.clk.Advance(61 * time.Minute)
	for _, c := range []*tls.Certificate{alice, bob, alice} {
		if _, err := s.launch(c, "", ""); err == nil || !strings.Contains(err.Error(), "503") || errors.Is(err, client.ErrUnauthorized) {
			t.Fatalf("a certificate of a CA whose CRL is stale: %v, want 503", err)
		}
	}
	if n := strings.Count(s.logs.String(), "a CRL is past its next update"); n != 1 {
		t.Fatalf("the stale CRL is warned of %d times, want once:\n%s", n, s.logs)
	}
	// Certificates of the other CAs are not its.
	s.loggedIn(s.dep.User(x509.Certificate{Subject: pkix.Name{CommonName: "carol"}}), "carol")

	s.cards.WriteCRL(s.crl, 2, s.clk.Now(), s.clk.Now().Add(time.Hour))
	s.loggedIn(bob, "bob")
	if !strings.Contains(s.logs.String(), "a CRL can be used again") {
		t.Fatalf("the fresh CRL is not logged:\n%s", s.logs)
	}

	forger := pkitest.NewCA(t, t.TempDir(), "cards", true) // the same names, another key
	forger.WriteCRL(s.crl, 3, s.clk.Now(), s.clk.Now().Add(time.Hour))
	if _, err := s.launch(bob, "", ""); err == nil || !strings.Contains(err.Error(), "503") {
		t.Fatalf("a certificate of a CA whose CRL is signed by another key: %v, want 503", err)
	}
	if !strings.Contains(s.logs.String(), "is signed by no certificate of its ca_file") {
		t.Fatalf("the forged CRL is not logged:\n%s", s.logs)
	}
}

// A certificate that names no configured user is a failed login, throttled as a wrong
// password: past the source's tokens the answer is 429, for a password login too.
func TestACertificateOfNoUserIsRefusedAndThrottled(t *testing.T) {
	s := newCertSite(t)
	mallory := s.cards.User(x509.Certificate{ExtraExtensions: []pkix.Extension{pkitest.UPNSAN("mallory@corp.example")}})
	nobody := s.mail.User(x509.Certificate{Subject: pkix.Name{CommonName: "no email"}})
	twice := s.cards.User(x509.Certificate{ExtraExtensions: []pkix.Extension{pkitest.UPNSAN("alice@corp.example", "bob@corp.example")}})
	for _, c := range []*tls.Certificate{nobody, twice} {
		if _, err := s.launch(c, "", ""); !errors.Is(err, client.ErrUnauthorized) {
			t.Fatalf("the certificate of %q: %v, want %v", c.Leaf.Subject, err, client.ErrUnauthorized)
		}
	}
	tooMany := strconv.Itoa(http.StatusTooManyRequests)
	throttled := false
	for i := 2; i < 2*logins.FailuresPerSource && !throttled; i++ {
		_, err := s.launch(mallory, "", "")
		switch {
		case err != nil && strings.Contains(err.Error(), tooMany) && i >= logins.FailuresPerSource:
			throttled = true
		case !errors.Is(err, client.ErrUnauthorized):
			t.Fatalf("unknown user's certificate %d: %v, want %v (429 only after %d)", i, err, client.ErrUnauthorized, logins.FailuresPerSource)
		}
	}
	if !throttled {
		t.Fatalf("%d certificates of no user were all answered 401, none throttled", 2*logins.FailuresPerSource)
	}
	if _, err := s.launch(nil, "alice", "lab"); err == nil || !strings.Contains(err.Error(), tooMany) {
		t.Fatalf("a password login from the throttled source: %v, want 429", err)
	}
	if !strings.Contains(s.logs.String(), `msg="a client certificate of an operator CA names no configured user" user=mallory`) {
		t.Fatalf("the unknown user is not logged:\n%s", s.logs)
	}
}

// A certificate of a CA the site does not name fails the handshake, and so does one of an
// operator CA that names a party of the site: a machine's identity is the site CA's alone.
func TestCertificatesOfOtherCAsFailTheHandshake(t *testing.T) {
	s := newCertSite(t)
	stranger := pkitest.NewCA(t, t.TempDir(), "stranger", false)
	for _, tc := range []struct {
		name, want string
		cert       *tls.Certificate
	}{
		{"a CA the site does not name", "tls: unknown certificate authority", stranger.User(x509.Certificate{Subject: pkix.Name{CommonName: "alice"}})},
		{"an operator CA's certificate naming a machine", "tls: bad certificate", s.dep.User(x509.Certificate{Subject: pkix.Name{CommonName: "alice"},
			URIs: []*url.URL{siteid.URI(siteid.RoleMachine, "vda-1")}})},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := s.launch(tc.cert, "", "")
			if err == nil || errors.Is(err, client.ErrUnauthorized) || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("launch: %v, want a TLS handshake failed with %q", err, tc.want)
			}
		})
	}
}

// The admin API takes certificates of operator CAs as the launch API does: an admin's or a
// monitor's logs in as them, a user's is no admin (401).
func TestTheAdminAPITakesOperatorCACertificates(t *testing.T) {
	s := newCertSite(t)
	a, err := NewAdmin(AdminOptions{Config: s.cfg, Broker: s.br, Zone: "hq", Node: "fd-hq-1", ClientCAs: s.cas,
		Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	if err != nil {
		t.Fatal(err)
	}
	port := s.serve(a)
	get := func(cert *tls.Certificate) int {
		t.Helper()
		c := &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: s.site.Pool(),
			GetClientCertificate: func(*tls.CertificateRequestInfo) (*tls.Certificate, error) { return cert, nil }}}}
		defer c.CloseIdleConnections()
		resp, err := c.Get("https://127.0.0.1:" + strconv.Itoa(int(port)) + "/v1/admin/machines")
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		return resp.StatusCode
	}
	if code := get(s.cards.User(x509.Certificate{ExtraExtensions: []pkix.Extension{pkitest.UPNSAN("admin@corp.example")}})); code != http.StatusOK {
		t.Fatalf("the admin's card: %d, want 200", code)
	}
	if code := get(s.cards.User(x509.Certificate{ExtraExtensions: []pkix.Extension{pkitest.UPNSAN("operator@corp.example")}})); code != http.StatusOK {
		t.Fatalf("the monitor's card: %d, want 200", code)
	}
	if code := get(s.cards.User(x509.Certificate{ExtraExtensions: []pkix.Extension{pkitest.UPNSAN("alice@corp.example")}})); code != http.StatusUnauthorized {
		t.Fatalf("alice's card at the admin API: %d, want 401 (no admin)", code)
	}
}

// An API of a site that names operator CAs but was given none logs no certificate in: it
// could not tell an operator CA's certificate from the site CA's.
func TestAnAPIWithoutTheOperatorCAsLogsNoCertificateIn(t *testing.T) {
	cfg, _ := labSite(t, "")
	cfg.Site.Auth.ClientCertificates = []configs.ClientCertificates{{CAFile: "corp-ca.pem", UserFrom: configs.UserFromCommonName}}
	a := logins.New(cfg, logins.Options{Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	r, _ := http.NewRequest(http.MethodPost, "/v1/launch", nil)
	leaf := &x509.Certificate{Subject: pkix.Name{CommonName: "alice"}, ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}}
	r.TLS = &tls.ConnectionState{VerifiedChains: [][]*x509.Certificate{{leaf}}}
	if li, err := a.Authenticate(r); !errors.Is(err, logins.ErrNoLogin) {
		t.Fatalf("authenticate = %s, %v; want %v", li.User.Name, err, logins.ErrNoLogin)
	}
}
