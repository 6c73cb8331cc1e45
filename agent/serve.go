package agent

import (
	"crypto/tls"
	"fmt"
	"net"
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
// from a gateway), then serves the channel's desktop stream (serveStream).
func (d *Display) handleTCP(raw net.Conn, port uint16) {
	c := tls.Server(raw, d.o.Identity.ServerTLS())
	c.SetDeadline(time.Now().Add(5 * time.Second))
	if err := c.Handshake(); err != nil {
		d.log.Debug("tls handshake failed", "client", raw.RemoteAddr().String(), "err", err)
		c.Close()
		return
	}
	tok, err := ticket.ReadFrame(c)
	if err != nil {
		c.Close()
		return
	}
	ch := ticket.Channel{Port: port, Proto: "tcp"}
	claims, err := d.check(tok, ch)
	if err == nil && claims.Mode != ticket.ModeDirect && !fromGateway(c.ConnectionState()) {
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
	if err := d.serveStream(c, claims); err != nil {
		d.log.Debug("desktop stream refused", "session", claims.Session, "channel", ch.String(), "err", err)
		c.Close()
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
