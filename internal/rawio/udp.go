//go:build linux && (amd64 || arm64)

package rawio

import (
	"net/netip"
	"os"
	"syscall"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"
)

// RcvTimeout bounds one blocking receive.
const RcvTimeout = 10 * time.Millisecond

// Supported says whether this platform has blocking workers (64-bit Linux).
const Supported = true

// Usable reports whether a UDP socket for ap would be a blocking Sock: an IP address that is neither
// unspecified nor zoned (those are served through the Go poller).
func Usable(ap netip.AddrPort) bool {
	return ap.Addr().IsValid() && !ap.Addr().IsUnspecified() && ap.Addr().Zone() == ""
}

// ListenUDP opens a blocking UDP socket bound to ap (an IPv6 socket is IPv6-only). buf, when
// positive, sets SO_RCVBUF and SO_SNDBUF.
func ListenUDP(ap netip.AddrPort, buf int) (*Sock, error) {
	return open(ap, buf, true)
}

// DialUDP opens a blocking UDP socket connected to remote, on an address the kernel picks,
// for a worker that reads it without waiting (Receiver.ReadFrom, after a worker's Poll says
// it has datagrams) and writes it with a Sender. buf is as for ListenUDP.
func DialUDP(remote netip.AddrPort, buf int) (*Sock, error) {
	return open(remote, buf, false)
}

// open makes the socket of ListenUDP (bind to ap) or DialUDP (connect to ap).
func open(ap netip.AddrPort, buf int, listen bool) (*Sock, error) {
	family, sa, err := From(ap)
	if err != nil {
		return nil, err
	}
	fd, err := unix.Socket(family, unix.SOCK_DGRAM|unix.SOCK_CLOEXEC, unix.IPPROTO_UDP)
	if err != nil {
		return nil, os.NewSyscallError("socket", err)
	}
	fail := func(call string, err error) (*Sock, error) {
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
	return &Sock{fd: fd, local: AddrPort(bound)}, nil
}

// Local returns the bound address of a UDP Sock or a Listener's; the zero AddrPort for other
// TCP Socks (see LocalAddr).
func (s *Sock) Local() netip.AddrPort { return s.local }

// family is a UDP socket's address family: AF_INET6 only for an IPv6 address, as From chose
// when the socket was made.
func (s *Sock) family() int {
	if s.local.Addr().Unmap().Is4() {
		return unix.AF_INET
	}
	return unix.AF_INET6
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
