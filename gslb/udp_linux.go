//go:build linux && (amd64 || arm64)

package gslb

import (
	"errors"
	"fmt"
	"net"
	"net/netip"
	"os"
	"runtime"
	"syscall"
	"time"
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

// rawUDP is a UDP socket made with system calls, blocking, and kept out of the Go poller,
// for the blocking workers.
//
// Why: at a steady query rate each query finds the server idle, and through Go's poller every
// one costs a park in epoll_wait, a wake-up, and the runtime's sysmon thread woken by each
// syscall.Syscall; on a paravirtualised host those context switches cost more than the answer.
// A thread blocked in recvmmsg is woken by the kernel alone, as in a C DNS server. The socket
// must not be in the poller's epoll set at all, or every datagram would also wake the poller.
//
// The cost: a goroutine blocked in a raw system call keeps its P, and the runtime cannot stop
// it for the garbage collector until the call returns. Hence the receive timeout: the signal
// the runtime sends to preempt a goroutine makes a receive with SO_RCVTIMEO return EINTR at
// once (signal(7)), the timeout bounds the wait if a signal is missed, and the worker then
// yields. And hence ServerOptions.BlockingUDP is the process owner's choice: it should add a
// P for each such worker (ExtraProcs), so that the rest of the process keeps every CPU's.
type rawUDP struct {
	f     *os.File        // owns the descriptor
	rc    syscall.RawConn // f's, for the workers' system calls
	local netip.AddrPort
}

// listenRawUDP opens a blocking UDP socket on addr. It returns nil, nil when addr is not an
// IP literal and port; the caller then uses a socket of the net package.
func listenRawUDP(addr string) (*rawUDP, error) {
	ap, err := netip.ParseAddrPort(addr)
	if err != nil || ap.Addr().IsUnspecified() || ap.Addr().Zone() != "" {
		return nil, nil
	}
	r, err := openRawUDP(ap)
	if err != nil {
		return nil, fmt.Errorf("listening on udp %s: %w", addr, err)
	}
	return r, nil
}

func openRawUDP(ap netip.AddrPort) (*rawUDP, error) {
	ip := ap.Addr().Unmap()
	var sa unix.Sockaddr
	family := unix.AF_INET
	if ip.Is4() {
		sa = &unix.SockaddrInet4{Addr: ip.As4(), Port: int(ap.Port())}
	} else {
		family = unix.AF_INET6
		sa = &unix.SockaddrInet6{Addr: ip.As16(), Port: int(ap.Port())}
	}
	fd, err := unix.Socket(family, unix.SOCK_DGRAM|unix.SOCK_CLOEXEC, unix.IPPROTO_UDP)
	if err != nil {
		return nil, os.NewSyscallError("socket", err)
	}
	tv := unix.NsecToTimeval(rcvTimeout.Nanoseconds())
	if err := unix.SetsockoptTimeval(fd, unix.SOL_SOCKET, unix.SO_RCVTIMEO, &tv); err != nil {
		unix.Close(fd)
		return nil, os.NewSyscallError("setsockopt", err)
	}
	if family == unix.AF_INET6 {
		if err := unix.SetsockoptInt(fd, unix.IPPROTO_IPV6, unix.IPV6_V6ONLY, 1); err != nil {
			unix.Close(fd)
			return nil, os.NewSyscallError("setsockopt", err)
		}
	}
	if err := unix.Bind(fd, sa); err != nil {
		unix.Close(fd)
		return nil, os.NewSyscallError("bind", err)
	}
	bound, err := unix.Getsockname(fd)
	if err != nil {
		unix.Close(fd)
		return nil, os.NewSyscallError("getsockname", err)
	}
	local := ap
	switch b := bound.(type) {
	case *unix.SockaddrInet4:
		local = netip.AddrPortFrom(netip.AddrFrom4(b.Addr), uint16(b.Port))
	case *unix.SockaddrInet6:
		local = netip.AddrPortFrom(netip.AddrFrom16(b.Addr), uint16(b.Port))
	}
	// A blocking descriptor: os.NewFile leaves it out of the poller.
	f := os.NewFile(uintptr(fd), "udp:"+local.String())
	rc, err := f.SyscallConn()
	if err != nil {
		f.Close()
		return nil, err
	}
	return &rawUDP{f: f, rc: rc, local: local}, nil
}

// LocalAddr returns the bound address.
func (r *rawUDP) LocalAddr() net.Addr { return net.UDPAddrFromAddrPort(r.local) }

// Close closes the socket (at once for new calls; a worker blocked in a receive keeps the
// descriptor until the receive returns).
func (r *rawUDP) Close() error { return r.f.Close() }

// rawWorkers returns the one blocking worker of a loop on a rawUDP socket.
func (u *udpLoop) rawWorkers() []func() error {
	return []func() error{func() error { return u.serveMmsg(u.raw.rc) }}
}

// ExtraProcs returns how many Ps a process should add to GOMAXPROCS for n DNS listeners with
// BlockingUDP, so that their workers (one per listener, each holding a P while it waits and
// using no CPU then) never take a P from the rest of the process.
func ExtraProcs(n int) int { return n }

// rcvTimeout bounds one blocking receive.
const rcvTimeout = 10 * time.Millisecond

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
	// The two system calls, made once as closures: a closure built per call would escape to
	// the heap (Control is an interface method) and allocate on every batch.
	var n, k, off int
	var errno syscall.Errno
	flags := uintptr(unix.MSG_WAITFORONE)
	recv := func(fd uintptr) {
		r, _, e := syscall.RawSyscall6(unix.SYS_RECVMMSG, fd, uintptr(unsafe.Pointer(&st.hdrs[0])), batchSize, flags, 0, 0)
		n, errno = int(r), e
	}
	send := func(fd uintptr) {
		r, _, e := syscall.RawSyscall6(unix.SYS_SENDMMSG, fd, uintptr(unsafe.Pointer(&st.ohdrs[off])), uintptr(k-off), unix.MSG_DONTWAIT, 0, 0)
		n, errno = int(r), e
	}
	// With coalescing, a partial batch is followed by a pause (nanosleep, which the runtime's
	// preemption signal interrupts like the receive) and a receive that does not wait.
	coalesce := u.coalesce
	pause := unix.NsecToTimespec(int64(coalesce))
	for !u.stop.Load() {
		for i := range st.hdrs {
			st.hdrs[i].hdr.Namelen = syscall.SizeofSockaddrInet6
			st.hdrs[i].hdr.Flags = 0
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
			syscall.RawSyscall(unix.SYS_NANOSLEEP, uintptr(unsafe.Pointer(&pause)), 0, 0)
			flags = unix.MSG_DONTWAIT | unix.MSG_WAITFORONE
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
