//go:build linux

package proxy

import (
	"net/netip"
	"os"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"

	"github.com/frontdoor-vdi/frontdoor/internal/sockaddr"
)

// listenSock is a listening TCP socket that the proxy opens and accepts on with raw calls,
// waiting for it in the server's tcpPoll. Accepted sockets are nonblocking from the start
// and inherit the listener's TCP_NODELAY and keepalive settings, which spares the calls
// package net makes per connection (setsockopt, getsockname) and those of wrapping the
// socket in the runtime's netpoller.
type listenSock struct {
	s    *sock                 // waits for connections in the server's tcpPoll
	addr netip.AddrPort        // the bound address
	fn   func(fd uintptr) bool // accept bound once

	// Results of fn; owned by the accept loop.
	fd   int
	peer unix.RawSockaddrInet6
	err  error
}

// listenBacklog is the listen(2) backlog; the kernel caps it at net.core.somaxconn.
const listenBacklog = 65535

// listenTCP opens a listening socket on addr with SO_REUSEADDR, TCP_NODELAY and, if
// keepAlive > 0, keepalive probes; if deferAccept > 0, a connection is accepted once the client
// has sent bytes or about deferAccept has passed (TCP_DEFER_ACCEPT). Like package net, it
// listens on a wildcard address with a dual-stack IPv6 socket where the host has IPv6.
func listenTCP(tp *tcpPoll, addr netip.AddrPort, keepAlive, deferAccept time.Duration) (*listenSock, error) {
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
	fail := func(call string, err error) (*listenSock, error) {
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
	_, sa, err := sockaddr.From(netip.AddrPortFrom(ip, addr.Port()))
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
	l := &listenSock{s: newSock(tp, fd), addr: sockaddr.Unmap(sockaddr.AddrPort(bound))}
	l.fn = l.accept
	return l, nil
}

// Addr returns the bound address.
func (l *listenSock) Addr() netip.AddrPort { return l.addr }

// Close closes the socket; a waiting next returns net.ErrClosed.
func (l *listenSock) Close() error { return l.s.Close() }

// next returns the next connection's socket and its peer; net.ErrClosed once the listener
// is closed.
func (l *listenSock) next() (int, netip.AddrPort, error) {
	l.fd, l.err = -1, nil
	if err := l.s.rc.Read(l.fn); err != nil {
		return -1, netip.AddrPort{}, err
	}
	if l.err != nil {
		return -1, netip.AddrPort{}, l.err
	}
	peer, _ := sockaddr.FromRaw(&l.peer)
	return l.fd, sockaddr.Unmap(peer), nil
}

func (l *listenSock) accept(fd uintptr) bool {
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
