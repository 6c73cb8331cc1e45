package lab

import (
	"crypto/tls"
	"net"
	"strings"
	"syscall"
	"testing"
	"time"
)

// TestProxyInFrontOfGatewaysFollowsHealth: a node runs the proxy section of the config — a
// load balancer in front of hq's two gateways — keeps a client on one gateway (affinity), and
// moves new connections off a gateway once its front door is powered off (SIGKILL) and its
// composite health verdict is down.
func TestProxyInFrontOfGatewaysFollowsHealth(t *testing.T) {
	cfg := testSite(t, func(s string) string {
		return s + `
proxy:
  listeners:
    - {name: vip-https, node: fd-east-2, address: "127.41.0.50:18443", pool: hq-https}
  pools:
    - name: hq-https
      affinity: true
      backends: [{gateway: gw-hq-1, port: 10443}, {gateway: gw-hq-2, port: 10443}]
`
	})
	l, _, _ := startLabWith(t, Options{Config: cfg})

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
	if err := l.Signal(nodeOf(t, l, victim), syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(10 * time.Second)
	for got := which(); got != other; got = which() {
		if time.Now().After(deadline) {
			t.Fatalf("10s after %s went down the VIP still reached %s, want %s", victim, got, other)
		}
		time.Sleep(50 * time.Millisecond)
	}
}
