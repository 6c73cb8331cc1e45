package node

import (
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/frontdoor-vdi/frontdoor/configs"
	"github.com/frontdoor-vdi/frontdoor/internal/testkit"
	"github.com/frontdoor-vdi/frontdoor/pki"
)

// pebble is a Pebble ACME server (github.com/letsencrypt/pebble, the module's tool) started on
// loopback for a test, resolving names at dnsServer.
type pebble struct {
	dir, mgmt string // the ACME directory's URL; the management API's https://host:port
	rootCA    string // PEM file of the root of Pebble's own HTTPS certificate (minica)
	client    *http.Client
}

func startPebble(t *testing.T, dnsServer string) *pebble {
	return startPebbleWith(t, pebbleOptions{dnsServer: dnsServer})
}

// pebbleOptions configure startPebbleWith.
type pebbleOptions struct {
	dnsServer string        // where Pebble resolves names
	tlsPort   int           // where it validates TLS-ALPN-01 challenges; 0: any
	validity  time.Duration // of the certificates it issues; 0: 90 days
}

func startPebbleWith(t *testing.T, o pebbleOptions) *pebble {
	t.Helper()
	dnsServer, tlsPort := o.dnsServer, o.tlsPort
	out, err := exec.Command("go", "tool", "-n", "pebble").Output()
	if err != nil {
		t.Fatalf("building Pebble (go tool -n pebble): %v", err)
	}
	bin := strings.TrimSpace(string(out))
	out, err = exec.Command("go", "list", "-m", "-f", "{{.Dir}}", "github.com/letsencrypt/pebble/v2").Output()
	if err != nil {
		t.Fatalf("finding Pebble's module: %v", err)
	}
	certs := filepath.Join(strings.TrimSpace(string(out)), "test", "certs")
	acme, mgmt, httpPort := freeTCPPort(t), freeTCPPort(t), freeTCPPort(t)
	if tlsPort == 0 {
		tlsPort = freeTCPPort(t)
	}
	conf := map[string]any{"pebble": map[string]any{
		"listenAddress":           fmt.Sprintf("127.0.0.1:%d", acme),
		"managementListenAddress": fmt.Sprintf("127.0.0.1:%d", mgmt),
		"certificate":             filepath.Join(certs, "localhost", "cert.pem"),
		"privateKey":              filepath.Join(certs, "localhost", "key.pem"),
		"httpPort":                httpPort, "tlsPort": tlsPort,
		"externalAccountBindingRequired": false,
		"keyAlgorithm":                   "ecdsa",
	}}
	if o.validity > 0 {
		conf["pebble"].(map[string]any)["profiles"] = map[string]any{"default": map[string]any{"validityPeriod": int(o.validity.Seconds())}}
	}
	dir := t.TempDir()
	b, _ := json.Marshal(conf)
	if err := os.WriteFile(filepath.Join(dir, "pebble.json"), b, 0o600); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(bin, "-config", filepath.Join(dir, "pebble.json"), "-dnsserver", dnsServer)
	cmd.Env = append(os.Environ(), "PEBBLE_VA_NOSLEEP=1", "PEBBLE_WFE_NONCEREJECT=0")
	testkit.Start(t, "Pebble", cmd)
	rootCA := filepath.Join(certs, "pebble.minica.pem")
	roots, err := pki.ReadCAPool(rootCA)
	if err != nil {
		t.Fatal(err)
	}
	p := &pebble{dir: fmt.Sprintf("https://127.0.0.1:%d/dir", acme), mgmt: fmt.Sprintf("https://127.0.0.1:%d", mgmt), rootCA: rootCA,
		client: &http.Client{Timeout: 5 * time.Second, Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: roots}}}}
	for i := 0; ; i++ {
		resp, err := p.client.Get(p.dir)
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return p
			}
		}
		if i == 200 {
			t.Fatalf("Pebble's directory never answered: %v", err)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// roots returns the roots Pebble issues from (it makes a new one at every start).
func (p *pebble) roots(t *testing.T) *x509.CertPool {
	t.Helper()
	resp, err := p.client.Get(p.mgmt + "/roots/0")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(b) {
		t.Fatalf("Pebble's root: %d %q", resp.StatusCode, b)
	}
	return pool
}

// acmeNodeSite is a site of one node fd on ip (DNS at :5353, launch at :9443) whose
// certificates come from Pebble p by challenge, with a GSLB name answered by gateways.
func acmeNodeSite(t *testing.T, p *pebble, ip, challenge, gateways string) *configs.Config {
	t.Helper()
	cfg, err := configs.Load("acme.yaml", []byte(fmt.Sprintf(`
site:
  name: acme-test
  tls: {issuer: acme, acme: {email: ops@example.test, ca: %q, ca_root: %q, challenge: %s}}
zones: [{name: hq, primary: true, ranges: [127.0.0.0/8]}]
nodes:
  - {name: fd, zone: hq, listeners: [{kind: dns, address: "%s:5353"}, {kind: launch, address: "%s:9443"}]}
%s
gslb:
  domains: [{name: vdi.example.test.}]
  names: [{name: desktop.vdi.example.test., sites: [{zone: hq, gateways: [gw]}]}]
`, p.dir, p.rootCA, challenge, ip, ip, gateways)))
	if err != nil {
		t.Fatal(err)
	}
	return cfg
}

// A node whose site takes its certificates from an ACME CA gets one from a real ACME server
// (Pebble) by the dns-01 challenge, which the node's own GSLB server answers and Pebble's
// validation reads there; the node's launch listener then serves it.
func TestACMECertificateFromPebbleByDNS01(t *testing.T) {
	testkit.SecondTier(t)
	p := startPebble(t, "127.0.98.1:5353")
	r := startNode(t, acmeNodeSite(t, p, "127.0.98.1", "dns-01", "gateways: [{name: gw, zone: hq, address: 127.0.98.3}]"), Options{})
	serveNode(t, r)
	leaf := servedCertificate(t, "127.0.98.1:9443", p.roots(t))
	t.Logf("served a certificate for %v from %q, valid until %s", leaf.DNSNames, leaf.Issuer.CommonName, leaf.NotAfter.Format(time.DateOnly))
}

// With the tls-alpn-01 challenge the CA connects to the name's address (the GSLB answer: a
// gateway this node hosts) and asks for acme-tls/1; the gateway's HTTPS port answers with the
// challenge's certificate, and the node then serves the certificate obtained.
func TestACMECertificateFromPebbleByTLSALPN01(t *testing.T) {
	testkit.SecondTier(t)
	const httpsPort = 10445
	p := startPebbleWith(t, pebbleOptions{dnsServer: "127.0.98.31:5353", tlsPort: httpsPort})
	r := startNode(t, acmeNodeSite(t, p, "127.0.98.31", "tls-alpn-01", fmt.Sprintf(`gateways: [{name: gw, zone: hq, node: fd, address: 127.0.98.32, ports: [{port: %d, check: {kind: tcp}}, {port: 8443}]}]
groups: [{name: desktops}]
machines: [{name: vda-1, address: 127.0.98.33, zone: hq, group: desktops, display_ports: [8443/tcp]}]`, httpsPort)), Options{})
	serveNode(t, r)
	servedCertificate(t, "127.0.98.31:9443", p.roots(t))
}

// A certificate is renewed before it expires, and the node serves the new one: Pebble issues
// for 30 s here, and the node looks every second (certmagic renews at a third of the life
// left, or at the CA's suggested window).
func TestACMECertificateIsRenewedBeforeItExpires(t *testing.T) {
	testkit.SecondTier(t)
	p := startPebbleWith(t, pebbleOptions{dnsServer: "127.0.98.35:5353", validity: 30 * time.Second})
	r := startNode(t, acmeNodeSite(t, p, "127.0.98.35", "dns-01", "gateways: [{name: gw, zone: hq, address: 127.0.98.36}]"), Options{CertRenewCheck: time.Second})
	serveNode(t, r)
	roots := p.roots(t)
	first := servedCertificate(t, "127.0.98.35:9443", roots)
	for {
		c, err := tls.Dial("tcp", "127.0.98.35:9443", &tls.Config{ServerName: "desktop.vdi.example.test", RootCAs: roots})
		if err == nil {
			leaf := c.ConnectionState().PeerCertificates[0]
			c.Close()
			if leaf.SerialNumber.Cmp(first.SerialNumber) != 0 {
				if !leaf.NotAfter.After(first.NotAfter) {
					t.Fatalf("the renewed certificate ends %s, the first %s", leaf.NotAfter, first.NotAfter)
				}
				t.Logf("renewed %s before the first's end (%s)", time.Now().Format(time.TimeOnly), first.NotAfter.Format(time.TimeOnly))
				return
			}
		}
		if time.Now().After(first.NotAfter) {
			t.Fatalf("the certificate ending %s was not renewed before its end (last: %v)", first.NotAfter.Format(time.TimeOnly), err)
		}
		time.Sleep(200 * time.Millisecond)
	}
}
