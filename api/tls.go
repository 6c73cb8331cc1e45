package api

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
	"net/netip"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/caddyserver/certmagic"
	"github.com/frontdoor-vdi/frontdoor/configs"
	"github.com/frontdoor-vdi/frontdoor/internal/atomicfile"
	"github.com/frontdoor-vdi/frontdoor/internal/tlspolicy"
	"github.com/mholt/acmez/v3"
	"go.uber.org/zap"
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
	ca := &CA{log: log, leafTT: 7 * 24 * time.Hour}
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

// Issue implements certmagic.Issuer: it signs the CSR's names for a week.
func (ca *CA) Issue(_ context.Context, csr *x509.CertificateRequest) (*certmagic.IssuedCertificate, error) {
	if err := csr.CheckSignature(); err != nil {
		return nil, fmt.Errorf("checking CSR: %w", err)
	}
	serial, _ := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 127))
	now := time.Now()
	tmpl := &x509.Certificate{
		SerialNumber: serial,
		Subject:      pkix.Name{CommonName: firstOr(csr.DNSNames, "frontdoor")},
		DNSNames:     csr.DNSNames,
		IPAddresses:  csr.IPAddresses,
		NotBefore:    now.Add(-5 * time.Minute),
		NotAfter:     now.Add(ca.leafTT),
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
	now := time.Now()
	tmpl := &x509.Certificate{
		SerialNumber: serial,
		Subject:      pkix.Name{CommonName: user, Organization: []string{"frontdoor users"}},
		NotBefore:    now.Add(-5 * time.Minute),
		NotAfter:     now.Add(ttl),
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

// Certs manages the node's server certificates with certmagic: issued by the internal CA or
// obtained with ACME, stored in the data dir, renewed while running.
type Certs struct {
	acme bool // from an ACME CA: the listeners answer TLS-ALPN-01 challenges
	make func(ctx context.Context) (*certSet, error)

	mu  sync.Mutex // serialises Reissue and Close
	cur atomic.Pointer[certSet]
}

// certSet is a certmagic cache and config, and what stops its background issuance.
type certSet struct {
	cache  *certmagic.Cache
	cfg    *certmagic.Config
	cancel context.CancelFunc
}

func (s *certSet) stop() {
	s.cancel()
	s.cache.Stop()
}

// NewCerts obtains certificates for names (DNS names or IP addresses) with issuer, keeping
// them under dir, before it returns. Close stops renewal.
func NewCerts(ctx context.Context, dir string, names []string, issuer certmagic.Issuer) (*Certs, error) {
	return newCerts(ctx, dir, nil, names, func(*certmagic.Config) certmagic.Issuer { return issuer }, false, 0)
}

// NewACMECerts manages certificates for names with the ACME CA of o. Certificates are
// obtained in the background — the node's own DNS server may have to answer the DNS-01
// challenge — and renewed while running (certmagic: at a third of their life left, or when
// the CA's renewal information says). They are kept in site, shared by a site's nodes
// (SiteStorage), or with site nil under dir.
func NewACMECerts(ctx context.Context, dir string, site CertKV, names []string, o ACMEOptions) (*Certs, error) {
	var storage certmagic.Storage
	if site != nil {
		storage = SiteStorage(site)
	}
	return newCerts(ctx, dir, storage, names, ACMEIssuer(o), true, o.RenewCheck)
}

// ACMEIssuer returns the issuer for an ACME CA with the site's settings: challenge is dns-01
// (answered through dns, e.g. the GSLB server's ACME records), http-01 or tls-alpn-01; caURL ""
// is Let's Encrypt's production directory.
func ACMEIssuer(o ACMEOptions) func(*certmagic.Config) certmagic.Issuer {
	return func(cfg *certmagic.Config) certmagic.Issuer {
		t := certmagic.ACMEIssuer{CA: o.CA, Email: o.Email, Agreed: true, TrustedRoots: o.Roots,
			DisableHTTPChallenge:    o.Challenge != "http-01",
			DisableTLSALPNChallenge: o.Challenge != "tls-alpn-01",
			Logger:                  zap.NewNop()}
		if t.CA == "" {
			t.CA = certmagic.LetsEncryptProductionCA
		}
		if o.Challenge == "dns-01" {
			t.DNS01Solver = &certmagic.DNS01Solver{DNSManager: certmagic.DNSManager{DNSProvider: o.DNS, Resolvers: o.Resolvers}}
		}
		return certmagic.NewACMEIssuer(cfg, t)
	}
}

// ACMEOptions configure ACMEIssuer.
type ACMEOptions struct {
	// CA is the directory URL. Default: Let's Encrypt's production directory.
	CA string
	// Email is the account's contact.
	Email string
	// Challenge is dns-01, http-01 or tls-alpn-01.
	Challenge string
	// Roots verify the directory's HTTPS certificate. Default: nil, the system roots.
	Roots *x509.CertPool
	// DNS adds and removes the dns-01 challenge's TXT records.
	DNS certmagic.DNSProvider
	// Resolvers are the DNS servers (host:port) that find the challenge's zone and check that
	// its record is served: the node's own DNS listeners, which answer it. Default: none,
	// the system's resolvers and the zone's authoritative servers.
	Resolvers []string
	// RenewCheck is how often the certificates are checked for renewal. Default: certmagic's
	// (10 minutes).
	RenewCheck time.Duration
}

// newCerts manages certificates for names from issuer. Those of an ACME CA (acme) are
// obtained in the background, and their OCSP responses stapled when they name a responder;
// the internal CA's are issued before it returns and name none.
func newCerts(ctx context.Context, dir string, storage certmagic.Storage, names []string, issuer func(*certmagic.Config) certmagic.Issuer, acme bool, renewCheck time.Duration) (*Certs, error) {
	if storage == nil {
		storage = &certmagic.FileStorage{Path: filepath.Join(dir, "certs")}
	}
	c := &Certs{acme: acme}
	c.make = func(ctx context.Context) (*certSet, error) {
		s := &certSet{}
		ctx, s.cancel = context.WithCancel(context.WithoutCancel(ctx))
		s.cache = certmagic.NewCache(certmagic.CacheOptions{
			GetConfigForCert:   func(certmagic.Certificate) (*certmagic.Config, error) { return s.cfg, nil },
			RenewCheckInterval: renewCheck,
			Logger:             zap.NewNop(),
		})
		s.cfg = certmagic.New(s.cache, certmagic.Config{
			Storage:             storage,
			Logger:              zap.NewNop(),
			DisableStorageCheck: true,
			OCSP:                certmagic.OCSPConfig{DisableStapling: !acme},
		})
		s.cfg.Issuers = []certmagic.Issuer{issuer(s.cfg)}
		manage := s.cfg.ManageSync
		if acme {
			manage = s.cfg.ManageAsync
		}
		if err := manage(ctx, names); err != nil {
			s.stop()
			return nil, fmt.Errorf("obtaining certificates for %v: %w", names, err)
		}
		return s, nil
	}
	s, err := c.make(ctx)
	if err != nil {
		return nil, err
	}
	c.cur.Store(s)
	return c, nil
}

// Reissue obtains every certificate again, from the issuer as it is now (the internal CA
// after a rotation, whose IssuerKey names it), and serves the new ones from then on. The
// certificates served until then stay until the new ones are there.
func (c *Certs) Reissue(ctx context.Context) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	s, err := c.make(ctx)
	if err != nil {
		return err
	}
	if old := c.cur.Swap(s); old != nil {
		old.stop()
	}
	return nil
}

// Issuers returns the issuers that obtain the certificates.
func (c *Certs) Issuers() []certmagic.Issuer { return c.cur.Load().cfg.Issuers }

// TLSConfig returns a server TLS config that serves the managed certificates, with the
// site's TLS policy (package tlspolicy). Every HTTPS listener and gateway port of a node takes
// its config from here.
func (c *Certs) TLSConfig() *tls.Config {
	t := c.cur.Load().cfg.TLSConfig()
	// The certificates of the set in use at each handshake (Reissue swaps them).
	t.GetCertificate = func(h *tls.ClientHelloInfo) (*tls.Certificate, error) { return c.cur.Load().cfg.GetCertificate(h) }
	t.NextProtos = []string{"h2", "http/1.1"}
	if c.acme {
		// A TLS-ALPN-01 validation asks for acme-tls/1; certmagic's GetCertificate answers it
		// with the challenge's certificate (on a site, whichever node started it).
		t.NextProtos = append(t.NextProtos, acmez.ACMETLS1Protocol)
	}
	tlspolicy.Server(t)
	return t
}

// Close stops certificate maintenance and background issuance.
func (c *Certs) Close() {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.cur.Load().stop()
}

// CertNames returns the names and addresses the certificates of a node running nodes cover:
// the GSLB names, every gateway's address and public addresses, the nodes' listener
// addresses (not unspecified ones) and localhost, sorted.
func CertNames(cfg *configs.Config, nodes []configs.Node) []string {
	set := map[string]bool{}
	for _, n := range cfg.GSLB.Names {
		set[strings.TrimSuffix(n.Name, ".")] = true
	}
	for _, g := range cfg.Gateways {
		set[g.Address.String()] = true
		for _, a := range g.PublicAddresses {
			set[a.String()] = true
		}
	}
	for _, n := range nodes {
		for _, l := range n.Listeners {
			if a := l.Address.Addr(); a.IsValid() && !a.IsUnspecified() {
				set[a.String()] = true
			}
		}
	}
	set["localhost"] = true
	out := make([]string, 0, len(set))
	for n := range set {
		out = append(out, n)
	}
	sort.Strings(out)
	return out
}

// ServerTLS returns the TLS config of a node's listeners: certificates from certs, users'
// client certificates of ca — and of the operator CAs of users (LoadClientCAs; nil: none) —
// accepted instead of a password, and a client that sends no server name (it dialled an IP
// address of names) gets the certificate of the address it reached, also when the listener
// is bound to another address: bound maps each address to the one really bound (nil: the
// same).
func ServerTLS(certs *Certs, ca *CA, names []string, bound func(netip.Addr) netip.Addr, users *ClientCAs) *tls.Config {
	tc := certs.TLSConfig()
	get := tc.GetCertificate
	public := map[netip.Addr]string{}
	for _, n := range names {
		if a, err := netip.ParseAddr(n); err == nil {
			if bound != nil {
				public[bound(a)] = a.String()
			} else {
				public[a] = a.String()
			}
		}
	}
	tc.ClientAuth = tls.VerifyClientCertIfGiven
	if users != nil {
		users.trust(tc)
	}
	tc.GetCertificate = func(h *tls.ClientHelloInfo) (*tls.Certificate, error) {
		if h.ServerName == "" && h.Conn != nil {
			if ap, err := netip.ParseAddrPort(h.Conn.LocalAddr().String()); err == nil {
				if name, ok := public[ap.Addr().Unmap()]; ok {
					hc := *h
					hc.ServerName = name
					return get(&hc)
				}
			}
		}
		return get(h)
	}
	return followCA(tc, ca, users)
}

// followCA returns tc, which makes each handshake take the client CAs of the moment: the
// site CA's certificates (two while it is rotated) and the operator CAs of users. A config
// is made for each change of the site CA and kept. Its handshakes run on those configs (its
// GetConfigForClient): a clone that changes anything else must drop GetConfigForClient.
func followCA(tc *tls.Config, ca *CA, users *ClientCAs) *tls.Config {
	type made struct {
		st *caState
		tc *tls.Config
	}
	var last atomic.Pointer[made]
	base := tc.Clone()
	tc.GetConfigForClient = func(*tls.ClientHelloInfo) (*tls.Config, error) {
		st := ca.cur.Load()
		if m := last.Load(); m != nil && m.st == st {
			return m.tc, nil
		}
		n := base.Clone()
		n.ClientCAs = st.pool
		if users != nil {
			n.ClientCAs = users.Pool()
		}
		last.Store(&made{st: st, tc: n})
		return n, nil
	}
	return tc
}
