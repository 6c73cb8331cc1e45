package node

import (
	"bufio"
	"log/slog"
	"net"
	"net/netip"
	"sync"
	"time"

	"github.com/frontdoor-vdi/frontdoor/internal/acceptloop"
	"github.com/frontdoor-vdi/frontdoor/proxy/proxyproto"
)

// proxyListener reads a PROXY protocol header (v1 or v2) from connections of trusted peers —
// a load balancer in front of the launch API — and reports the header's source as the
// connection's remote address, so the user-location zone is the real client's. Connections
// from anyone else are passed on untouched: their bytes are never read as a header. Headers are
// read off the accept path, with a deadline, so a slow peer blocks nobody.
type proxyListener struct {
	net.Listener
	trusted proxyproto.Trusted
	log     *slog.Logger
	conns   chan net.Conn
	done    chan struct{}
	once    sync.Once // guards err and closing done
	err     error
}

func newProxyListener(l net.Listener, trusted []netip.Prefix, log *slog.Logger) *proxyListener {
	p := &proxyListener{Listener: l, trusted: trusted, log: log, conns: make(chan net.Conn), done: make(chan struct{})}
	go p.loop()
	return p
}

func (p *proxyListener) isTrusted(a netip.Addr) bool { return p.trusted.Has(a) }

// loop accepts until the listener closes; running out of descriptors and other transient
// failures do not end it (package acceptloop).
func (p *proxyListener) loop() {
	acceptloop.Run(p.Listener, func(c net.Conn) { go p.handshake(c) },
		func(err error) { p.log.Warn("accepting connections", "err", err) })
	p.stop(net.ErrClosed)
}

// handshake reads the header of a trusted peer's connection and hands the connection on.
func (p *proxyListener) handshake(c net.Conn) {
	ap, _ := netip.ParseAddrPort(c.RemoteAddr().String())
	if p.isTrusted(ap.Addr()) {
		c.SetReadDeadline(time.Now().Add(5 * time.Second))
		br := bufio.NewReader(c)
		client, _, err := proxyproto.Client(br, ap, false)
		c.SetReadDeadline(time.Time{})
		if err != nil {
			p.log.Warn("bad PROXY header from a trusted peer", "peer", ap, "err", err)
			c.Close()
			return
		}
		remote := c.RemoteAddr()
		if client != ap {
			remote = net.TCPAddrFromAddrPort(client)
		}
		c = &proxiedConn{Conn: c, r: br, remote: remote}
	}
	select {
	case p.conns <- c:
	case <-p.done:
		c.Close()
	}
}

// Accept returns the next connection whose header, if any, has been read.
func (p *proxyListener) Accept() (net.Conn, error) {
	select {
	case c := <-p.conns:
		return c, nil
	case <-p.done:
		return nil, p.err
	}
}

// Close stops accepting.
func (p *proxyListener) Close() error {
	err := p.Listener.Close()
	p.stop(net.ErrClosed)
	return err
}

// stop ends Accept with err; the first call wins (the accept loop failing, or Close).
func (p *proxyListener) stop(err error) {
	p.once.Do(func() {
		p.err = err
		close(p.done)
	})
}

// proxiedConn is a connection whose first bytes went through a bufio.Reader and whose remote
// address came from a PROXY header.
type proxiedConn struct {
	net.Conn
	r      *bufio.Reader
	remote net.Addr
}

// Read reads what the header reader buffered, then the connection.
func (c *proxiedConn) Read(b []byte) (int, error) { return c.r.Read(b) }

// RemoteAddr is the client's address from the PROXY header.
func (c *proxiedConn) RemoteAddr() net.Addr { return c.remote }
