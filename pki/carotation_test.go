package pki

import (
	"crypto/tls"
	"errors"
	"io"
	"log/slog"
	"net"
	"net/netip"
	"testing"
	"time"

	"github.com/frontdoor-vdi/frontdoor/internal/siteid"
)

// rotatingCA returns a CA of a new certificate and key, with both in PEM.
func rotatingCA(t *testing.T) (ca *CA, certPEM, keyPEM []byte) {
	t.Helper()
	certPEM, keyPEM, err := GenerateCA("rotation")
	if err != nil {
		t.Fatal(err)
	}
	ca, err = NewCA(certPEM, keyPEM, slog.New(slog.NewTextHandler(io.Discard, nil)))
	if err != nil {
		t.Fatal(err)
	}
	return ca, certPEM, keyPEM
}

// tlsPair runs one handshake of client against server on loopback and returns the client's
// error and the server's.
func tlsPair(t *testing.T, client, server *tls.Config) (cerr, serr error) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	done := make(chan error, 1)
	go func() {
		c, err := ln.Accept()
		if err != nil {
			done <- err
			return
		}
		c.SetDeadline(time.Now().Add(5 * time.Second))
		s := tls.Server(c, server)
		err = s.Handshake()
		if err == nil {
			// TLS 1.3: the client's verdict on the server's certificate, and the server's
			// on the client's, arrive with the first read.
			_, err = s.Read(make([]byte, 1))
		}
		s.Close()
		done <- err
	}()
	c, err := net.Dial("tcp", ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	c.SetDeadline(time.Now().Add(5 * time.Second))
	tc := tls.Client(c, client)
	cerr = tc.Handshake()
	if cerr == nil {
		_, cerr = tc.Write([]byte{1})
		if cerr == nil {
			_, cerr = tc.Read(make([]byte, 1)) // the server's alert, or its close
			if errors.Is(cerr, io.EOF) {
				cerr = nil
			}
		}
	}
	tc.Close()
	return cerr, <-done
}

// TLS configs of the CA follow a rotation: a party's client config made after the CA trusts
// a new CA trusts a server of it, and a server config (made once) takes the new CA's client
// certificates at its next handshake; once the old CA is no longer trusted, its
// certificates are refused on both sides. A party's certificate is issued anew
// by the CA that issues.
func TestTLSConfigsFollowARotationOfTheCA(t *testing.T) {
	ca, oldCert, oldKey := rotatingCA(t)
	_, newCert, newKey := rotatingCA(t)
	gw := ca.Party(siteid.RoleGateway, "gw-1", []netip.Addr{netip.MustParseAddr("127.0.0.1")})
	makeTLS := gw.ClientTLS(nil)
	toMachines := func() *tls.Config { tc := makeTLS(); tc.ServerName = "127.0.0.1"; return tc }
	serverOf := func(issuer *CA) *tls.Config {
		t.Helper()
		c, err := issuer.PartyCertificate(siteid.RoleMachine, "vda-1", []netip.Addr{netip.MustParseAddr("127.0.0.1")})
		if err != nil {
			t.Fatal(err)
		}
		return &tls.Config{Certificates: []tls.Certificate{*c}, ClientAuth: tls.RequireAnyClientCert}
	}
	// A listener's config of the CA that takes client certificates (ServerTLS's followCA).
	listener := followCA(&tls.Config{Certificates: serverOf(ca).Certificates, ClientAuth: tls.RequireAndVerifyClientCert}, ca, nil)
	newOnly, err := NewCA(newCert, newKey, slog.New(slog.NewTextHandler(io.Discard, nil)))
	if err != nil {
		t.Fatal(err)
	}
	partyClient := func(issuer *CA) *tls.Config {
		t.Helper()
		c, err := issuer.PartyCertificate(siteid.RoleGateway, "gw-2", nil)
		if err != nil {
			t.Fatal(err)
		}
		return &tls.Config{Certificates: []tls.Certificate{*c}, InsecureSkipVerify: true}
	}

	if cerr, _ := tlsPair(t, toMachines(), serverOf(ca)); cerr != nil {
		t.Fatalf("before: a machine of the CA: %v", cerr)
	}
	if cerr, _ := tlsPair(t, toMachines(), serverOf(newOnly)); cerr == nil {
		t.Fatal("before: a machine of a CA not trusted was taken")
	}
	if _, serr := tlsPair(t, partyClient(newOnly), listener); serr == nil {
		t.Fatal("before: a client certificate of a CA not trusted was taken")
	}
	first, err := gw.Get()
	if err != nil {
		t.Fatal(err)
	}

	// Trust: the old CA issues, the new one is trusted too.
	if err := ca.Set(oldCert, oldKey, newCert); err != nil {
		t.Fatal(err)
	}
	if cerr, _ := tlsPair(t, toMachines(), serverOf(newOnly)); cerr != nil {
		t.Fatalf("trusting both: a machine of the new CA: %v", cerr)
	}
	if _, serr := tlsPair(t, partyClient(newOnly), listener); serr != nil {
		t.Fatalf("trusting both: a client certificate of the new CA: %v", serr)
	}
	if c, _ := gw.Get(); c != first {
		t.Fatal("the gateway's certificate was issued anew while the same CA issues")
	}

	// Issue: the new CA issues, the old one is trusted too; a party's certificate is new.
	if err := ca.Set(newCert, newKey, oldCert); err != nil {
		t.Fatal(err)
	}
	if c, _ := gw.Get(); c == first || c.Leaf.CheckSignatureFrom(newOnly.Cert()) != nil {
		t.Fatal("the gateway's certificate is not the new CA's")
	}
	if cerr, _ := tlsPair(t, toMachines(), serverOf(newOnly)); cerr != nil {
		t.Fatalf("issuing from the new CA: a machine of the new CA: %v", cerr)
	}
	if _, serr := tlsPair(t, partyClient(ca), listener); serr != nil {
		t.Fatalf("issuing from the new CA: a client certificate it issued: %v", serr)
	}

	// Retire: the old CA is trusted no more.
	oldOnly, err := NewCA(oldCert, oldKey, slog.New(slog.NewTextHandler(io.Discard, nil)))
	if err != nil {
		t.Fatal(err)
	}
	if err := ca.Set(newCert, newKey, nil); err != nil {
		t.Fatal(err)
	}
	if cerr, _ := tlsPair(t, toMachines(), serverOf(oldOnly)); cerr == nil {
		t.Fatal("retired: a machine of the old CA was taken")
	}
	if _, serr := tlsPair(t, partyClient(oldOnly), listener); serr == nil {
		t.Fatal("retired: a client certificate of the old CA was taken")
	}
	if cerr, _ := tlsPair(t, toMachines(), serverOf(newOnly)); cerr != nil {
		t.Fatalf("retired: a machine of the new CA: %v", cerr)
	}
	if string(ca.CertPEM()) != string(newCert) {
		t.Fatal("retired: the CA still hands out the old certificate")
	}
}

// A party's client config checks the server's name as crypto/tls does: a certificate of the
// CA for another address is refused.
func TestAPartysClientConfigChecksTheServersName(t *testing.T) {
	ca, _, _ := rotatingCA(t)
	c, err := ca.PartyCertificate(siteid.RoleMachine, "vda-1", []netip.Addr{netip.MustParseAddr("127.0.0.2")})
	if err != nil {
		t.Fatal(err)
	}
	client := ca.Party(siteid.RoleGateway, "gw-1", nil).ClientTLS(nil)()
	client.ServerName = "127.0.0.1"
	if cerr, _ := tlsPair(t, client, &tls.Config{Certificates: []tls.Certificate{*c}}); cerr == nil {
		t.Fatal("a certificate for 127.0.0.2 was taken for 127.0.0.1")
	}
}
