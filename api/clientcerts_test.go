package api

import (
	"context"
	"crypto/ecdsa"
	"crypto/ed25519"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"errors"
	"io"
	"log/slog"
	"math/big"
	"net"
	"net/http"
	"net/netip"
	"net/url"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"golang.org/x/crypto/cryptobyte"
	"golang.org/x/crypto/cryptobyte/asn1"

	"github.com/frontdoor-vdi/frontdoor/broker"
	"github.com/frontdoor-vdi/frontdoor/client"
	"github.com/frontdoor-vdi/frontdoor/configs"
	"github.com/frontdoor-vdi/frontdoor/internal/siteid"
	"github.com/frontdoor-vdi/frontdoor/internal/testbuf"
	"github.com/frontdoor-vdi/frontdoor/internal/testclock"
	"github.com/frontdoor-vdi/frontdoor/store/memory"
	"github.com/frontdoor-vdi/frontdoor/ticket"
)

// testCA is a CA of the operator's PKI made in the test: a root, and an issuing CA below it
// when issuing is set, which signs the users' certificates and the CRLs.
type testCA struct {
	t       *testing.T
	root    *x509.Certificate
	signer  *x509.Certificate // the issuing CA, or the root
	key     *ecdsa.PrivateKey // the signer's
	rootKey *ecdsa.PrivateKey
	file    string // the PEM of root (and issuing CA): the ca_file
	serials int64
}

func newTestCA(t *testing.T, dir, name string, issuing bool) *testCA {
	t.Helper()
	mk := func(tmpl *x509.Certificate, parent *x509.Certificate, parentKey *ecdsa.PrivateKey) (*x509.Certificate, *ecdsa.PrivateKey) {
		key, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
		if parent == nil {
			parent, parentKey = tmpl, key
		}
		der, err := x509.CreateCertificate(rand.Reader, tmpl, parent, &key.PublicKey, parentKey)
		if err != nil {
			t.Fatal(err)
		}
		c, err := x509.ParseCertificate(der)
		if err != nil {
			t.Fatal(err)
		}
		return c, key
	}
	ca := func(cn string, serial int64) *x509.Certificate {
		return &x509.Certificate{SerialNumber: big.NewInt(serial), Subject: pkix.Name{CommonName: cn, Organization: []string{name}},
			NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(24 * time.Hour),
			KeyUsage: x509.KeyUsageCertSign | x509.KeyUsageCRLSign, IsCA: true, BasicConstraintsValid: true}
	}
	c := &testCA{t: t, file: filepath.Join(dir, name+"-ca.pem"), serials: 100}
	var key *ecdsa.PrivateKey
	c.root, key = mk(ca(name+" root CA", 1), nil, nil)
	c.signer, c.key, c.rootKey = c.root, key, key
	pemOf := pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: c.root.Raw})
	if issuing {
		c.signer, c.key = mk(ca(name+" issuing CA", 2), c.root, key)
		pemOf = append(pemOf, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: c.signer.Raw})...)
	}
	if err := os.WriteFile(c.file, pemOf, 0o644); err != nil {
		t.Fatal(err)
	}
	return c
}

// user issues a client certificate: tmpl's names, the next serial, valid an hour.
func (c *testCA) user(tmpl x509.Certificate) *tls.Certificate {
	c.t.Helper()
	c.serials++
	tmpl.SerialNumber = big.NewInt(c.serials)
	tmpl.NotBefore, tmpl.NotAfter = time.Now().Add(-time.Hour), time.Now().Add(time.Hour)
	tmpl.KeyUsage = x509.KeyUsageDigitalSignature
	tmpl.ExtKeyUsage = []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}
	key, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	der, err := x509.CreateCertificate(rand.Reader, &tmpl, c.signer, &key.PublicKey, c.key)
	if err != nil {
		c.t.Fatal(err)
	}
	leaf, _ := x509.ParseCertificate(der)
	return &tls.Certificate{Certificate: [][]byte{der, c.signer.Raw}, PrivateKey: key, Leaf: leaf}
}

// writeCRL writes the signer's CRL revoking certs to file (replacing it whole, as an
// operator's tool does), next update at next.
func (c *testCA) writeCRL(file string, number int64, now, next time.Time, certs ...*tls.Certificate) {
	c.t.Helper()
	var leaves []*x509.Certificate
	for _, rc := range certs {
		leaves = append(leaves, rc.Leaf)
	}
	c.writeCRLOf(c.signer, c.key, file, number, now, next, leaves...)
}

// writeRootCRL writes the root's CRL revoking certs (an issuing CA) to file.
func (c *testCA) writeRootCRL(file string, number int64, now, next time.Time, certs ...*x509.Certificate) {
	c.t.Helper()
	c.writeCRLOf(c.root, c.rootKey, file, number, now, next, certs...)
}

func (c *testCA) writeCRLOf(by *x509.Certificate, key *ecdsa.PrivateKey, file string, number int64, now, next time.Time, certs ...*x509.Certificate) {
	c.t.Helper()
	var entries []x509.RevocationListEntry
	for _, rc := range certs {
		entries = append(entries, x509.RevocationListEntry{SerialNumber: rc.SerialNumber, RevocationTime: now.Add(-time.Minute)})
	}
	der, err := x509.CreateRevocationList(rand.Reader, &x509.RevocationList{Number: big.NewInt(number), ThisUpdate: now.Add(-time.Minute), NextUpdate: next,
		RevokedCertificateEntries: entries}, by, key)
	if err != nil {
		c.t.Fatal(err)
	}
	tmp := file + ".new"
	if err := os.WriteFile(tmp, pem.EncodeToMemory(&pem.Block{Type: "X509 CRL", Bytes: der}), 0o644); err != nil {
		c.t.Fatal(err)
	}
	if err := os.Rename(tmp, file); err != nil {
		c.t.Fatal(err)
	}
}

// upnSAN is a subject alternative name extension of a DNS name and the UPNs upns
// (otherName 1.3.6.1.4.1.311.20.2.3), as smart-card logon certificates carry them.
func upnSAN(upns ...string) pkix.Extension {
	var b cryptobyte.Builder
	b.AddASN1(asn1.SEQUENCE, func(b *cryptobyte.Builder) {
		b.AddASN1(asn1.Tag(2).ContextSpecific(), func(b *cryptobyte.Builder) { b.AddBytes([]byte("card.example")) })
		for _, u := range upns {
			b.AddASN1(asn1.Tag(0).ContextSpecific().Constructed(), func(b *cryptobyte.Builder) {
				b.AddASN1ObjectIdentifier(oidUPN)
				b.AddASN1(asn1.Tag(0).ContextSpecific().Constructed(), func(b *cryptobyte.Builder) {
					b.AddASN1(asn1.UTF8String, func(b *cryptobyte.Builder) { b.AddBytes([]byte(u)) })
				})
			})
		}
	})
	return pkix.Extension{Id: oidSubjectAltName, Value: b.BytesOrPanic()}
}

// certSite is the lab site with three operator CAs — cards (smart cards: UPN, an issuing CA
// and its CRL), mail (email SAN) and dept (common name) — beside the site CA, served by a
// real launch API over TLS on loopback.
type certSite struct {
	t                *testing.T
	cards, mail, dep *testCA
	crl              string // the cards issuing CA's CRL file
	rootCRL          string // the cards root CA's
	clk              *testclock.Clock
	site             *CA
	verifier         *ticket.Verifier
	logs             *testbuf.Buffer
	port             uint16 // the launch API's
	cfg              *configs.Config
	br               *broker.Broker
	cas              *ClientCAs
	tls              *tls.Config
}

func newCertSite(t *testing.T) *certSite {
	t.Helper()
	dir := t.TempDir()
	s := &certSite{t: t, clk: testclock.New(time.Now()), logs: &testbuf.Buffer{}}
	s.cards, s.mail, s.dep = newTestCA(t, dir, "cards", true), newTestCA(t, dir, "mail", false), newTestCA(t, dir, "dept", false)
	s.crl = filepath.Join(dir, "cards-issuing.crl")
	s.cards.writeCRL(s.crl, 1, s.clk.Now(), s.clk.Now().Add(time.Hour))
	s.rootCRL = filepath.Join(dir, "cards-root.crl")
	s.cards.writeRootCRL(s.rootCRL, 1, s.clk.Now(), s.clk.Now().Add(24*time.Hour))
	auth := "  auth:\n    min_password_cost: 4\n    client_certificates:\n" +
		"      - {ca_file: " + strconv.Quote(s.cards.file) + ", user_from: upn, strip_domain: corp.example, crl_files: [" + strconv.Quote(s.crl) + ", " + strconv.Quote(s.rootCRL) + "]}\n" +
		"      - {ca_file: " + strconv.Quote(s.mail.file) + ", user_from: email, strip_domain: Corp.Example}\n" +
		"      - {ca_file: " + strconv.Quote(s.dep.file) + "}\n"
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
	_, site, certs := testCerts(t, names)
	s.site = site
	log := slog.New(slog.NewTextHandler(s.logs, &slog.HandlerOptions{Level: slog.LevelInfo}))
	cas, err := LoadClientCAs(cfg.Site.Auth, site, log)
	if err != nil {
		t.Fatal(err)
	}
	pub, key, _ := ed25519.GenerateKey(rand.Reader)
	s.verifier = ticket.NewVerifier(pub, ticket.NewMemoryLedger(0, s.clk.Now), s.clk.Now)
	l := NewLaunch(LaunchOptions{Config: cfg, Broker: br, Signer: ticket.NewSigner(key, s.clk.Now), Verifier: s.verifier, Logins: &Logins{}, Logger: log, Now: s.clk.Now,
		ClientCAs: cas, Gateways: func(zone string) []GatewayEndpoint {
			return []GatewayEndpoint{{Name: "gw", Zone: zone, Addresses: []netip.Addr{netip.MustParseAddr("127.0.0.1")}}}
		}})
	s.cfg, s.br, s.cas, s.tls = cfg, br, cas, ServerTLS(certs, site, names, nil, cas)
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
	s.loggedIn(s.cards.user(x509.Certificate{Subject: pkix.Name{CommonName: "Alice Smith"}, ExtraExtensions: []pkix.Extension{upnSAN("alice@corp.example")}}), "alice")
	s.loggedIn(s.mail.user(x509.Certificate{Subject: pkix.Name{CommonName: "Bob"}, EmailAddresses: []string{"bob@corp.example"}}), "bob")
	s.loggedIn(s.dep.user(x509.Certificate{Subject: pkix.Name{CommonName: "carol"}}), "carol")

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
	if _, err := s.launch(s.cards.user(x509.Certificate{Subject: pkix.Name{CommonName: "alice"}}), "", ""); !errors.Is(err, client.ErrUnauthorized) {
		t.Fatalf("a card without a UPN, its CN a user's: %v, want %v", err, client.ErrUnauthorized)
	}
}

// A certificate whose serial its issuer's CRL lists is refused (401) and logged with its
// serial and CA; a CRL replaced on disk is read again, so a revocation takes effect at the
// next login, and its lifting too; a root's CRL that lists the issuing CA refuses all of its
// certificates.
func TestARevokedCertificateIsRefused(t *testing.T) {
	s := newCertSite(t)
	alice := s.cards.user(x509.Certificate{ExtraExtensions: []pkix.Extension{upnSAN("alice@corp.example")}})
	bob := s.cards.user(x509.Certificate{ExtraExtensions: []pkix.Extension{upnSAN("bob@corp.example")}})
	s.loggedIn(alice, "alice")

	s.cards.writeCRL(s.crl, 2, s.clk.Now(), s.clk.Now().Add(time.Hour), alice)
	if _, err := s.launch(alice, "", ""); !errors.Is(err, client.ErrUnauthorized) {
		t.Fatalf("a revoked certificate: %v, want %v", err, client.ErrUnauthorized)
	}
	logs := s.logs.String()
	if !strings.Contains(logs, "level=INFO msg=\"a revoked client certificate was refused\" serial="+serialHex(alice.Leaf)) || !strings.Contains(logs, `ca="CN=cards issuing CA,O=cards"`) {
		t.Fatalf("the refusal is not logged at info with the serial and the CA:\n%s", logs)
	}
	s.loggedIn(bob, "bob") // the CRL revokes alice's certificate alone

	s.cards.writeCRL(s.crl, 3, s.clk.Now(), s.clk.Now().Add(time.Hour))
	s.loggedIn(alice, "alice")

	// The root's CRL revokes the issuing CA, and so every certificate it issued.
	s.cards.writeRootCRL(s.rootCRL, 2, s.clk.Now(), s.clk.Now().Add(24*time.Hour), s.cards.signer)
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
	alice := s.cards.user(x509.Certificate{ExtraExtensions: []pkix.Extension{upnSAN("alice@corp.example")}})
	bob := s.cards.user(x509.Certificate{ExtraExtensions: []pkix.Extension{upnSAN("bob@corp.example")}})
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
	s.loggedIn(s.dep.user(x509.Certificate{Subject: pkix.Name{CommonName: "carol"}}), "carol")

	s.cards.writeCRL(s.crl, 2, s.clk.Now(), s.clk.Now().Add(time.Hour))
	s.loggedIn(bob, "bob")
	if !strings.Contains(s.logs.String(), "a CRL can be used again") {
		t.Fatalf("the fresh CRL is not logged:\n%s", s.logs)
	}

	forger := newTestCA(t, t.TempDir(), "cards", true) // the same names, another key
	forger.writeCRL(s.crl, 3, s.clk.Now(), s.clk.Now().Add(time.Hour))
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
	mallory := s.cards.user(x509.Certificate{ExtraExtensions: []pkix.Extension{upnSAN("mallory@corp.example")}})
	nobody := s.mail.user(x509.Certificate{Subject: pkix.Name{CommonName: "no email"}})
	twice := s.cards.user(x509.Certificate{ExtraExtensions: []pkix.Extension{upnSAN("alice@corp.example", "bob@corp.example")}})
	for _, c := range []*tls.Certificate{nobody, twice} {
		if _, err := s.launch(c, "", ""); !errors.Is(err, client.ErrUnauthorized) {
			t.Fatalf("the certificate of %q: %v, want %v", c.Leaf.Subject, err, client.ErrUnauthorized)
		}
	}
	tooMany := strconv.Itoa(http.StatusTooManyRequests)
	throttled := false
	for i := 2; i < 2*failuresPerSource && !throttled; i++ {
		_, err := s.launch(mallory, "", "")
		switch {
		case err != nil && strings.Contains(err.Error(), tooMany) && i >= failuresPerSource:
			throttled = true
		case !errors.Is(err, client.ErrUnauthorized):
			t.Fatalf("unknown user's certificate %d: %v, want %v (429 only after %d)", i, err, client.ErrUnauthorized, failuresPerSource)
		}
	}
	if !throttled {
		t.Fatalf("%d certificates of no user were all answered 401, none throttled", 2*failuresPerSource)
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
	stranger := newTestCA(t, t.TempDir(), "stranger", false)
	for _, tc := range []struct {
		name, want string
		cert       *tls.Certificate
	}{
		{"a CA the site does not name", "tls: unknown certificate authority", stranger.user(x509.Certificate{Subject: pkix.Name{CommonName: "alice"}})},
		{"an operator CA's certificate naming a machine", "tls: bad certificate", s.dep.user(x509.Certificate{Subject: pkix.Name{CommonName: "alice"},
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

// The user name of a certificate: its UPNs, email addresses or common name as the CA's
// entry says, less the domain compared without regard to case, the one name it gives.
func TestTheUserNameOfACertificate(t *testing.T) {
	leaf := func(cn string, emails []string, upns ...string) *x509.Certificate {
		ca := newTestCA(t, t.TempDir(), "names", false)
		tmpl := x509.Certificate{Subject: pkix.Name{CommonName: cn}, EmailAddresses: emails}
		if upns != nil {
			tmpl.ExtraExtensions = []pkix.Extension{upnSAN(upns...)}
		}
		return ca.user(tmpl).Leaf
	}
	for _, tc := range []struct {
		name, from, strip string
		cert              *x509.Certificate
		want              string // "" for an error
	}{
		{"a UPN less the domain", configs.UserFromUPN, "corp.example", leaf("x", nil, "alice@CORP.example"), "alice"},
		{"a UPN of another domain is taken whole", configs.UserFromUPN, "corp.example", leaf("x", nil, "alice@other.example"), "alice@other.example"},
		{"a UPN without stripping", configs.UserFromUPN, "", leaf("x", nil, "alice@corp.example"), "alice@corp.example"},
		{"two UPNs of one user are that user", configs.UserFromUPN, "corp.example", leaf("x", nil, "alice@corp.example", "alice"), "alice"},
		{"two users' UPNs are none", configs.UserFromUPN, "corp.example", leaf("x", nil, "alice@corp.example", "bob@corp.example"), ""},
		{"no UPN is none", configs.UserFromUPN, "", leaf("alice", []string{"alice@corp.example"}), ""},
		{"an email address", configs.UserFromEmail, "corp.example", leaf("x", []string{"bob@corp.example"}), "bob"},
		{"no email address is none", configs.UserFromEmail, "", leaf("bob", nil, "bob@corp.example"), ""},
		{"the common name", configs.UserFromCommonName, "", leaf("carol", []string{"x@corp.example"}), "carol"},
		{"the common name less the domain", configs.UserFromCommonName, "corp.example", leaf("carol@corp.example", nil), "carol"},
		{"no common name is none", configs.UserFromCommonName, "", leaf("", []string{"carol@corp.example"}), ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			op := &operatorCA{cfg: configs.ClientCertificates{UserFrom: tc.from, StripDomain: tc.strip}}
			got, err := op.userName(tc.cert)
			if got != tc.want || (err == nil) != (tc.want != "") {
				t.Fatalf("userName = %q, %v; want %q", got, err, tc.want)
			}
		})
	}
}

// LoadClientCAs refuses a CA file that is missing, holds no certificate, or a certificate
// that is no CA's, naming its key; it logs a CRL that cannot be used.
func TestLoadClientCAsNamesTheBadFile(t *testing.T) {
	dir := t.TempDir()
	site, err := LoadOrCreateCA(dir, "test", slog.New(slog.NewTextHandler(io.Discard, nil)))
	if err != nil {
		t.Fatal(err)
	}
	ca := newTestCA(t, dir, "corp", false)
	leafFile := filepath.Join(dir, "leaf.pem")
	os.WriteFile(leafFile, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: ca.user(x509.Certificate{Subject: pkix.Name{CommonName: "alice"}}).Leaf.Raw}), 0o644)
	empty := filepath.Join(dir, "empty.pem")
	os.WriteFile(empty, []byte("not pem\n"), 0o644)
	for _, tc := range []struct{ file, want string }{
		{filepath.Join(dir, "missing.pem"), "no such file"},
		{empty, "holds no PEM certificate"},
		{leafFile, `"CN=alice" is no CA certificate`},
	} {
		auth := configs.Auth{ClientCertificates: []configs.ClientCertificates{{CAFile: ca.file}, {CAFile: tc.file}}}
		_, err := LoadClientCAs(auth, site, nil)
		if err == nil || !strings.HasPrefix(err.Error(), "site.auth.client_certificates[1].ca_file: ") || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("LoadClientCAs(%s): %v, want an error of site.auth.client_certificates[1].ca_file saying %q", tc.file, err, tc.want)
		}
	}
	if cas, err := LoadClientCAs(configs.Auth{}, site, nil); cas != nil || err != nil {
		t.Fatalf("no operator CA: %v, %v; want nil (the site CA alone)", cas, err)
	}
	// A CRL that cannot be used is no error (it refuses its CA's certificates), but is
	// logged at once.
	logs := &testbuf.Buffer{}
	auth := configs.Auth{ClientCertificates: []configs.ClientCertificates{{CAFile: ca.file, CRLFiles: []string{empty}}}}
	if _, err := LoadClientCAs(auth, site, slog.New(slog.NewTextHandler(logs, nil))); err != nil {
		t.Fatalf("a CA with a bad CRL: %v, want no error", err)
	}
	if !strings.Contains(logs.String(), `level=ERROR msg="a CRL cannot be used: its CA's client certificates are refused until it can" key=site.auth.client_certificates[0].crl_files[0]`) {
		t.Fatalf("the bad CRL is not logged at start:\n%s", logs)
	}
}

// parseUPNs reads the UPNs among other names, and refuses what does not parse.
func TestParseUPNs(t *testing.T) {
	got, err := parseUPNs(upnSAN("alice@corp.example", "bob").Value)
	if err != nil || strings.Join(got, ",") != "alice@corp.example,bob" {
		t.Fatalf("parseUPNs = %q, %v", got, err)
	}
	for _, bad := range [][]byte{nil, {0x30}, {0x30, 0x02, 0xa0, 0x00}, append(upnSAN("x").Value, 0)} {
		if _, err := parseUPNs(bad); !errors.Is(err, errBadSAN) {
			t.Errorf("parseUPNs(%x) = %v, want %v", bad, err, errBadSAN)
		}
	}
}

// FuzzParseUPNs: any extension value parses or is refused, without a panic, and a UPN it
// returns is valid UTF-8 that a SAN of it gives back.
func FuzzParseUPNs(f *testing.F) {
	f.Add(upnSAN("alice@corp.example").Value)
	f.Add(upnSAN().Value)
	f.Add(upnSAN("a", "b", "ü@example").Value)
	f.Fuzz(func(t *testing.T, der []byte) {
		got, err := parseUPNs(der)
		if err != nil {
			return
		}
		again, err := parseUPNs(upnSAN(got...).Value)
		if err != nil || strings.Join(again, "\x00") != strings.Join(got, "\x00") {
			t.Fatalf("the UPNs %q written again read %q, %v", got, again, err)
		}
	})
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
	if code := get(s.cards.user(x509.Certificate{ExtraExtensions: []pkix.Extension{upnSAN("admin@corp.example")}})); code != http.StatusOK {
		t.Fatalf("the admin's card: %d, want 200", code)
	}
	if code := get(s.cards.user(x509.Certificate{ExtraExtensions: []pkix.Extension{upnSAN("operator@corp.example")}})); code != http.StatusOK {
		t.Fatalf("the monitor's card: %d, want 200", code)
	}
	if code := get(s.cards.user(x509.Certificate{ExtraExtensions: []pkix.Extension{upnSAN("alice@corp.example")}})); code != http.StatusUnauthorized {
		t.Fatalf("alice's card at the admin API: %d, want 401 (no admin)", code)
	}
}

// CheckClientCertificates finds a CRL past its next update, and nothing in good files.
func TestCheckClientCertificatesFindsAStaleCRL(t *testing.T) {
	dir := t.TempDir()
	ca := newTestCA(t, dir, "corp", true)
	crl := filepath.Join(dir, "corp.crl")
	now := time.Now()
	ca.writeCRL(crl, 1, now, now.Add(time.Hour))
	auth := configs.Auth{ClientCertificates: []configs.ClientCertificates{{CAFile: ca.file, CRLFiles: []string{crl}}}}
	if errs := CheckClientCertificates(auth, now); len(errs) != 0 {
		t.Fatalf("good files: %v", errs)
	}
	errs := CheckClientCertificates(auth, now.Add(2*time.Hour))
	if len(errs) != 1 || !strings.Contains(errs[0].Error(), "site.auth.client_certificates[0].crl_files[0]: "+crl+" is past its next update") {
		t.Fatalf("a stale CRL: %v", errs)
	}
}

// An API of a site that names operator CAs but was given none logs no certificate in: it
// could not tell an operator CA's certificate from the site CA's.
func TestAnAPIWithoutTheOperatorCAsLogsNoCertificateIn(t *testing.T) {
	cfg, _ := labSite(t, "")
	cfg.Site.Auth.ClientCertificates = []configs.ClientCertificates{{CAFile: "corp-ca.pem", UserFrom: configs.UserFromCommonName}}
	a := newAuthenticator(cfg, &loginGuard{}, nil, nil, slog.New(slog.NewTextHandler(io.Discard, nil)))
	r, _ := http.NewRequest(http.MethodPost, "/v1/launch", nil)
	leaf := &x509.Certificate{Subject: pkix.Name{CommonName: "alice"}, ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}}
	r.TLS = &tls.ConnectionState{VerifiedChains: [][]*x509.Certificate{{leaf}}}
	if li, err := a.authenticate(r); !errors.Is(err, errNoLogin) {
		t.Fatalf("authenticate = %s, %v; want %v", li.user.Name, err, errNoLogin)
	}
}
