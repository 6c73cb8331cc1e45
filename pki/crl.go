package pki

import (
	"bytes"
	"crypto/x509"
	"encoding/pem"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"os"
	"slices"
	"sync"
	"time"
)

// crlFile is a CRL of an operator CA (an entry of crl_files), read again when its
// modification time or size changes, when another file replaces it, or while it cannot be
// used.
type crlFile struct {
	path, key string
	signers   []*x509.Certificate // the CA file's certificates: one must have signed it

	mu      sync.Mutex  // guards the fields below
	info    fs.FileInfo // of the file read last; nil: none read
	signer  *x509.Certificate
	next    time.Time       // the CRL's next update; zero: none given
	serials map[string]bool // revoked serial numbers, in decimal
	err     error           // why the file read last cannot be used
	state   string          // its state logged last: "" (none yet), "ok", "stale" or the error
}

// crl is what a crlFile holds at a moment: its signer and revoked serials, and err when it
// cannot be used (unreadable, badly signed: signer is nil then; or past its next update).
type crl struct {
	signer  *x509.Certificate
	serials map[string]bool
	err     error
}

// current returns the CRL as the file holds it now: read again when it changed, refused
// when past its next update at now. A change of its state (usable, stale, unusable) is
// logged once: a stale or unusable CRL refuses its CA's certificates.
func (f *crlFile) current(now time.Time, log *slog.Logger) crl {
	st, statErr := os.Stat(f.path)
	f.mu.Lock()
	defer f.mu.Unlock()
	reread := false // a file read again is logged anew unless usable
	switch {
	case statErr != nil:
		f.info, f.signer, f.serials, f.err = nil, nil, nil, statErr
	case f.info == nil || f.err != nil || !os.SameFile(st, f.info) || !st.ModTime().Equal(f.info.ModTime()) || st.Size() != f.info.Size():
		f.info = st
		f.signer, f.serials, f.err = nil, nil, nil
		l, signer, err := readCRL(f.path, f.signers)
		if err != nil {
			f.err = err
			break
		}
		f.signer, f.next = signer, l.NextUpdate
		f.serials = make(map[string]bool, len(l.RevokedCertificateEntries))
		for _, e := range l.RevokedCertificateEntries {
			if e.SerialNumber != nil {
				f.serials[e.SerialNumber.String()] = true
			}
		}
		reread = true
	}
	c := crl{signer: f.signer, serials: f.serials, err: f.err}
	state := "ok"
	switch {
	case c.err != nil:
		state = c.err.Error()
	case !f.next.IsZero() && now.After(f.next):
		c.err = fmt.Errorf("%s is past its next update %s", f.path, f.next.UTC().Format(time.RFC3339))
		state = "stale"
	}
	if state != f.state || (reread && state != "ok") {
		switch {
		case state == "ok" && f.state != "":
			log.Info("a CRL can be used again", "key", f.key, "file", f.path)
		case state == "stale":
			log.Warn("a CRL is past its next update: its CA's client certificates are refused until a fresh one is there", "key", f.key, "file", f.path, "next_update", f.next)
		case c.err != nil:
			log.Error("a CRL cannot be used: its CA's client certificates are refused until it can", "key", f.key, "file", f.path, "err", c.err)
		}
		f.state = state
	}
	return c
}

// readCRL reads a CRL file (PEM "X509 CRL" or DER) and returns it with the certificate of
// signers that signed it.
func readCRL(path string, signers []*x509.Certificate) (*x509.RevocationList, *x509.Certificate, error) {
	raw, err := os.ReadFile(path)
	if err != nil {
		return nil, nil, err
	}
	der := raw
	if b, _ := pem.Decode(raw); b != nil {
		if b.Type != "X509 CRL" {
			return nil, nil, fmt.Errorf("%s: a PEM %s where an X509 CRL goes", path, b.Type)
		}
		der = b.Bytes
	}
	l, err := x509.ParseRevocationList(der)
	if err != nil {
		return nil, nil, fmt.Errorf("%s: %w", path, err)
	}
	for _, s := range signers {
		if bytes.Equal(l.RawIssuer, s.RawSubject) && l.CheckSignatureFrom(s) == nil {
			return l, s, nil
		}
	}
	return nil, nil, fmt.Errorf("%s: the CRL of %q is signed by no certificate of its ca_file", path, l.Issuer)
}

// sameCA reports whether a and b are the same CA: the same subject and key (a copy the
// client sent of an issuing CA, or the file's).
func sameCA(a, b *x509.Certificate) bool {
	return bytes.Equal(a.RawSubject, b.RawSubject) && bytes.Equal(a.RawSubjectPublicKeyInfo, b.RawSubjectPublicKeyInfo)
}

// Revoked returns the certificate of chain (verified to the CA, and completed to its root
// from the CA file) that the CA's CRLs revoke, and the CA whose CRL does; nil for none.
// Each certificate below the root is checked against the CRLs of its issuer: the leaf's
// issuer must have one, an issuing CA's may (a root's CRL that lists an issuing CA revokes
// every certificate it issued). Without crl_files nothing is revoked. With them, a
// certificate is ErrCertUnchecked when a CRL of an issuer in its chain is stale, when one of
// the CA's CRLs cannot be used (whose issuer is then unknown), or when its issuer has none.
func (op *OperatorCA) Revoked(chain []*x509.Certificate, now time.Time) (revoked, by *x509.Certificate, err error) {
	if len(op.crls) == 0 {
		return nil, nil, nil
	}
	if len(chain) < 2 {
		return nil, nil, fmt.Errorf("%w: the certificate is itself a CA certificate of %s", ErrCertUnchecked, op.key)
	}
	chain = op.complete(chain)
	crls := make([]crl, len(op.crls))
	var unusable []error
	for i, f := range op.crls {
		if crls[i] = f.current(now, op.log); crls[i].signer == nil {
			unusable = append(unusable, crls[i].err)
		}
	}
	if len(unusable) > 0 {
		return nil, nil, fmt.Errorf("%w: %w", ErrCertUnchecked, errors.Join(unusable...))
	}
	for i := 0; i+1 < len(chain); i++ {
		cert, issuer := chain[i], chain[i+1]
		serial := cert.SerialNumber.String()
		have := false
		for _, c := range crls {
			switch {
			case !sameCA(c.signer, issuer):
			case c.serials[serial]:
				return cert, issuer, nil
			case c.err != nil:
				return nil, nil, fmt.Errorf("%w: %w", ErrCertUnchecked, c.err)
			default:
				have = true
			}
		}
		if i == 0 && !have {
			op.log.Warn("a client certificate's issuer has no CRL among its CA's crl_files: refused", "key", op.key, "issuer", issuer.Subject.String(), "serial", SerialHex(cert))
			return nil, nil, fmt.Errorf("%w: its issuer %q has no CRL", ErrCertUnchecked, issuer.Subject)
		}
	}
	return nil, nil, nil
}

// complete extends a chain that ends at an issuing CA of the CA file (an anchor, for it is in
// the pool) with the file's certificates above it, up to a self-signed root: so that the
// root's CRL can revoke the issuing CA, whether the client sent it or not.
func (op *OperatorCA) complete(chain []*x509.Certificate) []*x509.Certificate {
	chain = slices.Clone(chain)
	for len(chain) <= len(op.certs)+1 {
		top := chain[len(chain)-1]
		if bytes.Equal(top.RawIssuer, top.RawSubject) {
			break
		}
		i := slices.IndexFunc(op.certs, func(c *x509.Certificate) bool {
			return bytes.Equal(top.RawIssuer, c.RawSubject) && !slices.ContainsFunc(chain, c.Equal) && top.CheckSignatureFrom(c) == nil
		})
		if i < 0 {
			break
		}
		chain = append(chain, op.certs[i])
	}
	return chain
}
