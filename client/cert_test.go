package client

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/json"
	"errors"
	"math/big"
	"net"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"testing"
	"time"
)

// A Launcher with a client certificate and no password presents the certificate at the
// handshake and sends no HTTP Basic credentials; a refusal names the certificate's subject.
func TestALauncherLogsInWithAClientCertificate(t *testing.T) {
	caKey, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	caTmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "corp CA"}, NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
		IsCA: true, BasicConstraintsValid: true, KeyUsage: x509.KeyUsageCertSign}
	caDER, err := x509.CreateCertificate(rand.Reader, caTmpl, caTmpl, &caKey.PublicKey, caKey)
	if err != nil {
		t.Fatal(err)
	}
	ca, _ := x509.ParseCertificate(caDER)
	key, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	der, err := x509.CreateCertificate(rand.Reader, &x509.Certificate{SerialNumber: big.NewInt(2), Subject: pkix.Name{CommonName: "alice"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour), ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}}, ca, &key.PublicKey, caKey)
	if err != nil {
		t.Fatal(err)
	}
	leaf, _ := x509.ParseCertificate(der)
	cert := &tls.Certificate{Certificate: [][]byte{der}, PrivateKey: key, Leaf: leaf}

	pool := x509.NewCertPool()
	pool.AddCert(ca)
	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _, basic := r.BasicAuth()
		if basic || len(r.TLS.VerifiedChains) == 0 || r.TLS.VerifiedChains[0][0].Subject.CommonName != "alice" {
			w.WriteHeader(http.StatusUnauthorized)
			return
		}
		var req struct{ Resource string }
		json.NewDecoder(r.Body).Decode(&req)
		if req.Resource != "desktop" {
			w.WriteHeader(http.StatusUnauthorized)
			return
		}
		json.NewEncoder(w).Encode(Descriptor{SessionID: "s-cert", Mode: ModeDirect})
	}))
	srv.TLS = &tls.Config{ClientAuth: tls.RequireAndVerifyClientCert, ClientCAs: pool}
	srv.Config.ErrorLog = nil
	srv.StartTLS()
	t.Cleanup(srv.Close)
	_, port, _ := net.SplitHostPort(srv.Listener.Addr().String())
	p, _ := strconv.Atoi(port)
	roots := x509.NewCertPool()
	roots.AddCert(srv.Certificate())

	l := &Launcher{Name: "127.0.0.1", Port: uint16(p), Certificate: cert, Resource: "desktop", RootCAs: roots}
	d, _, err := l.Launch(ctxT(t))
	if err != nil || d.SessionID != "s-cert" {
		t.Fatalf("a launch with the certificate: %+v, %v", d, err)
	}
	l.Resource = "other"
	if _, _, err := l.Launch(ctxT(t)); !errors.Is(err, ErrUnauthorized) || !strings.Contains(err.Error(), `as "the certificate of CN=alice"`) {
		t.Fatalf("a refused launch: %v, want %v naming the certificate", err, ErrUnauthorized)
	}
	l.Certificate = nil
	if _, _, err := l.Launch(ctxT(t)); err == nil {
		t.Fatal("a launch without the certificate went through a listener that requires one")
	}
}
