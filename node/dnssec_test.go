package node

import (
	"context"
	"encoding/pem"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/frontdoor-vdi/frontdoor/api"
	"github.com/frontdoor-vdi/frontdoor/configs"
	"github.com/frontdoor-vdi/frontdoor/gslb"
	"github.com/frontdoor-vdi/frontdoor/internal/testkit"
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

// On a site of several nodes every node signs with the site's one key (sealed in etcd), and
// follows a rollover made at another node: both keys while it is under way, the new one
// alone once it is finished.
func TestTheNodesOfASiteSignWithOneKey(t *testing.T) {
	testkit.SecondTier(t)
	cfg, dir, _ := acmeSite(t)
	cfg.GSLB.Domains[0].DNSSEC = true
	one := startSiteNode(t, cfg, dir, "fd-1")
	two := startSiteNode(t, cfg, dir, "fd-2")
	if a, b := one.dns.DS(), two.dns.DS(); len(a) != 1 || !slices.Equal(a, b) {
		t.Fatalf("fd-1 publishes %q, fd-2 %q: want one DS", a, b)
	}
	old := one.dns.DS()[0]
	ctx := context.Background()
	domain := cfg.GSLB.Domains[0].Name
	rolling, err := one.DNSSECRollover(ctx, domain, false)
	if err != nil || len(rolling.Keys) != 2 {
		t.Fatalf("rollover at fd-1: %+v, %v", rolling, err)
	}
	follows := func(what string, want ...string) {
		t.Helper()
		slices.Sort(want)
		for deadline := time.Now().Add(10 * time.Second); !slices.Equal(two.dns.DS(), want); time.Sleep(10 * time.Millisecond) {
			if time.Now().After(deadline) {
				t.Fatalf("%s: fd-2 publishes %q, want %q", what, two.dns.DS(), want)
			}
		}
	}
	follows("under way", old, rolling.Keys[1].DS)
	if _, err := two.DNSSECRollover(ctx, domain, false); !errors.Is(err, api.ErrRefused) {
		t.Fatalf("a second rollover at fd-2 while one is under way: %v", err)
	}
	done, err := two.DNSSECRollover(ctx, domain, true)
	if err != nil || len(done.Keys) != 1 || done.Keys[0].DS != rolling.Keys[1].DS {
		t.Fatalf("finish at fd-2: %+v, %v", done, err)
	}
	for deadline := time.Now().Add(10 * time.Second); !slices.Equal(one.dns.DS(), []string{done.Keys[0].DS}); time.Sleep(10 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("finished at fd-2: fd-1 publishes %q", one.dns.DS())
		}
	}
	// A node that joins later signs with the key in force.
	three := startSiteNode(t, cfg, dir, "fd-3")
	if got := three.dns.DS(); !slices.Equal(got, []string{done.Keys[0].DS}) {
		t.Fatalf("fd-3 publishes %q, want %q", got, done.Keys[0].DS)
	}
}

// A node of an earlier version kept its domain's one key in dnssec/APEXkey.pem: the node
// signs with that key still, so that the DS at the parent stays right.
func TestTheKeyOfAnEarlierVersionIsKept(t *testing.T) {
	cfg, err := configs.Load("site.yaml", []byte(signedNodeSite))
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	set, err := gslb.NewKeySet(time.Now())
	if err != nil {
		t.Fatal(err)
	}
	file := filepath.Join(dir, "dnssec", "vdi.example.test.key.pem")
	if err := os.MkdirAll(filepath.Dir(file), 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(file, pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: set.Keys[0].Private}), 0o600); err != nil {
		t.Fatal(err)
	}
	want, err := set.DS("vdi.example.test.")
	if err != nil {
		t.Fatal(err)
	}
	r := startNode(t, cfg, Options{DataDir: dir})
	if got := r.dns.DS(); !slices.Equal(got, []string{want[0].String()}) {
		t.Fatalf("the node publishes %q, want the earlier key's %q", got, want[0].String())
	}
}

// A site of an earlier version kept its domain's one key sealed in etcd under
// dnssec/APEXkey: the nodes sign with that key still.
func TestTheSiteKeyOfAnEarlierVersionIsKept(t *testing.T) {
	testkit.SecondTier(t)
	cfg, dir := etcdSite(t, "legacy-dnssec", "fd-1")
	site, err := configs.Load("site.yaml", []byte(signedNodeSite))
	if err != nil {
		t.Fatal(err)
	}
	cfg.GSLB, cfg.Gateways = site.GSLB, site.Gateways
	set, err := gslb.NewKeySet(time.Now())
	if err != nil {
		t.Fatal(err)
	}
	want, err := set.DS("vdi.example.test.")
	if err != nil {
		t.Fatal(err)
	}
	// What the earlier version wrote: the key alone, sealed in the site's storage, and no
	// key set.
	first := startSiteNode(t, cfg, dir, "fd-1")
	kv, err := first.site.(*siteOfNodes).sealed()
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	if err := kv.Delete(ctx, "dnssec/vdi.example.test.keys"); err != nil {
		t.Fatal(err)
	}
	if err := kv.Put(ctx, "dnssec/vdi.example.test.key", set.Keys[0].Private); err != nil {
		t.Fatal(err)
	}
	first.Close()
	r := startSiteNode(t, cfg, dir, "fd-1")
	if got := r.dns.DS(); !slices.Equal(got, []string{want[0].String()}) {
		t.Fatalf("the node publishes %q, want the earlier key's %q", got, want[0].String())
	}
}
