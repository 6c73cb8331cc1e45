package pki

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/pem"
	"io"
	"log/slog"
	"net"
	"net/netip"
	"slices"
	"testing"
	"time"

	"github.com/frontdoor-vdi/frontdoor/configs"
)

func TestInternalCAServesTrustedCertificates(t *testing.T) {
	dir, ca, certs := testCerts(t, []string{"desktop.vdi.lab.test", "127.0.0.1"})

	ln, err := tls.Listen("tcp", "127.0.0.1:0", certs.TLSConfig())
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	go handshakes(ln)
	for _, name := range []string{"desktop.vdi.lab.test", "127.0.0.1"} {
		c, err := tls.Dial("tcp", ln.Addr().String(), &tls.Config{RootCAs: ca.Pool(), ServerName: name})
		if err != nil {
			t.Errorf("handshake for %s: %v", name, err)
			continue
		}
		c.Close()
	}
	if _, err := tls.Dial("tcp", ln.Addr().String(), &tls.Config{ServerName: "desktop.vdi.lab.test"}); err == nil {
		t.Error("handshake without trusting the CA succeeded")
	}

	// A second start reuses the CA and the stored certificate.
	ca2, err := LoadOrCreateCA(dir, "test", slog.New(slog.NewTextHandler(io.Discard, nil)))
	if err != nil || ca2.IssuerKey() != ca.IssuerKey() {
		t.Fatalf("reloading CA: %v (key %s vs %s)", err, ca2.IssuerKey(), ca.IssuerKey())
	}
}

// TestCertNamesCoverWhatClientsDial: GSLB names without the dot, gateway addresses and public
// addresses, specific listener addresses, localhost; not an unspecified address.
func TestCertNamesCoverWhatClientsDial(t *testing.T) {
	cfg := &configs.Config{
		Gateways: []configs.Gateway{{Name: "gw", Address: netip.MustParseAddr("127.1.0.11"), PublicAddresses: []netip.Addr{netip.MustParseAddr("127.1.0.12")}}},
		GSLB:     configs.GSLB{Names: []configs.GSLBName{{Name: "desktop.example.com."}}},
	}
	nodes := []configs.Node{{Name: "fd", Listeners: []configs.Listener{{Kind: "launch", Address: netip.MustParseAddrPort("127.1.0.1:9443")}, {Kind: "admin", Address: netip.MustParseAddrPort("0.0.0.0:9090")}}}}
	got := CertNames(cfg, nodes)
	want := []string{"127.1.0.1", "127.1.0.11", "127.1.0.12", "desktop.example.com", "localhost"}
	if !slices.Equal(got, want) {
		t.Fatalf("CertNames = %v, want %v", got, want)
	}
}

// TestServerTLSNamesTheAddressReached: a client that dials an IP address and sends no server
// name gets that address's certificate, also when the listener is bound elsewhere.
func TestServerTLSNamesTheAddressReached(t *testing.T) {
	names := []string{"127.0.0.77", "localhost"}
	_, ca, certs := testCerts(t, names)
	// The public 127.0.0.77 is really bound at 127.0.0.78, as behind a drill's wire.
	bound := func(a netip.Addr) netip.Addr {
		if a == netip.MustParseAddr("127.0.0.77") {
			return netip.MustParseAddr("127.0.0.78")
		}
		return a
	}
	ln, err := tls.Listen("tcp", "127.0.0.78:0", ServerTLS(certs, ca, names, bound, nil))
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	go handshakes(ln)
	c, err := tls.Dial("tcp", ln.Addr().String(), &tls.Config{RootCAs: ca.Pool(), ServerName: "127.0.0.77"})
	if err != nil {
		t.Fatalf("the certificate of the reached address: %v", err)
	}
	c.Close()
}

// testCerts makes a CA in a temporary dir and certificates for names, closed at the end.
func testCerts(t *testing.T, names []string) (string, *CA, *Certs) {
	t.Helper()
	dir := t.TempDir()
	ca, err := LoadOrCreateCA(dir, "test", slog.New(slog.NewTextHandler(io.Discard, nil)))
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	certs, err := NewCerts(ctx, dir, names, ca)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(certs.Close)
	return dir, ca, certs
}

// handshakes completes the TLS handshake of every connection ln accepts, until it closes.
func handshakes(ln net.Listener) {
	for {
		c, err := ln.Accept()
		if err != nil {
			return
		}
		c.(*tls.Conn).Handshake()
		c.Close()
	}
}

// The TLS policy: TLS 1.3, or TLS 1.2 with an AEAD suite; a client that offers only CBC
// suites, or TLS 1.1, gets no connection.
func TestTLSPolicyTakesAEADSuitesOnly(t *testing.T) {
	_, ca, certs := testCerts(t, []string{"127.0.0.1"})
	ln, err := tls.Listen("tcp", "127.0.0.1:0", certs.TLSConfig())
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	go handshakes(ln)
	for _, tc := range []struct {
		name   string
		min    uint16
		max    uint16
		suites []uint16
		ok     bool
	}{
		{"TLS 1.3", tls.VersionTLS13, tls.VersionTLS13, nil, true},
		{"TLS 1.2 with AES-GCM", tls.VersionTLS12, tls.VersionTLS12, []uint16{tls.TLS_ECDHE_ECDSA_WITH_AES_128_GCM_SHA256}, true},
		{"TLS 1.2 with ChaCha20-Poly1305", tls.VersionTLS12, tls.VersionTLS12, []uint16{tls.TLS_ECDHE_ECDSA_WITH_CHACHA20_POLY1305_SHA256}, true},
		{"TLS 1.2 with CBC suites only", tls.VersionTLS12, tls.VersionTLS12, []uint16{tls.TLS_ECDHE_ECDSA_WITH_AES_128_CBC_SHA, tls.TLS_ECDHE_ECDSA_WITH_AES_256_CBC_SHA, tls.TLS_ECDHE_ECDSA_WITH_AES_128_CBC_SHA256}, false},
		{"TLS 1.1", tls.VersionTLS10, tls.VersionTLS11, nil, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c, err := tls.Dial("tcp", ln.Addr().String(), &tls.Config{RootCAs: ca.Pool(), ServerName: "127.0.0.1",
				MinVersion: tc.min, MaxVersion: tc.max, CipherSuites: tc.suites})
			if err == nil {
				c.Close()
			}
			if (err == nil) != tc.ok {
				t.Fatalf("handshake: %v, want success %v", err, tc.ok)
			}
		})
	}
}

// TestInternalCertificatesAreShortLived: every certificate the site CA issues — a listener's,
// a gateway's or machine's, a user's — is valid for 7 days or less, both ends counted (the
// CA/Browser Forum's short-lived certificate, which needs no CRL or OCSP address), and
// carries none.
func TestInternalCertificatesAreShortLived(t *testing.T) {
	_, ca, certs := testCerts(t, []string{"desktop.vdi.lab.test"})
	const shortLived = 604800 * time.Second

	listener, err := certs.TLSConfig().GetCertificate(&tls.ClientHelloInfo{ServerName: "desktop.vdi.lab.test"})
	if err != nil {
		t.Fatal(err)
	}
	party, err := ca.PartyCertificate("machine", "vda-1", []netip.Addr{netip.MustParseAddr("127.0.0.1")})
	if err != nil {
		t.Fatal(err)
	}
	userPEM, _, err := ca.IssueClient("alice", PartyTTL)
	if err != nil {
		t.Fatal(err)
	}
	block, _ := pem.Decode(userPEM)
	user, err := x509.ParseCertificate(block.Bytes)
	if err != nil {
		t.Fatal(err)
	}
	for name, c := range map[string]*x509.Certificate{"listener": leaf(t, listener), "machine": leaf(t, party), "user": user} {
		validity := c.NotAfter.Sub(c.NotBefore) + time.Second
		if validity > shortLived || validity < shortLived-time.Second {
			t.Errorf("the %s's certificate is valid for %v (%v to %v), want 7 days at most and no less than a second below", name, validity, c.NotBefore, c.NotAfter)
		}
		if len(c.CRLDistributionPoints) != 0 || len(c.OCSPServer) != 0 {
			t.Errorf("the %s's certificate names a CRL %v or OCSP %v", name, c.CRLDistributionPoints, c.OCSPServer)
		}
	}
}

func leaf(t *testing.T, c *tls.Certificate) *x509.Certificate {
	t.Helper()
	x, err := x509.ParseCertificate(c.Certificate[0])
	if err != nil {
		t.Fatal(err)
	}
	return x
}
