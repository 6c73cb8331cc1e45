package agent

import (
	"bytes"
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"time"

	"github.com/frontdoor-vdi/frontdoor/internal/atomicfile"
	"github.com/frontdoor-vdi/frontdoor/internal/siteid"
)

// Identity is a machine's certificate from the site CA, which its display ports present,
// and the CA, against which they check gateways' certificates. Enroll obtains it; Keep
// renews it.
type Identity struct {
	machine string

	mu    sync.Mutex // guards cert, ca, caPEM and dir
	cert  *tls.Certificate
	ca    *x509.CertPool
	caPEM []byte // the CA as the front door sent it, for Save
	dir   string // where Save last kept it: a renewal is kept there too
}

// The files of an identity in its directory (Save, LoadIdentity).
const (
	identityKey  = "machine.key"
	identityCert = "machine.pem"
	identityCA   = "site-ca.pem"
)

// Save keeps the identity in dir (the key mode 0600), whole or not at all, so that the agent
// starts again without a new enrolment; later renewals are kept there too.
func (id *Identity) Save(dir string) error {
	id.mu.Lock()
	defer id.mu.Unlock()
	return id.saveLocked(dir)
}

func (id *Identity) saveLocked(dir string) error {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return err
	}
	kder, err := x509.MarshalPKCS8PrivateKey(id.cert.PrivateKey)
	if err != nil {
		return err
	}
	if err := atomicfile.Write(filepath.Join(dir, identityKey), pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: kder}), 0o600); err != nil {
		return err
	}
	if err := atomicfile.Write(filepath.Join(dir, identityCA), id.caPEM, 0o644); err != nil {
		return err
	}
	if err := atomicfile.Write(filepath.Join(dir, identityCert), pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: id.cert.Certificate[0]}), 0o644); err != nil {
		return err
	}
	id.dir = dir
	return nil
}

// LoadIdentity reads the identity of machine that Save kept in dir; an error when there is
// none, it is not the machine's, or it has expired.
func LoadIdentity(dir, machine string) (*Identity, error) {
	read := func(name string) ([]byte, error) { return os.ReadFile(filepath.Join(dir, name)) }
	kp, err := read(identityKey)
	if err != nil {
		return nil, err
	}
	cp, err := read(identityCert)
	if err != nil {
		return nil, err
	}
	caPEM, err := read(identityCA)
	if err != nil {
		return nil, err
	}
	cert, err := tls.X509KeyPair(cp, kp)
	if err != nil {
		return nil, fmt.Errorf("the machine identity in %s: %w", dir, err)
	}
	ca := x509.NewCertPool()
	if !ca.AppendCertsFromPEM(caPEM) {
		return nil, fmt.Errorf("the machine identity in %s: no CA certificate", dir)
	}
	if _, err := cert.Leaf.Verify(x509.VerifyOptions{Roots: ca, KeyUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}}); err != nil {
		return nil, fmt.Errorf("the machine identity in %s: %w", dir, err)
	}
	id, err := NewIdentity(machine, &cert, ca)
	if err != nil {
		return nil, err
	}
	id.caPEM, id.dir = caPEM, dir
	return id, nil
}

// NewIdentity returns the identity of machine from its certificate and the site CA.
func NewIdentity(machine string, cert *tls.Certificate, ca *x509.CertPool) (*Identity, error) {
	id := &Identity{machine: machine}
	if err := id.set(cert, ca); err != nil {
		return nil, err
	}
	return id, nil
}

func (id *Identity) set(cert *tls.Certificate, ca *x509.CertPool) error {
	if cert == nil || cert.Leaf == nil || !siteid.Is(cert.Leaf, siteid.RoleMachine, id.machine) {
		return fmt.Errorf("the certificate does not name machine %s", id.machine)
	}
	id.mu.Lock()
	id.cert, id.ca = cert, ca
	id.mu.Unlock()
	return nil
}

// NotAfter is when the current certificate expires.
func (id *Identity) NotAfter() time.Time {
	id.mu.Lock()
	defer id.mu.Unlock()
	return id.cert.Leaf.NotAfter
}

// ServerTLS returns the TLS config of the display ports: the machine's certificate, and
// client certificates of the site CA checked when given (a gateway presents one; a client in
// direct mode does not need to).
//
// The CA certificates are those the identity holds at each handshake (they change when the
// site CA is rotated). The config offers protos (ALPN); it is not to be changed.
func (id *Identity) ServerTLS(protos ...string) *tls.Config {
	base := &tls.Config{MinVersion: tls.VersionTLS13, ClientAuth: tls.VerifyClientCertIfGiven, NextProtos: protos,
		GetCertificate: func(*tls.ClientHelloInfo) (*tls.Certificate, error) {
			id.mu.Lock()
			defer id.mu.Unlock()
			return id.cert, nil
		}}
	var made *tls.Config // the last config, for the pool made.ClientCAs; guarded by id.mu
	tc := base.Clone()
	tc.GetConfigForClient = func(*tls.ClientHelloInfo) (*tls.Config, error) {
		id.mu.Lock()
		defer id.mu.Unlock()
		if made == nil || made.ClientCAs != id.ca {
			made = base.Clone()
			made.ClientCAs = id.ca
		}
		return made, nil
	}
	return tc
}

// trust makes the identity trust the CA certificates of caPEM (the issuing one first) in
// place of those it holds, and keeps them where Save kept the identity; it reports whether
// they changed.
func (id *Identity) trust(caPEM []byte) (bool, error) {
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(caPEM) {
		return false, errors.New("no CA certificate")
	}
	id.mu.Lock()
	defer id.mu.Unlock()
	if bytes.Equal(id.caPEM, caPEM) {
		return false, nil
	}
	id.ca, id.caPEM = pool, caPEM
	if id.dir != "" {
		if err := id.saveLocked(id.dir); err != nil {
			return true, err
		}
	}
	return true, nil
}

// issuedByCurrent reports whether the certificate was issued by the first CA certificate the
// identity holds: the one that issues.
func (id *Identity) issuedByCurrent() bool {
	id.mu.Lock()
	defer id.mu.Unlock()
	b, _ := pem.Decode(id.caPEM)
	if b == nil {
		return true // nothing to compare with
	}
	issuer, err := x509.ParseCertificate(b.Bytes)
	return err != nil || id.cert.Leaf.CheckSignatureFrom(issuer) == nil
}

// enrolment is the agent API's certificate request and answer (api.Enrolment).
type enrolment struct {
	Machine     string `json:"machine"`
	CSR         string `json:"csr,omitempty"`
	Certificate string `json:"certificate,omitempty"`
	CA          string `json:"ca,omitempty"`
}

// Enroll obtains the machine's certificate from a front door's agent API: a new key, whose
// certificate request the machine's enrolment ticket (good once) or token authenticates.
// From then on the reporter presents the certificate (UseIdentity).
func (r *Reporter) Enroll(ctx context.Context) (*Identity, error) {
	cert, ca, caPEM, err := r.enroll(ctx)
	if err != nil {
		return nil, err
	}
	id, err := NewIdentity(r.machine, cert, ca)
	if err != nil {
		return nil, err
	}
	id.caPEM = caPEM
	r.UseIdentity(id)
	return id, nil
}

func (r *Reporter) enroll(ctx context.Context) (*tls.Certificate, *x509.CertPool, []byte, error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, nil, nil, err
	}
	csr, err := x509.CreateCertificateRequest(rand.Reader, &x509.CertificateRequest{Subject: pkix.Name{CommonName: r.machine}}, key)
	if err != nil {
		return nil, nil, nil, err
	}
	var ans enrolment
	req := enrolment{Machine: r.machine, CSR: string(pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE REQUEST", Bytes: csr}))}
	if err := r.postFor(ctx, "/v1/agent/certificate", req, &ans); err != nil {
		return nil, nil, nil, fmt.Errorf("enrolling machine %s: %w", r.machine, err)
	}
	b, _ := pem.Decode([]byte(ans.Certificate))
	if b == nil {
		return nil, nil, nil, errors.New("enrolling: the answer holds no certificate")
	}
	leaf, err := x509.ParseCertificate(b.Bytes)
	if err != nil {
		return nil, nil, nil, fmt.Errorf("enrolling: %w", err)
	}
	if pub, ok := leaf.PublicKey.(*ecdsa.PublicKey); !ok || !pub.Equal(&key.PublicKey) {
		return nil, nil, nil, errors.New("enrolling: the certificate is not for the key asked for")
	}
	ca := x509.NewCertPool()
	if !ca.AppendCertsFromPEM([]byte(ans.CA)) {
		return nil, nil, nil, errors.New("enrolling: the answer holds no CA certificate")
	}
	if _, err := leaf.Verify(x509.VerifyOptions{Roots: ca, KeyUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}}); err != nil {
		return nil, nil, nil, fmt.Errorf("enrolling: %w", err)
	}
	return &tls.Certificate{Certificate: [][]byte{b.Bytes}, PrivateKey: key, Leaf: leaf}, ca, []byte(ans.CA), nil
}

// Keep renews id through the agent API once its certificate is past half its life, checking
// every check, until ctx ends. A failed renewal is logged and tried again at the next check.
func (r *Reporter) Keep(ctx context.Context, id *Identity, check time.Duration) error {
	t := time.NewTicker(check)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-t.C:
		}
		id.mu.Lock()
		leaf := id.cert.Leaf
		id.mu.Unlock()
		if time.Until(leaf.NotAfter) > leaf.NotAfter.Sub(leaf.NotBefore)/2 {
			continue
		}
		if err := r.renew(ctx, id); err != nil {
			r.log.Warn("renewing the machine certificate", "not_after", leaf.NotAfter, "err", err)
			continue
		}
		r.log.Info("renewed the machine certificate", "not_after", id.NotAfter())
	}
}

// renew obtains a new certificate for id through the agent API, with the CA certificates
// the answer gives, and keeps both where Save kept the identity.
func (r *Reporter) renew(ctx context.Context, id *Identity) error {
	cert, ca, caPEM, err := r.enroll(ctx)
	if err != nil {
		return err
	}
	if err := id.set(cert, ca); err != nil {
		return err
	}
	id.mu.Lock()
	changed := !bytes.Equal(id.caPEM, caPEM)
	id.caPEM = caPEM
	if id.dir != "" {
		err = id.saveLocked(id.dir)
	}
	id.mu.Unlock()
	if changed {
		r.UseIdentity(id)
	}
	return err
}
