//go:build linux && (amd64 || arm64)

package rawio

import (
	"io"
	"net"
	"net/netip"
	"os"
	"sync/atomic"
	"syscall"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"
)

// Sock is a socket made with system calls, outside the runtime's netpoller.
//
// A TCP Sock (ListenTCP, DialTCP, Listener.Accept) is nonblocking: a call that would block
// waits for the socket's readiness from its dispatching Poll, which it joins the first time
// it has to wait and leaves with its close. A UDP Sock (ListenUDP, DialUDP) is blocking and
// never waits in a Poll of that kind: a worker blocks on it in the kernel, or finds it ready
// in a worker's Poll.
//
// A reference count keeps the descriptor open while a call uses it, so that Close from
// another goroutine cannot let the number be reused under a running call: the last
// reference after Close closes it.
type Sock struct {
	fd    int
	p     *Poll // the dispatching Poll of a TCP Sock; nil for UDP
	local netip.AddrPort
	state atomic.Uint64 // sockClosed | calls using fd
	// registered is set once the socket is in p's set, in slot.
	registered atomic.Bool
	slot       uint32
	// peerDone is set when p reported the peer's FIN, a reset or an error: a read after a
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
	// arm, if set, is work that no goroutine runs yet: the direction's next readiness (or
	// the socket's close) starts it instead of waking a waiter.
	arm atomic.Pointer[Arm]
}

// A Starter is work that a socket's readiness starts (Sock.StartOnReadable).
type Starter interface {
	// Start runs the work, in a goroutine of its own; it is called from the Poll's loop, or
	// from the goroutine that armed it or closed the socket, and must not block.
	Start()
}

// Arm holds a Starter while it waits for a socket's readiness. Its address is its identity:
// Disarm takes back exactly the Arm that StartOnReadable stored.
type Arm struct{ Starter }

// NewSock wraps fd, a nonblocking TCP socket, which joins p's set when it first has to wait.
func NewSock(p *Poll, fd int) *Sock {
	s := &Sock{fd: fd, p: p}
	s.r.ready = make(chan struct{}, 1)
	s.w.ready = make(chan struct{}, 1)
	return s
}

// incref takes a reference for a call on fd; false once the socket is closed.
func (s *Sock) incref() bool {
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

func (s *Sock) decref() {
	if s.state.Add(^uint64(0)) == sockClosed {
		s.destroy()
	}
}

func (s *Sock) destroy() {
	// Not a raw call: closing a socket in a watched epoll set may sleep on the set's lock.
	unix.Syscall(unix.SYS_CLOSE, uintptr(s.fd), 0, 0)
	if s.registered.Load() {
		s.p.unregister(s)
	}
}

// Close closes the socket once no call uses it; it is safe to call more than once and from
// any goroutine. Waits in progress return net.ErrClosed, and an armed Starter starts.
func (s *Sock) Close() error {
	for {
		v := s.state.Load()
		if v&sockClosed != 0 {
			return nil
		}
		if s.state.CompareAndSwap(v, v|sockClosed) {
			if v == 0 {
				s.destroy()
			}
			s.r.wakeOrStart()
			s.w.wake()
			return nil
		}
	}
}

// IsClosed reports whether Close was called.
func (s *Sock) IsClosed() bool { return s.state.Load()&sockClosed != 0 }

// PeerDone reports whether the Poll saw the peer's FIN, a reset or an error.
func (s *Sock) PeerDone() bool { return s.peerDone.Load() }

// Urgent reports whether the peer sent urgent (out-of-band) data: a read then stops short at
// its mark with bytes still queued behind it, so a short read no longer says the socket is
// drained.
func (s *Sock) Urgent() bool { return s.urgent.Load() }

// ready records the readiness events the Poll reported for s.
func (s *Sock) ready(events uint32) {
	if events&(unix.EPOLLRDHUP|unix.EPOLLHUP|unix.EPOLLERR) != 0 {
		s.peerDone.Store(true)
	}
	if events&unix.EPOLLPRI != 0 {
		s.urgent.Store(true)
	}
	if events&(unix.EPOLLIN|unix.EPOLLRDHUP|unix.EPOLLHUP|unix.EPOLLERR) != 0 {
		s.r.wakeOrStart()
	}
	if events&(unix.EPOLLOUT|unix.EPOLLHUP|unix.EPOLLERR) != 0 {
		s.w.wake()
	}
}

// wakeOrStart wakes w's waiter, or starts w's armed Starter if it has one. The token comes
// first: a StartOnReadable storing its Arm meanwhile then finds either the token or finds its
// Arm taken here, so the Starter is started exactly once and never missed.
func (w *waiter) wakeOrStart() {
	w.wake()
	if a := w.arm.Swap(nil); a != nil {
		select {
		case <-w.ready: // the token was for a, which starts without waiting
		default:
		}
		a.Start()
	}
}

// StartOnReadable arms a: it starts once s becomes readable or is closed, and the caller
// must then leave to a.Start whatever a's work touches. It may start at once, before
// StartOnReadable returns. It returns false if s cannot tell (the caller runs the work
// itself).
func (s *Sock) StartOnReadable(a *Arm) bool {
	if !s.incref() {
		return false
	}
	err := s.p.register(s)
	s.decref()
	if err != nil {
		return false
	}
	s.r.arm.Store(a)
	// Readiness reported before the store left a token instead: take a back and start it.
	select {
	case <-s.r.ready:
		if s.r.arm.CompareAndSwap(a, nil) {
			a.Start()
		}
	default:
	}
	// A Close before the store found nothing to start.
	if s.IsClosed() && s.r.arm.CompareAndSwap(a, nil) {
		a.Start()
	}
	return true
}

// Disarm takes a back if it is still armed on s, before readiness or a close starts it; the
// caller then owns a's work again.
func (s *Sock) Disarm(a *Arm) bool { return s.r.arm.CompareAndSwap(a, nil) }

// Armed reports whether a is armed on s and not started yet.
func (s *Sock) Armed(a *Arm) bool { return s.r.arm.Load() == a }

func (w *waiter) wake() {
	select {
	case w.ready <- struct{}{}:
	default:
	}
}

// wait blocks until w's direction may be ready, the socket is closed (nil: the caller's
// next call sees it) or w's deadline passes (os.ErrDeadlineExceeded).
func (s *Sock) wait(w *waiter) error {
	if !s.registered.Load() {
		if !s.incref() {
			return net.ErrClosed
		}
		err := s.p.register(s)
		s.decref()
		if err != nil {
			return err
		}
	}
	for {
		if s.IsClosed() {
			return net.ErrClosed
		}
		if err := s.p.Failure(); err != nil {
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
func (s *Sock) SetReadDeadline(t time.Time) error {
	s.r.setDeadline(t)
	return nil
}

// SetWriteDeadline sets the deadline of writes and of waits for writability.
func (s *Sock) SetWriteDeadline(t time.Time) error {
	s.w.setDeadline(t)
	return nil
}

// sockConn is a Sock's syscall.RawConn: Read and Write call f until it reports done,
// waiting for readiness between calls.
type sockConn Sock

var _ syscall.RawConn = (*sockConn)(nil)

// RawConn returns the socket as a syscall.RawConn.
func (s *Sock) RawConn() syscall.RawConn { return (*sockConn)(s) }

// Control calls f with the descriptor, unless the socket is closed (net.ErrClosed). A
// blocking call in f keeps the descriptor open until it returns.
func (s *Sock) Control(f func(fd uintptr)) error {
	if !s.incref() {
		return net.ErrClosed
	}
	f(uintptr(s.fd))
	s.decref()
	return nil
}

// ReadWith calls f with the descriptor until f reports done, waiting for readability
// between calls; that is syscall.RawConn's Read, without an interface call.
func (s *Sock) ReadWith(f func(fd uintptr) bool) error { return s.do(&s.r, f) }

// WriteWith is ReadWith for writability.
func (s *Sock) WriteWith(f func(fd uintptr) bool) error { return s.do(&s.w, f) }

func (c *sockConn) Control(f func(fd uintptr)) error    { return (*Sock)(c).Control(f) }
func (c *sockConn) Read(f func(fd uintptr) bool) error  { return (*Sock)(c).do(&c.r, f) }
func (c *sockConn) Write(f func(fd uintptr) bool) error { return (*Sock)(c).do(&c.w, f) }

func (s *Sock) do(w *waiter, f func(fd uintptr) bool) error {
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

// ErrOf returns err, or net.ErrClosed once the socket was closed.
func (s *Sock) ErrOf(err error) error {
	if err != nil && s.IsClosed() {
		return net.ErrClosed
	}
	return err
}

// ReadFD makes one read(2) of p from fd, a nonblocking descriptor, as a raw call (it does not
// block), repeated on EINTR.
func ReadFD(fd uintptr, p []byte) (int, syscall.Errno) {
	for {
		r, _, e := unix.RawSyscall(unix.SYS_READ, fd, uintptr(unsafe.Pointer(&p[0])), uintptr(len(p)))
		if e != unix.EINTR {
			return int(r), e
		}
	}
}

// Read reads into p; it returns io.EOF at the peer's FIN.
func (s *Sock) Read(p []byte) (int, error) {
	if len(p) == 0 {
		return 0, nil
	}
	var n int
	var rerr error
	err := s.ReadWith(func(fd uintptr) bool {
		r, e := ReadFD(fd, p)
		switch e {
		case 0:
			n = r
			if n == 0 {
				rerr = io.EOF
			}
			return true
		case unix.EAGAIN:
			return false
		}
		rerr = os.NewSyscallError("read", e)
		return true
	})
	if err != nil {
		return 0, err
	}
	if rerr == io.EOF {
		return n, rerr
	}
	return n, s.ErrOf(rerr)
}

// ReadNow reads what is queued into p without waiting: 0, nil when nothing is there yet or
// at the peer's FIN (which the next read sees again).
func (s *Sock) ReadNow(p []byte) (int, error) {
	if !s.incref() {
		return 0, net.ErrClosed
	}
	defer s.decref()
	r, e := ReadFD(uintptr(s.fd), p)
	switch {
	case e == 0:
		return r, nil
	case e == unix.EAGAIN:
		return 0, nil
	}
	return 0, os.NewSyscallError("read", e)
}

// Write writes all of p, waiting for room when the socket's buffer is full. It makes raw
// write calls, which do not block on the nonblocking socket.
func (s *Sock) Write(p []byte) (int, error) {
	var done int
	var werr error
	err := s.WriteWith(func(fd uintptr) bool {
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
		return done, s.ErrOf(err)
	}
	return done, s.ErrOf(werr)
}

// CloseWrite sends a FIN (shutdown(SHUT_WR)).
func (s *Sock) CloseWrite() error {
	var e syscall.Errno
	if err := s.Control(func(fd uintptr) {
		_, _, e = unix.RawSyscall(unix.SYS_SHUTDOWN, fd, unix.SHUT_WR, 0)
	}); err != nil {
		return err
	}
	if e != 0 {
		return os.NewSyscallError("shutdown", e)
	}
	return nil
}

// ResetOnClose makes the coming Close send a reset instead of a FIN (SO_LINGER 0).
func (s *Sock) ResetOnClose() {
	s.Control(func(fd uintptr) {
		unix.SetsockoptLinger(int(fd), unix.SOL_SOCKET, unix.SO_LINGER, &unix.Linger{Onoff: 1})
	})
}

// LocalAddr returns the socket's own address, IPv4-mapped addresses as IPv4: the bound one
// of a listening or UDP socket, else asked of the kernel.
func (s *Sock) LocalAddr() (netip.AddrPort, error) {
	if s.local.IsValid() {
		return s.local, nil
	}
	var sa unix.Sockaddr
	var err error
	if cerr := s.Control(func(fd uintptr) { sa, err = unix.Getsockname(int(fd)) }); cerr != nil {
		return netip.AddrPort{}, s.ErrOf(cerr)
	}
	if err != nil {
		return netip.AddrPort{}, os.NewSyscallError("getsockname", err)
	}
	return Unmap(AddrPort(sa)), nil
}
