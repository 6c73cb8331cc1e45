//go:build linux

package health

import (
	"bytes"
	"fmt"

	"golang.org/x/sys/unix"
)

// startTCPLocked opens a non-blocking socket, starts the connect and watches for it.
func (e *poller) startTCPLocked(op *pollOp) {
	family := addrFamily(op.addr)
	fd, err := rawSocket(family, unix.SOCK_STREAM|unix.SOCK_NONBLOCK|unix.SOCK_CLOEXEC)
	if err != nil {
		e.finishLocked(op, fmt.Errorf("connecting to %s: opening a socket: %w", op.addr, err))
		return
	}
	op.fd = fd
	// Close with a reset: a prober that leaves TIME_WAIT behind runs out of ports.
	rawLingerZero(fd)
	if err := rawConnect(fd, op.addr); err != nil && err != unix.EINPROGRESS {
		e.finishLocked(op, fmt.Errorf("connecting to %s: %w", op.addr, errno(err)))
		return
	}
	e.gen++
	op.gen = e.gen
	e.ops[int32(fd)] = op
	if err := e.armLocked(op, unix.EPOLLOUT, unix.EPOLL_CTL_ADD); err != nil {
		e.finishLocked(op, err)
	}
}

// armLocked waits for one event of kind ev on op's socket.
func (e *poller) armLocked(op *pollOp, ev uint32, ctl int) error {
	err := rawEpollCtl(e.epfd, ctl, op.fd, &unix.EpollEvent{Events: ev | unix.EPOLLONESHOT, Fd: int32(op.fd), Pad: op.gen})
	if err != nil {
		return fmt.Errorf("probing %s: watching the socket: %w", op.addr, err)
	}
	return nil
}

// stepTCPLocked moves a tcp or hello probe on after an event on its socket.
func (e *poller) stepTCPLocked(op *pollOp, ev uint32) {
	if !op.reading && op.sent == 0 {
		soerr, err := rawSoError(op.fd)
		switch {
		case err != nil:
			e.finishLocked(op, fmt.Errorf("connecting to %s: %w", op.addr, errno(err)))
			return
		case soerr != 0:
			e.finishLocked(op, fmt.Errorf("connecting to %s: %w", op.addr, soerr))
			return
		case ev&unix.EPOLLOUT == 0:
			e.rearmLocked(op, unix.EPOLLOUT) // not connected yet: the watch is one-shot
			return
		case op.kind == pollTCP:
			e.finishLocked(op, nil)
			return
		}
	}
	if !op.reading {
		n, err := rawWrite(op.fd, op.out[op.sent:])
		if err != nil && err != unix.EAGAIN {
			e.finishLocked(op, fmt.Errorf("sending a TLS ClientHello to %s: %w", op.addr, errno(err)))
			return
		}
		op.sent += max(n, 0)
		if op.sent < len(op.out) {
			e.rearmLocked(op, unix.EPOLLOUT)
			return
		}
		op.reading = true
		// On loopback the answer is often there already.
	}
	n, err := rawRead(op.fd, op.got[op.ngot:])
	switch {
	case err == unix.EAGAIN:
		e.rearmLocked(op, unix.EPOLLIN)
	case err != nil:
		e.finishLocked(op, fmt.Errorf("reading the TLS answer of %s: %w", op.addr, errno(err)))
	case n == 0:
		e.finishLocked(op, helloReply(op.addr, op.got[:op.ngot]))
	default:
		op.ngot += n
		if op.ngot == len(op.got) {
			e.finishLocked(op, helloReply(op.addr, op.got[:]))
			return
		}
		e.rearmLocked(op, unix.EPOLLIN)
	}
}

func (e *poller) rearmLocked(op *pollOp, ev uint32) {
	if err := e.armLocked(op, ev, unix.EPOLL_CTL_MOD); err != nil {
		e.finishLocked(op, err)
	}
}

// startUDPLocked sends a UDP probe on the port's kept socket. A reply is matched to the
// probe in flight on its socket; a socket carries one probe at a time, so a probe that
// starts while an earlier one still waits gets a new socket, and a socket whose probe
// timed out is closed (see finishLocked): a late reply then goes to a closed port and can
// never pass for the answer to a later probe. Datagrams that arrive while no probe waits
// are read and dropped.
func (e *poller) startUDPLocked(op *pollOp) {
	u := e.udpBy[op.addr]
	if u == nil || u.op != nil {
		nu, err := e.openUDPLocked(op)
		if err != nil {
			e.finishLocked(op, err)
			return
		}
		if u != nil {
			u.retired = true
		}
		e.udpBy[op.addr], u = nu, nu
	}
	u.op, u.used = op, e.now()
	op.udp, op.fd, op.gen = u, u.fd, u.gen
	if _, err := rawWrite(u.fd, op.out); err != nil {
		e.finishLocked(op, udpErr(op.addr, errno(err)))
	}
}

// openUDPLocked opens a connected UDP socket to op's port and watches it for reads.
func (e *poller) openUDPLocked(op *pollOp) (*udpSock, error) {
	family := addrFamily(op.addr)
	fd, err := rawSocket(family, unix.SOCK_DGRAM|unix.SOCK_NONBLOCK|unix.SOCK_CLOEXEC)
	if err != nil {
		return nil, fmt.Errorf("opening UDP socket to %s: %w", op.addr, err)
	}
	if err := rawConnect(fd, op.addr); err != nil {
		rawClose(fd)
		return nil, fmt.Errorf("opening UDP socket to %s: %w", op.addr, errno(err))
	}
	e.gen++
	u := &udpSock{addr: op.addr, fd: fd, gen: e.gen}
	if err := rawEpollCtl(e.epfd, unix.EPOLL_CTL_ADD, fd, &unix.EpollEvent{Events: unix.EPOLLIN, Fd: int32(fd), Pad: u.gen}); err != nil {
		rawClose(fd)
		return nil, fmt.Errorf("opening UDP socket to %s: watching it: %w", op.addr, err)
	}
	e.udps[int32(fd)] = u
	return u, nil
}

// readUDPLocked reads one datagram (or a pending ICMP error) from u.
func (e *poller) readUDPLocked(u *udpSock) {
	buf := e.scratch[:]
	n, err := rawRead(u.fd, buf)
	if err == unix.EAGAIN || err == unix.EINTR {
		return
	}
	op := u.op
	if op == nil {
		return // nobody asked: dropped
	}
	switch {
	case err != nil:
		e.finishLocked(op, udpErr(op.addr, errno(err)))
	case !bytes.HasPrefix(buf[:n], op.expect):
		e.finishLocked(op, fmt.Errorf("UDP reply from %s does not start with %q: %w", op.addr, op.expect, ErrBadReply))
	default:
		e.finishLocked(op, nil)
	}
}

func (e *poller) closeUDPLocked(u *udpSock) {
	if e.udps[int32(u.fd)] == u {
		delete(e.udps, int32(u.fd))
		rawClose(u.fd)
	}
	if e.udpBy[u.addr] == u {
		delete(e.udpBy, u.addr)
	}
}

// sweepLocked closes UDP sockets no probe used for udpIdle (a port no longer probed).
func (e *poller) sweepLocked(now int64) {
	e.swept = now
	for _, u := range e.udps {
		if u.op == nil && now-u.used > int64(udpIdle) {
			e.closeUDPLocked(u)
		}
	}
}

// opHeap orders probes by deadline.
type opHeap []*pollOp

func (h *opHeap) push(op *pollOp) {
	op.hidx = len(*h)
	*h = append(*h, op)
	h.up(op.hidx)
}

func (h *opHeap) remove(op *pollOp) {
	i, last := op.hidx, len(*h)-1
	if i != last {
		h.swap(i, last)
	}
	(*h)[last] = nil
	*h = (*h)[:last]
	op.hidx = -1
	if i != last {
		h.down(i)
		h.up(i)
	}
}

func (h opHeap) swap(i, j int) {
	h[i], h[j] = h[j], h[i]
	h[i].hidx, h[j].hidx = i, j
}

func (h opHeap) up(i int) {
	for i > 0 {
		p := (i - 1) / 2
		if h[p].dl <= h[i].dl {
			return
		}
		h.swap(i, p)
		i = p
	}
}

func (h opHeap) down(i int) {
	for {
		l := 2*i + 1
		if l >= len(h) {
			return
		}
		if r := l + 1; r < len(h) && h[r].dl < h[l].dl {
			l = r
		}
		if h[i].dl <= h[l].dl {
			return
		}
		h.swap(i, l)
		i = l
	}
}
