package node

import (
	"context"
	"io"
	"log/slog"
	"os"
	"testing"

	"github.com/frontdoor-vdi/frontdoor/configs"
)

// TestACMEIssuerIsWired: with site.tls.issuer acme the node builds its certificates with an
// ACME issuer whose DNS-01 challenges go to its own GSLB server, in the background (here the
// directory is a closed loopback port, so nothing is obtained, and nothing blocks the start).
func TestACMEIssuerIsWired(t *testing.T) {
	cfg, err := configs.Load("acme.yaml", []byte(`
site:
  name: acme-test
  tls: {issuer: acme, acme: {email: ops@example.test, ca: "https://127.0.0.1:1/directory"}}
zones: [{name: hq, primary: true}]
nodes:
  - {name: fd, zone: hq, listeners: [{kind: dns, address: "127.0.99.1:5353"}]}
gateways: [{name: gw, zone: hq, address: 127.0.99.2}]
gslb:
  domains: [{name: vdi.example.test.}]
  names: [{name: desktop.vdi.example.test., sites: [{zone: hq, gateways: [gw]}]}]
`))
	if err != nil {
		t.Fatal(err)
	}
	dir, err := os.MkdirTemp("", "frontdoor-acme-")
	if err != nil {
		t.Fatal(err)
	}
	// Background issuance may still be writing as the test ends: remove what is left later.
	defer os.RemoveAll(dir)
	r, err := New(context.Background(), Options{Config: cfg, DataDir: dir, Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	if len(r.certs.Issuers()) != 1 {
		t.Fatalf("issuers: %v", r.certs.Issuers())
	}
	if k := r.certs.Issuers()[0].IssuerKey(); k == r.ca.IssuerKey() {
		t.Errorf("issuer is the internal CA, want the ACME issuer")
	}
}
