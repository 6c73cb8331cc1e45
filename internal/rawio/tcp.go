//go:build linux && (amd64 || arm64)

package rawio

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/netip"
	"os"
	"syscall"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"
)

// Listener is a listening TCP socket, accepted on with raw calls and waiting in a dispatching
// Poll. Accepted sockets are nonblocking from the start and inherit the listener's
// TCP_NODELAY and keepalive settings, which spares the calls package net makes per connection
// (setsockopt, getsockname) and those of wrapping the socket in the runtime's netpoller.
type Listener struct {
	s  *Sock                 // waits for connections in the Poll
	fn func(fd uintptr) bool // accept bound once

	// Results of fn; owned by the accept loop.
	fd   int
	peer unix.RawSockaddrInet6
	err  error
}

// listenBacklog is the listen(2) backlog; the kernel caps it at net.core.somaxconn.
const listenBacklog = 65535

// ListenTCP opens a listening socket on addr with SO_REUSEADDR, TCP_NODELAY and, if
// keepAlive > 0, keepalive probes; if deferAccept > 0, a connection is accepted once the client
// has sent bytes or about deferAccept has passed (TCP_DEFER_ACCEPT). Like package net, it
// listens on a wildcard address with a dual-stack IPv6 socket where the host has IPv6.
func ListenTCP(p *Poll, addr netip.AddrPort, keepAlive, deferAccept time.Duration) (*Listener, error) {
	ip := addr.Addr().Unmap()
	family := unix.AF_INET
	if ip.Is6() {
		family = unix.AF_INET6
	}
	wildcard := ip.IsUnspecified()
	fd, err := unix.Socket(family, unix.SOCK_STREAM|unix.SOCK_NONBLOCK|unix.SOCK_CLOEXEC, 0)
	if wildcard && family == unix.AF_INET {
		if fd6, err6 := unix.Socket(unix.AF_INET6, unix.SOCK_STREAM|unix.SOCK_NONBLOCK|unix.SOCK_CLOEXEC, 0); err6 == nil {
			if err == nil {
				unix.Close(fd)
			}
			fd, err, family = fd6, nil, unix.AF_INET6
			ip = netip.IPv6Unspecified()
		}
	}
	if err != nil {
		return nil, os.NewSyscallError("socket", err)
	}
	fail := func(call string, err error) (*Listener, error) {
		unix.Close(fd)
		return nil, os.NewSyscallError(call, err)
	}
	if err := unix.SetsockoptInt(fd, unix.SOL_SOCKET, unix.SO_REUSEADDR, 1); err != nil {
		return fail("setsockopt", err)
	}
	if family == unix.AF_INET6 && wildcard {
		if err := unix.SetsockoptInt(fd, unix.IPPROTO_IPV6, unix.IPV6_V6ONLY, 0); err != nil {
			return fail("setsockopt", err)
		}
	}
	if err := setNoDelay(fd); err != nil {
		unix.Close(fd)
		return nil, err
	}
	if keepAlive > 0 {
		if err := setKeepAlive(fd, keepAlive); err != nil {
			unix.Close(fd)
			return nil, err
		}
	}
	_, sa, err := From(netip.AddrPortFrom(ip, addr.Port()))
	if err != nil {
		unix.Close(fd)
		return nil, err
	}
	if err := unix.Bind(fd, sa); err != nil {
		return fail("bind", err)
	}
	if deferAccept > 0 {
		// Seconds; the kernel waits for the client's first bytes about this long.
		secs := int((deferAccept + time.Second - 1) / time.Second)
		if err := unix.SetsockoptInt(fd, unix.IPPROTO_TCP, unix.TCP_DEFER_ACCEPT, secs); err != nil {
			return fail("setsockopt", err)
		}
	}
	if err := unix.Listen(fd, listenBacklog); err != nil {
		return fail("listen", err)
	}
	bound, err := unix.Getsockname(fd)
	if err != nil {
		return fail("getsockname", err)
	}
	l := &Listener{s: NewSock(p, fd)}
	l.s.local = Unmap(AddrPort(bound))
	l.fn = l.accept
	return l, nil
}

// Addr returns the bound address.
func (l *Listener) Addr() netip.AddrPort { return l.s.local }

// Close closes the socket; a waiting Accept returns net.ErrClosed.
func (l *Listener) Close() error { return l.s.Close() }

// Accept returns the next connection's socket, in the listener's Poll, and its peer;
// net.ErrClosed once the listener is closed. One goroutine at a time may call it.
func (l *Listener) Accept() (*Sock, netip.AddrPort, error) {
	l.fd, l.err = -1, nil
	if err := l.s.ReadWith(l.fn); err != nil {
		return nil, netip.AddrPort{}, err
	}
	if l.err != nil {
		return nil, netip.AddrPort{}, l.err
	}
	peer, _ := FromRaw(&l.peer)
	return NewSock(l.s.p, l.fd), Unmap(peer), nil
}

func (l *Listener) accept(fd uintptr) bool {
	for {
		n := uint32(unix.SizeofSockaddrInet6)
		r, _, e := unix.RawSyscall6(unix.SYS_ACCEPT4, fd, uintptr(unsafe.Pointer(&l.peer)),
			uintptr(unsafe.Pointer(&n)), unix.SOCK_NONBLOCK|unix.SOCK_CLOEXEC, 0, 0)
		switch e {
		case 0:
			l.fd = int(r)
			return true
		case unix.EINTR, unix.ECONNABORTED:
			continue
		case unix.EAGAIN:
			return false
		}
		l.err = os.NewSyscallError("accept4", e)
		return true
	}
}

// setNoDelay turns Nagle's algorithm off on a socket.
func setNoDelay(fd int) error {
	one := int32(1)
	_, _, e := unix.RawSyscall6(unix.SYS_SETSOCKOPT, uintptr(fd), unix.IPPROTO_TCP, unix.TCP_NODELAY,
		uintptr(unsafe.Pointer(&one)), 4, 0)
	if e != 0 {
		return os.NewSyscallError("setsockopt", e)
	}
	return nil
}

// setKeepAlive turns on keepalive probes after d of quiet, then every 15s, 9 at most (the
// intervals and count of package net).
func setKeepAlive(fd int, d time.Duration) error {
	secs := max(int((d+time.Second-1)/time.Second), 1)
	for _, o := range []struct{ level, opt, v int }{
		{unix.SOL_SOCKET, unix.SO_KEEPALIVE, 1},
		{unix.IPPROTO_TCP, unix.TCP_KEEPIDLE, secs},
		{unix.IPPROTO_TCP, unix.TCP_KEEPINTVL, 15},
		{unix.IPPROTO_TCP, unix.TCP_KEEPCNT, 9},
	} {
		if err := unix.SetsockoptInt(fd, o.level, o.opt, o.v); err != nil {
			return os.NewSyscallError("setsockopt", err)
		}
	}
	return nil
}

// ErrConnectTimeout is a dial that did not complete within its timeout.
var ErrConnectTimeout = errors.New("connect timeout")

// DialTCP connects to addr within timeout or until ctx is done, and sends first on the new
// connection. A loopback connect is usually complete when connect(2) returns EINPROGRESS:
// a write of first that succeeds at once shows it (a socket still in the handshake would
// refuse it with EAGAIN), else the state is checked (one getsockopt) before waiting for
// writability. It returns how many bytes of first it sent; the caller sends the rest.
func DialTCP(ctx context.Context, p *Poll, addr netip.AddrPort, timeout, keepAlive time.Duration, first []byte) (*Sock, int, error) {
	var raw unix.RawSockaddrInet6
	family, salen, err := Raw(addr, &raw)
	if err != nil {
		return nil, 0, err
	}
	sa := unsafe.Pointer(&raw)
	r, _, e := unix.RawSyscall(unix.SYS_SOCKET, uintptr(family), unix.SOCK_STREAM|unix.SOCK_NONBLOCK|unix.SOCK_CLOEXEC, 0)
	if e != 0 {
		return nil, 0, os.NewSyscallError("socket", e)
	}
	fd := int(r)
	if err := setNoDelay(fd); err != nil {
		unix.Close(fd)
		return nil, 0, err
	}
	if keepAlive > 0 {
		if err := setKeepAlive(fd, keepAlive); err != nil {
			unix.Close(fd)
			return nil, 0, err
		}
	}
	for {
		// Not a raw call: the search for a free local port can take long when ports run short.
		_, _, e = unix.Syscall(unix.SYS_CONNECT, uintptr(fd), uintptr(sa), uintptr(salen))
		if e != unix.EINTR {
			break
		}
	}
	pending := false
	switch e {
	case 0, unix.EISCONN:
	case unix.EINPROGRESS, unix.EALREADY:
		pending = true
	default:
		unix.Close(fd)
		return nil, 0, os.NewSyscallError("connect", e)
	}
	s := NewSock(p, fd)
	if !pending {
		return s, 0, nil
	}
	if len(first) > 0 {
		n, _, e := unix.RawSyscall6(unix.SYS_SENDTO, uintptr(fd), uintptr(unsafe.Pointer(&first[0])),
			uintptr(len(first)), unix.MSG_NOSIGNAL, 0, 0)
		switch e {
		case 0:
			return s, int(n), nil
		case unix.EAGAIN:
			// Still in the handshake.
		default:
			s.Close()
			return nil, 0, os.NewSyscallError("connect", e)
		}
	}
	var state byte
	var cerr error
	check := func(fd uintptr) bool {
		state, cerr = tcpState(fd)
		return cerr != nil || state != stateSynSent
	}
	if err := s.Control(func(fd uintptr) { check(fd) }); err != nil {
		s.Close()
		return nil, 0, err
	}
	if cerr == nil && state == stateSynSent {
		// Still in the handshake: wait for writability, bounded by the timeout and ctx.
		s.SetWriteDeadline(time.Now().Add(timeout))
		cut := make(chan struct{})
		stop := context.AfterFunc(ctx, func() {
			s.SetWriteDeadline(time.Unix(1, 0))
			close(cut)
		})
		err := s.WriteWith(check)
		if !stop() {
			<-cut // the cut has run or is running: let it finish before the deadline is cleared
			if err == nil {
				err = ctx.Err()
			}
		}
		s.SetWriteDeadline(time.Time{})
		if err != nil {
			s.Close()
			if errors.Is(err, os.ErrDeadlineExceeded) {
				if ctx.Err() != nil {
					return nil, 0, ctx.Err()
				}
				return nil, 0, ErrConnectTimeout
			}
			return nil, 0, err
		}
	}
	// A connect that failed leaves the socket closed; one that succeeded is established, or
	// already past it when the backend sent its last bytes and a FIN at once.
	if cerr == nil && state == stateClose {
		cerr = soError(s)
	}
	if cerr != nil {
		s.Close()
		return nil, 0, cerr
	}
	return s, 0, nil
}

// TCP states of tcp_info.tcpi_state.
const (
	stateSynSent = 2
	stateClose   = 7
)

// tcpState returns the socket's TCP state: the first byte of TCP_INFO.
func tcpState(fd uintptr) (byte, error) {
	var b [1]byte
	l := uint32(len(b))
	_, _, e := unix.RawSyscall6(unix.SYS_GETSOCKOPT, fd, unix.IPPROTO_TCP, unix.TCP_INFO,
		uintptr(unsafe.Pointer(&b[0])), uintptr(unsafe.Pointer(&l)), 0)
	if e != 0 {
		return 0, os.NewSyscallError("getsockopt", e)
	}
	return b[0], nil
}

// soError returns the error of a failed connect (SO_ERROR), or a generic one if the socket
// holds none.
func soError(s *Sock) error {
	var v int
	var err error
	if cerr := s.Control(func(fd uintptr) {
		v, err = unix.GetsockoptInt(int(fd), unix.SOL_SOCKET, unix.SO_ERROR)
	}); cerr != nil {
		return cerr
	}
	switch {
	case err != nil:
		return os.NewSyscallError("getsockopt", err)
	case v != 0:
		return os.NewSyscallError("connect", syscall.Errno(v))
	}
	return fmt.Errorf("connect: %w", syscall.ECONNREFUSED)
}

// WaitReadable blocks until s has bytes to read and returns how many are queued, or returns
// io.EOF at the peer's FIN, or the socket's error (including a passed read deadline).
func (s *Sock) WaitReadable() (int, error) {
	var avail int
	var opErr error
	err := s.ReadWith(func(fd uintptr) bool {
		avail, opErr = readable(fd)
		return opErr != unix.EAGAIN
	})
	if err != nil {
		return 0, s.ErrOf(err)
	}
	return avail, opErr
}

// readable returns the bytes queued on a stream socket without consuming them: n > 0, or
// io.EOF at the peer's FIN, or EAGAIN when nothing is there yet, or the socket's error. The
// peek comes first because "nothing yet" is the common answer when a copy loop goes to wait.
func readable(fd uintptr) (int, error) {
	var b byte
	r, _, e := unix.Syscall6(unix.SYS_RECVFROM, fd, uintptr(unsafe.Pointer(&b)), 1,
		unix.MSG_PEEK|unix.MSG_DONTWAIT, 0, 0)
	switch {
	case e == unix.EAGAIN:
		return 0, unix.EAGAIN
	case e != 0:
		return 0, os.NewSyscallError("recvfrom", e)
	case r == 0:
		return 0, io.EOF
	}
	n, err := unix.IoctlGetInt(int(fd), unix.SIOCINQ)
	if err != nil {
		return 0, err
	}
	return max(n, 1), nil
}
