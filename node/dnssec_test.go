package node

import (
	"path/filepath"
	"slices"
	"testing"

	"github.com/frontdoor-vdi/frontdoor/configs"
)

const signedNodeSite = `
site: {name: signed}
zones: [{name: hq, primary: true, ranges: [127.0.0.0/8]}]
nodes: [{name: fd, zone: hq}]
gateways: [{name: gw, zone: hq, address: 127.0.98.61}]
gslb:
  domains: [{name: vdi.example.test., dnssec: true}, {name: plain.example.test.}]
  names: [{name: desktop.vdi.example.test., sites: [{zone: hq, gateways: [gw]}]}]
`

// A signed domain's key is made at the first start and kept: the node signs with the same
// key, so the DS published at the parent stays right, after a restart.
func TestADNSSECKeyOutlivesARestart(t *testing.T) {
	cfg, err := configs.Load("site.yaml", []byte(signedNodeSite))
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	first := startNode(t, cfg, Options{DataDir: filepath.Join(dir, "fd")})
	ds := first.dns.DS()
	if len(ds) != 1 {
		t.Fatalf("DS of one signed domain: %q", ds)
	}
	first.Close()
	again := startNode(t, cfg, Options{DataDir: filepath.Join(dir, "fd")})
	if got := again.dns.DS(); !slices.Equal(got, ds) {
		t.Fatalf("after a restart the DS is %q, before %q", got, ds)
	}
}

// On a site of several nodes every node signs with the site's one key (sealed in etcd).
func TestTheNodesOfASiteSignWithOneKey(t *testing.T) {
	if testing.Short() {
		t.Skip("starts etcd and Pebble")
	}
	cfg, dir, _ := acmeSite(t)
	cfg.GSLB.Domains[0].DNSSEC = true
	one := startSiteNode(t, cfg, dir, "fd-1")
	two := startSiteNode(t, cfg, dir, "fd-2")
	if a, b := one.dns.DS(), two.dns.DS(); len(a) != 1 || !slices.Equal(a, b) {
		t.Fatalf("fd-1 publishes %q, fd-2 %q: want one DS", a, b)
	}
}
