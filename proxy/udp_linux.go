//go:build linux && (amd64 || arm64)

package proxy

import (
	"net/netip"
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

// rawReadLoop is readLoop on a rawSocket: one worker blocked in recvmmsg, which pauses for the
// listener's UDPCoalesce after a partial batch (see rawudp.Receiver).
func (s *Server) rawReadLoop(l *listener) {
	defer s.wg.Done()
	defer close(l.done)
	u := l.udp
	defer u.closeFlows("closed")
	in := rawudp.NewReceiver(u.raw, l.cfg.Batch, l.cfg.MaxDatagram, l.cfg.UDPCoalesce)
	dgs := make([]datagram, 0, l.cfg.Batch)
	out := newOut(l.cfg.Batch)
	for {
		n, err := in.Next(&u.stop)
		if err != nil {
			l.m.err("udp_read")
			s.log.Error("udp listener stopped", "listener", l.cfg.Name, "err", err)
		}
		if err != nil || n == 0 {
			return
		}
		dgs = dgs[:0]
		for i := range n {
			data, from, bad := in.Datagram(i)
			if from.IsValid() {
				dgs = append(dgs, datagram{from: from, data: data, long: bad})
			}
		}
		u.forward(dgs, out, s.opts.Now())
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
