//go:build linux && (amd64 || arm64)

package gslb

import (
	"errors"
	"fmt"
	"net/netip"
	"os"
	"runtime"
	"syscall"
	"unsafe"

	"golang.org/x/sys/unix"

	"github.com/frontdoor-vdi/frontdoor/internal/rawudp"
)

// mmsgState is one worker's buffers and message headers; it lives on the heap so that the
// kernel sees stable addresses.
type mmsgState struct {
	in    [batchSize][]byte
	names [batchSize]syscall.RawSockaddrInet6
	iovs  [batchSize]syscall.Iovec
	hdrs  [batchSize]rawudp.Mmsghdr
	out   [batchSize][]byte
	oiovs [batchSize]syscall.Iovec
	ohdrs [batchSize]rawudp.Mmsghdr
}

// rawUDP is the blocking socket of a loop with BlockingUDP (see package rawudp).
type rawUDP = rawudp.Conn

// listenRawUDP opens a blocking UDP socket on addr. It returns nil, nil when addr is not an
// IP literal and port; the caller then uses a socket of the net package.
func listenRawUDP(addr string) (*rawUDP, error) {
	ap, err := netip.ParseAddrPort(addr)
	if err != nil || ap.Addr().IsUnspecified() || ap.Addr().Zone() != "" {
		return nil, nil
	}
	r, err := rawudp.Listen(ap, 0)
	if err != nil {
		return nil, fmt.Errorf("listening on udp %s: %w", addr, err)
	}
	return r, nil
}

// rawWorkers returns the one blocking worker of a loop on a rawUDP socket.
func (u *udpLoop) rawWorkers() []func() error {
	return []func() error{func() error { return u.serveMmsg(u.raw.RawConn()) }}
}

func (u *udpLoop) serveMmsg(rc syscall.RawConn) error {
	st := new(mmsgState)
	for i := range st.in {
		st.in[i] = make([]byte, maxUDPRequest)
		st.iovs[i].Base = &st.in[i][0]
		st.iovs[i].SetLen(maxUDPRequest)
		st.hdrs[i].Hdr.Name = (*byte)(unsafe.Pointer(&st.names[i]))
		st.hdrs[i].Hdr.Iov = &st.iovs[i]
		st.hdrs[i].Hdr.Iovlen = 1
		st.out[i] = make([]byte, 0, 2048)
		st.ohdrs[i].Hdr.Iov = &st.oiovs[i]
		st.ohdrs[i].Hdr.Iovlen = 1
	}
	w := &udpWriter{local: u.local}
	// The two system calls, made once as closures: a closure built per call would escape to
	// the heap (Control is an interface method) and allocate on every batch.
	var n, k, off int
	var errno syscall.Errno
	flags := uintptr(unix.MSG_WAITFORONE)
	recv := func(fd uintptr) {
		n, errno = rawudp.Recvmmsg(fd, st.hdrs[:], flags)
	}
	send := func(fd uintptr) {
		n, errno = rawudp.Sendmmsg(fd, st.ohdrs[off:k], unix.MSG_DONTWAIT)
	}
	// With coalescing, a partial batch is followed by a pause (nanosleep, which the runtime's
	// preemption signal interrupts like the receive) and a receive that does not wait.
	coalesce := u.coalesce
	pause := unix.NsecToTimespec(int64(coalesce))
	for !u.stop.Load() {
		for i := range st.hdrs {
			st.hdrs[i].Hdr.Namelen = syscall.SizeofSockaddrInet6
			st.hdrs[i].Hdr.Flags = 0
		}
		err := rc.Control(recv)
		if err != nil {
			if u.stop.Load() || errors.Is(err, os.ErrClosed) {
				return nil
			}
			return fmt.Errorf("reading udp: %w", err)
		}
		if flags&unix.MSG_DONTWAIT != 0 {
			flags = unix.MSG_WAITFORONE
			if errno == syscall.EAGAIN {
				continue // nothing came while we slept: wait for the next query
			}
		}
		switch errno {
		case 0:
		case syscall.EAGAIN, syscall.EINTR:
			runtime.Gosched() // let a waiting stop-the-world or goroutine have the P
			continue
		case syscall.EBADF, syscall.ENOTSOCK, syscall.EINVAL, syscall.EFAULT:
			return fmt.Errorf("reading udp: %w", errno)
		default: // transient (ENOMEM, a queued ICMP error): read again
			continue
		}
		got := n
		k = 0
		for i := range n {
			peer, ok := rawudp.Peer(&st.names[i])
			if !ok || st.hdrs[i].Hdr.Flags&syscall.MSG_TRUNC != 0 {
				continue
			}
			w.reset(peer, st.out[k])
			u.answer(w, st.in[i][:st.hdrs[i].N])
			if len(w.reply) == 0 {
				continue
			}
			st.out[k] = w.buf
			st.oiovs[k].Base = &w.reply[0]
			st.oiovs[k].SetLen(len(w.reply))
			st.ohdrs[k].Hdr.Name = (*byte)(unsafe.Pointer(&st.names[i]))
			st.ohdrs[k].Hdr.Namelen = st.hdrs[i].Hdr.Namelen
			k++
		}
		for off = 0; off < k; {
			if err := rc.Control(send); err != nil {
				return nil
			}
			switch errno {
			case 0:
				off += n
			case syscall.EINTR:
			default: // a full send buffer or an unreachable peer: drop that reply
				off++
			}
		}
		if coalesce > 0 && got < batchSize {
			// Let queries gather before the next receive: one wake-up then takes them all.
			rawudp.Pause(&pause)
			flags = unix.MSG_DONTWAIT | unix.MSG_WAITFORONE
		}
	}
	return nil
}
