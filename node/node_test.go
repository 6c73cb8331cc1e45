package node

import (
	"context"
	"io"
	"log/slog"
	"os"
	"strings"
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

// A node is one configured node: New names the choice when the config has several and none
// is given, or an unknown one is, and refuses a site of several nodes on a store that only
// one process can hold.
func TestNewIsOneNodeOfASharedSite(t *testing.T) {
	cfg, err := configs.Load("two.yaml", []byte(`
site: {name: two}
zones: [{name: hq, primary: true}]
nodes:
  - {name: fd-1, zone: hq, listeners: [{kind: dns, address: "127.0.99.1:5353"}]}
  - {name: fd-2, zone: hq, listeners: [{kind: dns, address: "127.0.99.2:5353"}]}
`))
	if err != nil {
		t.Fatal(err)
	}
	quiet := slog.New(slog.NewTextHandler(io.Discard, nil))
	for _, c := range []struct {
		name, node, want string
	}{
		{"no node named", "", "the config has 2 nodes: choose one (fd-1, fd-2)"},
		{"an unknown node", "fd-9", `no node "fd-9" in the config (nodes: fd-1, fd-2)`},
		{"one of several on bolt", "fd-1", "site.store.backend: etcd"},
	} {
		t.Run(c.name, func(t *testing.T) {
			n, err := New(context.Background(), Options{Config: cfg, Node: c.node, DataDir: t.TempDir(), Logger: quiet})
			if err == nil {
				n.Close()
				t.Fatalf("New(%q) built a node, want an error naming %q", c.node, c.want)
			}
			if !strings.Contains(err.Error(), c.want) {
				t.Fatalf("New(%q): %v, want an error naming %q", c.node, err, c.want)
			}
		})
	}
}
