//go:build linux && (amd64 || arm64)

package proxy

import (
	"context"
	"fmt"
	"net/netip"
	"time"

	"github.com/frontdoor-vdi/frontdoor/internal/rawio"
)

// rawTCP is the raw engine's state, kept in the Server.
type rawTCP struct {
	// parkAfter is how long a copy direction waits for bytes in its own goroutine before
	// it parks: its goroutine ends, and its socket's readiness starts a new one.
	// onPark, if set, is called after each park, and after the out half is first armed
	// (tests).
	parkAfter time.Duration
	// parkSilent is parkAfter for a direction that has moved no byte yet, such as a
	// backend that has not answered: it waits in a goroutine only briefly, so a burst of
	// new idle connections does not hold two goroutine stacks each for parkAfter.
	parkSilent time.Duration
	onPark     func()
	// onArmedStart, if set, is handed each half that readiness starts (Sock.StartOnReadable)
	// instead of starting it (tests count the starts).
	onArmedStart func(*half)
	// tp tells TCP sockets of connections when they are ready.
	tp *rawio.Poll
}

// defaultEngine is the raw engine on 64-bit Linux.
func defaultEngine(s *Server) (tcpEngine, error) { return newRawEngine(s) }

// rawEngine moves TCP bytes through the sockets, poller and splice pipes of package rawio;
// the relay of a connection's two directions is relay_raw.go.
type rawEngine struct{ s *Server }

var _ tcpEngine = rawEngine{}

func newRawEngine(s *Server) (tcpEngine, error) {
	tp, err := rawio.NewPoll()
	if err != nil {
		return nil, fmt.Errorf("creating the tcp poller: %w", err)
	}
	s.tp = tp
	s.parkAfter = 250 * time.Millisecond
	s.parkSilent = 25 * time.Millisecond
	return rawEngine{s}, nil
}

// rawListener is a rawio.Listener whose connections come as rawConns.
type rawListener struct{ *rawio.Listener }

func (l rawListener) next() (tcpConn, netip.AddrPort, error) {
	c, peer, err := l.Accept()
	if err != nil {
		return nil, netip.AddrPort{}, err
	}
	return rawConn{c}, peer, nil
}

// rawConn is a rawio.Sock as a tcpConn.
type rawConn struct{ *rawio.Sock }

func (c rawConn) readNow(bufs *copyBufs) (*[]byte, int, error) {
	bp := bufs.get()
	n, err := c.ReadNow(*bp)
	if n == 0 {
		bufs.put(bp)
		return nil, 0, err
	}
	return bp, n, nil
}

func (c rawConn) writeAll(p []byte) (int, error)     { return c.Write(p) }
func (c rawConn) resetOnClose()                      { c.ResetOnClose() }
func (c rawConn) localAddr() (netip.AddrPort, error) { return c.LocalAddr() }

func (e rawEngine) listen(addr netip.AddrPort, keepAlive, deferAccept time.Duration) (tcpAcceptor, error) {
	l, err := rawio.ListenTCP(e.s.tp, addr, keepAlive, deferAccept)
	if err != nil {
		return nil, err
	}
	return rawListener{l}, nil
}

func (e rawEngine) dial(ctx context.Context, addr netip.AddrPort, timeout, keepAlive time.Duration, first []byte) (tcpConn, int, error) {
	c, sent, err := rawio.DialTCP(ctx, e.s.tp, addr, timeout, keepAlive, first)
	if err != nil {
		return nil, 0, err // not a typed nil in the interface
	}
	return rawConn{c}, sent, nil
}

func (e rawEngine) relay(r relayArgs) {
	s := e.s
	t := &tconn{s: s, l: r.l, ss: r.ss, b: r.b, e: r.e, idle: r.idle, noHalfClose: !r.halfClose}
	t.in.waitFirst = r.waitFirst
	s.mu.Lock()
	r.ss.t = t
	s.mu.Unlock()
	t.start() // the in half runs in this goroutine
}

func (e rawEngine) start() {
	e.s.wg.Add(1)
	go e.s.tcpPollLoop()
}

func (e rawEngine) failure() error { return e.s.tp.Failure() }

func (e rawEngine) stop() { e.s.tp.Close() }

func (e rawEngine) release() {}

// tcpPollLoop runs the TCP poller until Close.
func (s *Server) tcpPollLoop() {
	defer s.wg.Done()
	if err := s.tp.Loop(); err != nil && !s.tp.IsClosed() {
		s.pollFailed(err)
	}
}

// pollFailed stops the server when its TCP poller can no longer tell readiness: no TCP
// connection could move a byte again, so rather than hold them (and accept more) until
// their timeouts, it ends them all, and Serve returns the error for the process to exit
// and be restarted.
func (s *Server) pollFailed(err error) {
	s.log.Error("tcp poller failed; stopping the proxy", "err", err)
	s.tp.Fail(err) // before Close: Serve returns the failure once Close has cancelled s.ctx
	go s.Close()   // Close waits for the goroutine that called this
}
