package proxy

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/netip"
	"os"
	"sync/atomic"
	"syscall"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"

	"github.com/frontdoor-vdi/frontdoor/internal/sockaddr"
)

// sock is one TCP socket of a proxied connection: an accepted *net.TCPConn, or a backend
// socket that the proxy connects itself (socket and connect) and that waits in the runtime's
// poller through an os.File, which spares the calls package net makes on every dial (bind,
// getsockname, getpeername, and a wait in the poller before it checks the connect).
type sock struct {
	f      file
	rc     syscall.RawConn
	closed atomic.Bool // Close was called: errors after it read as net.ErrClosed
}

// file is what sock needs of *net.TCPConn and *os.File.
type file interface {
	io.ReadWriteCloser
	SetReadDeadline(t time.Time) error
	SetWriteDeadline(t time.Time) error
	SyscallConn() (syscall.RawConn, error)
}

var (
	_ file = (*net.TCPConn)(nil)
	_ file = (*os.File)(nil)
)

// newSock wraps the nonblocking socket fd; on error fd is closed.
func newSock(fd int) (*sock, error) {
	return sockOf(os.NewFile(uintptr(fd), "tcp"))
}

// sockOf wraps f; on error f is closed.
func sockOf(f file) (*sock, error) {
	rc, err := f.SyscallConn()
	if err != nil {
		f.Close()
		return nil, err
	}
	return &sock{f: f, rc: rc}, nil
}

// errOf returns err, or net.ErrClosed once the socket was closed (the poller reports a
// file's closing with an error of its own).
func (s *sock) errOf(err error) error {
	if err != nil && s.closed.Load() {
		return net.ErrClosed
	}
	return err
}

func (s *sock) Read(p []byte) (int, error) {
	n, err := s.f.Read(p)
	if err == io.EOF {
		return n, err
	}
	return n, s.errOf(err)
}

func (s *sock) Write(p []byte) (int, error) {
	n, err := s.f.Write(p)
	return n, s.errOf(err)
}

// writeAll writes p, waiting for room when the socket's buffer is full. It makes raw
// write calls, which do not block on the nonblocking socket.
func (s *sock) writeAll(p []byte) (int, error) {
	var done int
	var werr error
	err := s.rc.Write(func(fd uintptr) bool {
		for done < len(p) {
			n, _, e := unix.RawSyscall(unix.SYS_WRITE, fd, uintptr(unsafe.Pointer(&p[done])), uintptr(len(p)-done))
			switch e {
			case 0:
				done += int(n)
			case unix.EINTR:
			case unix.EAGAIN:
				return false
			default:
				werr = os.NewSyscallError("write", e)
				return true
			}
		}
		return true
	})
	if err != nil {
		return done, s.errOf(err)
	}
	return done, werr
}

// Close closes the socket; it is safe to call more than once and from any goroutine.
func (s *sock) Close() error {
	s.closed.Store(true)
	return s.f.Close()
}

// SetReadDeadline sets the deadline of reads and of waits for readability.
func (s *sock) SetReadDeadline(t time.Time) error { return s.f.SetReadDeadline(t) }

// CloseWrite sends a FIN (shutdown(SHUT_WR)).
func (s *sock) CloseWrite() error {
	var err error
	if cerr := s.rc.Control(func(fd uintptr) { err = unix.Shutdown(int(fd), unix.SHUT_WR) }); cerr != nil {
		return s.errOf(cerr)
	}
	return err
}

// resetOnClose makes the coming Close send a reset instead of a FIN (SO_LINGER 0).
func (s *sock) resetOnClose() {
	s.rc.Control(func(fd uintptr) {
		unix.SetsockoptLinger(int(fd), unix.SOL_SOCKET, unix.SO_LINGER, &unix.Linger{Onoff: 1})
	})
}

// localAddr returns the socket's own address.
func (s *sock) localAddr() (netip.AddrPort, error) {
	if c, ok := s.f.(*net.TCPConn); ok {
		return c.LocalAddr().(*net.TCPAddr).AddrPort(), nil
	}
	var sa unix.Sockaddr
	var err error
	if cerr := s.rc.Control(func(fd uintptr) { sa, err = unix.Getsockname(int(fd)) }); cerr != nil {
		return netip.AddrPort{}, s.errOf(cerr)
	}
	if err != nil {
		return netip.AddrPort{}, os.NewSyscallError("getsockname", err)
	}
	return addrPortOf(sa), nil
}

// addrPortOf converts an IPv4 or IPv6 socket address; IPv4-mapped IPv6 addresses are unmapped.
func addrPortOf(sa unix.Sockaddr) netip.AddrPort {
	switch a := sa.(type) {
	case *unix.SockaddrInet4:
		return netip.AddrPortFrom(netip.AddrFrom4(a.Addr), uint16(a.Port))
	case *unix.SockaddrInet6:
		return netip.AddrPortFrom(netip.AddrFrom16(a.Addr).Unmap(), uint16(a.Port))
	}
	return netip.AddrPort{}
}

// setNoDelay turns Nagle's algorithm off on a socket.
func setNoDelay(fd int) error {
	return os.NewSyscallError("setsockopt", unix.SetsockoptInt(fd, unix.IPPROTO_TCP, unix.TCP_NODELAY, 1))
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

// errConnectTimeout is a dial that did not complete within its timeout.
var errConnectTimeout = errors.New("connect timeout")

// dialSock connects to addr within timeout or until ctx is done. A loopback connect is
// usually complete when connect(2) returns EINPROGRESS, so the state is checked at once
// (one getsockopt) before waiting for writability.
func dialSock(ctx context.Context, addr netip.AddrPort, timeout, keepAlive time.Duration) (*sock, error) {
	family, sa, err := sockaddr.From(addr)
	if err != nil {
		return nil, err
	}
	fd, err := unix.Socket(family, unix.SOCK_STREAM|unix.SOCK_NONBLOCK|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		return nil, os.NewSyscallError("socket", err)
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
	for {
		err = unix.Connect(fd, sa)
		if err != unix.EINTR {
			break
		}
	}
	pending := false
	switch err {
	case nil, unix.EISCONN:
	case unix.EINPROGRESS, unix.EALREADY:
		pending = true
	default:
		unix.Close(fd)
		return nil, os.NewSyscallError("connect", err)
	}
	s, err := newSock(fd)
	if err != nil {
		return nil, err
	}
	if !pending {
		return s, nil
	}
	var state byte
	var cerr error
	check := func(fd uintptr) bool {
		state, cerr = tcpState(fd)
		return cerr != nil || state != stateSynSent
	}
	if err := s.rc.Control(func(fd uintptr) { check(fd) }); err != nil {
		s.Close()
		return nil, err
	}
	if cerr == nil && state == stateSynSent {
		// Still in the handshake: wait for writability, bounded by the timeout and ctx.
		s.f.SetWriteDeadline(time.Now().Add(timeout))
		cut := make(chan struct{})
		stop := context.AfterFunc(ctx, func() {
			s.f.SetWriteDeadline(time.Unix(1, 0))
			close(cut)
		})
		err := s.rc.Write(check)
		if !stop() {
			<-cut // the cut has run or is running: let it finish before the deadline is cleared
			if err == nil {
				err = ctx.Err()
			}
		}
		s.f.SetWriteDeadline(time.Time{})
		if err != nil {
			s.Close()
			if errors.Is(err, os.ErrDeadlineExceeded) {
				if ctx.Err() != nil {
					return nil, ctx.Err()
				}
				return nil, errConnectTimeout
			}
			return nil, err
		}
	}
	// A connect that failed leaves the socket closed; one that succeeded is established, or
	// already past it when the backend sent its last bytes and a FIN at once.
	if cerr == nil && state == stateClose {
		cerr = soError(s)
	}
	if cerr != nil {
		s.Close()
		return nil, cerr
	}
	return s, nil
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
	_, _, e := unix.Syscall6(unix.SYS_GETSOCKOPT, fd, unix.IPPROTO_TCP, unix.TCP_INFO,
		uintptr(unsafe.Pointer(&b[0])), uintptr(unsafe.Pointer(&l)), 0)
	if e != 0 {
		return 0, os.NewSyscallError("getsockopt", e)
	}
	return b[0], nil
}

// soError returns the error of a failed connect (SO_ERROR), or a generic one if the socket
// holds none.
func soError(s *sock) error {
	var v int
	var err error
	if cerr := s.rc.Control(func(fd uintptr) {
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
