package pki

import (
	"context"
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
	"io/fs"
	"log/slog"
	"math/big"
	"os"
	"path/filepath"
	"slices"
	"sync/atomic"
	"time"

	"github.com/caddyserver/certmagic"
	"github.com/frontdoor-vdi/frontdoor/internal/atomicfile"
)

// CA is the site's small certificate authority: it issues the certificates of the site's
// parties (gateways, machines), of its listeners when the issuer is "internal" (for certmagic,
// through its Issuer interface) and of users; and it is what they trust. While the site CA
// is rotated it trusts two CA certificates, its own and the other one (Set); every pool and
// TLS config made here follows such a change at the next handshake.
type CA struct {
	log    *slog.Logger
	leafTT time.Duration
	cur    atomic.Pointer[caState]
}

// caState is what a CA issues with and trusts at one time.
type caState struct {
	cert   *x509.Certificate   // the certificate of the CA that issues
	key    crypto.Signer       // its key
	pem    []byte              // cert in PEM
	trusts []*x509.Certificate // every CA certificate trusted: cert first
	pool   *x509.CertPool      // trusts
	bundle []byte              // trusts in PEM
}

var _ certmagic.Issuer = (*CA)(nil)

// LoadOrCreateCA reads the CA from dir (ca.pem, ca.key) or creates it there.
func LoadOrCreateCA(dir, site string, log *slog.Logger) (*CA, error) {
	certFile, keyFile := filepath.Join(dir, "ca.pem"), filepath.Join(dir, "ca.key")
	certPEM, err := os.ReadFile(certFile)
	if errors.Is(err, fs.ErrNotExist) {
		if err := createCA(certFile, keyFile, site); err != nil {
			return nil, err
		}
		certPEM, err = os.ReadFile(certFile)
	}
	if err != nil {
		return nil, fmt.Errorf("reading CA certificate: %w", err)
	}
	keyPEM, err := os.ReadFile(keyFile)
	if err != nil {
		return nil, fmt.Errorf("reading CA key: %w", err)
	}
	ca, err := NewCA(certPEM, keyPEM, log)
	if err != nil {
		return nil, fmt.Errorf("CA in %s: %w", dir, err)
	}
	return ca, nil
}

// NewCA returns the CA of a PEM certificate and its PEM key (a site's shared identity).
func NewCA(certPEM, keyPEM []byte, log *slog.Logger) (*CA, error) {
	ca := &CA{log: log, leafTT: PartyTTL}
	if err := ca.Set(certPEM, keyPEM, nil); err != nil {
		return nil, err
	}
	return ca, nil
}

// Set makes the CA of certPEM and keyPEM the one that issues from now on, and trusts, beside
// it, the CA certificates in also (PEM; none outside a rotation). On error nothing changes.
func (ca *CA) Set(certPEM, keyPEM, also []byte) error {
	pair, err := tls.X509KeyPair(certPEM, keyPEM)
	if err != nil {
		return fmt.Errorf("loading CA: %w", err)
	}
	cert, err := x509.ParseCertificate(pair.Certificate[0])
	if err != nil {
		return fmt.Errorf("parsing CA certificate: %w", err)
	}
	if !cert.IsCA {
		return errors.New("the CA certificate is not a CA's")
	}
	signer, ok := pair.PrivateKey.(crypto.Signer)
	if !ok {
		return errors.New("CA key cannot sign")
	}
	st := &caState{cert: cert, key: signer, pem: pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: cert.Raw}),
		trusts: []*x509.Certificate{cert}, pool: x509.NewCertPool()}
	others, err := parseCACerts(also, "the CA certificates also trusted")
	if err != nil {
		return err
	}
	for _, o := range others {
		if !o.Equal(cert) {
			st.trusts = append(st.trusts, o)
		}
	}
	for _, c := range st.trusts {
		st.pool.AddCert(c)
		st.bundle = append(st.bundle, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: c.Raw})...)
	}
	ca.cur.Store(st)
	return nil
}

// Trusts reports whether c is one of the CA certificates the CA trusts.
func (ca *CA) Trusts(c *x509.Certificate) bool {
	return slices.ContainsFunc(ca.cur.Load().trusts, c.Equal)
}

func createCA(certFile, keyFile, site string) error {
	certPEM, keyPEM, err := GenerateCA(site)
	if err != nil {
		return err
	}
	if err := os.MkdirAll(filepath.Dir(certFile), 0o700); err != nil {
		return fmt.Errorf("creating CA directory: %w", err)
	}
	if err := atomicfile.Write(keyFile, keyPEM, 0o600); err != nil {
		return fmt.Errorf("writing CA key: %w", err)
	}
	if err := atomicfile.Write(certFile, certPEM, 0o644); err != nil {
		return fmt.Errorf("writing CA certificate: %w", err)
	}
	return nil
}

// GenerateCA makes a new site CA: a P-256 key and a self-signed certificate valid ten years,
// both PEM.
func GenerateCA(site string) (certPEM, keyPEM []byte, err error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, nil, fmt.Errorf("generating CA key: %w", err)
	}
	serial, _ := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 127))
	now := time.Now()
	tmpl := &x509.Certificate{
		SerialNumber:          serial,
		Subject:               pkix.Name{CommonName: "frontdoor " + site + " internal CA", Organization: []string{"frontdoor"}},
		NotBefore:             now.Add(-time.Hour),
		NotAfter:              now.Add(10 * 365 * 24 * time.Hour),
		KeyUsage:              x509.KeyUsageCertSign | x509.KeyUsageCRLSign,
		BasicConstraintsValid: true,
		IsCA:                  true,
		MaxPathLenZero:        true,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		return nil, nil, fmt.Errorf("creating CA certificate: %w", err)
	}
	kder, err := x509.MarshalPKCS8PrivateKey(key)
	if err != nil {
		return nil, nil, fmt.Errorf("encoding CA key: %w", err)
	}
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: kder}), nil
}

// CertPEM returns the CA certificates trusted, in PEM, the issuing one first: what clients
// trust (ca.pem).
func (ca *CA) CertPEM() []byte { return ca.cur.Load().bundle }

// Cert returns the certificate of the CA that issues.
func (ca *CA) Cert() *x509.Certificate { return ca.cur.Load().cert }

// Pool returns a pool of the CA certificates trusted now. It is not to be changed.
func (ca *CA) Pool() *x509.CertPool { return ca.cur.Load().pool }

// IssuerKey implements certmagic.Issuer: it names the CA that issues, so that certificates of
// another CA (before a rotation) are not taken for its own.
func (ca *CA) IssuerKey() string {
	return "frontdoor-internal-" + ca.cur.Load().cert.SerialNumber.Text(16)
}

// Issue implements certmagic.Issuer: it signs the CSR's names for a week (validity).
func (ca *CA) Issue(_ context.Context, csr *x509.CertificateRequest) (*certmagic.IssuedCertificate, error) {
	if err := csr.CheckSignature(); err != nil {
		return nil, fmt.Errorf("checking CSR: %w", err)
	}
	serial, _ := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 127))
	notBefore, notAfter := validity(time.Now(), ca.leafTT)
	tmpl := &x509.Certificate{
		SerialNumber: serial,
		Subject:      pkix.Name{CommonName: firstOr(csr.DNSNames, "frontdoor")},
		DNSNames:     csr.DNSNames,
		IPAddresses:  csr.IPAddresses,
		NotBefore:    notBefore,
		NotAfter:     notAfter,
		KeyUsage:     x509.KeyUsageDigitalSignature,
		ExtKeyUsage:  []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
	}
	st := ca.cur.Load()
	der, err := x509.CreateCertificate(rand.Reader, tmpl, st.cert, csr.PublicKey, st.key)
	if err != nil {
		return nil, fmt.Errorf("signing certificate: %w", err)
	}
	ca.log.Info("issued certificate", "names", csr.DNSNames, "ips", csr.IPAddresses, "not_after", tmpl.NotAfter)
	chain := append(pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), st.pem...)
	return &certmagic.IssuedCertificate{Certificate: chain}, nil
}

// IssueClient returns a client certificate and key (PEM) for user, valid for ttl: users may
// authenticate to the launch API with it instead of a password.
func (ca *CA) IssueClient(user string, ttl time.Duration) (certPEM, keyPEM []byte, err error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, nil, err
	}
	serial, _ := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 127))
	notBefore, notAfter := validity(time.Now(), ttl)
	tmpl := &x509.Certificate{
		SerialNumber: serial,
		Subject:      pkix.Name{CommonName: user, Organization: []string{"frontdoor users"}},
		NotBefore:    notBefore,
		NotAfter:     notAfter,
		KeyUsage:     x509.KeyUsageDigitalSignature,
		ExtKeyUsage:  []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth},
	}
	st := ca.cur.Load()
	der, err := x509.CreateCertificate(rand.Reader, tmpl, st.cert, &key.PublicKey, st.key)
	if err != nil {
		return nil, nil, fmt.Errorf("signing client certificate: %w", err)
	}
	kder, err := x509.MarshalPKCS8PrivateKey(key)
	if err != nil {
		return nil, nil, err
	}
	ca.log.Info("issued client certificate", "user", user, "not_after", tmpl.NotAfter)
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: kder}), nil
}

func firstOr(l []string, def string) string {
	if len(l) > 0 {
		return l[0]
	}
	return def
}
