//go:build linux && (amd64 || arm64)

package proxy

import (
	"errors"
	"net/netip"
	"os"
	"runtime"
	"sync"
	"syscall"
	"unsafe"

	"golang.org/x/net/ipv4"
	"golang.org/x/sys/unix"

	"github.com/frontdoor-vdi/frontdoor/internal/rawudp"
)

// rawSocket is a listening UDP socket outside the Go poller, read by one blocking worker
// (Options.BlockingUDP; see package rawudp).
type rawSocket = rawudp.Conn

func listenRaw(ap netip.AddrPort, buf int) (*rawSocket, error) { return rawudp.Listen(ap, buf) }

// rawBatch is the receive side of rawReadLoop: buffers and headers at stable addresses.
type rawBatch struct {
	in    [][]byte
	names []syscall.RawSockaddrInet6
	iovs  []syscall.Iovec
	hdrs  []rawudp.Mmsghdr
}

func newRawBatch(n, size int) *rawBatch {
	b := &rawBatch{in: make([][]byte, n), names: make([]syscall.RawSockaddrInet6, n),
		iovs: make([]syscall.Iovec, n), hdrs: make([]rawudp.Mmsghdr, n)}
	buf := make([]byte, n*(size+1))
	for i := range n {
		b.in[i] = buf[i*(size+1) : (i+1)*(size+1) : (i+1)*(size+1)]
		b.iovs[i].Base = &b.in[i][0]
		b.iovs[i].SetLen(size + 1)
		b.hdrs[i].Hdr.Name = (*byte)(unsafe.Pointer(&b.names[i]))
		b.hdrs[i].Hdr.Iov = &b.iovs[i]
		b.hdrs[i].Hdr.Iovlen = 1
	}
	return b
}

// rawReadLoop is readLoop on a rawSocket: one worker blocked in recvmmsg. With the listener's
// UDPCoalesce, a batch smaller than a full one is followed by a pause and a receive that does
// not wait, so the datagrams that arrived meanwhile cost one wake-up instead of one each.
func (s *Server) rawReadLoop(l *listener) {
	defer s.wg.Done()
	defer close(l.done)
	u := l.udp
	defer u.closeFlows("closed")
	batch, size := l.cfg.Batch, l.cfg.MaxDatagram
	b := newRawBatch(batch, size)
	dgs := make([]datagram, 0, batch)
	out := newOut(batch)
	flags := uintptr(unix.MSG_WAITFORONE)
	var n int
	var errno syscall.Errno
	recv := func(fd uintptr) { n, errno = rawudp.Recvmmsg(fd, b.hdrs, flags) }
	rc := u.raw.RawConn()
	coalesce := l.cfg.UDPCoalesce
	pause := unix.NsecToTimespec(int64(coalesce))
	for !u.stop.Load() {
		for i := range b.hdrs {
			b.hdrs[i].Hdr.Namelen = syscall.SizeofSockaddrInet6
			b.hdrs[i].Hdr.Flags = 0
		}
		if err := rc.Control(recv); err != nil {
			if !u.stop.Load() && !errors.Is(err, os.ErrClosed) {
				l.m.err("udp_read")
				s.log.Error("udp listener stopped", "listener", l.cfg.Name, "err", err)
			}
			return
		}
		if flags&unix.MSG_DONTWAIT != 0 {
			flags = unix.MSG_WAITFORONE
			if errno == syscall.EAGAIN {
				continue // nothing came during the pause: wait for the next datagram
			}
		}
		switch errno {
		case 0:
		case syscall.EAGAIN, syscall.EINTR:
			runtime.Gosched() // let a waiting stop-the-world or goroutine have the P
			continue
		case syscall.EBADF, syscall.ENOTSOCK, syscall.EINVAL, syscall.EFAULT:
			l.m.err("udp_read")
			s.log.Error("udp listener stopped", "listener", l.cfg.Name, "err", errno)
			return
		default: // transient (ENOMEM, a queued ICMP error): read again
			l.m.err("udp_read")
			continue
		}
		dgs = dgs[:0]
		for i := range n {
			from, ok := rawudp.Peer(&b.names[i])
			if !ok {
				continue
			}
			m := int(b.hdrs[i].N)
			long := m > size || b.hdrs[i].Hdr.Flags&unix.MSG_TRUNC != 0
			dgs = append(dgs, datagram{from: from, data: b.in[i][:min(m, size)], long: long})
		}
		u.forward(dgs, out, s.opts.Now())
		if coalesce > 0 && n < batch {
			rawudp.Pause(&pause)
			flags = unix.MSG_DONTWAIT | unix.MSG_WAITFORONE
		}
	}
}

// rawSend is the send side of sendRaw, pooled per listener.
type rawSend struct {
	name syscall.RawSockaddrInet6
	iovs []syscall.Iovec
	hdrs []rawudp.Mmsghdr
}

var rawSends sync.Pool // of *rawSend; sized on first use by each listener's batch

// sendRaw sends ms to peer from the listening socket with as few sendmmsg calls as it takes;
// a full send buffer drops the rest, like writeAll.
func (u *udpListener) sendRaw(peer netip.AddrPort, ms []ipv4.Message) {
	if len(ms) == 0 {
		return
	}
	r, _ := rawSends.Get().(*rawSend)
	if r == nil || len(r.hdrs) < len(ms) {
		r = &rawSend{iovs: make([]syscall.Iovec, len(ms)), hdrs: make([]rawudp.Mmsghdr, len(ms))}
	}
	namelen := rawudp.Sockaddr(peer, u.local, &r.name)
	for i, m := range ms {
		buf := m.Buffers[0]
		r.iovs[i].Base = unsafe.SliceData(buf)
		r.iovs[i].SetLen(len(buf))
		r.hdrs[i].Hdr = syscall.Msghdr{Name: (*byte)(unsafe.Pointer(&r.name)), Namelen: namelen, Iov: &r.iovs[i], Iovlen: 1}
	}
	hdrs := r.hdrs[:len(ms)]
	for len(hdrs) > 0 {
		var k int
		var errno syscall.Errno
		err := u.raw.RawConn().Control(func(fd uintptr) { k, errno = rawudp.Sendmmsg(fd, hdrs, unix.MSG_DONTWAIT) })
		if err != nil || (errno != 0 && errno != syscall.EINTR) || k < 0 {
			break
		}
		hdrs = hdrs[k:]
	}
	for i := range ms {
		r.iovs[i].Base = nil // keep no datagram reachable from the pool
	}
	rawSends.Put(r)
}
