package lab

import (
	"context"
	"crypto/tls"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/frontdoor-vdi/frontdoor/internal/testkit"
)

// TestLaunchZoneFromTrustedProxyHeader: behind a load balancer the launch API sees the
// balancer's address; a PROXY header from a trusted balancer gives the client's, and so its
// location zone. The same header from an untrusted peer is never read as an address.
func TestLaunchZoneFromTrustedProxyHeader(t *testing.T) {
	testkit.Site(t)
	cfg := testSite(t, func(s string) string {
		return strings.Replace(s, `{kind: launch, address: "127.42.0.11:9443"}`,
			`{kind: launch, address: "127.42.0.11:9443", proxy_protocol_from: [127.0.0.5/32]}`, 1)
	})
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	l, err := New(ctx, Options{Config: cfg})
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- l.Serve(ctx) }()
	defer func() { cancel(); <-done }()

	launch := func(from, header string) (map[string]any, error) {
		d := &net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP(from)}, Timeout: 5 * time.Second}
		tr := &http.Transport{TLSClientConfig: &tls.Config{RootCAs: l.CA().Pool()},
			DialContext: func(ctx context.Context, network, addr string) (net.Conn, error) {
				c, err := d.DialContext(ctx, network, addr)
				if err == nil && header != "" {
					_, err = c.Write([]byte(header))
				}
				return c, err
			}}
		hc := &http.Client{Timeout: 30 * time.Second, Transport: tr}
		req, _ := http.NewRequest(http.MethodPost, "https://127.42.0.11:9443/v1/launch", strings.NewReader(`{"resource":"desktop","endpoint":"kiosk"}`))
		req.SetBasicAuth("dave", "lab")
		resp, err := hc.Do(req)
		if err != nil {
			return nil, err
		}
		defer resp.Body.Close()
		var out map[string]any
		json.NewDecoder(resp.Body).Decode(&out)
		if resp.StatusCode != http.StatusOK {
			return out, fmt.Errorf("status %s: %v", resp.Status, out)
		}
		return out, nil
	}

	hdr := "PROXY TCP4 127.43.7.7 127.42.0.11 50000 9443\r\n"
	out, err := launch("127.0.0.5", hdr)
	if err != nil {
		t.Fatal(err)
	}
	if out["location_zone"] != "west" || out["preferred_zone"] != "west" {
		t.Errorf("launch through a trusted balancer: location zone %v, preferred %v; want west (the header's client)", out["location_zone"], out["preferred_zone"])
	}
	// Without a header, a trusted peer's own address counts (127.0.0.5 is in hq).
	if out, err := launch("127.0.0.5", ""); err != nil || out["location_zone"] != "hq" {
		t.Errorf("trusted peer without a header: %v, %v; want zone hq", out["location_zone"], err)
	}
	// An untrusted peer's header is not read: TLS sees it as garbage and the launch fails.
	if out, err := launch("127.0.0.6", hdr); err == nil {
		t.Errorf("an untrusted PROXY header was accepted: %v", out)
	}
}
