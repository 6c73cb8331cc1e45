package client

import (
	"context"
	"crypto/tls"
	"errors"
	"io"
	"net"
	"net/netip"
	"sync/atomic"
	"testing"
	"time"

	"github.com/frontdoor-vdi/frontdoor/internal/siteid"
	"github.com/frontdoor-vdi/frontdoor/internal/testkit"
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
	testkit.Serve(t, ln, func(c net.Conn) { ticket.ReadFrame(c) })
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

// A gateway of an earlier version, which closes at the sealed frame before it reads the
// ticket, gets the plain frame with the same ticket, and the channel opens.
func TestAGatewayWithoutSealedChannelsGetsAPlainOne(t *testing.T) {
	ip := netip.MustParseAddr("127.0.71.9")
	cert, err := siteCA().PartyCertificate(siteid.RoleGateway, "gw-old", []netip.Addr{ip})
	if err != nil {
		t.Fatal(err)
	}
	ln, err := tls.Listen("tcp", netip.AddrPortFrom(ip, 0).String(), &tls.Config{Certificates: []tls.Certificate{*cert}})
	if err != nil {
		t.Fatal(err)
	}
	var plain atomic.Int32
	testkit.Serve(t, ln, func(c net.Conn) {
		tok, err := ticket.ReadFrame(c) // an earlier version's reader: FDT1 alone
		if err != nil || tok != "a-ticket" {
			return
		}
		plain.Add(1)
		c.Write([]byte{ticket.StatusOK})
		io.Copy(c, c)
	})
	s := &Session{o: Options{RootCAs: siteCA().Pool(), DialTimeout: 5 * time.Second, StatusTimeout: 5 * time.Second}}
	port := uint16(ln.Addr().(*net.TCPAddr).Port)
	c, _, err := s.dialTCP(context.Background(), route{name: "gw-old", addr: ip}, port, "a-ticket")
	if err != nil {
		t.Fatalf("the channel did not open: %v", err)
	}
	defer c.Close()
	if plain.Load() != 1 {
		t.Fatalf("%d plain openings, want 1", plain.Load())
	}
	c.SetDeadline(time.Now().Add(5 * time.Second))
	c.Write([]byte("ping"))
	got := make([]byte, 4)
	if _, err := io.ReadFull(c, got); err != nil || string(got) != "ping" {
		t.Fatalf("echo: %q, %v", got, err)
	}
}
