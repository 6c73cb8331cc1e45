//go:build linux

package health

import (
	"errors"
	"fmt"
	"net/netip"
	"os"
	"sync"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
)

// havePoller says whether NetProber runs tcp, hello and udp probes on a poller.
const havePoller = true

// poller runs TCP connect, TLS hello and UDP probes on non-blocking sockets that one epoll
// loop goroutine watches for all probes in flight: no goroutine, timer or net.Conn per
// probe, and probe deadlines in a heap inside the loop. TCP sockets close with a reset (no
// TIME_WAIT). UDP sockets are connected (an ICMP port-unreachable reads as ECONNREFUSED) and
// kept per target port across probes while the loop runs (it ends after idleLinger without a
// probe, so with few ports and long intervals a socket may last one probe); see startUDP for
// how stale replies are kept out.
//
// The loop starts with the first probe and ends after idleLinger without one, closing its
// sockets, so a NetProber needs no Close. No call of ours blocks: the epoll fd is itself
// watched by the runtime's poller, where the loop goroutine parks between events (a thread
// blocked in epoll_wait would cost a thread hand-off and a sysmon wake-up per event, which
// measured as more CPU than the probes themselves, and a raw blocking call would stall the
// garbage collector).
type poller struct {
	base time.Time // monotonic origin of the nanosecond times below

	mu       sync.Mutex // guards every field below
	running  bool
	epfd     int
	ef       *os.File // epfd, registered with the runtime's poller
	wakeAt   int64    // the loop's wait ends at this time at the latest
	gen      int32
	inflight int
	idle     int64                       // when inflight last dropped to 0
	ops      map[int32]*pollOp           // tcp and hello probes by fd
	udps     map[int32]*udpSock          // every open UDP socket by fd
	udpBy    map[netip.AddrPort]*udpSock // the socket the next UDP probe of a port uses
	deadline opHeap
	swept    int64
	finished *pollOp // finished probes whose done is still to run, newest first
	scratch  [2048]byte
}

const (
	idleLinger = 100 * time.Millisecond // the loop ends after this long without a probe
	udpIdle    = time.Minute            // an unused UDP socket is closed after this long
)

type pollKind uint8

const (
	pollTCP pollKind = iota
	pollHello
	pollUDP
)

// pollOp is one probe in flight.
type pollOp struct {
	kind    pollKind
	addr    netip.AddrPort
	fd      int
	gen     int32
	out     []byte // the ClientHello or the UDP payload
	sent    int
	expect  []byte // the UDP reply prefix
	reading bool   // tcp/hello: connected, hello sent
	got     [helloReplyLen]byte
	ngot    int
	udp     *udpSock
	dl      int64 // deadline; 0 for none
	hidx    int   // index in the deadline heap, -1 when not in it
	ended   bool
	err     error
	done    func(error)
	next    *pollOp // in the finished list
}

// udpSock is a connected UDP socket to one target port.
type udpSock struct {
	addr    netip.AddrPort
	fd      int
	gen     int32
	op      *pollOp // the probe waiting for a reply, if any
	retired bool    // no longer in udpBy: closed when op ends
	used    int64
}

func (e *poller) now() int64 { return int64(time.Since(e.base)) }

// start starts one probe and returns it, or nil when it ended at once (done has then been
// called). done is called exactly once, never with e.mu held.
func (e *poller) start(kind pollKind, addr netip.AddrPort, out, expect []byte, deadline time.Time, done func(error)) *pollOp {
	op := &pollOp{kind: kind, addr: addr, fd: -1, out: out, expect: expect, hidx: -1, done: done}
	e.mu.Lock()
	if e.base.IsZero() {
		e.base = time.Now()
	}
	if !deadline.IsZero() {
		op.dl = max(int64(deadline.Sub(e.base)), 1)
	}
	if err := e.runLocked(); err != nil {
		e.finishLocked(op, err)
		e.unlockAndDeliver()
		return nil
	}
	e.inflight++
	if kind == pollUDP {
		e.startUDPLocked(op)
	} else {
		e.startTCPLocked(op)
	}
	if !op.ended && op.dl != 0 {
		e.deadline.push(op)
		if op.dl < e.wakeAt {
			e.wakeLocked(op.dl)
		}
	}
	e.unlockAndDeliver()
	return op
}

// cancel ends op with err unless it has ended already.
func (e *poller) cancel(op *pollOp, err error) {
	if op == nil {
		return
	}
	e.mu.Lock()
	e.finishLocked(op, err)
	e.unlockAndDeliver()
}

// runLocked starts the loop if it is not running.
func (e *poller) runLocked() error {
	if e.running {
		return nil
	}
	epfd, err := unix.EpollCreate1(unix.EPOLL_CLOEXEC)
	if err != nil {
		return fmt.Errorf("creating an epoll instance: %w", err)
	}
	// A non-blocking epoll fd in an os.File joins the runtime's own poller: the loop
	// goroutine parks there until a probe socket has an event, and no thread sleeps in a
	// system call of ours.
	if err := unix.SetNonblock(epfd, true); err != nil {
		rawClose(epfd)
		return fmt.Errorf("creating an epoll instance: %w", err)
	}
	ef := os.NewFile(uintptr(epfd), "health-poller")
	rc, err := ef.SyscallConn()
	if err != nil {
		ef.Close()
		return fmt.Errorf("creating an epoll instance: %w", err)
	}
	e.epfd, e.ef, e.running, e.wakeAt = epfd, ef, true, -1
	e.ops, e.udps, e.udpBy = map[int32]*pollOp{}, map[int32]*udpSock{}, map[netip.AddrPort]*udpSock{}
	e.swept = e.now()
	go e.loop(epfd, rc)
	return nil
}

// wakeLocked makes the loop's wait end at dl at the latest.
func (e *poller) wakeLocked(dl int64) {
	if e.wakeAt != dl {
		e.wakeAt = dl
		e.ef.SetReadDeadline(e.base.Add(time.Duration(dl)))
	}
}

// loop waits for socket events and deadlines until idleLinger passes without a probe.
func (e *poller) loop(epfd int, rc syscall.RawConn) {
	events := make([]unix.EpollEvent, 256)
	e.mu.Lock()
	for {
		now := e.now()
		e.expireLocked(now)
		if now-e.swept > int64(udpIdle/6) {
			e.sweepLocked(now)
		}
		var wake int64
		switch {
		case e.inflight > 0 && len(e.deadline) > 0:
			wake = e.deadline[0].dl
		case e.inflight > 0:
			wake = now + int64(time.Hour)
		case now-e.idle >= int64(idleLinger):
			e.stopLocked()
			e.unlockAndDeliver()
			return
		default:
			wake = e.idle + int64(idleLinger)
		}
		e.wakeLocked(wake)
		e.unlockAndDeliver()
		var n int
		var werr error
		// The callback runs at once and then each time the epoll fd becomes readable;
		// Read returns when it reports events or at the read deadline.
		rc.Read(func(uintptr) bool {
			n, werr = rawEpollPoll(epfd, events)
			return n > 0 || werr != nil && werr != unix.EINTR
		})
		e.mu.Lock()
		if werr != nil && werr != unix.EINTR {
			// Cannot happen with a valid epfd; end every probe rather than spin.
			for op := range e.opsLocked() {
				e.finishLocked(op, fmt.Errorf("waiting for sockets: %w", werr))
			}
			continue
		}
		for _, ev := range events[:max(n, 0)] {
			switch {
			case e.ops[ev.Fd] != nil && e.ops[ev.Fd].gen == ev.Pad:
				e.stepTCPLocked(e.ops[ev.Fd], ev.Events)
			case e.udps[ev.Fd] != nil && e.udps[ev.Fd].gen == ev.Pad:
				e.readUDPLocked(e.udps[ev.Fd])
			}
		}
	}
}

// opsLocked yields every probe in flight.
func (e *poller) opsLocked() func(func(*pollOp) bool) {
	return func(yield func(*pollOp) bool) {
		for _, op := range append([]*pollOp(nil), e.deadline...) {
			if !yield(op) {
				return
			}
		}
		for _, op := range e.ops {
			if !op.ended && !yield(op) {
				return
			}
		}
		for _, u := range e.udps {
			if u.op != nil && !yield(u.op) {
				return
			}
		}
	}
}

// stopLocked closes the loop's sockets; nothing is in flight.
func (e *poller) stopLocked() {
	for _, u := range e.udps {
		rawClose(u.fd)
	}
	e.ef.Close()
	e.ef = nil
	e.ops, e.udps, e.udpBy = nil, nil, nil
	e.running = false
}

// expireLocked ends the probes whose deadline has passed.
func (e *poller) expireLocked(now int64) {
	for len(e.deadline) > 0 && e.deadline[0].dl <= now {
		op := e.deadline[0]
		var err error
		switch {
		case op.kind == pollUDP:
			err = fmt.Errorf("UDP probe of %s: no reply: %w", op.addr, ErrTimeout)
		case op.reading || op.sent > 0:
			err = fmt.Errorf("TLS hello to %s: no answer: %w", op.addr, ErrTimeout)
		default:
			err = fmt.Errorf("connecting to %s: %w", op.addr, ErrTimeout)
		}
		e.finishLocked(op, err)
	}
}

// finishLocked ends op with err: it leaves the heap, its TCP socket closes (with a reset),
// and a UDP socket that may still get a late reply for it is closed too.
func (e *poller) finishLocked(op *pollOp, err error) {
	if op.ended {
		return
	}
	op.ended, op.err = true, err
	if op.hidx >= 0 {
		e.deadline.remove(op)
	}
	if u := op.udp; u != nil {
		u.op = nil
		// After a timeout or a cancel the reply may still come: a new socket (a new
		// source port) keeps it away from the next probe.
		answered := err == nil || errors.Is(err, ErrBadReply) || errors.Is(err, ErrPortUnreachable)
		if u.retired || !answered {
			e.closeUDPLocked(u)
		}
	} else if op.fd >= 0 {
		if e.ops[int32(op.fd)] == op {
			delete(e.ops, int32(op.fd))
		}
		rawClose(op.fd)
		op.fd = -1
	}
	if e.running {
		e.inflight--
		if e.inflight == 0 {
			// The loop may be waiting for a probe without a deadline, such as this
			// cancelled one: make it see that it is idle.
			e.idle = e.now()
			if end := e.idle + int64(idleLinger); end < e.wakeAt {
				e.wakeLocked(end)
			}
		}
	}
	op.next, e.finished = e.finished, op
}

// unlockAndDeliver unlocks e.mu and calls done for the probes that ended.
func (e *poller) unlockAndDeliver() {
	list := e.finished
	e.finished = nil
	e.mu.Unlock()
	// The list is newest first; deliver in the order they ended.
	var rev *pollOp
	for list != nil {
		next := list.next
		list.next, rev = rev, list
		list = next
	}
	for op := rev; op != nil; {
		next := op.next
		op.next = nil
		op.done(op.err)
		op = next
	}
}

// addrFamily returns the socket family for ap.
func addrFamily(ap netip.AddrPort) int {
	if a := ap.Addr(); a.Is4() || a.Is4In6() {
		return unix.AF_INET
	}
	return unix.AF_INET6
}

// errno turns an error of package unix into one that errors.Is matches against syscall
// errnos (they are the same type on Linux).
func errno(err error) error {
	var en syscall.Errno
	if errors.As(err, &en) {
		return en
	}
	return err
}
