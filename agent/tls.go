package agent

import (
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
	"sync"
	"time"

	"github.com/frontdoor-vdi/frontdoor/internal/siteid"
)

// Identity is a machine's certificate from the site CA, which its display ports present,
// and the CA, against which they check gateways' certificates. Enroll obtains it; Keep
// renews it.
type Identity struct {
	machine string

	mu   sync.Mutex // guards cert and ca
	cert *tls.Certificate
	ca   *x509.CertPool
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
func (id *Identity) ServerTLS() *tls.Config {
	id.mu.Lock()
	ca := id.ca
	id.mu.Unlock()
	return &tls.Config{MinVersion: tls.VersionTLS13, ClientAuth: tls.VerifyClientCertIfGiven, ClientCAs: ca,
		GetCertificate: func(*tls.ClientHelloInfo) (*tls.Certificate, error) {
			id.mu.Lock()
			defer id.mu.Unlock()
			return id.cert, nil
		}}
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
	cert, ca, err := r.enroll(ctx)
	if err != nil {
		return nil, err
	}
	id, err := NewIdentity(r.machine, cert, ca)
	if err != nil {
		return nil, err
	}
	r.UseIdentity(id)
	return id, nil
}

func (r *Reporter) enroll(ctx context.Context) (*tls.Certificate, *x509.CertPool, error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, nil, err
	}
	csr, err := x509.CreateCertificateRequest(rand.Reader, &x509.CertificateRequest{Subject: pkix.Name{CommonName: r.machine}}, key)
	if err != nil {
		return nil, nil, err
	}
	var ans enrolment
	req := enrolment{Machine: r.machine, CSR: string(pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE REQUEST", Bytes: csr}))}
	if err := r.postFor(ctx, "/v1/agent/certificate", req, &ans); err != nil {
		return nil, nil, fmt.Errorf("enrolling machine %s: %w", r.machine, err)
	}
	b, _ := pem.Decode([]byte(ans.Certificate))
	if b == nil {
		return nil, nil, errors.New("enrolling: the answer holds no certificate")
	}
	leaf, err := x509.ParseCertificate(b.Bytes)
	if err != nil {
		return nil, nil, fmt.Errorf("enrolling: %w", err)
	}
	if pub, ok := leaf.PublicKey.(*ecdsa.PublicKey); !ok || !pub.Equal(&key.PublicKey) {
		return nil, nil, errors.New("enrolling: the certificate is not for the key asked for")
	}
	ca := x509.NewCertPool()
	if !ca.AppendCertsFromPEM([]byte(ans.CA)) {
		return nil, nil, errors.New("enrolling: the answer holds no CA certificate")
	}
	if _, err := leaf.Verify(x509.VerifyOptions{Roots: ca, KeyUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}}); err != nil {
		return nil, nil, fmt.Errorf("enrolling: %w", err)
	}
	return &tls.Certificate{Certificate: [][]byte{b.Bytes}, PrivateKey: key, Leaf: leaf}, ca, nil
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
		cert, ca, err := r.enroll(ctx)
		if err == nil {
			err = id.set(cert, ca)
		}
		if err != nil {
			r.log.Warn("renewing the machine certificate", "not_after", leaf.NotAfter, "err", err)
			continue
		}
		r.log.Info("renewed the machine certificate", "not_after", cert.Leaf.NotAfter)
	}
}
