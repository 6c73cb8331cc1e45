// Package capture is a net.PacketConn that keeps the first datagram a client writes to it
// and sends nothing: the benchmarks take a real client's first packet (a QUIC Initial, a
// DTLS ClientHello) this way, to replay it as a flood.
package capture

import (
	"net"
	"sync"
	"time"
)

// Conn keeps the first datagram written to it; reads wait until it is closed.
type Conn struct {
	local  *net.UDPAddr
	first  chan []byte
	once   sync.Once
	closed chan struct{}
	cOnce  sync.Once
}

// New returns a Conn that tells local as its address.
func New(local *net.UDPAddr) *Conn {
	return &Conn{local: local, first: make(chan []byte, 1), closed: make(chan struct{})}
}

// First delivers the first datagram written.
func (c *Conn) First() <-chan []byte { return c.first }

// WriteTo implements net.PacketConn.
func (c *Conn) WriteTo(b []byte, _ net.Addr) (int, error) {
	c.once.Do(func() { c.first <- append([]byte(nil), b...) })
	return len(b), nil
}

// ReadFrom implements net.PacketConn: it returns once the Conn is closed.
func (c *Conn) ReadFrom([]byte) (int, net.Addr, error) {
	<-c.closed
	return 0, nil, net.ErrClosed
}

// Close implements net.PacketConn.
func (c *Conn) Close() error {
	c.cOnce.Do(func() { close(c.closed) })
	return nil
}

// LocalAddr implements net.PacketConn.
func (c *Conn) LocalAddr() net.Addr { return c.local }

// SetDeadline implements net.PacketConn; it does nothing.
func (c *Conn) SetDeadline(time.Time) error { return nil }

// SetReadDeadline implements net.PacketConn; it does nothing.
func (c *Conn) SetReadDeadline(time.Time) error { return nil }

// SetWriteDeadline implements net.PacketConn; it does nothing.
func (c *Conn) SetWriteDeadline(time.Time) error { return nil }
