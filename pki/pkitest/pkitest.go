// Package pkitest makes the PKI of an operator in a test: root and issuing CAs, users'
// client certificates, CRLs, and subject alternative names with UPNs as smart cards carry
// them. It stands in for the operator's own CA, not for frontdoor's site CA (pki.CA).
package pkitest

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"math/big"
	"os"
	"path/filepath"
	"testing"
	"time"

	encasn1 "encoding/asn1"

	"golang.org/x/crypto/cryptobyte"
	"golang.org/x/crypto/cryptobyte/asn1"
)

// CA is a CA of the operator's PKI made in the test: a root, and an issuing CA below it
// when issuing is set, which signs the users' certificates and the CRLs.
type CA struct {
	t       *testing.T
	Root    *x509.Certificate
	Signer  *x509.Certificate // the issuing CA, or the root
	key     *ecdsa.PrivateKey // the signer's
	rootKey *ecdsa.PrivateKey
	File    string // the PEM of Root (and the issuing CA): the ca_file
	serials int64
}

// NewCA makes the CA name in dir, its ca_file name-ca.pem: a root, and an issuing CA below it when issuing is set.
func NewCA(t *testing.T, dir, name string, issuing bool) *CA {
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
	c := &CA{t: t, File: filepath.Join(dir, name+"-ca.pem"), serials: 100}
	var key *ecdsa.PrivateKey
	c.Root, key = mk(ca(name+" root CA", 1), nil, nil)
	c.Signer, c.key, c.rootKey = c.Root, key, key
	pemOf := pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: c.Root.Raw})
	if issuing {
		c.Signer, c.key = mk(ca(name+" issuing CA", 2), c.Root, key)
		pemOf = append(pemOf, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: c.Signer.Raw})...)
	}
	if err := os.WriteFile(c.File, pemOf, 0o644); err != nil {
		t.Fatal(err)
	}
	return c
}

// User issues a client certificate: tmpl's names, the next serial, valid an hour.
func (c *CA) User(tmpl x509.Certificate) *tls.Certificate {
	c.t.Helper()
	c.serials++
	tmpl.SerialNumber = big.NewInt(c.serials)
	tmpl.NotBefore, tmpl.NotAfter = time.Now().Add(-time.Hour), time.Now().Add(time.Hour)
	tmpl.KeyUsage = x509.KeyUsageDigitalSignature
	tmpl.ExtKeyUsage = []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}
	key, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	der, err := x509.CreateCertificate(rand.Reader, &tmpl, c.Signer, &key.PublicKey, c.key)
	if err != nil {
		c.t.Fatal(err)
	}
	leaf, _ := x509.ParseCertificate(der)
	return &tls.Certificate{Certificate: [][]byte{der, c.Signer.Raw}, PrivateKey: key, Leaf: leaf}
}

// WriteCRL writes the signer's CRL revoking certs to file (replacing it whole, as an
// operator's tool does), next update at next.
func (c *CA) WriteCRL(file string, number int64, now, next time.Time, certs ...*tls.Certificate) {
	c.t.Helper()
	var leaves []*x509.Certificate
	for _, rc := range certs {
		leaves = append(leaves, rc.Leaf)
	}
	c.writeCRLOf(c.Signer, c.key, file, number, now, next, leaves...)
}

// WriteRootCRL writes the root's CRL revoking certs (an issuing CA) to file.
func (c *CA) WriteRootCRL(file string, number int64, now, next time.Time, certs ...*x509.Certificate) {
	c.t.Helper()
	c.writeCRLOf(c.Root, c.rootKey, file, number, now, next, certs...)
}

func (c *CA) writeCRLOf(by *x509.Certificate, key *ecdsa.PrivateKey, file string, number int64, now, next time.Time, certs ...*x509.Certificate) {
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

// UPNSAN is a subject alternative name extension of a DNS name and the UPNs upns
// (otherName 1.3.6.1.4.1.311.20.2.3), as smart-card logon certificates carry them.
func UPNSAN(upns ...string) pkix.Extension {
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

var (
	// oidUPN is Microsoft's user principal name, an otherName of the SAN.
	oidUPN = encasn1.ObjectIdentifier{1, 3, 6, 1, 4, 1, 311, 20, 2, 3}
	// oidSubjectAltName is the subject alternative name extension (RFC 5280 4.2.1.6).
	oidSubjectAltName = encasn1.ObjectIdentifier{2, 5, 29, 17}
)
