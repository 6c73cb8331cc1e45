package client

import (
	"bytes"
	"context"
	"crypto/rand"
	"crypto/sha256"
	"errors"
	"fmt"
	"io"
	"net"
	"time"
)

// listener is a local port exposed by Expose.
type listener struct {
	ln   net.Listener
	port uint16
}

// Attach returns a connection riding the TCP channel on port: what is written to it goes
// through the tunnel, what the machine sends comes out of it. One connection rides a channel at
// a time (ErrBusy otherwise); closing it frees the channel and keeps the tunnel open. A cut
// closes it: bytes in flight are lost, so Attach again after WaitUp. While the session is
// reconnecting Attach returns ErrDown.
func (s *Session) Attach(port uint16) (net.Conn, error) {
	a, b := net.Pipe()
	t, err := s.attach(port, b)
	if err != nil {
		a.Close()
		b.Close()
		return nil, err
	}
	return &attached{Conn: a, detach: func() { t.detach(b) }}, nil
}

// attached is the caller's end of an attached pipe; closing it frees the channel at once.
type attached struct {
	net.Conn
	detach func()
}

// Close detaches from the channel and closes the pipe.
func (a *attached) Close() error {
	a.detach()
	return a.Conn.Close()
}

// attach makes local ride the TCP channel on port and starts carrying its bytes to the tunnel.
func (s *Session) attach(port uint16, local net.Conn) (*tcpLink, error) {
	if !s.hasChannel(port, "tcp") {
		return nil, fmt.Errorf("%w: %d/tcp", ErrNoChannel, port)
	}
	s.mu.Lock()
	l, closed := s.link, s.closed
	if closed || l == nil {
		s.mu.Unlock()
		if closed {
			return nil, ErrClosed
		}
		return nil, ErrDown
	}
	s.wg.Add(1) // under mu, so that Close waits for the pump
	s.mu.Unlock()
	t := l.tcp[port]
	t.mu.Lock()
	err := error(nil)
	switch {
	case l.down.Load():
		err = ErrDown
	case t.local != nil:
		err = ErrBusy
	default:
		t.local = local
	}
	t.mu.Unlock()
	if err != nil {
		s.wg.Done()
		return nil, err
	}
	go func() {
		defer s.wg.Done()
		buf := make([]byte, 32<<10)
		for {
			n, err := local.Read(buf)
			if n > 0 {
				if _, werr := t.conn.Write(buf[:n]); werr != nil {
					s.fail(l, fmt.Errorf("%d/tcp: %w", port, werr))
					t.detach(local)
					return
				}
			}
			if err != nil {
				t.detach(local)
				return
			}
		}
	}()
	return t, nil
}

func (s *Session) hasChannel(port uint16, proto string) bool {
	for _, c := range s.chans {
		if c.Port == port && c.Proto == proto {
			return true
		}
	}
	return false
}

// Expose listens on addr (e.g. "127.0.0.1:2222"; port 0 picks one) and lets each accepted
// connection ride the TCP channel on port, so that a program such as nc or ssh uses the
// tunnel. One local connection rides the channel at a time: a second one is closed at once.
// A connection accepted while the session reconnects waits up to 5s for it. It returns the
// listening address; Close closes the listener.
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
			s.serveLocal(c, port)
		}
	}()
	return ln.Addr(), nil
}

// serveLocal attaches an accepted connection, waiting briefly when the session is down.
func (s *Session) serveLocal(c net.Conn, port uint16) {
	_, err := s.attach(port, c)
	if errors.Is(err, ErrDown) {
		ctx, cancel := context.WithTimeout(s.ctx, 5*time.Second)
		if s.WaitUp(ctx) == nil {
			_, err = s.attach(port, c)
		}
		cancel()
	}
	if err != nil {
		s.log.Info("local connection refused", "port", port, "client", c.RemoteAddr().String(), "reason", err)
		c.Close()
	}
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

// EchoTCP proves the TCP channel on port against an echoing machine (the agent's display
// simulator): it sends n random bytes, reads them back and compares their SHA-256. It attaches
// to the channel for the duration.
func (s *Session) EchoTCP(ctx context.Context, port uint16, n int) error {
	c, err := s.Attach(port)
	if err != nil {
		return err
	}
	defer c.Close()
	if dl, ok := ctx.Deadline(); ok {
		c.SetDeadline(dl)
	}
	stop := context.AfterFunc(ctx, func() { c.SetDeadline(time.Unix(1, 0)) })
	defer stop()
	data := make([]byte, n)
	rand.Read(data)
	werr := make(chan error, 1)
	go func() { _, err := c.Write(data); werr <- err }()
	got := make([]byte, n)
	_, rerr := io.ReadFull(c, got)
	c.Close()
	if err := <-werr; err != nil {
		return fmt.Errorf("echo %d/tcp: writing: %w", port, err)
	}
	if rerr != nil {
		return fmt.Errorf("echo %d/tcp: reading: %w", port, rerr)
	}
	if sha256.Sum256(got) != sha256.Sum256(data) {
		return fmt.Errorf("echo %d/tcp: %d bytes came back different", port, n)
	}
	return nil
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
