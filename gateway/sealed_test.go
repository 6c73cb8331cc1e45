package gateway

import (
	"bytes"
	"crypto/tls"
	"errors"
	"io"
	"net"
	"net/netip"
	"testing"
	"time"

	"github.com/frontdoor-vdi/frontdoor/internal/siteid"
	"github.com/frontdoor-vdi/frontdoor/internal/testkit"
	"github.com/frontdoor-vdi/frontdoor/ticket"
)

// dialSealed asks for a sealed channel with tok: TLS to the gateway, the sealed frame and the
// status. When the gateway seals it, it makes the channel's TLS connection to the machine on
// the same TCP connection, taking only the pinned key, and shows it inner (tok unless set);
// it returns that connection (or the gateway's, for a plain channel) and the status.
func (r *rig) dialSealed(t *testing.T, tok, inner string) (net.Conn, byte) {
	t.Helper()
	raw, err := net.Dial("tcp", netip.AddrPortFrom(netip.MustParseAddr(r.addr), r.port).String())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { raw.Close() })
	raw.SetDeadline(time.Now().Add(5 * time.Second))
	c := tls.Client(raw, &tls.Config{RootCAs: r.pool, ServerName: r.addr})
	if err := ticket.WriteSealedFrame(c, tok); err != nil {
		t.Fatal(err)
	}
	var st [1]byte
	if _, err := io.ReadFull(c, st[:]); err != nil {
		return nil, ticket.StatusDenied
	}
	if st[0] != ticket.StatusSealed {
		if st[0] == ticket.StatusRotated {
			if _, err := ticket.ReadFrame(c); err != nil {
				t.Fatal(err)
			}
		}
		raw.SetDeadline(time.Time{})
		return c, st[0]
	}
	pin, _, err := ticket.ReadSealed(c)
	if err != nil {
		t.Fatal(err)
	}
	m := tls.Client(raw, &tls.Config{MinVersion: tls.VersionTLS13, InsecureSkipVerify: true,
		VerifyConnection: func(cs tls.ConnectionState) error {
			if ticket.Pin(cs.PeerCertificates[0]) != pin {
				return errors.New("not the pinned key")
			}
			return nil
		}})
	if err := m.Handshake(); err != nil {
		t.Fatalf("the sealed channel's handshake with the machine: %v", err)
	}
	if inner == "" {
		inner = tok
	}
	if err := ticket.WriteFrame(m, inner); err != nil {
		t.Fatal(err)
	}
	raw.SetDeadline(time.Time{})
	return m, st[0]
}

// A sealed channel is TLS between the client and the machine's agent, through the gateway:
// the certificate at its end is the machine's, and a stream's bytes get through both ways.
func TestASealedChannelEndsAtTheMachine(t *testing.T) {
	r, s := startOne(t)
	c, st := r.dialSealed(t, r.issue(t, ticket.Launch, "s-1", "vda-1"), "")
	if st != ticket.StatusSealed {
		t.Fatalf("status %d, want StatusSealed", st)
	}
	s.want(t, "connected s-1 gw-1")
	peer := c.(*tls.Conn).ConnectionState().PeerCertificates[0]
	if !siteid.Is(peer, siteid.RoleMachine, "vda-1") {
		t.Fatalf("the sealed channel ends at %v, not at machine vda-1", peer.Subject)
	}
	cc, err := openStream(c)
	if err != nil {
		t.Fatal(err)
	}
	echoes(t, cc, 4<<20)
}

// Only the holder of the ticket the gateway brought gets the machine's stream: a client that
// shows another ticket on the sealed channel (someone who took the TCP connection over after
// the gateway's TLS was dropped) is closed before its hello is answered.
func TestASealedChannelTakesOnlyTheTicketsHolder(t *testing.T) {
	r, _ := startOne(t)
	other := r.issue(t, ticket.Launch, "s-2", "vda-1")
	c, st := r.dialSealed(t, r.issue(t, ticket.Launch, "s-1", "vda-1"), other)
	if st != ticket.StatusSealed {
		t.Fatalf("status %d, want StatusSealed", st)
	}
	c.SetDeadline(time.Now().Add(5 * time.Second))
	if _, err := openStream(c); err == nil {
		t.Fatal("the machine answered a client that showed another ticket")
	}
}

// earlierAgent is a machine of an earlier version at ip: it takes plain ticket frames only,
// closes at a sealed one, and echoes what an admitted channel carries.
func earlierAgent(t *testing.T, ip string) uint16 {
	t.Helper()
	cert, err := siteCA().PartyCertificate(siteid.RoleMachine, "vda-1", []netip.Addr{netip.MustParseAddr(ip)})
	if err != nil {
		t.Fatal(err)
	}
	ln, err := tls.Listen("tcp", ip+":0", &tls.Config{Certificates: []tls.Certificate{*cert}, ClientAuth: tls.RequireAndVerifyClientCert, ClientCAs: siteCA().Pool()})
	if err != nil {
		t.Fatal(err)
	}
	testkit.Serve(t, ln, func(c net.Conn) {
		if _, err := ticket.ReadFrame(c); err != nil {
			return
		}
		c.Write([]byte{ticket.StatusOK})
		io.Copy(c, c)
	})
	return uint16(ln.Addr().(*net.TCPAddr).Port)
}

// A machine whose agent takes no sealed channel gets a plain one: the gateway opens the leg
// again with the plain frame and tells the client so, and the channel carries its bytes.
func TestAMachineWithoutSealedChannelsGetsAPlainOne(t *testing.T) {
	signer, v, _ := keys(t)
	port := earlierAgent(t, "127.0.62.5")
	r := startFor(t, "127.0.62.5", "gw-1", "127.0.50.1", port, 0, newSessions("s-1"), signer, v, nil)
	c, st := r.dialSealed(t, r.issue(t, ticket.Launch, "s-1", "vda-1"), "")
	if st != ticket.StatusOK && st != ticket.StatusRotated {
		t.Fatalf("status %d, want a plain channel's", st)
	}
	if _, ok := c.(*tls.Conn); !ok {
		t.Fatal("no connection")
	}
	msg := []byte("plain-through-the-gateway")
	c.SetDeadline(time.Now().Add(5 * time.Second))
	if _, err := c.Write(msg); err != nil {
		t.Fatal(err)
	}
	got := make([]byte, len(msg))
	if _, err := io.ReadFull(c, got); err != nil || !bytes.Equal(got, msg) {
		t.Fatalf("echo: %q, %v", got, err)
	}
}
