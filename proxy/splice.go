//go:build linux

package proxy

import (
	"errors"
	"io"
	"net"
	"os"
	"sync/atomic"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"
)

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

	// noHalfClose ends the connection at the backend's FIN (Listener.NoHalfClose);
	// endedAtEOF says it did, so the client half's net.ErrClosed is no error.
	noHalfClose bool
	endedAtEOF  atomic.Bool
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
	src, dst *sock
	n        atomic.Int64 // bytes moved
	lastRead int64        // unix nanoseconds of this half's last byte; owned by the running half
	bulk     bool         // splice mode; owned by the running half
	pipe     [2]int       // read and write end of the splice pipe if piped; owned by the running half
	piped    bool
	// waitFirst makes the next read wait for a readiness event first: set after a short
	// read, which drained the socket, so that the read that would find nothing is spared.
	// Owned by the running half.
	waitFirst bool
	err       error
	parked    pollEntry

	// readFn is readInto bound once, so that a read does not allocate a closure; buf, got and
	// rerr are its results.
	readFn func(fd uintptr) bool
	buf    *[]byte
	got    int
	rerr   error
}

// init prepares h to copy src to dst for t.
func (h *half) init(t *tconn, src, dst *sock, now int64) {
	h.t, h.src, h.dst = t, src, dst
	h.lastRead = now
	h.readFn = h.readInto
}

// start runs the in half in the caller's goroutine, which holds a count of the server's wait
// group for it. The out half gets a goroutine of its own once the backend has sent something
// (or closed), or once the in half parks: until the backend answers no goroutine waits for it.
func (t *tconn) start() {
	now := time.Now().UnixNano()
	t.last.Store(now)
	client, backend := t.ss.client.(*sock), t.ss.backend.(*sock)
	t.in.init(t, client, backend, now)
	t.out.init(t, backend, client, now)
	if !backend.spawnOnReady(&t.out) {
		t.out.spawn()
	}
	t.in.run()
}

// spawn runs h in a goroutine of its own.
func (h *half) spawn() {
	h.t.s.wg.Add(1)
	go h.runOwn()
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
			if avail, err = waitReadable(h.src); err == nil {
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
				h.closePipe()
				h.end(errIdle)
				return
			}
			if now.Sub(time.Unix(0, h.lastRead)) >= parkAfter && t.s.poller != nil {
				if h == &t.in && t.out.src.r.spawn.CompareAndSwap(&t.out, nil) {
					t.out.spawn() // it waits for the backend, and parks, on its own
				}
				h.closePipe() // before the poller may hand h to another goroutine
				if t.s.poller.park(h) == nil {
					return
				}
			}
			h.src.SetReadDeadline(now.Add(min(parkAfter, last.Add(t.idle).Sub(now))))
		default:
			h.closePipe()
			h.end(err)
			return
		}
	}
}

// copy waits for bytes on src, reads what is queued (up to smallCopy) and writes it to dst.
// It returns io.EOF at the peer's FIN.
func (h *half) copy() (int64, error) {
	err := h.src.errOf(h.src.rc.Read(h.readFn))
	bp, n, rerr := h.buf, h.got, h.rerr
	h.buf, h.rerr = nil, nil
	if bp != nil {
		defer h.t.s.bufs.put(bp)
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
	} else {
		h.waitFirst = true
	}
	w, err := h.dst.writeAll((*bp)[:n])
	return int64(w), err
}

// readInto is the read callback of copy: it reads into a pooled buffer and keeps it unless
// nothing was there, and reports false (wait) on EAGAIN.
func (h *half) readInto(fd uintptr) bool {
	if h.waitFirst {
		h.waitFirst = false
		// Every byte or FIN that came after the short read brings an event; one that came
		// with it may have brought its event before, so the FIN it left is read at once.
		if !h.src.peerDone.Load() && !h.src.urgent.Load() {
			return false
		}
	}
	bp := h.t.s.bufs.get()
	var r uintptr
	var e unix.Errno
	for {
		// A raw call: a read of a nonblocking socket does not block, so the scheduler
		// need not be told.
		r, _, e = unix.RawSyscall(unix.SYS_READ, fd, uintptr(unsafe.Pointer(&(*bp)[0])), uintptr(len(*bp)))
		if e != unix.EINTR {
			break
		}
	}
	if e == unix.EAGAIN {
		h.t.s.bufs.put(bp)
		return false
	}
	h.buf, h.got, h.rerr = bp, int(r), nil
	if e != 0 {
		h.got, h.rerr = 0, e
	}
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
		switch {
		case t.ended.Load() != 0:
		case h == &t.out && t.noHalfClose:
			// All the backend sent has been written to the client's socket: the close sends
			// it, then the FIN, and stops the client half.
			t.endedAtEOF.Store(true)
			t.ss.client.Close()
			t.ss.backend.Close()
		default:
			h.dst.CloseWrite()
		}
	}
	h.err = err
	if err != nil {
		if h == &t.out && !errors.Is(err, net.ErrClosed) {
			t.ss.client.resetOnClose() // pass a backend reset on to the client
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
	if t.endedAtEOF.Load() && errors.Is(errIn, net.ErrClosed) {
		errIn = nil // the backend's FIN ended the connection (noHalfClose)
	}
	e := &t.e
	e.in += t.in.n.Load()
	e.out += t.out.n.Load()
	t.s.closedTCP(t.l, t.ss, t.b, e, errIn, errOut)
}

// expired tells whether the connection has moved no byte either way for its idle timeout;
// the expiry pass ends such connections, whose halves are parked.
func (t *tconn) expired(now time.Time) bool {
	return now.Sub(time.Unix(0, t.last.Load())) >= t.idle
}

// kill closes both sockets at once; running halves see the closed sockets, parked halves
// are taken from the poller and ended here with why.
func (t *tconn) kill(why error) {
	client, backend := t.ss.client.(*sock), t.ss.backend.(*sock)
	// A half that no goroutine has run yet is taken before the close could start it.
	var unstarted *half
	if backend.r.spawn.CompareAndSwap(&t.out, nil) {
		unstarted = &t.out
	}
	client.Close()
	backend.Close()
	if unstarted != nil {
		unstarted.end(why)
	}
	for _, h := range []*half{&t.in, &t.out} {
		if t.s.poller.take(h) {
			h.end(why)
		}
	}
}

// waitReadable blocks until src has bytes to read and returns how many are queued, or
// returns io.EOF at the peer's FIN, or the socket's error (including a passed read deadline).
func waitReadable(src *sock) (int, error) {
	var avail int
	var opErr error
	err := src.rc.Read(func(fd uintptr) bool {
		avail, opErr = readable(fd)
		return opErr != unix.EAGAIN
	})
	if err != nil {
		return 0, src.errOf(err)
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

// move copies avail queued bytes from src to dst: small amounts with read and write, larger
// ones with splice.
func (h *half) move(avail int) (int64, error) {
	if avail > smallCopy {
		return h.splice(avail)
	}
	bp := h.t.s.bufs.get()
	defer h.t.s.bufs.put(bp)
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

// maxPipe is the splice pipe's size (the default of fs.pipe-max-size) and the most bytes
// one splice call moves.
const maxPipe = 1 << 20

// splice moves up to n bytes from src to dst through the half's pipe, which it opens on
// first use; bytes never enter user space. It returns io.EOF if src is at EOF before any
// byte moved.
func (h *half) splice(n int) (int64, error) {
	if !h.piped {
		if err := unix.Pipe2(h.pipe[:], unix.O_NONBLOCK|unix.O_CLOEXEC); err != nil {
			// Out of descriptors or pipe memory: move the bytes through user space instead.
			return h.move(min(n, smallCopy))
		}
		unix.FcntlInt(uintptr(h.pipe[0]), unix.F_SETPIPE_SZ, maxPipe) // smaller works too, in more calls
		h.piped = true
	}
	var moved int64
	for moved < int64(n) {
		var in int
		var serr error
		err := h.src.rc.Read(func(fd uintptr) bool {
			in, serr = spliceOnce(int(fd), h.pipe[1], min(n-int(moved), maxPipe))
			return serr != unix.EAGAIN
		})
		if err = h.src.errOf(err); err == nil {
			err = serr
		}
		if err != nil {
			return moved, err
		}
		if in == 0 {
			if moved == 0 {
				return 0, io.EOF
			}
			return moved, nil // the next wait sees the EOF again
		}
		for in > 0 {
			var out int
			err := h.dst.rc.Write(func(fd uintptr) bool {
				out, serr = spliceOnce(h.pipe[0], int(fd), in)
				return serr != unix.EAGAIN
			})
			if err = h.dst.errOf(err); err == nil {
				err = serr
			}
			if err != nil {
				return moved, err
			}
			in -= out
			moved += int64(out)
		}
	}
	return moved, nil
}

// spliceOnce is one nonblocking splice(2) call from one descriptor to the other.
func spliceOnce(from, to, n int) (int, error) {
	for {
		m, err := unix.Splice(from, nil, to, nil, n, unix.SPLICE_F_MOVE|unix.SPLICE_F_NONBLOCK)
		switch {
		case err == unix.EINTR:
			continue
		case err == unix.EAGAIN:
			return 0, err
		case err != nil:
			return 0, os.NewSyscallError("splice", err)
		}
		return int(m), nil
	}
}

// closePipe closes the splice pipe, if any; the running half calls it before it parks or ends.
func (h *half) closePipe() {
	if h.piped {
		unix.Close(h.pipe[0])
		unix.Close(h.pipe[1])
		h.piped = false
	}
}
