package pki

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"net/netip"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/caddyserver/certmagic"
	"github.com/frontdoor-vdi/frontdoor/configs"
	"github.com/frontdoor-vdi/frontdoor/internal/tlspolicy"
	"github.com/mholt/acmez/v3"
	"go.uber.org/zap"
)

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
