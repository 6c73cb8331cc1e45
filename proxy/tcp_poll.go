//go:build linux

package proxy

import (
	"errors"
	"fmt"
	"os"
	"sync"
	"sync/atomic"
	"syscall"
	"unsafe"

	"golang.org/x/sys/unix"
)

// tcpPoll tells the proxy's TCP sockets when they are ready. It is one edge-triggered epoll
// set of its own, nested in the runtime's netpoller: a dispatcher goroutine waits there for
// the set to become readable, takes its events with one epoll_wait that does not block and
// wakes the goroutines waiting on those sockets.
//
// It spares the calls that putting each socket in the runtime's netpoller costs: os.NewFile's
// fcntl and the EPOLL_CTL_DEL before close. A socket (listening ones too) joins the set
// (EPOLL_CTL_ADD) only the first time it has to wait, and leaves it with its close.
type tcpPoll struct {
	epfd int
	f    *os.File // epfd, waited on in the runtime's netpoller
	rc   syscall.RawConn

	mu     sync.Mutex // guards slots, gens, free, closed, shut, err and the use of epfd
	slots  []*sock    // registered sockets by slot; an event names its slot and generation
	gens   []uint32   // the generation of each slot, bumped when its socket leaves
	free   []uint32   // unused slots
	closed bool       // no socket may join the set
	shut   bool       // close has run: the set's file is closed
	err    error      // why the poller failed; nil while it works or after a plain close

	// failed is set, before any socket is woken, once the poller can no longer tell
	// readiness: every wait then returns err instead of waiting forever.
	failed atomic.Bool
}

var errPollClosed = errors.New("tcp poller closed")

func newTCPPoll() (*tcpPoll, error) {
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
	return &tcpPoll{epfd: epfd, f: f, rc: rc}, nil
}

// register adds s to the set for input, output and the peer's FIN, edge-triggered. The add
// reports what is ready already, so nothing that happened before is lost.
func (p *tcpPoll) register(s *sock) error {
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
func (p *tcpPoll) unregister(s *sock) {
	p.mu.Lock()
	p.slots[s.slot] = nil
	p.gens[s.slot]++
	p.free = append(p.free, s.slot)
	p.mu.Unlock()
}

// loop dispatches readiness until the poller is closed.
func (p *tcpPoll) loop() error {
	events := make([]unix.EpollEvent, 128)
	ready := make([]*sock, len(events))
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

func (p *tcpPoll) isClosed() bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.closed
}

// fail marks the poller failed with err and wakes every socket in the set, so that each
// waiter returns err rather than waiting for readiness nobody will report; sockets not yet
// in the set fail to join it. Halves started by a socket's readiness start now and meet
// the error in their first wait.
func (p *tcpPoll) fail(err error) {
	p.mu.Lock()
	if p.err == nil {
		p.err = fmt.Errorf("tcp poller failed: %w", err)
	}
	p.closed = true
	p.failed.Store(true)
	socks := make([]*sock, 0, len(p.slots))
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

// failure returns the error fail recorded; nil while the poller works.
func (p *tcpPoll) failure() error {
	if !p.failed.Load() {
		return nil
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.err
}

// close stops the loop and releases the set; sockets that have yet to wait then fail to.
// The file is closed outside mu: its Close waits for the loop's read, which may be waiting
// for mu.
func (p *tcpPoll) close() {
	p.mu.Lock()
	was := p.shut
	p.closed, p.shut = true, true
	p.mu.Unlock()
	if !was {
		p.f.Close()
	}
}
