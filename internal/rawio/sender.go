//go:build linux && (amd64 || arm64)

package rawio

import (
	"net"
	"net/netip"
	"syscall"
	"unsafe"

	"golang.org/x/sys/unix"
)

// Sender is one worker's send side: headers at stable addresses, made once, for batches of
// datagrams sent with sendmmsg.
//
// With segmentation offload (UDP GSO, NewSender's gso), a run of datagrams of one size (the
// run's last may be shorter) to one peer goes down the stack as one large datagram that the
// kernel, or the network card, cuts into the run's datagrams at the very end: routing,
// filtering and the device are passed once per run instead of once per datagram. The
// receivers see the same datagrams either way: a run the kernel refuses (its datagrams are
// larger than the route's MTU allows, or the device cannot) is sent again one datagram at a
// time, and no later run is made of datagrams that large.
type Sender struct {
	name unix.RawSockaddrInet6
	iovs []syscall.Iovec
	hdrs []Mmsghdr
	ctrl [][gsoCmsgSpace]byte // per header: its UDP_SEGMENT control message
	runs []int                // per header: how many datagrams it carries
	size []int                // per header: the size of its first datagram
	gso  int                  // the largest datagram made into runs; 0: none

	// What send sets; send is made once because a closure built per call would escape to the
	// heap (Control is an interface method) and allocate on every batch.
	todo  []Mmsghdr
	k     int
	errno syscall.Errno
	send  func(fd uintptr)
}

const (
	gsoCmsgSpace   = 24    // unix.CmsgSpace(2): a cmsghdr and a uint16, aligned
	gsoMaxSegments = 64    // UDP_MAX_SEGMENTS of the kernels that first had UDP GSO (4.18)
	gsoMaxBytes    = 65000 // under the largest UDP payload of IPv4 (65507) and IPv6
)

// NewSender returns a Sender of up to n datagrams per system call, which uses segmentation
// offload when gso is set.
func NewSender(n int, gso bool) *Sender {
	s := &Sender{iovs: make([]syscall.Iovec, n), hdrs: make([]Mmsghdr, n),
		ctrl: make([][gsoCmsgSpace]byte, n), runs: make([]int, n), size: make([]int, n)}
	if gso {
		s.gso = gsoMaxBytes
	}
	for i := range s.ctrl {
		h := (*unix.Cmsghdr)(unsafe.Pointer(&s.ctrl[i][0]))
		h.Level, h.Type = unix.SOL_UDP, unix.UDP_SEGMENT
		h.SetLen(unix.CmsgLen(2))
	}
	s.send = func(fd uintptr) { s.k, s.errno = SendmmsgWait(fd, s.todo) }
	return s
}

// GSO returns the size of the largest datagram the Sender still sends in runs with
// segmentation offload; 0 is none.
func (s *Sender) GSO() int { return s.gso }

// Send sends bufs, one datagram each, on c to to, or to c's peer when to is the zero
// AddrPort (a DialUDP Sock). It waits while the socket's send buffer is full (the runtime is
// told, so the P is handed on) and returns the error that made it drop the rest: the
// socket's pending error (such as ECONNREFUSED after an ICMP port unreachable), or
// net.ErrClosed.
func (s *Sender) Send(c *Sock, to netip.AddrPort, bufs [][]byte) error {
	var name *byte
	var namelen uint32
	if to.IsValid() {
		namelen = PutRaw(&s.name, to, c.family())
		name = (*byte)(unsafe.Pointer(&s.name))
	}
	defer func() {
		for i := range s.iovs {
			s.iovs[i].Base = nil // keep no datagram reachable
		}
		s.todo = nil
	}()
	for len(bufs) > 0 {
		h, m := s.fill(bufs, name, namelen)
		s.todo = s.hdrs[:h]
		sent := 0 // headers
	call:
		for len(s.todo) > 0 {
			if err := c.Control(s.send); err != nil || c.IsClosed() {
				return net.ErrClosed
			}
			switch {
			case s.errno == syscall.EINTR:
			case s.errno != 0 && s.runs[sent] > 1 && gsoRefused(s.errno):
				// Send the rest again with no run of datagrams this large, or none at all when
				// the kernel has no offload.
				if s.errno == syscall.ENOPROTOOPT || s.errno == syscall.EOPNOTSUPP {
					s.gso = 0
				} else {
					s.gso = min(s.gso, s.size[sent]-1)
				}
				done := 0
				for _, r := range s.runs[:sent] {
					done += r
				}
				m = done
				break call
			case s.errno != 0:
				return s.errno
			case s.k <= 0:
				return syscall.EIO
			default:
				s.todo = s.todo[s.k:]
				sent += s.k
			}
		}
		bufs = bufs[m:]
	}
	return nil
}

// gsoRefused reports whether errno is how a kernel or a route turns down segmentation
// offload: a segment over the route's MTU (EMSGSIZE, or EINVAL on older kernels), a device
// without checksum offload (EIO), a kernel without UDP_SEGMENT.
func gsoRefused(errno syscall.Errno) bool {
	switch errno {
	case syscall.EMSGSIZE, syscall.EINVAL, syscall.EIO, syscall.ENOPROTOOPT, syscall.EOPNOTSUPP:
		return true
	}
	return false
}

// fill sets up headers for the first datagrams of bufs and returns how many headers and how
// many datagrams they carry.
func (s *Sender) fill(bufs [][]byte, name *byte, namelen uint32) (h, m int) {
	limit := min(len(bufs), len(s.iovs))
	for m < limit && h < len(s.hdrs) {
		size := len(bufs[m])
		run, total := 1, size
		if size > 0 && size <= s.gso {
			// A run goes on while its datagrams have the first one's size; a shorter one ends it.
			for m+run < limit && run < gsoMaxSegments && len(bufs[m+run-1]) == size {
				next := len(bufs[m+run])
				if next == 0 || next > size || total+next > gsoMaxBytes {
					break
				}
				run++
				total += next
			}
		}
		for i := m; i < m+run; i++ {
			s.iovs[i].Base = unsafe.SliceData(bufs[i])
			s.iovs[i].SetLen(len(bufs[i]))
		}
		s.hdrs[h].Hdr = syscall.Msghdr{Name: name, Namelen: namelen, Iov: &s.iovs[m], Iovlen: uint64(run)}
		if run > 1 {
			*(*uint16)(unsafe.Pointer(&s.ctrl[h][unix.CmsgLen(0)])) = uint16(size)
			s.hdrs[h].Hdr.Control = &s.ctrl[h][0]
			s.hdrs[h].Hdr.SetControllen(gsoCmsgSpace)
		}
		s.runs[h], s.size[h] = run, size
		h++
		m += run
	}
	return h, m
}
