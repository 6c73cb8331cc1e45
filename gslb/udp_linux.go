//go:build linux && (amd64 || arm64)

package gslb

import (
	"errors"
	"fmt"
	"net"
	"net/netip"
	"syscall"
	"unsafe"

	"golang.org/x/sys/unix"
)

// mmsghdr is struct mmsghdr of 64-bit Linux.
type mmsghdr struct {
	hdr syscall.Msghdr
	n   uint32
	_   [4]byte
}

// mmsgState is one worker's buffers and message headers; it lives on the heap so that the
// kernel sees stable addresses.
type mmsgState struct {
	in    [batchSize][]byte
	names [batchSize]syscall.RawSockaddrInet6
	iovs  [batchSize]syscall.Iovec
	hdrs  [batchSize]mmsghdr
	out   [batchSize][]byte
	oiovs [batchSize]syscall.Iovec
	ohdrs [batchSize]mmsghdr
}

// mmsgWorker returns a worker that reads with recvmmsg and writes with sendmmsg made as raw
// system calls inside the Go poller's callbacks, or nil when the socket gives no raw access.
//
// Raw calls matter here: every syscall.Syscall wakes the runtime's sysmon thread out of its
// deep sleep when the process was idle, and sysmon then polls every 20µs for a millisecond.
// A DNS server that idles between bursts of queries paid dozens of context switches per burst
// for that. The socket stays non-blocking, so the calls never block and the goroutine parks in
// the poller between bursts like any other.
func (u *udpLoop) mmsgWorker() func() error {
	rc, err := u.conn.SyscallConn()
	if err != nil {
		return nil
	}
	return func() error { return u.serveMmsg(rc) }
}

func (u *udpLoop) serveMmsg(rc syscall.RawConn) error {
	st := new(mmsgState)
	for i := range st.in {
		st.in[i] = make([]byte, maxUDPRequest)
		st.iovs[i].Base = &st.in[i][0]
		st.iovs[i].SetLen(maxUDPRequest)
		st.hdrs[i].hdr.Name = (*byte)(unsafe.Pointer(&st.names[i]))
		st.hdrs[i].hdr.Iov = &st.iovs[i]
		st.hdrs[i].hdr.Iovlen = 1
		st.out[i] = make([]byte, 0, 2048)
		st.ohdrs[i].hdr.Iov = &st.oiovs[i]
		st.ohdrs[i].hdr.Iovlen = 1
	}
	w := &udpWriter{local: u.local}
	for !u.stop.Load() {
		for i := range st.hdrs {
			st.hdrs[i].hdr.Namelen = syscall.SizeofSockaddrInet6
			st.hdrs[i].hdr.Flags = 0
		}
		var n int
		var errno syscall.Errno
		err := rc.Read(func(fd uintptr) bool {
			for {
				r, _, e := syscall.RawSyscall6(unix.SYS_RECVMMSG, fd, uintptr(unsafe.Pointer(&st.hdrs[0])), batchSize, 0, 0, 0)
				switch e {
				case syscall.EINTR:
					continue
				case syscall.EAGAIN:
					return false // park in the poller until the socket is readable
				}
				n, errno = int(r), e
				return true
			}
		})
		if err != nil {
			if errors.Is(err, net.ErrClosed) {
				return nil
			}
			return fmt.Errorf("reading udp: %w", err)
		}
		switch errno {
		case 0:
		case syscall.EBADF, syscall.ENOTSOCK, syscall.EINVAL, syscall.EFAULT:
			return fmt.Errorf("reading udp: %w", errno)
		default: // transient (ENOMEM, a queued ICMP error): read again
			continue
		}
		k := 0
		for i := range n {
			peer, ok := sockaddrPeer(&st.names[i])
			if !ok || st.hdrs[i].hdr.Flags&syscall.MSG_TRUNC != 0 {
				continue
			}
			w.reset(peer, st.out[k])
			u.answer(w, st.in[i][:st.hdrs[i].n])
			if len(w.reply) == 0 {
				continue
			}
			st.out[k] = w.buf
			st.oiovs[k].Base = &w.reply[0]
			st.oiovs[k].SetLen(len(w.reply))
			st.ohdrs[k].hdr.Name = (*byte)(unsafe.Pointer(&st.names[i]))
			st.ohdrs[k].hdr.Namelen = st.hdrs[i].hdr.Namelen
			k++
		}
		if k == 0 {
			continue
		}
		off := 0
		err = rc.Write(func(fd uintptr) bool {
			for off < k {
				r, _, e := syscall.RawSyscall6(unix.SYS_SENDMMSG, fd, uintptr(unsafe.Pointer(&st.ohdrs[off])), uintptr(k-off), 0, 0, 0)
				switch e {
				case 0:
					off += int(r)
				case syscall.EINTR:
				case syscall.EAGAIN:
					return false // the send buffer is full: wait until writable
				default:
					off++ // skip the datagram that failed (e.g. an unreachable peer)
				}
			}
			return true
		})
		if err != nil {
			if errors.Is(err, net.ErrClosed) {
				return nil
			}
			return fmt.Errorf("writing udp: %w", err)
		}
	}
	return nil
}

// sockaddrPeer decodes the sender of a datagram.
func sockaddrPeer(sa *syscall.RawSockaddrInet6) (netip.AddrPort, bool) {
	port := func(p *uint16) uint16 {
		b := (*[2]byte)(unsafe.Pointer(p))
		return uint16(b[0])<<8 | uint16(b[1])
	}
	switch sa.Family {
	case syscall.AF_INET:
		sa4 := (*syscall.RawSockaddrInet4)(unsafe.Pointer(sa))
		return netip.AddrPortFrom(netip.AddrFrom4(sa4.Addr), port(&sa4.Port)), true
	case syscall.AF_INET6:
		return netip.AddrPortFrom(netip.AddrFrom16(sa.Addr), port(&sa.Port)), true
	}
	return netip.AddrPort{}, false
}
