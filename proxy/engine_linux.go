//go:build linux

package proxy

import (
	"context"
	"fmt"
	"net/netip"
	"time"
)

// rawTCP is the raw engine's state, kept in the Server.
type rawTCP struct {
	// poller holds quiet TCP copy directions without goroutines; nil if epoll is missing,
	// then quiet directions keep their goroutines.
	poller *poller
	// parkAfter is how long a copy direction waits for bytes in its own goroutine before
	// it parks in the poller. onPark, if set, is called after each park (tests).
	parkAfter time.Duration
	// parkSilent is parkAfter for a direction that has moved no byte yet, such as a
	// backend that has not answered: it waits in a goroutine only briefly, so a burst of
	// new idle connections does not hold two goroutine stacks each for parkAfter.
	parkSilent time.Duration
	onPark     func()
	// onArmedStart, if set, is handed each half that readiness starts (spawnOnReady)
	// instead of starting it (tests count the starts).
	onArmedStart func(*half)
	// tp tells TCP sockets of connections when they are ready.
	tp *tcpPoll
}

// defaultEngine is the raw engine on Linux.
func defaultEngine(s *Server) (tcpEngine, error) { return newRawEngine(s) }

// rawEngine moves TCP bytes with the proxy's own raw calls, epoll sets and splice pipes
// (accept.go, conn_sock.go, tcp_poll.go, poller.go, splice.go).
type rawEngine struct{ s *Server }

var _ tcpEngine = rawEngine{}

func newRawEngine(s *Server) (tcpEngine, error) {
	tp, err := newTCPPoll()
	if err != nil {
		return nil, fmt.Errorf("creating the tcp poller: %w", err)
	}
	s.tp = tp
	s.parkAfter = 250 * time.Millisecond
	s.parkSilent = 25 * time.Millisecond
	if p, err := newPoller(s); err == nil {
		s.poller = p
	} else {
		s.log.Warn("no idle poller; quiet connections keep their goroutines", "err", err)
	}
	return rawEngine{s}, nil
}

// rawListener is a listenSock whose connections come as socks of the server's poller.
type rawListener struct {
	*listenSock
	tp *tcpPoll
}

func (l rawListener) next() (tcpConn, netip.AddrPort, error) {
	fd, peer, err := l.listenSock.next()
	if err != nil {
		return nil, netip.AddrPort{}, err
	}
	return newSock(l.tp, fd), peer, nil
}

func (e rawEngine) listen(addr netip.AddrPort, keepAlive, deferAccept time.Duration) (tcpAcceptor, error) {
	l, err := listenTCP(e.s.tp, addr, keepAlive, deferAccept)
	if err != nil {
		return nil, err
	}
	return rawListener{l, e.s.tp}, nil
}

func (e rawEngine) dial(ctx context.Context, addr netip.AddrPort, timeout, keepAlive time.Duration, first []byte) (tcpConn, int, error) {
	c, sent, err := dialSock(ctx, e.s.tp, addr, timeout, keepAlive, first)
	if err != nil {
		return nil, 0, err // not a typed nil in the interface
	}
	return c, sent, nil
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
	s := e.s
	if s.poller != nil {
		s.wg.Add(1)
		go s.poller.loop()
	}
	s.wg.Add(1)
	go s.tcpPollLoop()
}

func (e rawEngine) failure() error { return e.s.tp.failure() }

func (e rawEngine) stop() {
	if e.s.poller != nil {
		e.s.poller.stop()
	}
	e.s.tp.close()
}

func (e rawEngine) release() {
	if e.s.poller != nil {
		e.s.poller.close()
	}
}

// tcpPollLoop runs the TCP poller until Close.
func (s *Server) tcpPollLoop() {
	defer s.wg.Done()
	if err := s.tp.loop(); err != nil && !s.tp.isClosed() {
		s.pollFailed(err)
	}
}

// pollFailed stops the server when its TCP poller can no longer tell readiness: no TCP
// connection could move a byte again, so rather than hold them (and accept more) until
// their timeouts, it ends them all, and Serve returns the error for the process to exit
// and be restarted.
func (s *Server) pollFailed(err error) {
	s.log.Error("tcp poller failed; stopping the proxy", "err", err)
	s.tp.fail(err) // before Close: Serve returns the failure once Close has cancelled s.ctx
	go s.Close()   // Close waits for the goroutine that called this
}
