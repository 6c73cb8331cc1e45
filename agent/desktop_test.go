package agent_test

import (
	"crypto/ed25519"
	"crypto/rand"
	"log/slog"
	"net"
	"net/netip"
	"strconv"
	"testing"
	"time"

	"github.com/frontdoor-vdi/frontdoor/agent"
	"github.com/frontdoor-vdi/frontdoor/ticket"
)

// serveAndDrop accepts connections on l and closes them, as a desktop server that is up.
func serveAndDrop(l net.Listener) {
	for {
		c, err := l.Accept()
		if err != nil {
			return
		}
		c.Close()
	}
}

// A desktop server that stops answering takes its machine out: the agent closes the
// desktop's display port, which the front doors' probes connect to, and opens it again
// once the server answers.
func TestADesktopServerDownClosesItsDisplayPort(t *testing.T) {
	const ip = "127.0.74.1"
	srv, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srvAddr := srv.Addr().String()
	go serveAndDrop(srv)
	id, _ := machineIdentity(t, ip)
	pub, _, _ := ed25519.GenerateKey(rand.Reader)
	port := freePort(t, ip)
	d, err := agent.NewDisplay(agent.DisplayOptions{Machine: "vda-1", Address: netip.MustParseAddr(ip), TCPPorts: []uint16{port},
		Desktop:  agent.Desktop{Protocol: "vnc", Network: "tcp", Address: srvAddr, Port: port},
		Verifier: ticket.NewVerifier(pub, ticket.NewMemoryLedger(0, nil), nil), Identity: id,
		DesktopCheckEvery: 20 * time.Millisecond, Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	serve(t, d)
	display := net.JoinHostPort(ip, strconv.Itoa(int(port)))
	open := func() bool {
		c, err := net.DialTimeout("tcp", display, time.Second)
		if err == nil {
			c.Close()
		}
		return err == nil
	}
	waitUntil := func(what string, cond func() bool) {
		t.Helper()
		for end := time.Now().Add(10 * time.Second); !cond(); time.Sleep(10 * time.Millisecond) {
			if time.Now().After(end) {
				t.Fatalf("timed out: %s", what)
			}
		}
	}
	if !open() {
		t.Fatal("the display port is closed while the desktop server answers")
	}
	srv.Close()
	waitUntil("the display port to close once the desktop server is down", func() bool { return !open() })
	srv, err = net.Listen("tcp", srvAddr)
	if err != nil {
		t.Fatal(err)
	}
	defer srv.Close()
	go serveAndDrop(srv)
	waitUntil("the display port to open once the desktop server is back", open)
}
