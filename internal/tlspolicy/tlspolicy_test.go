package tlspolicy

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"math/big"
	"net"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"testing"
	"time"
)

func TestHandlerKeepsBrowsersOnHTTPS(t *testing.T) {
	h := Handler(http.NotFoundHandler())
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "https://fd.test/nowhere", nil))
	if got := rec.Header().Get("Strict-Transport-Security"); rec.Code != http.StatusNotFound || got != HSTS {
		t.Fatalf("a 404: %d with Strict-Transport-Security %q, want %q on every answer", rec.Code, got, HSTS)
	}
	if got := rec.Header().Get("X-Content-Type-Options"); got != "nosniff" {
		t.Fatalf("a 404: X-Content-Type-Options %q, want nosniff", got)
	}
}

func TestServerOffersAEADSuitesOnly(t *testing.T) {
	var c tls.Config
	Server(&c)
	if c.MinVersion != tls.VersionTLS12 {
		t.Errorf("MinVersion %x, want TLS 1.2", c.MinVersion)
	}
	if len(c.CipherSuites) == 0 || slices.Equal(c.CipherSuites, nil) {
		t.Fatal("no suites set: Go's defaults offer CBC ones")
	}
	for _, id := range c.CipherSuites {
		if s := tls.CipherSuiteName(id); aeadOf(s) == "" {
			t.Errorf("%s offered: not an AEAD suite", s)
		}
	}
}

// aeadOf returns the AEAD cipher a TLS 1.2 suite's name carries, or "".
func aeadOf(name string) string {
	for _, a := range []string{"AES_128_GCM", "AES_256_GCM", "CHACHA20_POLY1305"} {
		if strings.Contains(name, "_WITH_"+a) {
			return a
		}
	}
	return ""
}

// A client that keeps sessions gets no ticket, so its next connection is a full handshake.
func TestServerIssuesNoSessionTickets(t *testing.T) {
	srv := serverConfig(t)
	Server(srv)
	cli := &tls.Config{RootCAs: srv.RootCAs, ServerName: "fd.test", ClientSessionCache: tls.NewLRUClientSessionCache(8)}
	for _, v := range []uint16{tls.VersionTLS12, tls.VersionTLS13} {
		cli.MinVersion, cli.MaxVersion = v, v
		for i := range 2 {
			if st := handshake(t, srv, cli); st.DidResume {
				t.Fatalf("%s, connection %d: resumed from a ticket", tls.VersionName(v), i+1)
			}
		}
	}
}

// BenchmarkHandshake is what a node's CPU pays per TLS handshake: full (the policy) and
// resumed from a ticket (Go's default), both on loopback with an ECDSA P-256 certificate.
func BenchmarkHandshake(b *testing.B) {
	for _, resumed := range []bool{false, true} {
		name := "full"
		if resumed {
			name = "resumed"
		}
		b.Run(name, func(b *testing.B) {
			srv := serverConfig(b)
			Server(srv)
			srv.SessionTicketsDisabled = !resumed
			cli := &tls.Config{RootCAs: srv.RootCAs, ServerName: "fd.test", ClientSessionCache: tls.NewLRUClientSessionCache(8)}
			handshake(b, srv, cli)
			b.ResetTimer()
			for b.Loop() {
				if st := handshake(b, srv, cli); st.DidResume != resumed {
					b.Fatalf("resumed %v, want %v", st.DidResume, resumed)
				}
			}
		})
	}
}

// serverConfig is a server config of a new ECDSA P-256 certificate for fd.test, its own
// root in RootCAs for the clients.
func serverConfig(t testing.TB) *tls.Config {
	t.Helper()
	key, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "fd.test"}, DNSNames: []string{"fd.test"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour), IsCA: true, BasicConstraintsValid: true,
		KeyUsage: x509.KeyUsageDigitalSignature | x509.KeyUsageCertSign}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	leaf, _ := x509.ParseCertificate(der)
	pool := x509.NewCertPool()
	pool.AddCert(leaf)
	return &tls.Config{Certificates: []tls.Certificate{{Certificate: [][]byte{der}, PrivateKey: key, Leaf: leaf}}, RootCAs: pool}
}

// handshake completes one handshake of cli with srv over a loopback pipe and returns the
// client's state once the server has sent its tickets, if any.
func handshake(t testing.TB, srv, cli *tls.Config) tls.ConnectionState {
	t.Helper()
	a, b := net.Pipe()
	done := make(chan error, 1)
	go func() {
		s := tls.Server(a, srv)
		err := s.Handshake()
		if err == nil {
			_, err = s.Write([]byte{1}) // after the tickets of TLS 1.3
		}
		a.Close()
		done <- err
	}()
	c := tls.Client(b, cli)
	if err := c.Handshake(); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Read(make([]byte, 1)); err != nil {
		t.Fatal(err)
	}
	st := c.ConnectionState()
	b.Close()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	return st
}
