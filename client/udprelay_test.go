package client

import (
	"bytes"
	"crypto/rand"
	"net"
	"testing"
	"time"

	"github.com/frontdoor-vdi/frontdoor/agent"
)

// udpStandIn is what the agent sees of an RDP server that takes RDP's UDP transport: a TCP
// port (the agent checks that it answers) and a UDP socket on the same port that answers
// each datagram with "ack:" and the datagram, and says where each came from. No RDP server
// installable here has a UDP transport (xrdp and FreeRDP have none; Windows' has), so the
// test stands one in: what it checks is the tunnel's part, datagrams carried both ways.
type udpStandIn struct {
	addr string
	from chan string
}

func startUDPStandIn(t *testing.T) *udpStandIn {
	t.Helper()
	for try := 0; try < 20; try++ {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		pc, err := net.ListenPacket("udp", ln.Addr().String())
		if err != nil {
			ln.Close()
			continue
		}
		u := &udpStandIn{addr: ln.Addr().String(), from: make(chan string, 100)}
		go func() {
			for {
				c, err := ln.Accept()
				if err != nil {
					return
				}
				c.Close()
			}
		}()
		go func() {
			buf := make([]byte, 64<<10)
			for {
				n, from, err := pc.ReadFrom(buf)
				if err != nil {
					return
				}
				select {
				case u.from <- from.String():
				default:
				}
				pc.WriteTo(append([]byte("ack:"), buf[:n]...), from)
			}
		}()
		t.Cleanup(func() { ln.Close(); pc.Close() })
		return u
	}
	t.Fatal("no port free for tcp and udp")
	return nil
}

// roundTrip sends a datagram of size bytes from c until its ack comes back (UDP: a few tries)
// and returns where the server saw it come from.
func (u *udpStandIn) roundTrip(t *testing.T, c net.Conn, size int) string {
	t.Helper()
	msg := make([]byte, size)
	rand.Read(msg)
	buf := make([]byte, 64<<10)
	for try := 0; try < 50; try++ {
		if _, err := c.Write(msg); err != nil {
			t.Fatal(err)
		}
		c.SetReadDeadline(time.Now().Add(200 * time.Millisecond))
		for {
			n, err := c.Read(buf)
			if err != nil {
				break
			}
			if bytes.Equal(buf[:n], append([]byte("ack:"), msg...)) {
				from := <-u.from // the server records before it acks
				for len(u.from) > 0 {
					from = <-u.from
				}
				return from
			}
		}
	}
	t.Fatalf("a datagram of %d bytes never came back", size)
	return ""
}

// RDP's UDP transport rides the desktop's UDP channel: the viewer's datagrams reach the
// server's UDP port (the largest RDP sends, 1,232 bytes, whole), its answers come back, and
// when the gateway dies the server keeps seeing one flow from one address, through the next
// gateway. A second local sender is kept out while the first one's flow is live.
func TestRDPsUDPTransportOutlivesItsGateway(t *testing.T) {
	srv := startUDPStandIn(t)
	s := newSiteWith(t, &agent.Desktop{Protocol: "rdp", Network: "tcp", Address: srv.addr, UDPPort: 1})
	port, stops := s.startQUICGateways(gwA, gwB)
	d := s.descriptor("s-rdp-udp", ModeGateway, "gw-a", "gw-b")
	d.Desktop.Protocol, d.Desktop.UDPChannel = "rdp", &Channel{Port: s.port, Proto: "udp"}
	ev := newEvents()
	sess, err := Open(ctxT(t), Options{Descriptor: d, RootCAs: s.pool, Channels: s.channels(), QUIC: &QUICOptions{Port: port},
		OnEvent: ev.on, Logger: quiet, KeepaliveTimeout: 5 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	defer sess.Close()
	ev.wait(t, EventUp)
	tcp, err := sess.Expose("127.0.0.1:0", s.port)
	if err != nil {
		t.Fatal(err)
	}
	local, err := sess.ExposeUDP(tcp.String(), s.port)
	if err != nil {
		t.Fatal(err)
	}
	if local.String() != tcp.String() {
		t.Fatalf("UDP on %s, TCP on %s: a viewer sends its UDP to the port of its TCP", local, tcp)
	}
	viewer, err := net.Dial("udp", local.String())
	if err != nil {
		t.Fatal(err)
	}
	defer viewer.Close()
	first := srv.roundTrip(t, viewer, 1232)
	if host, _, _ := net.SplitHostPort(first); host != "127.0.0.1" {
		t.Fatalf("the server saw the flow from %s, want the agent on loopback", first)
	}

	stops[gwA]()
	if back := ev.wait(t, EventBack); back.Via != "gw-b" || !back.SameSession {
		t.Fatalf("back event %+v, want the same session via gw-b", back)
	}
	if again := srv.roundTrip(t, viewer, 1232); again != first {
		t.Fatalf("after the gateway died the server saw the flow from %s, before from %s: its transport broke", again, first)
	}

	other, err := net.Dial("udp", local.String())
	if err != nil {
		t.Fatal(err)
	}
	defer other.Close()
	other.Write([]byte("a second flow"))
	srv.roundTrip(t, viewer, 100)
	other.SetReadDeadline(time.Now().Add(300 * time.Millisecond))
	if n, err := other.Read(make([]byte, 100)); err == nil {
		t.Fatalf("a second sender got %d bytes while the first flow was live", n)
	}
}

// In direct mode the client's QUIC connection to the machine's UDP port carries the flow.
func TestRDPsUDPTransportInDirectMode(t *testing.T) {
	srv := startUDPStandIn(t)
	s := newSiteWith(t, &agent.Desktop{Protocol: "rdp", Network: "tcp", Address: srv.addr, UDPPort: 1})
	d := s.descriptor("s-rdp-udp-direct", ModeDirect)
	d.Desktop.Protocol, d.Desktop.UDPChannel = "rdp", &Channel{Port: s.port, Proto: "udp"}
	sess := s.open(t, d, nil, nil)
	local, err := sess.ExposeUDP("127.0.0.1:0", s.port)
	if err != nil {
		t.Fatal(err)
	}
	viewer, err := net.Dial("udp", local.String())
	if err != nil {
		t.Fatal(err)
	}
	defer viewer.Close()
	srv.roundTrip(t, viewer, 1232)
	if _, err := sess.ExposeUDP("127.0.0.1:0", s.port+1); err == nil {
		t.Fatal("ExposeUDP of a port the session has no channel of: no error")
	}
}
