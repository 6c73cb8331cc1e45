package api

import (
	"context"
	"crypto/tls"
	"io"
	"log/slog"
	"testing"
	"time"
)

func TestInternalCAServesTrustedCertificates(t *testing.T) {
	dir := t.TempDir()
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	ca, err := LoadOrCreateCA(dir, "test", log)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	certs, err := NewCerts(ctx, dir, []string{"desktop.vdi.lab.test", "127.0.0.1"}, ca)
	if err != nil {
		t.Fatal(err)
	}
	defer certs.Close()

	ln, err := tls.Listen("tcp", "127.0.0.1:0", certs.TLSConfig())
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			c.(*tls.Conn).Handshake()
			c.Close()
		}
	}()
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
	ca2, err := LoadOrCreateCA(dir, "test", log)
	if err != nil || ca2.IssuerKey() != ca.IssuerKey() {
		t.Fatalf("reloading CA: %v (key %s vs %s)", err, ca2.IssuerKey(), ca.IssuerKey())
	}
}
