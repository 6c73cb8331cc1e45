package agent

import (
	"crypto/subtle"
	"crypto/tls"
	"errors"
	"fmt"
	"net"
	"time"

	"github.com/frontdoor-vdi/frontdoor/internal/acceptloop"
	"github.com/frontdoor-vdi/frontdoor/internal/resume"
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
// from a gateway), then serves the channel's desktop stream (serveStream): on this connection,
// or, for a sealed channel (see ticket.FrameMagicSealed), on the TLS connection the client
// makes through the gateway once this one's TLS layer is dropped.
func (d *Display) handleTCP(raw net.Conn, port uint16) {
	bc := resume.BatchTLS(raw, func(u net.Conn) *tls.Conn { return tls.Server(u, d.o.Identity.ServerTLS()) })
	c := bc.Conn
	c.SetDeadline(time.Now().Add(5 * time.Second))
	if err := c.Handshake(); err != nil {
		d.log.Debug("tls handshake failed", "client", raw.RemoteAddr().String(), "err", err)
		c.Close()
		return
	}
	tok, sealed, err := ticket.ReadOpening(c)
	if err != nil {
		c.Close()
		return
	}
	ch := ticket.Channel{Port: port, Proto: "tcp"}
	claims, err := d.check(tok, ch)
	gw := fromGateway(c.ConnectionState())
	if err == nil && (claims.Mode != ticket.ModeDirect || sealed) && !gw {
		err = ErrNotFromGateway
	}
	if err == nil && port != d.o.Desktop.Port {
		err = fmt.Errorf("%w: %s (the desktop is on %d/tcp)", ErrNoDesktop, ch, d.o.Desktop.Port)
	}
	if err == nil && d.full(claims.Session) {
		err = ErrSessionCap
	}
	if err != nil {
		d.log.Warn("channel denied", "channel", ch.String(), "client", c.RemoteAddr().String(), "reason", err)
		c.Write([]byte{ticket.DeniedStatus(err)})
		c.Close()
		return
	}
	if _, err := c.Write([]byte{ticket.StatusOK}); err != nil {
		c.Close()
		return
	}
	path := pathOf(c.ConnectionState())
	var conn net.Conn = bc
	if sealed {
		if conn, err = d.unseal(raw, tok); err != nil {
			d.log.Warn("sealed channel refused", "session", claims.Session, "channel", ch.String(), "via", path, "err", err)
			raw.Close()
			return
		}
	}
	if err := d.serveStream(conn, path, claims); err != nil {
		d.log.Debug("desktop stream refused", "session", claims.Session, "channel", ch.String(), "err", err)
		conn.Close()
	}
}

// errNotTheTicketHolder refuses a sealed channel whose client did not send the ticket the
// gateway brought.
var errNotTheTicketHolder = errors.New("the client did not show the channel's ticket")

// unseal takes a sealed channel's own TLS connection on raw, whose gateway leg carried tok:
// the client's handshake, then tok again as its first bytes.
func (d *Display) unseal(raw net.Conn, tok string) (net.Conn, error) {
	c := resume.BatchTLS(raw, func(u net.Conn) *tls.Conn { return tls.Server(u, d.o.Identity.ServerTLS()) })
	c.SetDeadline(time.Now().Add(5 * time.Second))
	if err := c.Handshake(); err != nil {
		return nil, fmt.Errorf("the client's handshake: %w", err)
	}
	got, err := ticket.ReadFrame(c)
	if err != nil {
		return nil, fmt.Errorf("the client's ticket: %w", err)
	}
	if subtle.ConstantTimeCompare([]byte(got), []byte(tok)) != 1 {
		return nil, errNotTheTicketHolder
	}
	return c, nil
}

// fromGateway reports whether the peer presented a gateway's certificate of the site CA.
func fromGateway(st tls.ConnectionState) bool {
	if len(st.VerifiedChains) == 0 || len(st.VerifiedChains[0]) == 0 {
		return false
	}
	role, _, ok := siteid.Of(st.VerifiedChains[0][0])
	return ok && role == siteid.RoleGateway
}
