package client

import (
	"context"
	"crypto/tls"
	"errors"
	"net"
	"net/netip"
	"testing"
	"time"

	"github.com/frontdoor-vdi/frontdoor/internal/siteid"
	"github.com/frontdoor-vdi/frontdoor/ticket"
)

// A sealed channel takes only the key the gateway named: a machine certificate of the site
// with another key (another machine's, or one that took the connection over) is refused, and
// the named one is taken.
func TestASealedChannelTakesOnlyThePinnedKey(t *testing.T) {
	addrs := []netip.Addr{netip.MustParseAddr("127.0.0.1")}
	served, err := siteCA().PartyCertificate(siteid.RoleMachine, "vda-1", addrs)
	if err != nil {
		t.Fatal(err)
	}
	other, err := siteCA().PartyCertificate(siteid.RoleMachine, "vda-1", addrs)
	if err != nil {
		t.Fatal(err)
	}
	ln, err := tls.Listen("tcp", "127.0.0.1:0", &tls.Config{Certificates: []tls.Certificate{*served}})
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go func() { defer c.Close(); ticket.ReadFrame(c) }()
		}
	}()
	try := func(pin [32]byte) error {
		raw, err := net.Dial("tcp", ln.Addr().String())
		if err != nil {
			t.Fatal(err)
		}
		defer raw.Close()
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_, err = unseal(ctx, raw, pin, "a-ticket")
		return err
	}
	if err := try(ticket.Pin(other.Leaf)); !errors.Is(err, ErrNotTheMachine) {
		t.Fatalf("another key: %v, want ErrNotTheMachine", err)
	}
	if err := try(ticket.Pin(served.Leaf)); err != nil {
		t.Fatalf("the named key: %v", err)
	}
}
