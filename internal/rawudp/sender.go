//go:build linux && (amd64 || arm64)

package rawudp

import (
	"net"
	"net/netip"
	"syscall"
	"unsafe"
)

// Sender is one worker's send side: headers at stable addresses, made once, for batches of
// datagrams sent with sendmmsg.
type Sender struct {
	name syscall.RawSockaddrInet6
	iovs []syscall.Iovec
	hdrs []Mmsghdr

	// What send sets; send is made once because a closure built per call would escape to the
	// heap (Control is an interface method) and allocate on every batch.
	todo  []Mmsghdr
	k     int
	errno syscall.Errno
	send  func(fd uintptr)
}

// NewSender returns a Sender of up to n datagrams per system call.
func NewSender(n int) *Sender {
	s := &Sender{iovs: make([]syscall.Iovec, n), hdrs: make([]Mmsghdr, n)}
	s.send = func(fd uintptr) { s.k, s.errno = SendmmsgWait(fd, s.todo) }
	return s
}

// Send sends bufs, one datagram each, on c to to, or to c's peer when to is the zero
// AddrPort (a Dial'ed Conn). It waits while the socket's send buffer is full (the runtime is
// told, so the P is handed on) and returns the error that made it drop the rest: the
// socket's pending error (such as ECONNREFUSED after an ICMP port unreachable), or
// net.ErrClosed.
func (s *Sender) Send(c *Conn, to netip.AddrPort, bufs [][]byte) error {
	var name *byte
	var namelen uint32
	if to.IsValid() {
		namelen = Sockaddr(to, c.local, &s.name)
		name = (*byte)(unsafe.Pointer(&s.name))
	}
	defer func() {
		for i := range s.iovs {
			s.iovs[i].Base = nil // keep no datagram reachable
		}
		s.todo = nil
	}()
	for len(bufs) > 0 {
		n := min(len(bufs), len(s.hdrs))
		for i, b := range bufs[:n] {
			s.iovs[i].Base = unsafe.SliceData(b)
			s.iovs[i].SetLen(len(b))
			s.hdrs[i].Hdr = syscall.Msghdr{Name: name, Namelen: namelen, Iov: &s.iovs[i], Iovlen: 1}
		}
		s.todo = s.hdrs[:n]
		for len(s.todo) > 0 {
			if err := c.rc.Control(s.send); err != nil || c.closed.Load() {
				return net.ErrClosed
			}
			switch {
			case s.errno == syscall.EINTR:
			case s.errno != 0:
				return s.errno
			case s.k <= 0:
				return syscall.EIO
			default:
				s.todo = s.todo[s.k:]
			}
		}
		bufs = bufs[n:]
	}
	return nil
}
