package agent_test

import (
	"context"
	"log/slog"
	"net"
	"net/netip"
	"testing"

	"github.com/frontdoor-vdi/frontdoor/agent"
	"github.com/frontdoor-vdi/frontdoor/internal/siteid"
	"github.com/frontdoor-vdi/frontdoor/pki"
)

// machineIdentity returns vda-1's certificate of a new site CA, for ip, and the CA.
func machineIdentity(t *testing.T, ip string) (*agent.Identity, *pki.CA) {
	t.Helper()
	caCert, caKey, err := pki.GenerateCA("agent-test")
	if err != nil {
		t.Fatal(err)
	}
	ca, err := pki.NewCA(caCert, caKey, slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	cert, err := ca.PartyCertificate(siteid.RoleMachine, "vda-1", []netip.Addr{netip.MustParseAddr(ip)})
	if err != nil {
		t.Fatal(err)
	}
	id, err := agent.NewIdentity("vda-1", cert, ca.Pool())
	if err != nil {
		t.Fatal(err)
	}
	return id, ca
}

// freePort returns a TCP port free on ip.
func freePort(t *testing.T, ip string) uint16 {
	t.Helper()
	l, err := net.Listen("tcp", ip+":0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return uint16(l.Addr().(*net.TCPAddr).Port)
}

// serve runs d (after Listen) until the test ends.
func serve(t *testing.T, d *agent.Display) {
	t.Helper()
	if err := d.Listen(); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- d.Serve(context.Background()) }()
	t.Cleanup(func() { d.Close(); <-done })
}
