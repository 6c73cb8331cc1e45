package proxy

import (
	"errors"
	"io"
	"net"
	"os"
	"sync"
	"sync/atomic"
	"syscall"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"
)

// errIdle ends a connection that moved no byte for the listener's idle timeout.
var errIdle = errors.New("idle timeout")

// tconn is one proxied TCP connection after the backend is connected: two halves that copy
// one direction each, and what the last half to end must report.
type tconn struct {
	s       *Server
	l       *listener
	ss      *session
	b       *backend
	e       accessEntry
	idle    time.Duration
	last    atomic.Int64 // unix nanoseconds of the last byte either way
	in, out half         // in is client to backend
	ended   atomic.Int32 // halves done
}

// half copies src to dst. While it has bytes to move it runs in a goroutine; once quiet for
// parkAfter it parks in the server's idle poller and the goroutine ends, so an idle
// connection costs memory for its sockets and this struct only.
//
// A half starts in copy mode: it reads whatever is queued into a pooled buffer, taken only
// once bytes are there, and writes it on, which for the few hundred bytes of a short exchange
// is one read and one write per burst and no readiness check. A read that fills the buffer
// switches it to bulk mode, where it waits for readability, asks how much is queued and
// splices larger amounts (HAProxy's splice-auto does the same); it goes back to copy mode
// when it parks.
type half struct {
	t        *tconn
	src, dst *net.TCPConn
	rc       syscall.RawConn
	lr       io.LimitedReader
	n        atomic.Int64 // bytes moved
	lastRead int64        // unix nanoseconds of this half's last byte; owned by the running half
	bulk     bool         // splice mode; owned by the running half
	err      error
	parked   pollEntry

	// readFn is readInto bound once, so that a read does not allocate a closure; buf, got and
	// rerr are its results.
	readFn func(fd uintptr) bool
	buf    *[]byte
	got    int
	rerr   error
}

// init prepares h to copy src to dst for t.
func (h *half) init(t *tconn, src, dst *net.TCPConn, now int64) error {
	h.t, h.src, h.dst = t, src, dst
	h.lastRead = now
	h.lr.R = src
	h.readFn = h.readInto
	rc, err := src.SyscallConn()
	h.rc = rc
	return err
}

// start runs the out half in a new goroutine and the in half in the caller's, which holds a
// count of the server's wait group for it.
func (t *tconn) start() {
	now := time.Now().UnixNano()
	t.last.Store(now)
	errIn := t.in.init(t, t.ss.client, t.ss.backend, now)
	errOut := t.out.init(t, t.ss.backend, t.ss.client, now)
	if errOut != nil {
		t.out.end(errOut)
	} else {
		t.s.wg.Add(1)
		go t.out.runOwn()
	}
	if errIn != nil {
		t.in.end(errIn)
		return
	}
	t.in.run()
}

// runOwn is run in a goroutine of its own.
func (h *half) runOwn() {
	defer h.t.s.wg.Done()
	h.run()
}

// run moves bytes until EOF, an error, idleness past the timeout (the half ends), or
// quietness past parkAfter, or parkSilent while it has moved nothing yet (the half parks).
func (h *half) run() {
	t := h.t
	parkAfter := t.s.parkAfter
	if h.n.Load() == 0 {
		parkAfter = min(parkAfter, t.s.parkSilent)
	}
	h.src.SetReadDeadline(time.Unix(0, h.lastRead).Add(min(parkAfter, t.idle)))
	lm, bm := t.l.m.bytesOut, t.b.m.bytesOut
	if h == &t.in {
		lm, bm = t.l.m.bytesIn, t.b.m.bytesIn
	}
	for {
		var n int64
		var err error
		if h.bulk {
			var avail int
			if avail, err = waitReadable(h.rc); err == nil {
				n, err = h.move(avail)
			}
		} else {
			n, err = h.copy()
		}
		if n > 0 {
			parkAfter = t.s.parkAfter
			now := time.Now().UnixNano()
			h.lastRead = now
			t.last.Store(now)
			h.n.Add(n)
			lm.Add(float64(n))
			bm.Add(float64(n))
		}
		switch {
		case err == nil:
		case errors.Is(err, os.ErrDeadlineExceeded):
			now := time.Now()
			last := time.Unix(0, t.last.Load())
			if now.Sub(last) >= t.idle {
				h.end(errIdle)
				return
			}
			if now.Sub(time.Unix(0, h.lastRead)) >= parkAfter && t.s.poller != nil {
				if t.s.poller.park(h) == nil {
					return
				}
			}
			h.src.SetReadDeadline(now.Add(min(parkAfter, last.Add(t.idle).Sub(now))))
		default:
			h.end(err)
			return
		}
	}
}

// copy waits for bytes on src, reads what is queued (up to smallCopy) and writes it to dst.
// It returns io.EOF at the peer's FIN.
func (h *half) copy() (int64, error) {
	err := h.rc.Read(h.readFn)
	bp, n, rerr := h.buf, h.got, h.rerr
	h.buf, h.rerr = nil, nil
	if bp != nil {
		defer copyBufs.Put(bp)
	}
	switch {
	case err != nil:
		return 0, err
	case rerr != nil:
		return 0, os.NewSyscallError("read", rerr)
	case n == 0:
		return 0, io.EOF
	}
	if n == len(*bp) {
		h.bulk = true
	}
	w, err := h.dst.Write((*bp)[:n])
	return int64(w), err
}

// readInto is the read callback of copy: it reads into a pooled buffer and keeps it unless
// nothing was there, and reports false (wait) on EAGAIN.
func (h *half) readInto(fd uintptr) bool {
	bp := copyBufs.Get().(*[]byte)
	var n int
	var err error
	for {
		n, err = unix.Read(int(fd), *bp)
		if err != unix.EINTR {
			break
		}
	}
	if err == unix.EAGAIN {
		copyBufs.Put(bp)
		return false
	}
	h.buf, h.got, h.rerr = bp, n, err
	return true
}

// resume continues a parked half in a new goroutine, in copy mode; the poller calls it
// after adding to the server's wait group.
func (h *half) resume() {
	defer h.t.s.wg.Done()
	h.lastRead = time.Now().UnixNano()
	h.bulk = false
	h.run()
}

// end finishes one half: at EOF it half-closes the other side's write end (unless the other
// half has ended already: then finish closes both sockets at once, and the close sends the
// same FIN); on an error it closes both sockets so the other half stops too. The second half
// to end closes the connection and reports it.
func (h *half) end(err error) {
	t := h.t
	if err == io.EOF {
		err = nil
		if t.ended.Load() == 0 {
			h.dst.CloseWrite()
		}
	}
	h.err = err
	if err != nil {
		if h == &t.out && !errors.Is(err, net.ErrClosed) {
			t.ss.client.SetLinger(0) // pass a backend reset on to the client
		}
		t.ss.client.Close()
		t.ss.backend.Close()
	}
	if t.ended.Add(1) == 2 {
		t.finish()
	}
}

// finish closes the connection and runs the accounting of its end.
func (t *tconn) finish() {
	t.ss.client.Close()
	t.ss.backend.Close()
	errIn, errOut := t.in.err, t.out.err
	e := &t.e
	e.in += t.in.n.Load()
	e.out += t.out.n.Load()
	switch {
	case errors.Is(errIn, errIdle) || errors.Is(errOut, errIdle):
		e.reason = "idle"
	case errIn == nil && errOut == nil:
		e.reason = "eof"
	case errIn != nil && !errors.Is(errIn, net.ErrClosed):
		e.reason = "client_error"
	case errOut != nil && !errors.Is(errOut, net.ErrClosed):
		e.reason = "backend_error"
	default:
		e.reason = "closed"
	}
	t.b.active.Add(-1)
	t.b.m.active.Dec()
	t.l.m.active.Dec()
	t.s.release(t.l, t.e.peer, t.ss)
	t.s.accessLog(*e)
}

// waitReadable blocks until src has bytes to read and returns how many are queued, or
// returns io.EOF at the peer's FIN, or the socket's error (including a passed read deadline).
func waitReadable(rc syscall.RawConn) (int, error) {
	var avail int
	var opErr error
	err := rc.Read(func(fd uintptr) bool {
		avail, opErr = readable(fd)
		return opErr != unix.EAGAIN
	})
	if err != nil {
		return 0, err
	}
	return avail, opErr
}

// readable returns the bytes queued on a stream socket without consuming them: n > 0, or
// io.EOF at the peer's FIN, or EAGAIN when nothing is there yet, or the socket's error. The
// peek comes first because "nothing yet" is the common answer when a copy loop goes to wait.
func readable(fd uintptr) (int, error) {
	var b byte
	r, _, e := unix.Syscall6(unix.SYS_RECVFROM, fd, uintptr(unsafe.Pointer(&b)), 1,
		unix.MSG_PEEK|unix.MSG_DONTWAIT, 0, 0)
	switch {
	case e == unix.EAGAIN:
		return 0, unix.EAGAIN
	case e != 0:
		return 0, os.NewSyscallError("recvfrom", e)
	case r == 0:
		return 0, io.EOF
	}
	n, err := unix.IoctlGetInt(int(fd), unix.SIOCINQ)
	if err != nil {
		return 0, err
	}
	return max(n, 1), nil
}

// smallCopy is the most bytes copied through user space with read and write instead of
// splice: for a few hundred bytes two splice calls cost more than a read and a write.
const smallCopy = 16 << 10

var copyBufs = sync.Pool{New: func() any {
	b := make([]byte, smallCopy)
	return &b
}}

// move copies avail queued bytes from src to dst: small amounts with read and write, larger
// ones with splice(2) through dst.ReadFrom(&io.LimitedReader{src, avail}).
func (h *half) move(avail int) (int64, error) {
	if avail > smallCopy {
		h.lr.N = int64(avail)
		return h.dst.ReadFrom(&h.lr)
	}
	bp := copyBufs.Get().(*[]byte)
	defer copyBufs.Put(bp)
	n, err := h.src.Read((*bp)[:avail])
	if n > 0 {
		w, werr := h.dst.Write((*bp)[:n])
		if werr != nil {
			return int64(w), werr
		}
	}
	if err == io.EOF && n > 0 {
		err = nil // the next wait sees the EOF again
	}
	return int64(n), err
}
