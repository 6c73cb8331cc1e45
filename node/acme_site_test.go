package node

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"io"
	"log/slog"
	"path/filepath"
	"testing"
	"time"

	"github.com/frontdoor-vdi/frontdoor/configs"
	"github.com/frontdoor-vdi/frontdoor/internal/testkit"
	"github.com/frontdoor-vdi/frontdoor/store/etcd"
	"github.com/libdns/libdns"
	"github.com/miekg/dns"
)

// acmeSite is a site of three nodes on an embedded etcd whose certificates come from Pebble,
// which asks fd-1's DNS listener for the challenges' records.
func acmeSite(t *testing.T) (*configs.Config, string, *pebble) {
	t.Helper()
	dir := t.TempDir()
	endpoint, secret := startEtcd(t, dir)
	p := startPebble(t, "127.0.98.11:5353")
	cfg, err := configs.Load("site.yaml", []byte(fmt.Sprintf(`
site:
  name: acme-site
  store: {backend: etcd, endpoints: [%s], secret_file: %q}
  tls: {issuer: acme, acme: {email: ops@example.test, ca: %q, ca_root: %q}}
zones: [{name: hq, primary: true, ranges: [127.0.0.0/8]}]
nodes:
  - {name: fd-1, zone: hq, listeners: [{kind: dns, address: "127.0.98.11:5353"}, {kind: launch, address: "127.0.98.11:9443"}]}
  - {name: fd-2, zone: hq, listeners: [{kind: dns, address: "127.0.98.12:5353"}, {kind: launch, address: "127.0.98.12:9443"}]}
  - {name: fd-3, zone: hq, listeners: [{kind: dns, address: "127.0.98.13:5353"}, {kind: launch, address: "127.0.98.13:9443"}]}
gateways: [{name: gw, zone: hq, address: 127.0.98.3}]
gslb:
  domains: [{name: vdi.example.test.}]
  names: [{name: desktop.vdi.example.test., sites: [{zone: hq, gateways: [gw]}]}]
`, endpoint, secret, p.dir, p.rootCA)))
	if err != nil {
		t.Fatal(err)
	}
	return cfg, dir, p
}

// startSiteNode starts node name of cfg with its data under dir.
func startSiteNode(t *testing.T, cfg *configs.Config, dir, name string) *Node {
	t.Helper()
	return startSiteNodeWith(t, cfg, dir, name, Options{})
}

// startSiteNodeWith is startSiteNode with options o.
func startSiteNodeWith(t *testing.T, cfg *configs.Config, dir, name string, o Options) *Node {
	t.Helper()
	o.Config, o.Node, o.DataDir, o.Logger = cfg, name, filepath.Join(dir, name), slog.New(slog.NewTextHandler(io.Discard, nil))
	r, err := New(context.Background(), o)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { r.Close() })
	if err := r.Listen(); err != nil {
		t.Fatal(err)
	}
	serveNode(t, r)
	return r
}

// servedCertificate waits up to 60 s for addr to serve a certificate for
// desktop.vdi.example.test that roots verify, and returns it.
func servedCertificate(t *testing.T, addr string, roots *x509.CertPool) *x509.Certificate {
	t.Helper()
	deadline := time.Now().Add(60 * time.Second)
	for {
		c, err := tls.Dial("tcp", addr, &tls.Config{ServerName: "desktop.vdi.example.test", RootCAs: roots})
		if err == nil {
			leaf := c.ConnectionState().PeerCertificates[0]
			c.Close()
			return leaf
		}
		if time.Now().After(deadline) {
			t.Fatalf("after 60 s %s serves no certificate from the ACME CA: %v", addr, err)
		}
		time.Sleep(200 * time.Millisecond)
	}
}

// On a site of several nodes one certificate is obtained for the site: the nodes share it
// through etcd (sealed), whichever obtained it, and a node that joins later serves it without
// a new issuance.
func TestACMEOnASiteOfSeveralNodesObtainsOnce(t *testing.T) {
	testkit.SecondTier(t)
	cfg, dir, p := acmeSite(t)
	startSiteNode(t, cfg, dir, "fd-1")
	startSiteNode(t, cfg, dir, "fd-2")
	roots := p.roots(t)
	one := servedCertificate(t, "127.0.98.11:9443", roots)
	two := servedCertificate(t, "127.0.98.12:9443", roots)
	if one.SerialNumber.Cmp(two.SerialNumber) != 0 {
		t.Fatalf("fd-1 serves serial %x, fd-2 serial %x: the site obtained the name twice", one.SerialNumber, two.SerialNumber)
	}
	startSiteNode(t, cfg, dir, "fd-3")
	if three := servedCertificate(t, "127.0.98.13:9443", roots); three.SerialNumber.Cmp(one.SerialNumber) != 0 {
		t.Fatalf("fd-3, which joined later, serves serial %x, the site's is %x", three.SerialNumber, one.SerialNumber)
	}
}

// A challenge record one node adds is served by the site's other DNS nodes (through etcd), so
// that the CA finds it whichever node it asks; withdrawn, it goes from them too.
func TestAChallengeRecordReachesEveryDNSNode(t *testing.T) {
	testkit.SecondTier(t)
	cfg, dir, _ := acmeSite(t)
	startSiteNode(t, cfg, dir, "fd-1")
	fd2 := startSiteNode(t, cfg, dir, "fd-2")
	prov := siteChallenges{st: fd2.store.(*etcd.Store), local: fd2.dns.ACME()}
	rec := []libdns.Record{libdns.TXT{Name: "_acme-challenge.desktop", Text: "token-42"}}
	if _, err := prov.AppendRecords(context.Background(), "vdi.example.test.", rec); err != nil {
		t.Fatal(err)
	}
	txt := func(server string) []string {
		m := new(dns.Msg)
		m.SetQuestion("_acme-challenge.desktop.vdi.example.test.", dns.TypeTXT)
		r, err := dns.Exchange(m, server)
		if err != nil {
			t.Fatalf("asking %s: %v", server, err)
		}
		var out []string
		for _, rr := range r.Answer {
			if t, ok := rr.(*dns.TXT); ok {
				out = append(out, t.Txt...)
			}
		}
		return out
	}
	waitTXT := func(server string, want bool) {
		t.Helper()
		for i := 0; ; i++ {
			got := txt(server)
			if (len(got) == 1 && got[0] == "token-42") == want {
				return
			}
			if i == 100 {
				t.Fatalf("%s answers %q, want the record %v", server, got, want)
			}
			time.Sleep(50 * time.Millisecond)
		}
	}
	waitTXT("127.0.98.12:5353", true)
	waitTXT("127.0.98.11:5353", true)
	if _, err := prov.DeleteRecords(context.Background(), "vdi.example.test.", rec); err != nil {
		t.Fatal(err)
	}
	waitTXT("127.0.98.11:5353", false)
	waitTXT("127.0.98.12:5353", false)
	if _, err := prov.AppendRecords(context.Background(), "vdi.example.test.", []libdns.Record{libdns.TXT{Name: "_acme-challenge.elsewhere.example.", Text: "x"}}); err == nil {
		t.Fatal("a challenge record outside the site's domains was published")
	}
}
