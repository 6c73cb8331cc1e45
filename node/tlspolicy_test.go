package node

import (
	"crypto/tls"
	"net/http"
	"testing"
	"time"

	"github.com/frontdoor-vdi/frontdoor/configs"
	"github.com/frontdoor-vdi/frontdoor/internal/tlspolicy"
)

const policySite = `
site: {name: policy}
zones: [{name: hq, primary: true, ranges: [127.0.0.0/8]}]
nodes: [{name: fd, zone: hq, listeners: [{kind: launch, address: "127.0.97.1:9444"}, {kind: admin, address: "127.0.97.1:9091"}]}]
gateways: [{name: gw, zone: hq, node: fd, address: 127.0.97.1, ports: [{port: 10444, check: {kind: https}}, {port: 8443, check: {kind: tls}}]}]
groups: [{name: desktops}]
machines: [{name: vda-1, address: 127.0.97.11, zone: hq, group: desktops, display_ports: [8443/tcp]}]
resources: [{name: desktop, groups: [{group: desktops}], entitled: {everyone: true}}]
users: [{name: alice, password_hash: "$2a$10$hmIm37EQl2GI6WzyFg.kUe2OoNhztKxrxmbZEcRHkzoi.ekBqG9n2"}]
`

// Every HTTPS answer of a node — the portal, the launch and admin APIs, a refusal, a page
// that is not there, the gateway's HTTPS port — tells a browser to come back over HTTPS only,
// and TLS 1.2 without an AEAD suite gets no connection (a TLS scanner's findings).
func TestEveryHTTPSListenerKeepsThePolicy(t *testing.T) {
	cfg, err := configs.Load("site.yaml", []byte(policySite))
	if err != nil {
		t.Fatal(err)
	}
	r := startNode(t, cfg, Options{})
	serveNode(t, r)
	hc := &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: r.ca.Pool()}, DisableKeepAlives: true},
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	for _, url := range []string{
		"https://127.0.97.1:9444/",              // the portal
		"https://127.0.97.1:9444/v1/sessions",   // the launch API, no login: 401
		"https://127.0.97.1:9444/no/such/thing", // 404
		"https://127.0.97.1:9091/",              // the console
		"https://127.0.97.1:9091/v1/admin/site", // the admin API, no login
		"https://127.0.97.1:10444/",             // the gateway's HTTPS port
	} {
		resp, err := hc.Get(url)
		if err != nil {
			t.Errorf("GET %s: %v", url, err)
			continue
		}
		resp.Body.Close()
		if got := resp.Header.Get("Strict-Transport-Security"); got != tlspolicy.HSTS {
			t.Errorf("GET %s: %d with Strict-Transport-Security %q, want %q", url, resp.StatusCode, got, tlspolicy.HSTS)
		}
	}
	for _, addr := range []string{"127.0.97.1:9444", "127.0.97.1:9091", "127.0.97.1:10444", "127.0.97.1:8443"} {
		c, err := tls.Dial("tcp", addr, &tls.Config{RootCAs: r.ca.Pool(), MaxVersion: tls.VersionTLS12,
			CipherSuites: []uint16{tls.TLS_ECDHE_ECDSA_WITH_AES_128_CBC_SHA, tls.TLS_ECDHE_RSA_WITH_AES_128_CBC_SHA}})
		if err == nil {
			c.Close()
			t.Errorf("%s: a TLS 1.2 client with CBC suites only got a connection", addr)
		}
	}
}
