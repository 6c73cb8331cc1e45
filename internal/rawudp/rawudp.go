//go:build linux && (amd64 || arm64)

// Package rawudp is a UDP socket for one worker that blocks in the kernel: made with system
// calls, blocking, never registered with the Go poller, and read and written in batches with
// recvmmsg and sendmmsg as raw system calls.
//
// Why: at a steady packet rate each datagram finds a server idle, and through Go's poller every
// one costs a park in epoll_wait, a wake-up and a hand-over between threads; on a
// paravirtualised host those context switches cost more than the work. A thread blocked in
// recvmmsg is woken by the kernel alone, as in a C server. The socket must not be in the
// poller's epoll set at all, or every datagram would also wake the poller's thread.
//
// The cost: a goroutine blocked in a raw system call keeps its P, and the runtime cannot stop
// it for the garbage collector until the call returns. Hence the receive timeout (RcvTimeout):
// the signal the runtime sends to preempt a goroutine makes a receive with SO_RCVTIMEO, and a
// Pause, return EINTR at once (signal(7)); the timeout bounds the wait if a signal is missed,
// and the worker then yields. And hence a process that runs such workers should add a P for
// each, so that the rest of the process keeps every CPU's.
package rawudp

import (
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

// RcvTimeout bounds one blocking receive.
const RcvTimeout = 10 * time.Millisecond

// Conn is a blocking UDP socket outside the Go poller.
type Conn struct {
	f      *os.File        // owns the descriptor
	rc     syscall.RawConn // f's, for the workers' system calls
	local  netip.AddrPort
	closed atomic.Bool
}

// Supported says whether this platform has blocking workers (64-bit Linux).
const Supported = true

// Usable reports whether a socket for ap would be a Conn: an IP address that is neither
// unspecified nor zoned (those are served through the Go poller).
func Usable(ap netip.AddrPort) bool {
	return ap.Addr().IsValid() && !ap.Addr().IsUnspecified() && ap.Addr().Zone() == ""
}

// Listen opens a blocking UDP socket bound to ap (an IPv6 socket is IPv6-only). buf, when
// positive, sets SO_RCVBUF and SO_SNDBUF.
func Listen(ap netip.AddrPort, buf int) (*Conn, error) {
	return open(ap, buf, true)
}

// Dial opens a blocking UDP socket connected to remote, on an address the kernel picks, for
// a worker that reads it without waiting (Receiver.ReadFrom, after an Epoll says it has
// datagrams) and writes it with a Sender. buf is as for Listen.
func Dial(remote netip.AddrPort, buf int) (*Conn, error) {
	return open(remote, buf, false)
}

// open makes the socket of Listen (bind to ap) or Dial (connect to ap).
func open(ap netip.AddrPort, buf int, listen bool) (*Conn, error) {
	family, sa, err := sockaddr.From(ap)
	if err != nil {
		return nil, err
	}
	fd, err := unix.Socket(family, unix.SOCK_DGRAM|unix.SOCK_CLOEXEC, unix.IPPROTO_UDP)
	if err != nil {
		return nil, os.NewSyscallError("socket", err)
	}
	fail := func(call string, err error) (*Conn, error) {
		unix.Close(fd)
		return nil, os.NewSyscallError(call, err)
	}
	if listen {
		tv := unix.NsecToTimeval(RcvTimeout.Nanoseconds())
		if err := unix.SetsockoptTimeval(fd, unix.SOL_SOCKET, unix.SO_RCVTIMEO, &tv); err != nil {
			return fail("setsockopt", err)
		}
		if family == unix.AF_INET6 {
			if err := unix.SetsockoptInt(fd, unix.IPPROTO_IPV6, unix.IPV6_V6ONLY, 1); err != nil {
				return fail("setsockopt", err)
			}
		}
	}
	if buf > 0 {
		// Best effort, like net.UDPConn.SetReadBuffer: the kernel caps it at rmem_max.
		unix.SetsockoptInt(fd, unix.SOL_SOCKET, unix.SO_RCVBUF, buf)
		unix.SetsockoptInt(fd, unix.SOL_SOCKET, unix.SO_SNDBUF, buf)
	}
	if listen {
		if err := unix.Bind(fd, sa); err != nil {
			return fail("bind", err)
		}
	} else if err := unix.Connect(fd, sa); err != nil {
		return fail("connect", err)
	}
	bound, err := unix.Getsockname(fd)
	if err != nil {
		return fail("getsockname", err)
	}
	local := sockaddr.AddrPort(bound)
	// A blocking descriptor: os.NewFile leaves it out of the poller.
	f := os.NewFile(uintptr(fd), "udp:"+local.String())
	rc, err := f.SyscallConn()
	if err != nil {
		f.Close()
		return nil, err
	}
	return &Conn{f: f, rc: rc, local: local}, nil
}

// Local returns the bound address.
func (c *Conn) Local() netip.AddrPort { return c.local }

// family is the socket's address family: AF_INET6 only for an IPv6 address, as
// sockaddr.From chose when the socket was made.
func (c *Conn) family() int {
	if c.local.Addr().Unmap().Is4() {
		return unix.AF_INET
	}
	return unix.AF_INET6
}

// LocalAddr returns the bound address as a net.Addr.
func (c *Conn) LocalAddr() net.Addr { return net.UDPAddrFromAddrPort(c.local) }

// RawConn gives the descriptor to system calls; it keeps the descriptor open during a call.
func (c *Conn) RawConn() syscall.RawConn { return c.rc }

// Close closes the socket: at once for new calls, while a call in progress (a worker blocked
// in a receive) keeps the descriptor until it returns, so its number cannot be reused under
// the call.
func (c *Conn) Close() error {
	c.closed.Store(true)
	return c.f.Close()
}

// Mmsghdr is struct mmsghdr of 64-bit Linux.
type Mmsghdr struct {
	Hdr syscall.Msghdr
	N   uint32
	_   [4]byte
}

// Recvmmsg reads up to len(hdrs) datagrams from fd.
func Recvmmsg(fd uintptr, hdrs []Mmsghdr, flags uintptr) (int, syscall.Errno) {
	r, _, e := syscall.RawSyscall6(unix.SYS_RECVMMSG, fd, uintptr(unsafe.Pointer(&hdrs[0])), uintptr(len(hdrs)), flags, 0, 0)
	return int(r), e
}

// Sendmmsg sends up to len(hdrs) datagrams on fd.
func Sendmmsg(fd uintptr, hdrs []Mmsghdr, flags uintptr) (int, syscall.Errno) {
	r, _, e := syscall.RawSyscall6(unix.SYS_SENDMMSG, fd, uintptr(unsafe.Pointer(&hdrs[0])), uintptr(len(hdrs)), flags, 0, 0)
	return int(r), e
}

// SendmmsgWait is Sendmmsg for a goroutine that may wait for room in the socket's send
// buffer: without MSG_DONTWAIT the call blocks, and the runtime is told of it, so the P is
// handed on while it waits.
func SendmmsgWait(fd uintptr, hdrs []Mmsghdr) (int, syscall.Errno) {
	r, _, e := syscall.Syscall6(unix.SYS_SENDMMSG, fd, uintptr(unsafe.Pointer(&hdrs[0])), uintptr(len(hdrs)), 0, 0, 0)
	return int(r), e
}

// Pause sleeps for d in the kernel, keeping the P; the runtime's preemption signal ends it
// early.
func Pause(d *unix.Timespec) {
	syscall.RawSyscall(unix.SYS_NANOSLEEP, uintptr(unsafe.Pointer(d)), 0, 0)
}
