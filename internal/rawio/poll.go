//go:build linux && (amd64 || arm64)

package rawio

import (
	"errors"
	"fmt"
	"net"
	"os"
	"runtime"
	"sync"
	"sync/atomic"
	"syscall"
	"unsafe"

	"golang.org/x/sys/unix"
)

// Poll is an epoll set of Socks, in one of two kinds.
//
// A dispatching Poll (NewPoll) tells TCP Socks when they are ready. It is nested in the
// runtime's netpoller: Loop waits there for the set to become readable, takes its events with
// one epoll_wait that does not block and wakes the goroutines waiting on those sockets, or
// starts their armed work. The set is edge-triggered; a socket (listening ones too) joins it
// (EPOLL_CTL_ADD) only the first time it has to wait, and leaves it with its close. That
// spares the calls that putting each socket in the runtime's netpoller costs: os.NewFile's
// fcntl and the EPOLL_CTL_DEL before close.
//
// A worker's Poll (NewWorkerPoll) holds blocking UDP Socks that one worker waits on in the
// kernel, like a blocking receive (Wait): the worker keeps its P while it waits, the
// runtime's preemption signal ends the wait, and the wait is bounded by RcvTimeout. It is
// level-triggered: a Sock that still holds datagrams is reported again by the next Wait. It
// is not in the runtime's netpoller, or every datagram would also wake the netpoller's thread.
type Poll struct {
	epfd   int
	f      *os.File // epfd, waited on in the runtime's netpoller; nil for a worker's Poll
	rc     syscall.RawConn
	events []unix.EpollEvent // a worker's Wait's

	mu     sync.RWMutex // guards slots, gens, free, closed, shut, err and the use of epfd
	slots  []*Sock      // registered sockets by slot; an event names its slot and generation
	gens   []uint32     // the generation of each slot, bumped when its socket leaves
	free   []uint32     // unused slots
	closed bool         // no socket may join the set
	shut   bool         // Close has run: the set is closed
	err    error        // why the poller failed; nil while it works or after a plain close

	// failed is set, before any socket is woken, once the poller can no longer tell
	// readiness: every wait then returns err instead of waiting forever.
	failed atomic.Bool
}

var errPollClosed = errors.New("poller closed")

// NewPoll returns a dispatching Poll for TCP Socks; run its Loop in a goroutine.
func NewPoll() (*Poll, error) {
	epfd, err := unix.EpollCreate1(unix.EPOLL_CLOEXEC)
	if err != nil {
		return nil, os.NewSyscallError("epoll_create1", err)
	}
	// Nonblocking so that os.NewFile puts it in the runtime's netpoller.
	if err := unix.SetNonblock(epfd, true); err != nil {
		unix.Close(epfd)
		return nil, os.NewSyscallError("fcntl", err)
	}
	f := os.NewFile(uintptr(epfd), "tcp-epoll")
	rc, err := f.SyscallConn()
	if err != nil {
		f.Close()
		return nil, err
	}
	return &Poll{epfd: epfd, f: f, rc: rc}, nil
}

// NewWorkerPoll returns an empty worker's Poll that reports up to n ready Socks per Wait.
func NewWorkerPoll(n int) (*Poll, error) {
	epfd, err := unix.EpollCreate1(unix.EPOLL_CLOEXEC)
	if err != nil {
		return nil, os.NewSyscallError("epoll_create1", err)
	}
	return &Poll{epfd: epfd, events: make([]unix.EpollEvent, n)}, nil
}

// register adds s to a dispatching set for input, output and the peer's FIN,
// edge-triggered. The add reports what is ready already, so nothing that happened before is
// lost.
func (p *Poll) register(s *Sock) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	if s.registered.Load() {
		return nil
	}
	if p.closed {
		if p.err != nil {
			return p.err
		}
		return errPollClosed
	}
	var id uint32
	if n := len(p.free); n > 0 {
		id = p.free[n-1]
		p.free = p.free[:n-1]
	} else {
		id = uint32(len(p.slots))
		p.slots = append(p.slots, nil)
		p.gens = append(p.gens, 0)
	}
	ev := unix.EpollEvent{
		Events: unix.EPOLLIN | unix.EPOLLOUT | unix.EPOLLRDHUP | unix.EPOLLPRI | unix.EPOLLET,
		Fd:     int32(id), Pad: int32(p.gens[id]),
	}
	// The socket is held (its reference count) by the waiting caller: fd is its own. Not a
	// raw call: adding to a set that is itself watched may sleep on a kernel-wide lock.
	if _, _, e := unix.Syscall6(unix.SYS_EPOLL_CTL, uintptr(p.epfd), unix.EPOLL_CTL_ADD,
		uintptr(s.fd), uintptr(unsafe.Pointer(&ev)), 0, 0); e != 0 {
		p.free = append(p.free, id)
		return os.NewSyscallError("epoll_ctl", e)
	}
	p.slots[id] = s
	s.slot = id
	s.registered.Store(true)
	return nil
}

// unregister frees the slot of s; its socket is closed already, which took it out of the set.
func (p *Poll) unregister(s *Sock) {
	p.mu.Lock()
	p.slots[s.slot] = nil
	p.gens[s.slot]++
	p.free = append(p.free, s.slot)
	p.mu.Unlock()
}

// Loop dispatches a dispatching Poll's readiness until it is closed.
func (p *Poll) Loop() error {
	events := make([]unix.EpollEvent, 128)
	ready := make([]*Sock, len(events))
	var werr error
	drain := func(fd uintptr) bool {
		for {
			n, _, e := unix.RawSyscall6(unix.SYS_EPOLL_PWAIT, fd, uintptr(unsafe.Pointer(&events[0])),
				uintptr(len(events)), 0, 0, 0)
			switch {
			case e == unix.EINTR:
				continue
			case e != 0:
				werr = os.NewSyscallError("epoll_pwait", e)
				return true
			case n == 0:
				return false // wait for the set to become readable again
			}
			p.mu.Lock()
			for i, ev := range events[:n] {
				id, gen := uint32(ev.Fd), uint32(ev.Pad)
				ready[i] = nil
				if int(id) < len(p.slots) && p.gens[id] == gen {
					ready[i] = p.slots[id]
				}
			}
			p.mu.Unlock()
			for i, ev := range events[:n] {
				if s := ready[i]; s != nil {
					s.ready(ev.Events)
					ready[i] = nil
				}
			}
			if int(n) < len(events) {
				return false
			}
		}
	}
	err := p.rc.Read(drain)
	if err == nil {
		err = werr
	}
	return err
}

// IsClosed reports whether the Poll was closed or failed.
func (p *Poll) IsClosed() bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.closed
}

// Fail marks a dispatching Poll failed with err and wakes every socket in the set, so that
// each waiter returns err rather than waiting for readiness nobody will report; sockets not
// yet in the set fail to join it. Armed work starts now and meets the error in its first
// wait.
func (p *Poll) Fail(err error) {
	p.mu.Lock()
	if p.err == nil {
		p.err = fmt.Errorf("tcp poller failed: %w", err)
	}
	p.closed = true
	p.failed.Store(true)
	socks := make([]*Sock, 0, len(p.slots))
	for _, s := range p.slots {
		if s != nil {
			socks = append(socks, s)
		}
	}
	p.mu.Unlock()
	for _, s := range socks {
		s.ready(unix.EPOLLIN | unix.EPOLLOUT)
	}
}

// Failure returns the error Fail recorded; nil while the Poll works.
func (p *Poll) Failure() error {
	if !p.failed.Load() {
		return nil
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.err
}

// Add watches s, a UDP Sock, in a worker's Poll for datagrams and errors; Wait reports it by
// id. Any goroutine may call Add.
func (p *Poll) Add(s *Sock, id uint64) error {
	ev := unix.EpollEvent{Events: unix.EPOLLIN, Fd: int32(uint32(id)), Pad: int32(uint32(id >> 32))}
	return p.ctl(s, unix.EPOLL_CTL_ADD, &ev)
}

// Remove stops watching s in a worker's Poll; any goroutine may call it. Call it before
// closing s: a Sock closed while another goroutine is in a call on it keeps its descriptor,
// and would be reported ready, until that call returns.
func (p *Poll) Remove(s *Sock) error {
	return p.ctl(s, unix.EPOLL_CTL_DEL, &unix.EpollEvent{})
}

func (p *Poll) ctl(s *Sock, op int, ev *unix.EpollEvent) error {
	p.mu.RLock()
	defer p.mu.RUnlock()
	if p.closed {
		return net.ErrClosed
	}
	var errno error
	if err := s.Control(func(fd uintptr) { errno = unix.EpollCtl(p.epfd, op, int(fd), ev) }); err != nil {
		return err
	}
	if errno != nil {
		return fmt.Errorf("epoll_ctl: %w", errno)
	}
	return nil
}

// Wait blocks a worker until Socks in its Poll are ready and returns how many; ID(i) names
// them. It returns 0, nil once stop is set (within RcvTimeout). A timeout or a signal makes
// the worker yield its P before it waits again, so a waiting stop-the-world or goroutine can
// have it.
func (p *Poll) Wait(stop *atomic.Bool) (int, error) {
	ms := uintptr(RcvTimeout.Milliseconds())
	for !stop.Load() {
		r, _, errno := syscall.RawSyscall6(unix.SYS_EPOLL_PWAIT, uintptr(p.epfd), uintptr(unsafe.Pointer(&p.events[0])),
			uintptr(len(p.events)), ms, 0, 0)
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

// ID returns the id of the i-th ready Sock of a worker's last Wait.
func (p *Poll) ID(i int) uint64 {
	return uint64(uint32(p.events[i].Fd)) | uint64(uint32(p.events[i].Pad))<<32
}

// Close closes the Poll: sockets that have yet to wait in a dispatching one then fail to,
// its Loop returns, and a worker's Add and Remove return net.ErrClosed. Close a worker's Poll
// once no Wait is in progress. A dispatching Poll's file is closed outside mu: its Close
// waits for Loop's read, which may be waiting for mu.
func (p *Poll) Close() error {
	p.mu.Lock()
	was := p.shut
	p.closed, p.shut = true, true
	p.mu.Unlock()
	switch {
	case was:
		return net.ErrClosed
	case p.f != nil:
		return p.f.Close()
	}
	return unix.Close(p.epfd)
}
