package proxy

import (
	"context"
	"errors"
	"io"
	"net"
	"net/netip"
	"os"
	"sync/atomic"
	"time"
)

// stdEngine moves TCP bytes with the standard library only: net.ListenConfig and net.Dialer
// open the sockets (TCP_NODELAY is package net's default; keepalive as the raw engine sets
// it), and each direction is one io.Copy between *net.TCPConn, which on Linux splices
// through TCPConn.ReadFrom and elsewhere copies through a buffer. It is the engine on every
// system but Linux, and on Linux the one tests and comparisons can pick (newStdEngine).
//
// DeferAccept sets TCP_DEFER_ACCEPT on Linux, as the raw engine does; elsewhere a listener
// with it is refused (deferaccept_other.go). What it does not do: a direction's
// goroutine lives as long as its connection (nothing parks); bytes are counted, and the idle
// timer reset, when a copy returns, which it does at least every stdWindow.
type stdEngine struct{ s *Server }

var _ tcpEngine = stdEngine{}

// stdWindow bounds how long one copy runs before it returns to count its bytes: the
// connection's metrics and idle timer are that fresh.
const stdWindow = time.Second

func newStdEngine(s *Server) (tcpEngine, error) { return stdEngine{s}, nil }

// keepAliveConfig is the keepalive of the raw engine (setKeepAlive): probes after d of
// quiet, then every 15s, 9 at most; off for d <= 0.
func keepAliveConfig(d time.Duration) (time.Duration, net.KeepAliveConfig) {
	if d <= 0 {
		return -1, net.KeepAliveConfig{}
	}
	return 0, net.KeepAliveConfig{Enable: true, Idle: d, Interval: 15 * time.Second, Count: 9}
}

func (e stdEngine) listen(addr netip.AddrPort, keepAlive, deferAccept time.Duration) (tcpAcceptor, error) {
	var lc net.ListenConfig
	lc.KeepAlive, lc.KeepAliveConfig = keepAliveConfig(keepAlive)
	ctl, err := deferAcceptControl(deferAccept)
	if err != nil {
		return nil, err
	}
	lc.Control = ctl
	// A wildcard address gets a dual-stack socket where the host has IPv6, as with the raw
	// engine.
	ln, err := lc.Listen(context.Background(), "tcp", addr.String())
	if err != nil {
		return nil, err
	}
	return stdListener{ln.(*net.TCPListener)}, nil
}

func (e stdEngine) dial(ctx context.Context, addr netip.AddrPort, timeout, keepAlive time.Duration, _ []byte) (tcpConn, int, error) {
	d := net.Dialer{Timeout: timeout}
	d.KeepAlive, d.KeepAliveConfig = keepAliveConfig(keepAlive)
	c, err := d.DialTCP(ctx, "tcp", netip.AddrPort{}, addr)
	if err != nil {
		return nil, 0, err
	}
	return stdConn{c}, 0, nil // the caller sends first
}

func (e stdEngine) start()         {}
func (e stdEngine) failure() error { return nil }
func (e stdEngine) stop()          {}
func (e stdEngine) release()       {}

// stdListener is a *net.TCPListener whose connections are stdConns.
type stdListener struct{ ln *net.TCPListener }

func (l stdListener) Addr() netip.AddrPort { return unmapped(l.ln.Addr()) }
func (l stdListener) Close() error         { return l.ln.Close() }

func (l stdListener) next() (tcpConn, netip.AddrPort, error) {
	c, err := l.ln.AcceptTCP()
	if err != nil {
		return nil, netip.AddrPort{}, err
	}
	return stdConn{c}, unmapped(c.RemoteAddr()), nil
}

// unmapped returns a TCP address as an AddrPort, an IPv4-mapped address as IPv4.
func unmapped(a net.Addr) netip.AddrPort {
	ap := a.(*net.TCPAddr).AddrPort()
	return netip.AddrPortFrom(ap.Addr().Unmap(), ap.Port())
}

// stdConn is a *net.TCPConn as a tcpConn.
type stdConn struct{ *net.TCPConn }

// readNow reads nothing: what the client sent already goes through the relay's copy.
func (c stdConn) readNow(*copyBufs) (*[]byte, int, error) { return nil, 0, nil }
func (c stdConn) writeAll(p []byte) (int, error)          { return c.Write(p) }
func (c stdConn) resetOnClose()                           { c.SetLinger(0) }
func (c stdConn) localAddr() (netip.AddrPort, error)      { return unmapped(c.LocalAddr()), nil }

// stdRelay is one connection relayed by the standard engine: two directions, each an io.Copy
// in a goroutine of its own, and what the last to end must report.
type stdRelay struct {
	s               *Server
	r               relayArgs
	client, backend *net.TCPConn
	last            atomic.Int64 // unix nanoseconds of the last copy that moved bytes either way
	in, out         stdHalf      // in is client to backend
	ended           atomic.Int32 // directions done
	// endedAtEOF says the backend's FIN ended the connection (no half-close), so the client
	// direction's net.ErrClosed is no error.
	endedAtEOF atomic.Bool
	// why is the reason kill gave: the error of a direction that then meets its closed socket.
	why atomic.Pointer[error]
}

// stdHalf is one direction of a stdRelay.
type stdHalf struct {
	src, dst *net.TCPConn
	n        atomic.Int64 // bytes moved
	err      error        // why it ended; nil at EOF. Written before ended is counted.
}

var _ tcpRelay = (*stdRelay)(nil)

func (e stdEngine) relay(r relayArgs) {
	s := e.s
	client, backend := r.ss.client.(stdConn).TCPConn, r.ss.backend.(stdConn).TCPConn
	t := &stdRelay{s: s, r: r, client: client, backend: backend}
	t.in.src, t.in.dst = client, backend
	t.out.src, t.out.dst = backend, client
	t.last.Store(time.Now().UnixNano())
	s.mu.Lock()
	r.ss.t = t
	s.mu.Unlock()
	s.wg.Add(1)
	go func() {
		defer s.wg.Done()
		t.run(&t.out)
	}()
	t.run(&t.in)
}

// run copies h's direction until EOF, an error or the idle timeout.
func (t *stdRelay) run(h *stdHalf) {
	lm, bm := t.r.l.m.bytesOut, t.r.b.m.bytesOut
	if h == &t.in {
		lm, bm = t.r.l.m.bytesIn, t.r.b.m.bytesIn
	}
	for {
		now := time.Now()
		left := time.Unix(0, t.last.Load()).Add(t.r.idle).Sub(now)
		if left <= 0 {
			t.end(h, errIdle)
			return
		}
		// Half the idle timeout at most: a connection that moves bytes has counted them
		// well before the expiry pass could take it for idle.
		h.src.SetReadDeadline(now.Add(min(left, t.r.idle/2, stdWindow)))
		n, err := io.Copy(h.dst, h.src)
		if n > 0 {
			t.last.Store(time.Now().UnixNano())
			h.n.Add(n)
			lm.Add(float64(n))
			bm.Add(float64(n))
		}
		switch {
		case err == nil:
			t.end(h, io.EOF)
			return
		case errors.Is(err, os.ErrDeadlineExceeded):
		default:
			t.end(h, err)
			return
		}
	}
}

// end finishes one direction as the raw engine's half.end does: at EOF it passes the FIN on
// (or, without half-close, the backend's FIN closes both sockets); on an error it closes both
// sockets, with a reset to the client if the backend failed. The second to end reports.
func (t *stdRelay) end(h *stdHalf, err error) {
	if err == io.EOF {
		err = nil
		switch {
		case t.ended.Load() != 0:
		case h == &t.out && !t.r.halfClose:
			t.endedAtEOF.Store(true)
			t.client.Close()
			t.backend.Close()
		default:
			h.dst.CloseWrite()
		}
	}
	if why := t.why.Load(); why != nil && errors.Is(err, net.ErrClosed) {
		err = *why
	}
	h.err = err
	if err != nil {
		if h == &t.out && !errors.Is(err, net.ErrClosed) {
			t.client.SetLinger(0) // pass a backend reset on to the client
		}
		t.client.Close()
		t.backend.Close()
	}
	if t.ended.Add(1) == 2 {
		t.finish()
	}
}

func (t *stdRelay) finish() {
	t.client.Close()
	t.backend.Close()
	errIn, errOut := t.in.err, t.out.err
	if t.endedAtEOF.Load() && errors.Is(errIn, net.ErrClosed) {
		errIn = nil
	}
	e := &t.r.e
	e.in += t.in.n.Load()
	e.out += t.out.n.Load()
	t.s.closedTCP(t.r.l, t.r.ss, t.r.b, e, errIn, errOut)
}

// expired tells whether no copy has moved a byte for the idle timeout: the expiry pass ends
// such a connection (a direction blocked in a write does not see its own timer).
func (t *stdRelay) expired(now time.Time) bool {
	return now.Sub(time.Unix(0, t.last.Load())) >= t.r.idle
}

// kill closes both sockets; each direction ends with why.
func (t *stdRelay) kill(why error) {
	t.why.CompareAndSwap(nil, &why)
	t.client.Close()
	t.backend.Close()
}
