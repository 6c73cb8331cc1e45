//go:build linux && (amd64 || arm64)

package rawio

import (
	"errors"
	"fmt"
	"net"
	"net/netip"
	"runtime"
	"sync/atomic"
	"syscall"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"
)

// Receiver is one worker's receive side of a UDP Sock: n buffers with their headers at stable
// addresses, read in batches by Next.
//
// With coalescing, Next pauses after a batch smaller than a full one and then reads without
// waiting, so the datagrams that arrived meanwhile are read by one wake-up instead of about
// one each (like a network card's interrupt moderation). A datagram that finds the worker
// waiting is read at once; under load one may wait up to the pause more.
type Receiver struct {
	c        *Sock
	bufs     [][]byte
	names    []unix.RawSockaddrInet6
	iovs     []syscall.Iovec
	hdrs     []Mmsghdr
	size     int
	coalesce bool
	pause    unix.Timespec
	last     int // datagrams in the previous batch

	// What recv sets; recv is made once because a closure built per call would escape to the
	// heap (Control is an interface method) and allocate on every batch.
	flags uintptr
	n     int
	errno syscall.Errno
	recv  func(fd uintptr)
}

// NewReceiver returns a Receiver of n datagrams of up to size bytes from c; coalesce is the
// pause after a partial batch (0 for none). c may be nil for a Receiver used only with
// ReadFrom.
func NewReceiver(c *Sock, n, size int, coalesce time.Duration) *Receiver {
	r := &Receiver{c: c, bufs: make([][]byte, n), names: make([]unix.RawSockaddrInet6, n),
		iovs: make([]syscall.Iovec, n), hdrs: make([]Mmsghdr, n), size: size,
		coalesce: coalesce > 0, pause: unix.NsecToTimespec(int64(coalesce))}
	// One byte more than size: a datagram that fills it was longer.
	buf := make([]byte, n*(size+1))
	for i := range n {
		r.bufs[i] = buf[i*(size+1) : (i+1)*(size+1) : (i+1)*(size+1)]
		r.iovs[i].Base = &r.bufs[i][0]
		r.iovs[i].SetLen(size + 1)
		r.hdrs[i].Hdr.Name = (*byte)(unsafe.Pointer(&r.names[i]))
		r.hdrs[i].Hdr.Iov = &r.iovs[i]
		r.hdrs[i].Hdr.Iovlen = 1
	}
	r.recv = func(fd uintptr) { r.n, r.errno = Recvmmsg(fd, r.hdrs, r.flags) }
	return r
}

// Next waits for the next batch and returns how many datagrams it holds. It returns 0, nil
// once stop is set or the Sock is closed (set stop first for a prompt return: a Next that
// waits in the kernel sees a Close only at its receive timeout), and an error when the
// socket cannot be read.
// Transient errors (a timeout, a signal, ENOMEM) are retried; on a timeout or a signal the
// worker first yields its P, so a waiting stop-the-world or goroutine can have it.
func (r *Receiver) Next(stop *atomic.Bool) (int, error) {
	r.flags = unix.MSG_WAITFORONE
	if r.coalesce && r.last > 0 && r.last < len(r.hdrs) {
		Pause(&r.pause)
		r.flags |= unix.MSG_DONTWAIT
	}
	for !stop.Load() && !r.c.IsClosed() {
		r.reset()
		if err := r.c.Control(r.recv); err != nil {
			if stop.Load() || r.c.IsClosed() || errors.Is(err, net.ErrClosed) {
				return 0, nil
			}
			return 0, fmt.Errorf("reading udp: %w", err)
		}
		if r.flags&unix.MSG_DONTWAIT != 0 {
			r.flags = unix.MSG_WAITFORONE
			if r.errno == syscall.EAGAIN {
				continue // nothing came during the pause: wait for the next datagram
			}
		}
		switch r.errno {
		case 0:
			r.last = r.n
			return r.n, nil
		case syscall.EAGAIN, syscall.EINTR:
			runtime.Gosched()
		case syscall.EBADF, syscall.ENOTSOCK, syscall.EINVAL, syscall.EFAULT:
			return 0, fmt.Errorf("reading udp: %w", r.errno)
		default: // transient (ENOMEM, a queued ICMP error): read again
		}
	}
	return 0, nil
}

// ReadFrom reads the datagrams c holds, up to the Receiver's n, without waiting, and returns
// how many it read. It returns 0, nil when c holds none, net.ErrClosed once c is closed, and
// c's pending error (such as ECONNREFUSED after an ICMP port unreachable) when it has one.
func (r *Receiver) ReadFrom(c *Sock) (int, error) {
	r.flags = unix.MSG_DONTWAIT
	for {
		r.reset()
		if err := c.Control(r.recv); err != nil || c.IsClosed() {
			return 0, net.ErrClosed
		}
		switch r.errno {
		case 0:
			return r.n, nil
		case syscall.EAGAIN:
			return 0, nil
		case syscall.EINTR:
		default:
			return 0, r.errno
		}
	}
}

func (r *Receiver) reset() {
	for i := range r.hdrs {
		r.hdrs[i].Hdr.Namelen = unix.SizeofSockaddrInet6
		r.hdrs[i].Hdr.Flags = 0
	}
}

// Datagram returns datagram i of the last batch: its bytes, its sender, and whether it was
// longer than the Receiver's size (its bytes are then cut) or its sender is not IP.
func (r *Receiver) Datagram(i int) (data []byte, from netip.AddrPort, bad bool) {
	from, ok := FromRaw(&r.names[i])
	n := int(r.hdrs[i].N)
	bad = !ok || n > r.size || r.hdrs[i].Hdr.Flags&unix.MSG_TRUNC != 0
	return r.bufs[i][:min(n, r.size)], from, bad
}

// Name returns the sender's socket address of datagram i and its length, for a reply with
// sendmmsg; it stays valid until the next Next.
func (r *Receiver) Name(i int) (*unix.RawSockaddrInet6, uint32) {
	return &r.names[i], r.hdrs[i].Hdr.Namelen
}
