package pki

import (
	"crypto/tls"
	"crypto/x509"
	"encoding/pem"
	"errors"
	"fmt"
	"log/slog"
	"net/url"
	"os"
	"slices"
	"strings"
	"sync/atomic"
	"time"

	"github.com/frontdoor-vdi/frontdoor/configs"
)

// Errors of the client certificates of operator CAs.
var (
	// ErrCertUnchecked: a CRL of the certificate's CA is past its next update, cannot be
	// read or verified, or its issuer has none; the login is answered 503 and counts as no
	// failure (the site must fix it, not the user).
	ErrCertUnchecked = errors.New("the revocation of client certificates of this CA cannot be checked now")
	// errOperatorParty: a certificate of an operator CA names a party of the site (a
	// gateway or a machine), which only the site CA may.
	errOperatorParty = errors.New("a client certificate of an operator CA names a party of the site")
)

// ClientCAs are the CAs whose client certificates the node's listeners accept: the site CA
// (users and the site's parties) and the operator's (site.auth.client_certificates: users
// only, named as each CA's entry says, refused when its CRL lists them). LoadClientCAs
// reads them; a nil *ClientCAs is the site CA alone.
type ClientCAs struct {
	site *CA
	ops  []*OperatorCA
	log  *slog.Logger
	pool atomic.Pointer[clientPool] // Pool's last answer
}

// clientPool is a pool of ClientCAs made while the site CA was in state st.
type clientPool struct {
	st   *caState
	pool *x509.CertPool
}

// OperatorCA is one entry of site.auth.client_certificates, loaded.
type OperatorCA struct {
	key   string // its configuration path, for logs
	cfg   configs.ClientCertificates
	certs []*x509.Certificate // of cfg.CAFile
	crls  []*crlFile
	log   *slog.Logger // the ClientCAs' logger: a CRL's changes of state are told there
}

// LoadClientCAs reads the operator CAs of auth beside the site CA: their ca_file now, their
// crl_files now and at each login again when they change; nil when auth names none. A CA
// file that cannot be read or holds no CA certificate is an error naming its key; a CRL that
// cannot be used, or is stale, is logged and refuses its CA's certificates until it is fixed.
func LoadClientCAs(auth configs.Auth, site *CA, log *slog.Logger) (*ClientCAs, error) {
	if len(auth.ClientCertificates) == 0 {
		return nil, nil
	}
	if log == nil {
		log = slog.Default()
	}
	c := &ClientCAs{site: site, log: log}
	for i, cc := range auth.ClientCertificates {
		key := fmt.Sprintf("site.auth.client_certificates[%d]", i)
		certs, err := readCACerts(cc.CAFile)
		if err != nil {
			return nil, fmt.Errorf("%s.ca_file: %w", key, err)
		}
		op := &OperatorCA{key: key, cfg: cc, certs: certs, log: log}
		for j, f := range cc.CRLFiles {
			crl := &crlFile{path: f, key: fmt.Sprintf("%s.crl_files[%d]", key, j), signers: certs}
			crl.current(time.Now(), log) // read now, so that a bad one is logged at start
			op.crls = append(op.crls, crl)
		}
		c.ops = append(c.ops, op)
	}
	return c, nil
}

// CheckClientCertificates reads the CA files and CRLs of auth's operator CAs as a node does,
// and returns what a node would refuse to start with or refuse logins for at now: a CA file
// that cannot be read or holds no CA certificate, a CRL that cannot be read or is signed by
// no certificate of its CA file, or is past its next update; each error names its key.
func CheckClientCertificates(auth configs.Auth, now time.Time) []error {
	var errs []error
	for i, cc := range auth.ClientCertificates {
		key := fmt.Sprintf("site.auth.client_certificates[%d]", i)
		certs, err := readCACerts(cc.CAFile)
		if err != nil {
			errs = append(errs, fmt.Errorf("%s.ca_file: %w (the node does not start)", key, err))
			continue
		}
		for j, f := range cc.CRLFiles {
			l, _, err := readCRL(f, certs)
			switch {
			case err != nil:
				errs = append(errs, fmt.Errorf("%s.crl_files[%d]: %w (its CA's certificates are refused until it can be used)", key, j, err))
			case !l.NextUpdate.IsZero() && now.After(l.NextUpdate):
				errs = append(errs, fmt.Errorf("%s.crl_files[%d]: %s is past its next update %s (its issuer's certificates are refused until a fresh one is there)",
					key, j, f, l.NextUpdate.UTC().Format(time.RFC3339)))
			}
		}
	}
	return errs
}

// ReadCAPool reads a PEM file of CA certificates (at least one, and nothing else) into a
// pool.
func ReadCAPool(file string) (*x509.CertPool, error) {
	certs, err := readCACerts(file)
	if err != nil {
		return nil, err
	}
	pool := x509.NewCertPool()
	for _, c := range certs {
		pool.AddCert(c)
	}
	return pool, nil
}

// readCACerts reads a PEM file of CA certificates: at least one, and nothing else.
func readCACerts(file string) ([]*x509.Certificate, error) {
	raw, err := os.ReadFile(file)
	if err != nil {
		return nil, err
	}
	out, err := parseCACerts(raw, file)
	if err == nil && len(out) == 0 {
		err = fmt.Errorf("%s holds no PEM certificate", file)
	}
	return out, err
}

// parseCACerts parses PEM CA certificates, and nothing else, from raw (of what, for errors).
func parseCACerts(raw []byte, what string) ([]*x509.Certificate, error) {
	file := what
	var out []*x509.Certificate
	for rest := raw; ; {
		var b *pem.Block
		b, rest = pem.Decode(rest)
		if b == nil {
			break
		}
		if b.Type != "CERTIFICATE" {
			return nil, fmt.Errorf("%s: a PEM %s where CA certificates go", file, b.Type)
		}
		c, err := x509.ParseCertificate(b.Bytes)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", file, err)
		}
		if !c.BasicConstraintsValid || !c.IsCA {
			return nil, fmt.Errorf("%s: %q is no CA certificate", file, c.Subject)
		}
		out = append(out, c)
	}
	return out, nil
}

// Pool returns a pool of the site CA's certificates (two while it is rotated) and every
// operator CA's: the listeners' ClientCAs. It is not to be changed.
func (c *ClientCAs) Pool() *x509.CertPool {
	st := c.site.cur.Load()
	if last := c.pool.Load(); last != nil && last.st == st {
		return last.pool
	}
	p := x509.NewCertPool()
	for _, s := range st.trusts {
		p.AddCert(s)
	}
	defer c.pool.Store(&clientPool{st: st, pool: p})
	for _, op := range c.ops {
		for _, ca := range op.certs {
			p.AddCert(ca)
		}
	}
	return p
}

// trust makes tc refuse at the handshake a certificate of an operator CA that names a party
// of the site: a gateway's or a machine's identity is the site CA's alone. (followCA gives tc
// the client CAs.)
func (c *ClientCAs) trust(tc *tls.Config) {
	next := tc.VerifyConnection
	tc.VerifyConnection = func(cs tls.ConnectionState) error {
		if len(cs.VerifiedChains) > 0 && !c.FromSite(cs.VerifiedChains) && NamesParty(cs.VerifiedChains[0][0]) {
			return errOperatorParty
		}
		if next != nil {
			return next(cs)
		}
		return nil
	}
}

// NamesParty reports whether cert carries a frontdoor:// URI, as the site's parties do.
func NamesParty(cert *x509.Certificate) bool {
	return slices.ContainsFunc(cert.URIs, func(u *url.URL) bool { return u.Scheme == "frontdoor" })
}

// FromSite reports whether one of the verified chains ends at the site CA (always, for a
// nil c: the listener trusts the site CA alone).
func (c *ClientCAs) FromSite(chains [][]*x509.Certificate) bool {
	if c == nil {
		return true
	}
	for _, ch := range chains {
		if len(ch) > 0 && c.site.Trusts(ch[len(ch)-1]) {
			return true
		}
	}
	return false
}

// OperatorOf returns the operator CA and the chain to it of a client certificate's verified
// chains; nil when they end at the site CA.
func (c *ClientCAs) OperatorOf(chains [][]*x509.Certificate) (*OperatorCA, []*x509.Certificate) {
	if c.FromSite(chains) {
		return nil, nil
	}
	for _, ch := range chains {
		root := ch[len(ch)-1]
		for _, op := range c.ops {
			if slices.ContainsFunc(op.certs, root.Equal) {
				return op, ch
			}
		}
	}
	return nil, nil
}

// SerialHex is a certificate's serial number in hexadecimal, as CRL tools print it.
func SerialHex(c *x509.Certificate) string { return strings.ToUpper(c.SerialNumber.Text(16)) }

// UserName returns the user name leaf gives by the CA's user_from, less its strip_domain.
func (op *OperatorCA) UserName(leaf *x509.Certificate) (string, error) {
	var names []string
	switch op.cfg.UserFrom {
	case configs.UserFromEmail:
		names = leaf.EmailAddresses
	case configs.UserFromUPN:
		var err error
		if names, err = upns(leaf); err != nil {
			return "", err
		}
	default:
		if leaf.Subject.CommonName != "" {
			names = []string{leaf.Subject.CommonName}
		}
	}
	var out string
	for _, n := range names {
		n = stripDomain(n, op.cfg.StripDomain)
		switch {
		case n == "":
		case out == "":
			out = n
		case out != n:
			return "", fmt.Errorf("its %s names several users (%s, %s)", op.cfg.UserFrom, out, n)
		}
	}
	if out == "" {
		return "", fmt.Errorf("it has no %s", op.cfg.UserFrom)
	}
	return out, nil
}

// stripDomain takes "@domain" off the end of name, compared without regard to case.
func stripDomain(name, domain string) string {
	if domain == "" {
		return name
	}
	at := strings.LastIndexByte(name, '@')
	if at > 0 && strings.EqualFold(name[at+1:], domain) {
		return name[:at]
	}
	return name
}

// CAFile is the operator CA's ca_file, for logs.
func (op *OperatorCA) CAFile() string { return op.cfg.CAFile }
