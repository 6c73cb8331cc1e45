package lab

import (
	"context"
	"crypto/tls"
	"net"
	"strings"
	"testing"
	"time"
)

// TestProxyInFrontOfGatewaysFollowsHealth: the node runs the proxy section of the config — a
// load balancer in front of hq's two gateways — keeps a client on one gateway (affinity), and
// moves new connections off a gateway as soon as its composite health verdict is down.
func TestProxyInFrontOfGatewaysFollowsHealth(t *testing.T) {
	cfg := testSite(t, func(s string) string {
		return s + `
proxy:
  listeners:
    - {name: vip-https, node: fd-hq-1, address: "127.41.0.50:18443", pool: hq-https}
  pools:
    - name: hq-https
      affinity: true
      backends: [{gateway: gw-hq-1, port: 10443}, {gateway: gw-hq-2, port: 10443}]
`
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
	waitEligible := func(name string, want bool) {
		t.Helper()
		deadline := time.Now().Add(10 * time.Second)
		for l.Runtime.Health.Eligible(name) != want {
			if time.Now().After(deadline) {
				t.Fatalf("gateway %s eligible=%v after 10s, want %v", name, !want, want)
			}
			time.Sleep(20 * time.Millisecond)
		}
	}
	waitEligible("gw-hq-1", true)
	waitEligible("gw-hq-2", true)

	// which reports the gateway behind the VIP by the certificate it presents: TLS passes
	// through the proxy untouched, and a client that sends no server name gets the
	// certificate of the gateway's own address.
	which := func() string {
		t.Helper()
		c, err := tls.DialWithDialer(&net.Dialer{Timeout: 5 * time.Second}, "tcp", "127.41.0.50:18443", &tls.Config{InsecureSkipVerify: true})
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		cert := c.ConnectionState().PeerCertificates[0]
		if len(cert.IPAddresses) == 0 {
			return strings.Join(cert.DNSNames, ",")
		}
		return cert.IPAddresses[0].String()
	}
	first := which()
	for i := 0; i < 5; i++ {
		if got := which(); got != first {
			t.Fatalf("connection %d reached %s, first reached %s: affinity broken", i, got, first)
		}
	}
	victim, other := "gw-hq-1", "127.41.0.12"
	if first == "127.41.0.12" {
		victim, other = "gw-hq-2", "127.41.0.11"
	}
	l.Runtime.Gateways[victim].Close()
	waitEligible(victim, false)
	if got := which(); got != other {
		t.Fatalf("after %s went down the VIP reached %s, want %s", victim, got, other)
	}
}
