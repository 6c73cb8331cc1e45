package agent

import (
	"crypto/tls"
	"errors"
	"io"
	"net"
	"net/netip"
	"slices"
	"time"

	"github.com/frontdoor-vdi/frontdoor/internal/acceptloop"
	"github.com/frontdoor-vdi/frontdoor/internal/siteid"
	"github.com/frontdoor-vdi/frontdoor/ticket"
)

// acceptTCP accepts the port's channels until the listener closes; running out of
// descriptors and other transient failures do not end it (package acceptloop).
func (d *Display) acceptTCP(l net.Listener, port uint16) {
	acceptloop.Run(l, func(c net.Conn) {
		d.wg.Add(1)
		go func() { defer d.wg.Done(); d.handleTCP(c, port) }()
	}, func(err error) { d.log.Warn("accepting channels", "port", port, "err", err) })
}

// handleTCP completes the TLS handshake, checks the channel's ticket (a gateway-mode one only
// from a gateway), then echoes: the desktop simulator.
func (d *Display) handleTCP(raw net.Conn, port uint16) {
	c := tls.Server(raw, d.o.Identity.ServerTLS())
	defer c.Close()
	c.SetDeadline(time.Now().Add(5 * time.Second))
	if err := c.Handshake(); err != nil {
		d.log.Debug("tls handshake failed", "client", raw.RemoteAddr().String(), "err", err)
		return
	}
	tok, err := ticket.ReadFrame(c)
	if err != nil {
		return
	}
	ch := ticket.Channel{Port: port, Proto: "tcp"}
	claims, err := d.check(tok, ch)
	if err == nil && claims.Mode != ticket.ModeDirect && !fromGateway(c.ConnectionState()) {
		err = ErrNotFromGateway
	}
	if err != nil {
		d.log.Warn("channel denied", "channel", ch.String(), "client", c.RemoteAddr().String(), "reason", err)
		c.Write([]byte{ticket.StatusDenied})
		return
	}
	if _, err := c.Write([]byte{ticket.StatusOK}); err != nil {
		return
	}
	c.SetDeadline(time.Time{})
	d.mu.Lock()
	if d.closed {
		d.mu.Unlock()
		return
	}
	d.conns[c] = ticketOf{claims.Session, claims.Issued}
	d.mu.Unlock()
	if d.o.Verifier.Revoked(claims) {
		// Revoked between the check and the registration, which a cut would miss.
		d.mu.Lock()
		delete(d.conns, c)
		d.mu.Unlock()
		return
	}
	d.opened(claims.Session, claims.Mode)
	defer func() {
		d.mu.Lock()
		delete(d.conns, c)
		d.mu.Unlock()
		d.released(claims.Session)
	}()
	if _, err := io.Copy(c, c); err == nil {
		c.CloseWrite() // close_notify: the far end reads its end of the stream
	}
}

// fromGateway reports whether the peer presented a gateway's certificate of the site CA.
func fromGateway(st tls.ConnectionState) bool {
	if len(st.VerifiedChains) == 0 || len(st.VerifiedChains[0]) == 0 {
		return false
	}
	role, _, ok := siteid.Of(st.VerifiedChains[0][0])
	return ok && role == siteid.RoleGateway
}

// serveUDP answers probes, opens flows on a valid ticket and echoes datagrams of open flows.
func (d *Display) serveUDP(c *net.UDPConn, port uint16) {
	buf := make([]byte, 64<<10)
	for {
		n, from, err := c.ReadFromUDPAddrPort(buf)
		if err != nil {
			var ne net.Error
			if errors.As(err, &ne) && ne.Timeout() {
				continue
			}
			d.endFlows(port)
			return
		}
		from = netip.AddrPortFrom(from.Addr().Unmap(), from.Port())
		k := flowKey{port, from}
		b := buf[:n]
		d.mu.Lock()
		f := d.flows[k]
		if f != nil {
			f.last = time.Now()
		}
		d.mu.Unlock()
		switch {
		case f != nil:
			c.WriteToUDPAddrPort(b, from)
		case string(b) == ticket.ProbePayload:
			c.WriteToUDPAddrPort(b, from)
		default:
			tok, ok := ticket.ParseDatagram(b)
			if !ok {
				continue
			}
			ch := ticket.Channel{Port: port, Proto: "udp"}
			claims, err := d.check(tok, ch)
			if err == nil && claims.Mode != ticket.ModeDirect && !slices.Contains(d.o.Gateways, from.Addr()) {
				err = ErrNotFromGateway
			}
			if err != nil {
				d.log.Warn("flow denied", "channel", ch.String(), "client", from, "reason", err)
				continue
			}
			d.mu.Lock()
			d.flows[k] = &uflow{session: claims.Session, issued: claims.Issued, last: time.Now()}
			d.mu.Unlock()
			d.opened(claims.Session, claims.Mode)
			c.WriteToUDPAddrPort([]byte(ticket.UDPReady), from)
		}
	}
}

func (d *Display) endFlows(port uint16) {
	var ended []string
	d.mu.Lock()
	for k, f := range d.flows {
		if k.port == port {
			delete(d.flows, k)
			ended = append(ended, f.session)
		}
	}
	d.mu.Unlock()
	for _, s := range ended {
		d.released(s)
	}
}
