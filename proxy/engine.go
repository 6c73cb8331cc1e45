package proxy

import (
	"context"
	"errors"
	"net"
	"net/netip"
	"sync"
	"time"
)

// tcpEngine opens, connects and relays the sockets of the server's TCP connections; the rest
// of the TCP path (limits, PROXY headers, SNI routing, backend choice, accounting) is the
// same whichever engine moves the bytes. There are two:
//
//   - the raw engine (Linux, engine_linux.go): sockets accepted and connected with raw calls,
//     waiting in an epoll set of the server's, spliced in bulk, parked when quiet (see the
//     package doc);
//   - the standard engine (every system, engine_std.go): net.TCPListener, net.Dialer and
//     io.Copy between *net.TCPConn, which splices on Linux through ReadFrom.
//
// New takes the system's default (defaultEngine): the raw engine on Linux, the standard one
// elsewhere.
type tcpEngine interface {
	// listen opens a listening socket on addr (see listenTCP for the options).
	listen(addr netip.AddrPort, keepAlive, deferAccept time.Duration) (tcpAcceptor, error)
	// dial connects to addr within timeout or until ctx is done and sends first on the new
	// connection; it returns how many bytes of first it sent (the caller sends the rest).
	dial(ctx context.Context, addr netip.AddrPort, timeout, keepAlive time.Duration, first []byte) (tcpConn, int, error)
	// relay carries r's connection, whose backend is connected, in both directions until
	// both end, then reports it with Server.closedTCP. The calling goroutine carries the
	// client-to-backend direction.
	relay(r relayArgs)
	// start starts the engine's own goroutines (counted in the server's wait group); Serve
	// calls it.
	start()
	// failure is why the engine stopped the server on its own; nil while it works.
	failure() error
	// stop ends the engine's goroutines; Close calls it before waiting for them, and release
	// once they have returned.
	stop()
	release()
}

// tcpAcceptor is a listening socket of an engine.
type tcpAcceptor interface {
	Addr() netip.AddrPort
	Close() error
	// next returns the next connection and its peer; an error that wraps net.ErrClosed
	// once the listener is closed.
	next() (tcpConn, netip.AddrPort, error)
}

// tcpConn is one socket of a proxied TCP connection, before its relay starts.
type tcpConn interface {
	Read(p []byte) (int, error)
	SetReadDeadline(t time.Time) error
	// readNow reads what is queued into a buffer of bufs without waiting: a nil buffer when
	// nothing is there yet (or the engine does not look).
	readNow(bufs *copyBufs) (*[]byte, int, error)
	// writeAll writes all of p.
	writeAll(p []byte) (int, error)
	// resetOnClose makes the coming Close send a reset instead of a FIN.
	resetOnClose()
	localAddr() (netip.AddrPort, error)
	Close() error
}

// tcpRelay is a running relay of one connection, as the server's expiry pass and Close see it.
type tcpRelay interface {
	// expired tells whether the connection has moved no byte for its idle timeout.
	expired(now time.Time) bool
	// kill closes both sockets at once and ends the connection with why.
	kill(why error)
}

// relayArgs is what a relay needs of a connection whose backend is connected.
type relayArgs struct {
	l         *listener
	ss        *session
	b         *backend
	e         accessEntry
	idle      time.Duration
	halfClose bool // false: the backend's FIN ends the connection (Listener.NoHalfClose)
	// waitFirst says a short read drained the client's socket already.
	waitFirst bool
}

// errIdle ends a connection that moved no byte for the listener's idle timeout.
var errIdle = errors.New("idle timeout")

// closedTCP does the accounting of a connection's end: the reason from each direction's
// error (nil at EOF), the gauges, the limits' counts and the access log line.
func (s *Server) closedTCP(l *listener, ss *session, b *backend, e *accessEntry, errIn, errOut error) {
	switch {
	case errors.Is(errIn, errIdle) || errors.Is(errOut, errIdle):
		e.reason = "idle"
	case errIn == nil && errOut == nil:
		e.reason = "eof"
	case errIn != nil && !errors.Is(errIn, net.ErrClosed):
		e.reason = "client_error"
	case errOut != nil && !errors.Is(errOut, net.ErrClosed):
		e.reason = "backend_error"
	default:
		e.reason = "closed"
	}
	b.active.Add(-1)
	b.m.active.Dec()
	l.m.active.Dec()
	s.release(l, e.peer, ss)
	s.accessLog(*e)
}

// smallCopy is the most bytes copied through user space with read and write instead of
// splice: for a few hundred bytes two splice calls cost more than a read and a write.
const smallCopy = 16 << 10

// copyBufs pools a server's buffers of copies through user space, smallCopy bytes each; the
// zero value is ready.
type copyBufs struct{ p sync.Pool }

func (b *copyBufs) get() *[]byte {
	if v := b.p.Get(); v != nil {
		return v.(*[]byte)
	}
	buf := make([]byte, smallCopy)
	return &buf
}

func (b *copyBufs) put(bp *[]byte) { b.p.Put(bp) }
