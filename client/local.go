package client

import (
	"bytes"
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"io"
	"net"
	"net/netip"
	"sync"
	"time"
)

// listener is a local port exposed by Expose or ExposeUDP.
type listener struct {
	ln   io.Closer
	port uint16
}

// Attach opens a desktop stream on the TCP channel on port and returns its end: what is
// written to it reaches the desktop server, what the server sends comes out of it, from the
// server's first byte on. Each Attach is a connection of its own to the desktop server (a
// viewer's handshake starts afresh). The stream outlives a cut: while the session reconnects
// the connection stays open, and nothing written or sent is lost (session reliability). It
// waits for the session while it reconnects, within ctx.
func (s *Session) Attach(ctx context.Context, port uint16) (net.Conn, error) {
	if !s.hasChannel(port, "tcp") {
		return nil, fmt.Errorf("%w: %d/tcp", ErrNoChannel, port)
	}
	a, b := net.Pipe()
	if _, err := s.openStream(ctx, port, b); err != nil {
		a.Close()
		b.Close()
		return nil, err
	}
	return a, nil
}

func (s *Session) hasChannel(port uint16, proto string) bool {
	for _, c := range s.chans {
		if c.Port == port && c.Proto == proto {
			return true
		}
	}
	return false
}

// Expose listens on addr (e.g. "127.0.0.1:5900"; port 0 picks one) and gives each accepted
// connection a desktop stream of its own on the TCP channel on port (Attach), so that a viewer
// such as vncviewer or xfreerdp uses the tunnel. A connection accepted while the session
// reconnects waits up to 10s for it. It returns the listening address; Close closes the
// listener.
func (s *Session) Expose(addr string, port uint16) (net.Addr, error) {
	if !s.hasChannel(port, "tcp") {
		return nil, fmt.Errorf("%w: %d/tcp", ErrNoChannel, port)
	}
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("exposing %d/tcp: %w", port, err)
	}
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		ln.Close()
		return nil, ErrClosed
	}
	s.listeners = append(s.listeners, listener{ln: ln, port: port})
	s.wg.Add(1)
	s.mu.Unlock()
	go func() {
		defer s.wg.Done()
		var backoff time.Duration
		for {
			c, err := ln.Accept()
			if err != nil {
				var ne net.Error
				if errors.As(err, &ne) && ne.Timeout() && s.ctx.Err() == nil {
					backoff = min(max(2*backoff, 5*time.Millisecond), time.Second)
					t := time.NewTimer(backoff)
					select {
					case <-s.ctx.Done():
					case <-t.C:
					}
					t.Stop()
					continue
				}
				return
			}
			backoff = 0
			s.wg.Add(1)
			go func() { defer s.wg.Done(); s.serveLocal(c, port) }()
		}
	}()
	return ln.Addr(), nil
}

// udpFlowIdle is how long a local UDP flow keeps ExposeUDP's channel from other senders
// after its last datagram: short, so that a viewer that reconnects from a new port (mstsc
// after a break) gets its UDP transport back within its handshake's time.
const udpFlowIdle = 5 * time.Second

// ExposeUDP listens for UDP on addr and carries one local flow on the UDP channel on port:
// the datagrams of a viewer go out on the channel, and the channel's datagrams come back to
// it. RDP's UDP transport takes it: mstsc sends its UDP to the address and port of its TCP
// connection, so give Expose's address. The machine's end relays one flow to the desktop
// server, so a second sender is dropped while the first has sent in the last 5 s (RDP's
// lossy UDP transport, a flow of its own, then stays on TCP). Datagrams are dropped while
// the session reconnects, as a network would; the viewer's transport sends them again. It
// returns the listening address; Close closes it.
func (s *Session) ExposeUDP(addr string, port uint16) (net.Addr, error) {
	if !s.hasChannel(port, "udp") {
		return nil, fmt.Errorf("%w: %d/udp", ErrNoChannel, port)
	}
	la, err := net.ResolveUDPAddr("udp", addr)
	if err != nil {
		return nil, fmt.Errorf("exposing %d/udp: %w", port, err)
	}
	pc, err := net.ListenUDP("udp", la)
	if err != nil {
		return nil, fmt.Errorf("exposing %d/udp: %w", port, err)
	}
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		pc.Close()
		return nil, ErrClosed
	}
	s.listeners = append(s.listeners, listener{ln: pc, port: port})
	s.wg.Add(2)
	s.mu.Unlock()
	var (
		mu   sync.Mutex // guards peer, last
		peer netip.AddrPort
		last time.Time
	)
	go func() {
		defer s.wg.Done()
		buf := make([]byte, 64<<10)
		for {
			n, from, err := pc.ReadFromUDPAddrPort(buf)
			if err != nil {
				return
			}
			now := s.now()
			mu.Lock()
			mine := !peer.IsValid() || peer == from || now.Sub(last) > udpFlowIdle
			if mine {
				peer, last = from, now
			}
			mu.Unlock()
			if mine {
				s.WriteDatagram(port, buf[:n]) // down or too large: lost, as on a network
			}
		}
	}()
	go func() {
		defer s.wg.Done()
		for {
			b, err := s.ReadDatagram(s.ctx, port)
			if err != nil {
				return
			}
			mu.Lock()
			to := peer
			mu.Unlock()
			if to.IsValid() {
				pc.WriteToUDPAddrPort(b, to)
			}
		}
	}()
	return pc.LocalAddr(), nil
}

// serveLocal gives an accepted connection its desktop stream.
func (s *Session) serveLocal(c net.Conn, port uint16) {
	ctx, cancel := context.WithTimeout(s.ctx, 10*time.Second)
	defer cancel()
	if _, err := s.openStream(ctx, port, c); err != nil {
		s.log.Warn("local connection refused", "port", port, "client", c.RemoteAddr().String(), "reason", err)
		c.Close()
		return
	}
	s.log.Info("viewer connected", "port", port, "client", c.RemoteAddr().String())
}

// WriteDatagram sends b on the UDP channel on port. Datagrams starting with "FDT1" or "FDKA"
// are reserved for tickets and keepalives.
func (s *Session) WriteDatagram(port uint16, b []byte) error {
	s.mu.Lock()
	l, closed := s.link, s.closed
	s.mu.Unlock()
	switch {
	case closed:
		return ErrClosed
	case l == nil:
		return ErrDown
	}
	u := l.udp[port]
	if u == nil {
		return fmt.Errorf("%w: %d/udp", ErrNoChannel, port)
	}
	_, err := u.conn.Write(b)
	return err
}

// ReadDatagram returns the next datagram received on the UDP channel on port (keepalive
// echoes excluded). The queue holds 256 datagrams across reconnects; more are dropped.
func (s *Session) ReadDatagram(ctx context.Context, port uint16) ([]byte, error) {
	q := s.udpIn[port]
	if q == nil {
		return nil, fmt.Errorf("%w: %d/udp", ErrNoChannel, port)
	}
	select {
	case b := <-q:
		return b, nil
	case <-ctx.Done():
		return nil, ctx.Err()
	case <-s.done:
		return nil, s.Err()
	}
}

// EchoUDP proves the UDP channel on port against an echoing machine: it sends count numbered
// datagrams of size bytes, one at a time, each with a few tries, and checks that each comes
// back unchanged. Other datagrams queued for the port are discarded.
func (s *Session) EchoUDP(ctx context.Context, port uint16, count, size int) error {
	size = max(size, 24)
	nonce := make([]byte, 16)
	rand.Read(nonce)
	for i := 0; i < count; i++ {
		msg := make([]byte, size)
		rand.Read(msg)
		copy(msg, "echo")
		copy(msg[4:], nonce)
		msg[20], msg[21], msg[22], msg[23] = byte(i>>24), byte(i>>16), byte(i>>8), byte(i)
		ok := false
		for try := 0; try < 5 && !ok; try++ {
			if err := s.WriteDatagram(port, msg); err != nil {
				return fmt.Errorf("echo %d/udp: %w", port, err)
			}
			rctx, cancel := context.WithTimeout(ctx, 300*time.Millisecond)
			for !ok {
				b, err := s.ReadDatagram(rctx, port)
				if err != nil {
					break
				}
				ok = bytes.Equal(b, msg)
			}
			cancel()
			if ctx.Err() != nil {
				return fmt.Errorf("echo %d/udp: %w", port, ctx.Err())
			}
		}
		if !ok {
			return fmt.Errorf("echo %d/udp: datagram %d did not come back", port, i)
		}
	}
	return nil
}
