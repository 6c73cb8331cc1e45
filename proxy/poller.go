//go:build linux

package proxy

import (
	"sync"

	"golang.org/x/sys/unix"
)

// poller watches the sockets of quiet TCP connections with an epoll instance of its own, so
// that a quiet copy direction needs no parked goroutine: when bytes arrive, the poller starts
// a goroutine that resumes the copy. The sockets stay registered with Go's own netpoller as
// well; this second, level-triggered one-shot registration only says "wake me".
type poller struct {
	s    *Server
	epfd int
	wake int // eventfd that stops the loop

	mu     sync.Mutex // guards parked and next
	parked map[uint64]*half
	next   uint64
}

// pollEntry is a half's registration with the poller.
type pollEntry struct {
	id         uint64 // key in parked; 0 until first parked (0 is the wake event)
	registered bool   // the socket was added to the epoll set
}

func newPoller(s *Server) (*poller, error) {
	epfd, err := unix.EpollCreate1(unix.EPOLL_CLOEXEC)
	if err != nil {
		return nil, err
	}
	wake, err := unix.Eventfd(0, unix.EFD_CLOEXEC|unix.EFD_NONBLOCK)
	if err != nil {
		unix.Close(epfd)
		return nil, err
	}
	ev := unix.EpollEvent{Events: unix.EPOLLIN}
	if err := unix.EpollCtl(epfd, unix.EPOLL_CTL_ADD, wake, &ev); err != nil {
		unix.Close(epfd)
		unix.Close(wake)
		return nil, err
	}
	return &poller{s: s, epfd: epfd, wake: wake, parked: make(map[uint64]*half)}, nil
}

// park registers h's source socket for one readiness event; on nil, h belongs to the poller
// and the caller's goroutine must stop touching it.
func (p *poller) park(h *half) error {
	p.mu.Lock()
	if h.parked.id == 0 {
		p.next++
		h.parked.id = p.next
	}
	id, wasRegistered := h.parked.id, h.parked.registered
	h.parked.registered = true
	p.parked[id] = h
	p.mu.Unlock()
	var err error
	cerr := h.src.rc.Control(func(fd uintptr) {
		ev := unix.EpollEvent{Events: unix.EPOLLIN | unix.EPOLLRDHUP | unix.EPOLLONESHOT,
			Fd: int32(uint32(id)), Pad: int32(uint32(id >> 32))}
		op := unix.EPOLL_CTL_ADD
		if wasRegistered {
			op = unix.EPOLL_CTL_MOD
		}
		err = unix.EpollCtl(p.epfd, op, int(fd), &ev)
	})
	if err == nil {
		err = cerr
	}
	if err != nil {
		p.mu.Lock()
		if p.parked[id] == h {
			delete(p.parked, id)
		}
		h.parked.registered = wasRegistered
		p.mu.Unlock()
		return err
	}
	if p.s.onPark != nil {
		p.s.onPark()
	}
	return nil
}

// take removes h from the poller if it is parked there; the caller then owns it.
func (p *poller) take(h *half) bool {
	if p == nil {
		return false
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if h.parked.id != 0 && p.parked[h.parked.id] == h {
		delete(p.parked, h.parked.id)
		return true
	}
	return false
}

// loop resumes parked halves whose socket became readable, until stop.
func (p *poller) loop() {
	defer p.s.wg.Done()
	events := make([]unix.EpollEvent, 256)
	for {
		n, err := unix.EpollWait(p.epfd, events, -1)
		if err == unix.EINTR {
			continue
		}
		if err != nil {
			p.s.log.Error("idle poller failed", "err", err)
			return
		}
		for _, ev := range events[:n] {
			id := uint64(uint32(ev.Fd)) | uint64(uint32(ev.Pad))<<32
			if id == 0 {
				return
			}
			p.mu.Lock()
			h := p.parked[id]
			delete(p.parked, id)
			p.mu.Unlock()
			if h != nil {
				p.s.wg.Add(1)
				go h.resume()
			}
		}
	}
}

// stop wakes the loop so that it returns.
func (p *poller) stop() {
	var one = [8]byte{1}
	unix.Write(p.wake, one[:])
}

// close releases the epoll instance; call after the loop returned.
func (p *poller) close() {
	unix.Close(p.epfd)
	unix.Close(p.wake)
}
