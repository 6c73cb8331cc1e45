//go:build linux

package proxy

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/netip"
	"os"
	"sync/atomic"
	"syscall"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"

	"github.com/frontdoor-vdi/frontdoor/internal/sockaddr"
)

// sock is one TCP socket of a proxied connection, accepted or connected by the proxy itself
// with raw calls. It is nonblocking; a call that would block waits for the socket's readiness
// from the server's tcpPoll, which spares the calls the runtime's netpoller makes per socket
// (fcntl when it is wrapped, EPOLL_CTL_DEL before close) and those package net makes on each
// accept and dial.
//
// A reference count keeps the descriptor open while a call uses it, so that Close from
// another goroutine cannot let the number be reused under a running call: the last
// reference after Close closes it.
type sock struct {
	fd    int
	tp    *tcpPoll
	rc    *sockConn
	state atomic.Uint64 // sockClosed | calls using fd
	// registered is set once the socket is in tp's set, in slot.
	registered atomic.Bool
	slot       uint32
	// peerDone is set when tp reported the peer's FIN, a reset or an error: a read after a
	// short one must then not wait for a readiness event, which may have come already.
	peerDone atomic.Bool
	urgent   atomic.Bool // the peer sent urgent (out-of-band) data; set before the wake-up
	r, w     waiter
}

const sockClosed = 1 << 62

// waiter is one direction's wait for readiness.
type waiter struct {
	ready    chan struct{} // holds a token once the direction may have become ready since the last wait
	deadline atomic.Int64  // unix nanoseconds; 0 is none
	timer    *time.Timer   // owned by the one goroutine that waits in this direction
	// spawn, if set, is a half that no goroutine runs yet: the direction's next readiness
	// (or the socket's close) starts it in one instead of waking a waiter.
	spawn atomic.Pointer[half]
}

// newSock wraps the nonblocking socket fd; it joins tp's set when it first has to wait.
func newSock(tp *tcpPoll, fd int) *sock {
	s := &sock{fd: fd, tp: tp}
	s.rc = (*sockConn)(s)
	s.r.ready = make(chan struct{}, 1)
	s.w.ready = make(chan struct{}, 1)
	return s
}

// incref takes a reference for a call on fd; false once the socket is closed.
func (s *sock) incref() bool {
	for {
		v := s.state.Load()
		if v&sockClosed != 0 {
			return false
		}
		if s.state.CompareAndSwap(v, v+1) {
			return true
		}
	}
}

func (s *sock) decref() {
	if s.state.Add(^uint64(0)) == sockClosed {
		s.destroy()
	}
}

func (s *sock) destroy() {
	// Not a raw call: closing a socket in a watched epoll set may sleep on the set's lock.
	unix.Syscall(unix.SYS_CLOSE, uintptr(s.fd), 0, 0)
	if s.registered.Load() {
		s.tp.unregister(s)
	}
}

// Close closes the socket once no call uses it; it is safe to call more than once and from
// any goroutine. Waits in progress return net.ErrClosed.
func (s *sock) Close() error {
	for {
		v := s.state.Load()
		if v&sockClosed != 0 {
			return nil
		}
		if s.state.CompareAndSwap(v, v|sockClosed) {
			if v == 0 {
				s.destroy()
			}
			s.r.wakeOrSpawn()
			s.w.wake()
			return nil
		}
	}
}

func (s *sock) isClosed() bool { return s.state.Load()&sockClosed != 0 }

// ready records the readiness events tp reported for s.
func (s *sock) ready(events uint32) {
	if events&(unix.EPOLLRDHUP|unix.EPOLLHUP|unix.EPOLLERR) != 0 {
		s.peerDone.Store(true)
	}
	if events&unix.EPOLLPRI != 0 {
		// Urgent data: a read stops short at its mark with bytes still queued behind it, so
		// a short read no longer says the socket is drained.
		s.urgent.Store(true)
	}
	if events&(unix.EPOLLIN|unix.EPOLLRDHUP|unix.EPOLLHUP|unix.EPOLLERR) != 0 {
		s.r.wakeOrSpawn()
	}
	if events&(unix.EPOLLOUT|unix.EPOLLHUP|unix.EPOLLERR) != 0 {
		s.w.wake()
	}
}

// wakeOrSpawn wakes w's waiter, or starts w's spawn half if it has one. The token comes
// first: a spawnOnReady storing its half meanwhile then finds either the token or finds its
// half taken here, so the half is started exactly once and never missed.
func (w *waiter) wakeOrSpawn() {
	w.wake()
	if h := w.spawn.Swap(nil); h != nil {
		select {
		case <-w.ready: // the token was for h, which starts without waiting
		default:
		}
		h.startArmed()
	}
}

// startArmed starts a half armed with spawnOnReady in a goroutine of its own, or hands it
// to the server's onArmedStart.
func (h *half) startArmed() {
	if f := h.t.s.onArmedStart; f != nil {
		f(h)
		return
	}
	h.spawn()
}

// spawnOnReady makes h, which reads s, start in a goroutine of its own when s becomes
// readable or is closed. It returns false if s cannot tell (the caller starts h itself).
func (s *sock) spawnOnReady(h *half) bool {
	if !s.incref() {
		return false
	}
	err := s.tp.register(s)
	s.decref()
	if err != nil {
		return false
	}
	h.waitFirst = false // it starts only when there is something to read
	s.r.spawn.Store(h)
	// Readiness reported before the store left a token instead: take h back and start it.
	select {
	case <-s.r.ready:
		if s.r.spawn.CompareAndSwap(h, nil) {
			h.startArmed()
		}
	default:
	}
	// A Close before the store found no half to start.
	if s.isClosed() && s.r.spawn.CompareAndSwap(h, nil) {
		h.startArmed()
	}
	return true
}

func (w *waiter) wake() {
	select {
	case w.ready <- struct{}{}:
	default:
	}
}

// wait blocks until w's direction may be ready, the socket is closed (nil: the caller's
// next call sees it) or w's deadline passes (os.ErrDeadlineExceeded).
func (s *sock) wait(w *waiter) error {
	if !s.registered.Load() {
		if !s.incref() {
			return net.ErrClosed
		}
		err := s.tp.register(s)
		s.decref()
		if err != nil {
			return err
		}
	}
	for {
		if s.isClosed() {
			return net.ErrClosed
		}
		if err := s.tp.failure(); err != nil {
			return err
		}
		dl := w.deadline.Load()
		if dl == 0 {
			<-w.ready
			return nil
		}
		d := time.Duration(dl - time.Now().UnixNano())
		if d <= 0 {
			return os.ErrDeadlineExceeded
		}
		if w.timer == nil {
			w.timer = time.NewTimer(d)
		} else {
			w.timer.Reset(d)
		}
		select {
		case <-w.ready:
			w.timer.Stop()
			return nil
		case <-w.timer.C:
		}
	}
}

// setDeadline sets w's deadline. A waiter sees a new deadline at its next wake-up, or at
// once if the deadline has passed already.
func (w *waiter) setDeadline(t time.Time) {
	if t.IsZero() {
		w.deadline.Store(0)
		return
	}
	w.deadline.Store(max(t.UnixNano(), 1))
	if !t.After(time.Now()) {
		w.wake()
	}
}

// SetReadDeadline sets the deadline of reads and of waits for readability.
func (s *sock) SetReadDeadline(t time.Time) error {
	s.r.setDeadline(t)
	return nil
}

// SetWriteDeadline sets the deadline of writes and of waits for writability.
func (s *sock) SetWriteDeadline(t time.Time) error {
	s.w.setDeadline(t)
	return nil
}

// sockConn is a sock's syscall.RawConn: Read and Write call f until it reports done,
// waiting for readiness between calls.
type sockConn sock

var _ syscall.RawConn = (*sockConn)(nil)

// Control calls f with the descriptor, unless the socket is closed.
func (c *sockConn) Control(f func(fd uintptr)) error {
	s := (*sock)(c)
	if !s.incref() {
		return net.ErrClosed
	}
	f(uintptr(s.fd))
	s.decref()
	return nil
}

func (c *sockConn) Read(f func(fd uintptr) bool) error  { return (*sock)(c).do(&c.r, f) }
func (c *sockConn) Write(f func(fd uintptr) bool) error { return (*sock)(c).do(&c.w, f) }

func (s *sock) do(w *waiter, f func(fd uintptr) bool) error {
	for {
		if !s.incref() {
			return net.ErrClosed
		}
		done := f(uintptr(s.fd))
		s.decref()
		if done {
			return nil
		}
		if err := s.wait(w); err != nil {
			return err
		}
	}
}

// errOf returns err, or net.ErrClosed once the socket was closed.
func (s *sock) errOf(err error) error {
	if err != nil && s.isClosed() {
		return net.ErrClosed
	}
	return err
}

// Read reads into p; it returns io.EOF at the peer's FIN.
func (s *sock) Read(p []byte) (int, error) {
	if len(p) == 0 {
		return 0, nil
	}
	var n int
	var rerr error
	err := s.rc.Read(func(fd uintptr) bool {
		for {
			r, _, e := unix.RawSyscall(unix.SYS_READ, fd, uintptr(unsafe.Pointer(&p[0])), uintptr(len(p)))
			switch e {
			case 0:
				n = int(r)
				if n == 0 {
					rerr = io.EOF
				}
				return true
			case unix.EINTR:
				continue
			case unix.EAGAIN:
				return false
			}
			rerr = os.NewSyscallError("read", e)
			return true
		}
	})
	if err != nil {
		return 0, err
	}
	if rerr == io.EOF {
		return n, rerr
	}
	return n, s.errOf(rerr)
}

// readNow reads what is queued into a buffer of bufs without waiting: a nil buffer when
// nothing is there yet or at the peer's FIN (which the next read sees again).
func (s *sock) readNow(bufs *copyBufs) (*[]byte, int, error) {
	if !s.incref() {
		return nil, 0, net.ErrClosed
	}
	defer s.decref()
	bp := bufs.get()
	for {
		r, _, e := unix.RawSyscall(unix.SYS_READ, uintptr(s.fd), uintptr(unsafe.Pointer(&(*bp)[0])), uintptr(len(*bp)))
		switch {
		case e == unix.EINTR:
			continue
		case e == 0 && r > 0:
			return bp, int(r), nil
		case e == 0, e == unix.EAGAIN:
			bufs.put(bp)
			return nil, 0, nil
		}
		bufs.put(bp)
		return nil, 0, os.NewSyscallError("read", e)
	}
}

// Write writes all of p.
func (s *sock) Write(p []byte) (int, error) { return s.writeAll(p) }

// writeAll writes p, waiting for room when the socket's buffer is full. It makes raw
// write calls, which do not block on the nonblocking socket.
func (s *sock) writeAll(p []byte) (int, error) {
	var done int
	var werr error
	err := s.rc.Write(func(fd uintptr) bool {
		for done < len(p) {
			n, _, e := unix.RawSyscall(unix.SYS_WRITE, fd, uintptr(unsafe.Pointer(&p[done])), uintptr(len(p)-done))
			switch e {
			case 0:
				done += int(n)
			case unix.EINTR:
			case unix.EAGAIN:
				return false
			default:
				werr = os.NewSyscallError("write", e)
				return true
			}
		}
		return true
	})
	if err != nil {
		return done, s.errOf(err)
	}
	return done, s.errOf(werr)
}

// CloseWrite sends a FIN (shutdown(SHUT_WR)).
func (s *sock) CloseWrite() error {
	var e syscall.Errno
	if err := s.rc.Control(func(fd uintptr) {
		_, _, e = unix.RawSyscall(unix.SYS_SHUTDOWN, fd, unix.SHUT_WR, 0)
	}); err != nil {
		return err
	}
	if e != 0 {
		return os.NewSyscallError("shutdown", e)
	}
	return nil
}

// resetOnClose makes the coming Close send a reset instead of a FIN (SO_LINGER 0).
func (s *sock) resetOnClose() {
	s.rc.Control(func(fd uintptr) {
		unix.SetsockoptLinger(int(fd), unix.SOL_SOCKET, unix.SO_LINGER, &unix.Linger{Onoff: 1})
	})
}

// localAddr returns the socket's own address.
func (s *sock) localAddr() (netip.AddrPort, error) {
	var sa unix.Sockaddr
	var err error
	if cerr := s.rc.Control(func(fd uintptr) { sa, err = unix.Getsockname(int(fd)) }); cerr != nil {
		return netip.AddrPort{}, s.errOf(cerr)
	}
	if err != nil {
		return netip.AddrPort{}, os.NewSyscallError("getsockname", err)
	}
	return sockaddr.Unmap(sockaddr.AddrPort(sa)), nil
}

// setNoDelay turns Nagle's algorithm off on a socket.
func setNoDelay(fd int) error {
	one := int32(1)
	_, _, e := unix.RawSyscall6(unix.SYS_SETSOCKOPT, uintptr(fd), unix.IPPROTO_TCP, unix.TCP_NODELAY,
		uintptr(unsafe.Pointer(&one)), 4, 0)
	if e != 0 {
		return os.NewSyscallError("setsockopt", e)
	}
	return nil
}

// setKeepAlive turns on keepalive probes after d of quiet, then every 15s, 9 at most (the
// intervals and count of package net).
func setKeepAlive(fd int, d time.Duration) error {
	secs := max(int((d+time.Second-1)/time.Second), 1)
	for _, o := range []struct{ level, opt, v int }{
		{unix.SOL_SOCKET, unix.SO_KEEPALIVE, 1},
		{unix.IPPROTO_TCP, unix.TCP_KEEPIDLE, secs},
		{unix.IPPROTO_TCP, unix.TCP_KEEPINTVL, 15},
		{unix.IPPROTO_TCP, unix.TCP_KEEPCNT, 9},
	} {
		if err := unix.SetsockoptInt(fd, o.level, o.opt, o.v); err != nil {
			return os.NewSyscallError("setsockopt", err)
		}
	}
	return nil
}

// errConnectTimeout is a dial that did not complete within its timeout.
var errConnectTimeout = errors.New("connect timeout")

// dialSock connects to addr within timeout or until ctx is done, and sends first on the new
// connection. A loopback connect is usually complete when connect(2) returns EINPROGRESS:
// a write of first that succeeds at once shows it (a socket still in the handshake would
// refuse it with EAGAIN), else the state is checked (one getsockopt) before waiting for
// writability. It returns how many bytes of first it sent; the caller sends the rest.
func dialSock(ctx context.Context, tp *tcpPoll, addr netip.AddrPort, timeout, keepAlive time.Duration, first []byte) (*sock, int, error) {
	var raw unix.RawSockaddrInet6
	family, salen, err := sockaddr.Raw(addr, &raw)
	if err != nil {
		return nil, 0, err
	}
	sa := unsafe.Pointer(&raw)
	r, _, e := unix.RawSyscall(unix.SYS_SOCKET, uintptr(family), unix.SOCK_STREAM|unix.SOCK_NONBLOCK|unix.SOCK_CLOEXEC, 0)
	if e != 0 {
		return nil, 0, os.NewSyscallError("socket", e)
	}
	fd := int(r)
	if err := setNoDelay(fd); err != nil {
		unix.Close(fd)
		return nil, 0, err
	}
	if keepAlive > 0 {
		if err := setKeepAlive(fd, keepAlive); err != nil {
			unix.Close(fd)
			return nil, 0, err
		}
	}
	for {
		// Not a raw call: the search for a free local port can take long when ports run short.
		_, _, e = unix.Syscall(unix.SYS_CONNECT, uintptr(fd), uintptr(sa), uintptr(salen))
		if e != unix.EINTR {
			break
		}
	}
	pending := false
	switch e {
	case 0, unix.EISCONN:
	case unix.EINPROGRESS, unix.EALREADY:
		pending = true
	default:
		unix.Close(fd)
		return nil, 0, os.NewSyscallError("connect", e)
	}
	s := newSock(tp, fd)
	if !pending {
		return s, 0, nil
	}
	if len(first) > 0 {
		n, _, e := unix.RawSyscall6(unix.SYS_SENDTO, uintptr(fd), uintptr(unsafe.Pointer(&first[0])),
			uintptr(len(first)), unix.MSG_NOSIGNAL, 0, 0)
		switch e {
		case 0:
			return s, int(n), nil
		case unix.EAGAIN:
			// Still in the handshake.
		default:
			s.Close()
			return nil, 0, os.NewSyscallError("connect", e)
		}
	}
	var state byte
	var cerr error
	check := func(fd uintptr) bool {
		state, cerr = tcpState(fd)
		return cerr != nil || state != stateSynSent
	}
	if err := s.rc.Control(func(fd uintptr) { check(fd) }); err != nil {
		s.Close()
		return nil, 0, err
	}
	if cerr == nil && state == stateSynSent {
		// Still in the handshake: wait for writability, bounded by the timeout and ctx.
		s.SetWriteDeadline(time.Now().Add(timeout))
		cut := make(chan struct{})
		stop := context.AfterFunc(ctx, func() {
			s.SetWriteDeadline(time.Unix(1, 0))
			close(cut)
		})
		err := s.rc.Write(check)
		if !stop() {
			<-cut // the cut has run or is running: let it finish before the deadline is cleared
			if err == nil {
				err = ctx.Err()
			}
		}
		s.SetWriteDeadline(time.Time{})
		if err != nil {
			s.Close()
			if errors.Is(err, os.ErrDeadlineExceeded) {
				if ctx.Err() != nil {
					return nil, 0, ctx.Err()
				}
				return nil, 0, errConnectTimeout
			}
			return nil, 0, err
		}
	}
	// A connect that failed leaves the socket closed; one that succeeded is established, or
	// already past it when the backend sent its last bytes and a FIN at once.
	if cerr == nil && state == stateClose {
		cerr = soError(s)
	}
	if cerr != nil {
		s.Close()
		return nil, 0, cerr
	}
	return s, 0, nil
}

// TCP states of tcp_info.tcpi_state.
const (
	stateSynSent = 2
	stateClose   = 7
)

// tcpState returns the socket's TCP state: the first byte of TCP_INFO.
func tcpState(fd uintptr) (byte, error) {
	var b [1]byte
	l := uint32(len(b))
	_, _, e := unix.RawSyscall6(unix.SYS_GETSOCKOPT, fd, unix.IPPROTO_TCP, unix.TCP_INFO,
		uintptr(unsafe.Pointer(&b[0])), uintptr(unsafe.Pointer(&l)), 0)
	if e != 0 {
		return 0, os.NewSyscallError("getsockopt", e)
	}
	return b[0], nil
}

// soError returns the error of a failed connect (SO_ERROR), or a generic one if the socket
// holds none.
func soError(s *sock) error {
	var v int
	var err error
	if cerr := s.rc.Control(func(fd uintptr) {
		v, err = unix.GetsockoptInt(int(fd), unix.SOL_SOCKET, unix.SO_ERROR)
	}); cerr != nil {
		return cerr
	}
	switch {
	case err != nil:
		return os.NewSyscallError("getsockopt", err)
	case v != 0:
		return os.NewSyscallError("connect", syscall.Errno(v))
	}
	return fmt.Errorf("connect: %w", syscall.ECONNREFUSED)
}
