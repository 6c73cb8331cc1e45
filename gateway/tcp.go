package gateway

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"net"
	"net/netip"
	"sync"
	"sync/atomic"
	"time"

	"github.com/frontdoor-vdi/frontdoor/internal/acceptloop"
	"github.com/frontdoor-vdi/frontdoor/internal/connlimit"
	"github.com/frontdoor-vdi/frontdoor/ticket"
)

// acceptLoop is the accept loop of a TCP channel port, lim its listener: running out of
// descriptors and other transient failures do not end it (package acceptloop), and while it
// cannot accept the health port reads down (serveHealth). A source that opens connections
// faster than its pace has them closed at once, before any TLS.
func (g *Gateway) acceptLoop(port uint16, lim *connlimit.Listener) *acceptloop.Loop {
	return &acceptloop.Loop{
		Serve: func(c net.Conn) {
			if !g.paced(c) {
				g.log.Debug("channel refused", "client", c.RemoteAddr(), "port", port, "reason", ErrSourceRate)
				c.Close()
				return
			}
			g.wg.Add(1)
			go func() { defer g.wg.Done(); g.handleTCP(c, port, lim) }()
		},
		Failed: func(err error) { g.log.Warn("accepting channels", "port", port, "err", err) },
	}
}

func (g *Gateway) handleTCP(raw net.Conn, port uint16, lim *connlimit.Listener) {
	client, _ := netip.ParseAddrPort(raw.RemoteAddr().String())
	conn := tls.Server(raw, g.o.TLS)
	kept := false // an open channel's goroutines close conn
	defer func() {
		if !kept {
			conn.Close()
		}
	}()
	conn.SetDeadline(time.Now().Add(g.o.HandshakeTimeout))
	if err := conn.Handshake(); err != nil {
		g.log.Debug("tls handshake failed", "client", client, "err", err)
		return
	}
	tok, sealed, err := ticket.ReadOpening(conn)
	if err != nil {
		// A health probe closes (or resets) right after the handshake: only a frame that is
		// not ours is worth a log line.
		if errors.Is(err, ticket.ErrFrame) {
			g.log.Info("channel refused", "client", client, "port", port, "reason", "bad frame")
		} else {
			g.log.Debug("channel closed before its ticket", "client", client, "port", port, "err", err)
		}
		return
	}
	var seal net.Conn
	if sealed {
		seal = raw
	}
	kept = g.serveChannel(conn, seal, tok, port, client, func() {
		lim.Hold(raw) // a channel now: never closed for a new connection
		conn.SetDeadline(time.Time{})
	})
}

// serveChannel admits the TCP channel to port whose ticket tok came on conn (a TLS
// connection, or a browser's WebSocket) from client, and relays it to the session's machine
// until either end closes; admitted is called once the ticket was admitted, before bytes flow.
// With seal (the TCP connection under conn, when the client asked for a sealed channel) it
// relays the channel sealed when the machine takes it (ticket.FrameMagicSealed): the bytes of
// seal and of the machine's TCP connection, which the gateway cannot read. It reports whether
// it opened the channel, whose goroutines then relay it and close conn; on false conn is the
// caller's to close.
func (g *Gateway) serveChannel(conn, seal net.Conn, tok string, port uint16, client netip.AddrPort, admittedHook func()) (kept bool) {
	ch := ticket.Channel{Port: port, Proto: "tcp"}
	claims, addr, err := g.admit(tok, ch, client)
	if err != nil {
		g.refused(err, "client", client, "channel", ch.String(), "session", claims.Session, "user", claims.User)
		conn.Write([]byte{ticket.DeniedStatus(err)})
		return
	}
	if g.full(claims.Session) { // before the machine is dialled; open checks again
		g.log.Warn("channel refused", "session", claims.Session, "channel", ch.String(), "client", client, "reason", ErrSessionCap)
		conn.Write([]byte{ticket.StatusDenied})
		return
	}
	up, sealed, err := g.machineLeg(claims, netip.AddrPortFrom(addr, port), tok, seal != nil)
	if err != nil {
		g.log.Warn("machine refused channel", "session", claims.Session, "machine", claims.Machine, "err", err)
		conn.Write([]byte{ticket.StatusDenied})
		return
	}
	defer func() {
		if !kept {
			up.Close()
		}
	}()
	var once sync.Once
	cut := func() { once.Do(func() { conn.Close(); up.Close() }) }
	if sealed {
		// Closing a TLS connection would send its close_notify into the sealed stream.
		cut = func() { once.Do(func() { seal.Close(); up.NetConn().Close() }) }
	}
	c := &channel{session: claims.Session, issued: claims.Issued, close: cut}
	if err := g.open(c); err != nil {
		g.log.Warn("channel refused", "session", claims.Session, "channel", ch.String(), "client", client, "reason", err)
		conn.Write([]byte{ticket.StatusDenied})
		return
	}
	defer func() {
		if !kept {
			g.release(c)
		}
	}()
	if g.o.Verifier.Revoked(claims) || !g.o.Sessions.Active(claims.Session) {
		// Ended or revoked between the check and the registration, which a cut would miss.
		conn.Write([]byte{ticket.StatusDenied})
		return
	}
	if !sealed {
		if err := admitted(conn, g.o.Reissue, claims, g.log); err != nil {
			return
		}
		admittedHook()
		splice(conn, up, cut, func() { g.release(c) })
		return true
	}
	pin := ticket.Pin(up.ConnectionState().PeerCertificates[0])
	if err := admittedSealed(conn, g.o.Reissue, claims, g.log, pin); err != nil {
		return
	}
	admittedHook()
	splice(seal, up.NetConn(), cut, func() { g.release(c) })
	return true
}

// machineLeg opens a channel's TLS connection to its machine at addr and hands it tok, sealed
// when asked and the machine takes it: an agent of an earlier version closes at the sealed
// frame, and the channel is opened again as a plain one. It reports whether the leg is sealed.
func (g *Gateway) machineLeg(claims ticket.Claims, addr netip.AddrPort, tok string, seal bool) (*tls.Conn, bool, error) {
	up, err := dialMachine(context.Background(), g.o.MachineTLS(), g.o.DialTimeout, claims.Machine, addr)
	if err != nil {
		return nil, false, fmt.Errorf("machine unreachable: %w", err)
	}
	// The machine's agent checks the ticket too: it learns the session of every channel.
	up.SetDeadline(time.Now().Add(g.o.HandshakeTimeout))
	write := ticket.WriteFrame
	if seal {
		write = ticket.WriteSealedFrame
	}
	var st [1]byte
	err = write(up, tok)
	if err == nil {
		_, err = io.ReadFull(up, st[:])
	}
	switch {
	case err != nil && seal && errors.Is(err, io.EOF):
		up.Close()
		g.log.Debug("the machine takes no sealed channel: a plain one", "session", claims.Session, "machine", claims.Machine)
		return g.machineLeg(claims, addr, tok, false)
	case err != nil:
		up.Close()
		return nil, false, err
	case st[0] != ticket.StatusOK:
		up.Close()
		return nil, false, fmt.Errorf("status %d", st[0])
	}
	up.SetDeadline(time.Time{})
	return up, seal, nil
}

// splice copies both ways (relay: a sealed channel's legs in the kernel, others through
// pump), each direction on a goroutine of its own, and returns at once: the
// caller's goroutine made the handshakes and its stack grew to 16 KiB, which a direction
// parked in Read on it would keep for the channel's life, where a new one's stays at 4 KiB
// (a gateway carries thousands of idle channels). When one side ends it half-closes the other
// (close_notify; a WebSocket, which has no half-close, is closed); when both are done (or one
// fails) it cuts both, then calls done.
func splice(client, up net.Conn, cut, done func()) {
	var left atomic.Int32
	left.Store(2)
	end := func() {
		if left.Add(-1) == 0 {
			cut()
			done()
		}
	}
	go func() {
		if _, err := relay(up, client); err != nil {
			cut()
		} else if cw, ok := up.(interface{ CloseWrite() error }); ok {
			cw.CloseWrite()
		} else {
			up.Close()
		}
		end()
	}()
	go func() {
		if _, err := relay(client, up); err != nil {
			cut()
		} else if cw, ok := client.(interface{ CloseWrite() error }); ok {
			cw.CloseWrite()
		} else {
			client.Close()
		}
		end()
	}()
}

// pumpSmall is the buffer a direction of a channel keeps for its whole life; pumpBufs lends
// a large one while it is busy.
const pumpSmall = 2 << 10

var pumpBufs = sync.Pool{New: func() any { b := make([]byte, 32<<10); return &b }}

// pump copies src to dst until src ends (nil at io.EOF), as io.Copy does, but an idle
// direction holds 2 KiB rather than 32: a read that fills the small buffer borrows a large one
// from a pool, and a read that uses little of it gives it back. A gateway carries thousands of
// mostly idle desktop channels.
func pump(dst io.Writer, src io.Reader) (int64, error) {
	small := make([]byte, pumpSmall)
	var big *[]byte
	defer func() {
		if big != nil {
			pumpBufs.Put(big)
		}
	}()
	var n int64
	for {
		buf := small
		if big != nil {
			buf = *big
		}
		r, err := src.Read(buf)
		if r > 0 {
			w, werr := dst.Write(buf[:r])
			n += int64(w)
			if werr != nil {
				return n, werr
			}
		}
		if err != nil {
			if errors.Is(err, io.EOF) {
				return n, nil
			}
			return n, err
		}
		switch {
		case big == nil && r == len(small):
			big = pumpBufs.Get().(*[]byte)
		case big != nil && r < len(*big)/8:
			pumpBufs.Put(big)
			big = nil
		}
	}
}
