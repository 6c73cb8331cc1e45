package pki

import (
	"bytes"
	"crypto"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"errors"
	"fmt"
	"math/big"
	"net"
	"net/netip"
	"net/url"
	"sync"
	"time"

	"github.com/frontdoor-vdi/frontdoor/internal/siteid"
)

// PartyBackdate is how long before its issue a gateway's or machine's certificate is valid.
const PartyBackdate = 5 * time.Minute

// PartyIssued returns when a certificate of IssueParty was issued.
func PartyIssued(c *x509.Certificate) time.Time { return c.NotBefore.Add(PartyBackdate) }

// PartyTTL is how long a gateway's or a machine's certificate is valid, its backdating
// included (validity); it is renewed at half of it.
const PartyTTL = 7 * 24 * time.Hour

// validity returns the NotBefore and NotAfter of a certificate issued at now for ttl:
// backdated by PartyBackdate (clocks differ), and valid for ttl in all, both ends included
// (RFC 5280 4.1.2.5). A certificate of 7 days or less is short-lived as the CA/Browser
// Forum's Baseline Requirements define it (1.6.1, 604,800 seconds), and such a certificate
// needs no CRL or OCSP address (7.1.2.11.2): it expires before a revocation would reach its
// users. That is why the site CA's certificates carry none, and why they live a week.
func validity(now time.Time, ttl time.Duration) (notBefore, notAfter time.Time) {
	notBefore = now.Add(-PartyBackdate)
	return notBefore, notBefore.Add(ttl - time.Second)
}

// IssueParty signs a certificate for pub that names a party of the site (package siteid: a
// gateway or a machine, by role and name) and its addresses, for TLS as server and client,
// valid for ttl. It returns the certificate in DER.
//
// Its NotBefore is PartyBackdate before it was issued (clocks differ); PartyIssued gives the
// issue time back, which a machine's revocation compares with.
func (ca *CA) IssueParty(role, name string, addrs []netip.Addr, pub crypto.PublicKey, ttl time.Duration) ([]byte, error) {
	if role != siteid.RoleGateway && role != siteid.RoleMachine {
		return nil, fmt.Errorf("issuing a certificate: unknown role %q", role)
	}
	if name == "" {
		return nil, errors.New("issuing a certificate: no name")
	}
	serial, err := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 127))
	if err != nil {
		return nil, err
	}
	notBefore, notAfter := validity(time.Now(), ttl)
	tmpl := &x509.Certificate{
		SerialNumber: serial,
		Subject:      pkix.Name{CommonName: role + " " + name, Organization: []string{"frontdoor " + role + "s"}},
		URIs:         []*url.URL{siteid.URI(role, name)},
		NotBefore:    notBefore,
		NotAfter:     notAfter,
		KeyUsage:     x509.KeyUsageDigitalSignature,
		ExtKeyUsage:  []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth, x509.ExtKeyUsageClientAuth},
	}
	for _, a := range addrs {
		tmpl.IPAddresses = append(tmpl.IPAddresses, net.IP(a.Unmap().AsSlice()))
	}
	st := ca.cur.Load()
	der, err := x509.CreateCertificate(rand.Reader, tmpl, st.cert, pub, st.key)
	if err != nil {
		return nil, fmt.Errorf("signing the certificate of %s %s: %w", role, name, err)
	}
	ca.log.Info("issued certificate", "role", role, "name", name, "not_after", tmpl.NotAfter)
	return der, nil
}

// PartyCertificate returns a new key and a certificate for it from IssueParty, valid for
// PartyTTL, as a tls.Certificate.
func (ca *CA) PartyCertificate(role, name string, addrs []netip.Addr) (*tls.Certificate, error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, err
	}
	der, err := ca.IssueParty(role, name, addrs, &key.PublicKey, PartyTTL)
	if err != nil {
		return nil, err
	}
	leaf, err := x509.ParseCertificate(der)
	if err != nil {
		return nil, err
	}
	return &tls.Certificate{Certificate: [][]byte{der}, PrivateKey: key, Leaf: leaf}, nil
}

// PartyCertificates hands out a party's certificate from the CA, issuing a new one when the
// last is past half its life: for tls.Config.GetCertificate and GetClientCertificate.
type PartyCertificates struct {
	ca         *CA
	role, name string
	addrs      []netip.Addr

	mu     sync.Mutex // guards cert and issuer
	cert   *tls.Certificate
	issuer []byte // the certificate of the CA that issued cert, DER
}

// Party returns the certificates of a party of the site, issued as they are needed.
func (ca *CA) Party(role, name string, addrs []netip.Addr) *PartyCertificates {
	return &PartyCertificates{ca: ca, role: role, name: name, addrs: addrs}
}

// Get returns a certificate valid for at least half of PartyTTL, from the CA that issues now
// (a new one once the site CA was rotated).
func (p *PartyCertificates) Get() (*tls.Certificate, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	issuer := p.ca.Cert().Raw
	if p.cert != nil && time.Until(p.cert.Leaf.NotAfter) > PartyTTL/2 && bytes.Equal(p.issuer, issuer) {
		return p.cert, nil
	}
	c, err := p.ca.PartyCertificate(p.role, p.name, p.addrs)
	if err != nil {
		return nil, err
	}
	p.cert, p.issuer = c, issuer
	return c, nil
}

// ClientTLS returns a maker of client configs that present the party's certificate, trust
// the CA certificates the CA trusts when the config is made (a rotation of the site CA
// changes them) and check connections with verify (nil: nothing more). Make one per
// connection.
func (p *PartyCertificates) ClientTLS(verify func(tls.ConnectionState) error) func() *tls.Config {
	return func() *tls.Config {
		return &tls.Config{MinVersion: tls.VersionTLS13, RootCAs: p.ca.Pool(), VerifyConnection: verify,
			GetClientCertificate: func(*tls.CertificateRequestInfo) (*tls.Certificate, error) { return p.Get() }}
	}
}

// PublicKeyFromCSR checks a PEM certificate request and returns its public key: the key a
// machine's agent holds, for IssueParty.
func PublicKeyFromCSR(csrPEM []byte) (crypto.PublicKey, error) {
	b, _ := pem.Decode(csrPEM)
	if b == nil || b.Type != "CERTIFICATE REQUEST" {
		return nil, errors.New("want a PEM CERTIFICATE REQUEST")
	}
	csr, err := x509.ParseCertificateRequest(b.Bytes)
	if err != nil {
		return nil, fmt.Errorf("certificate request: %w", err)
	}
	if err := csr.CheckSignature(); err != nil {
		return nil, fmt.Errorf("certificate request: %w", err)
	}
	return csr.PublicKey, nil
}
