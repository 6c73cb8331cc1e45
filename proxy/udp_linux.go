//go:build linux && (amd64 || arm64)

package proxy

import (
	"net/netip"
	"syscall"
	"unsafe"

	"golang.org/x/net/ipv4"

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

// rawSend is the send side of sendRaw: headers at stable addresses and the send call, made
// once per rawSend (a closure built per call would escape and allocate on every batch).
type rawSend struct {
	name  syscall.RawSockaddrInet6
	iovs  []syscall.Iovec
	hdrs  []rawudp.Mmsghdr
	todo  []rawudp.Mmsghdr // what the next send call sends
	k     int
	errno syscall.Errno
	send  func(fd uintptr)
}

// sendRaw sends ms to peer from the listening socket with as few sendmmsg calls as it takes.
// Like writeAll in the other read mode, it waits while the socket's send buffer is full (the
// socket is blocking; the wait releases the P).
func (u *udpListener) sendRaw(peer netip.AddrPort, ms []ipv4.Message) {
	if len(ms) == 0 {
		return
	}
	r, _ := u.sends.Get().(*rawSend)
	if r == nil || len(r.hdrs) < len(ms) {
		r = &rawSend{iovs: make([]syscall.Iovec, len(ms)), hdrs: make([]rawudp.Mmsghdr, len(ms))}
		r.send = func(fd uintptr) { r.k, r.errno = rawudp.SendmmsgWait(fd, r.todo) }
	}
	namelen := rawudp.Sockaddr(peer, u.local, &r.name)
	for i, m := range ms {
		buf := m.Buffers[0]
		r.iovs[i].Base = unsafe.SliceData(buf)
		r.iovs[i].SetLen(len(buf))
		r.hdrs[i].Hdr = syscall.Msghdr{Name: (*byte)(unsafe.Pointer(&r.name)), Namelen: namelen, Iov: &r.iovs[i], Iovlen: 1}
	}
	r.todo = r.hdrs[:len(ms)]
	for len(r.todo) > 0 {
		if err := u.raw.RawConn().Control(r.send); err != nil {
			break // closed
		}
		if r.errno == syscall.EINTR {
			continue
		}
		if r.errno != 0 || r.k <= 0 {
			break // an unreachable peer or a broken socket: UDP is lossy, drop the rest
		}
		r.todo = r.todo[r.k:]
	}
	for i := range ms {
		r.iovs[i].Base = nil // keep no datagram reachable from the pool
	}
	r.todo = nil
	u.sends.Put(r)
}
