//go:build linux && (amd64 || arm64)

package rawudp

import (
	"fmt"
	"net"
	"runtime"
	"sync"
	"sync/atomic"
	"syscall"
	"unsafe"

	"golang.org/x/sys/unix"
)

// Epoll is one worker's epoll set of Conns, waited on in the kernel like a blocking receive:
// the worker keeps its P while it waits, the runtime's preemption signal ends the wait, and
// the wait is bounded by RcvTimeout. The set is level-triggered: a Conn that still holds
// datagrams is reported again by the next Wait.
type Epoll struct {
	events []unix.EpollEvent // Wait's

	mu     sync.RWMutex // guards closed: Add and Remove read-lock it, Close write-locks it
	fd     int
	closed bool
}

// NewEpoll returns an empty set that reports up to n ready Conns per Wait.
func NewEpoll(n int) (*Epoll, error) {
	fd, err := unix.EpollCreate1(unix.EPOLL_CLOEXEC)
	if err != nil {
		return nil, fmt.Errorf("epoll_create1: %w", err)
	}
	return &Epoll{fd: fd, events: make([]unix.EpollEvent, n)}, nil
}

// Add watches c for datagrams and errors; Wait reports it by id. Any goroutine may call Add.
func (e *Epoll) Add(c *Conn, id uint64) error {
	ev := unix.EpollEvent{Events: unix.EPOLLIN, Fd: int32(uint32(id)), Pad: int32(uint32(id >> 32))}
	return e.ctl(c, unix.EPOLL_CTL_ADD, &ev)
}

// Remove stops watching c; any goroutine may call it. Call it before closing c: a Conn
// closed while another goroutine is in a call on it keeps its descriptor, and would be
// reported ready, until that call returns.
func (e *Epoll) Remove(c *Conn) error {
	return e.ctl(c, unix.EPOLL_CTL_DEL, &unix.EpollEvent{})
}

func (e *Epoll) ctl(c *Conn, op int, ev *unix.EpollEvent) error {
	e.mu.RLock()
	defer e.mu.RUnlock()
	if e.closed {
		return net.ErrClosed
	}
	var errno error
	if err := c.rc.Control(func(fd uintptr) { errno = unix.EpollCtl(e.fd, op, int(fd), ev) }); err != nil {
		return err
	}
	if errno != nil {
		return fmt.Errorf("epoll_ctl: %w", errno)
	}
	return nil
}

// Wait blocks until Conns in the set are ready and returns how many; ID(i) names them. It
// returns 0, nil once stop is set (within RcvTimeout). A timeout or a signal makes the worker
// yield its P before it waits again, so a waiting stop-the-world or goroutine can have it.
func (e *Epoll) Wait(stop *atomic.Bool) (int, error) {
	ms := uintptr(RcvTimeout.Milliseconds())
	for !stop.Load() {
		r, _, errno := syscall.RawSyscall6(unix.SYS_EPOLL_PWAIT, uintptr(e.fd), uintptr(unsafe.Pointer(&e.events[0])),
			uintptr(len(e.events)), ms, 0, 0)
		switch {
		case errno == 0 && r > 0:
			return int(r), nil
		case errno == 0 || errno == syscall.EINTR:
			runtime.Gosched()
		default:
			return 0, fmt.Errorf("epoll_wait: %w", errno)
		}
	}
	return 0, nil
}

// ID returns the id of the i-th ready Conn of the last Wait.
func (e *Epoll) ID(i int) uint64 {
	return uint64(uint32(e.events[i].Fd)) | uint64(uint32(e.events[i].Pad))<<32
}

// Close closes the set, once no Wait is in progress; Add and Remove then return
// net.ErrClosed.
func (e *Epoll) Close() error {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.closed {
		return net.ErrClosed
	}
	e.closed = true
	return unix.Close(e.fd)
}
