package agent

import (
	"context"
	"errors"
	"net"
	"time"

	"github.com/frontdoor-vdi/frontdoor/configs"
	"github.com/frontdoor-vdi/frontdoor/internal/quicguard"
	"github.com/frontdoor-vdi/frontdoor/ticket"
	"github.com/quic-go/quic-go"
)

// A UDP display port speaks QUIC (ALPN ticket.QUICALPN, TLS 1.3 with the machine's
// certificate): each UDP channel is one connection whose first stream carries the channel's
// header and ticket, as on a gateway's QUIC port, and whose DATAGRAM frames carry the channel's
// datagrams, each prefixed with the port. A gateway relays a client's flow on a connection of
// its own, presenting its certificate of the site CA; a direct-mode client dials the port
// itself. Nothing on the port is readable on the wire, and a flow is known by its connection,
// not by a source address that can be forged. A probe datagram (ticket.ProbePayload, which no
// QUIC packet can be) is echoed beside the connections.

// udpPort is one UDP display port's QUIC end.
type udpPort struct {
	tr    *quic.Transport
	ln    *quic.Listener
	guard *quicguard.Guard
}

// listenQUIC opens the QUIC end of a UDP display port on c, guarded as a gateway's QUIC port
// is (package quicguard).
func (d *Display) listenQUIC(c *net.UDPConn) (*udpPort, error) {
	port := c.LocalAddr().String()
	tr, guard, err := quicguard.Transport(c, func(keep float64) {
		d.log.Warn("new QUIC connections on a display port: the kernel sheds a share", "port", port, "let_through", keep)
	})
	if err != nil {
		return nil, err
	}
	tc := d.o.Identity.ServerTLS(ticket.QUICALPN)
	ln, err := tr.Listen(tc, &quic.Config{EnableDatagrams: true, MaxIdleTimeout: d.o.UDPIdle,
		HandshakeIdleTimeout: 5 * time.Second, MaxIncomingStreams: 4, MaxIncomingUniStreams: -1})
	if err != nil {
		guard.Close()
		tr.Close()
		return nil, err
	}
	return &udpPort{tr: tr, ln: ln, guard: guard}, nil
}

func (p *udpPort) close() {
	p.ln.Close()
	p.tr.Close()
	p.guard.Close()
	p.tr.Conn.Close()
}

// serveQUIC accepts the port's channels and answers its probes until the port closes.
func (d *Display) serveQUIC(p *udpPort, port uint16) {
	d.wg.Add(1)
	go func() {
		defer d.wg.Done()
		buf := make([]byte, 2048)
		for {
			n, from, err := p.tr.ReadNonQUICPacket(context.Background(), buf)
			if err != nil {
				return
			}
			if string(buf[:n]) == ticket.ProbePayload {
				p.tr.WriteTo(buf[:n], from)
			}
		}
	}()
	for {
		c, err := p.ln.Accept(context.Background())
		if err != nil {
			return
		}
		d.wg.Add(1)
		go func() { defer d.wg.Done(); d.serveFlow(c, port) }()
	}
}

// qconn is an open UDP channel's connection, closed by a cut.
type qconn struct{ c *quic.Conn }

func (q qconn) Close() error { return q.c.CloseWithError(0, "session ended") }

// serveFlow checks a connection's ticket (a gateway-mode one only from a gateway), then echoes
// its datagrams, the desktop simulator, until either end closes it: the session is
// disconnected as soon as the client's connection is gone.
func (d *Display) serveFlow(c *quic.Conn, port uint16) {
	defer c.CloseWithError(0, "")
	ctx, cancel := context.WithTimeout(c.Context(), 5*time.Second)
	st, err := c.AcceptStream(ctx)
	cancel()
	if err != nil {
		return
	}
	st.SetDeadline(time.Now().Add(5 * time.Second))
	asked, tok, err := ticket.ReadChannel(st)
	if err != nil {
		return
	}
	ch := ticket.Channel{Port: port, Proto: "udp"}
	claims, err := d.check(tok, ch)
	switch {
	case err != nil:
	case asked != ch:
		err = errors.New("not a UDP channel of this port")
	case claims.Mode != ticket.ModeDirect && !fromGateway(c.ConnectionState().TLS):
		err = ErrNotFromGateway
	case d.full(claims.Session):
		err = ErrSessionCap
	}
	if err != nil {
		d.log.Warn("flow denied", "channel", ch.String(), "client", c.RemoteAddr().String(), "reason", err)
		st.Write([]byte{ticket.DeniedStatus(err)})
		st.Close()
		// The status reaches the client before the connection goes.
		t := time.NewTimer(time.Second)
		select {
		case <-c.Context().Done():
		case <-t.C:
		}
		t.Stop()
		return
	}
	untrack, ok := d.track(qconn{c}, claims)
	if !ok {
		return
	}
	defer untrack()
	var relay *udpRelay
	if port == d.o.Desktop.UDPPort {
		if relay, err = d.relay(c, claims, port); err != nil {
			d.log.Warn("flow denied: no way to the desktop server's UDP port", "channel", ch.String(), "desktop", d.o.Desktop.String(), "err", err)
			st.Write([]byte{ticket.StatusDenied})
			st.Close()
			return
		}
		defer relay.detach(c, d.o.ReliabilityTimeout)
	}
	if _, err := st.Write([]byte{ticket.StatusOK}); err != nil {
		return
	}
	st.SetDeadline(time.Time{})
	d.opened(claims.Session, claims.Mode)
	defer d.released(claims.Session)
	echoAll := d.o.Desktop.Protocol == configs.DesktopBuiltin || d.o.EchoDatagrams
	for {
		b, err := c.ReceiveDatagram(c.Context())
		if err != nil {
			return
		}
		// The client's keepalives come back, so that it sees the path alive. The desktop's UDP
		// transport goes to its server. The builtin desktop echoes every datagram (the lab's
		// UDP checks); other datagrams are dropped.
		switch {
		case isKeepalive(b):
		case relay != nil:
			relay.send(b)
			continue
		case !echoAll:
			continue
		}
		if c.SendDatagram(b) != nil {
			return
		}
	}
}

// keepaliveMagic starts the payload of a client's keepalive datagram (after the 2-byte port).
const keepaliveMagic = "FDKA"

func isKeepalive(b []byte) bool {
	return len(b) >= 2+len(keepaliveMagic) && string(b[2:2+len(keepaliveMagic)]) == keepaliveMagic
}
