//go:build linux && (amd64 || arm64)

package proxy

import (
	"errors"
	"io"
	"net"
	"os"
	"sync/atomic"
	"time"

	"golang.org/x/sys/unix"

	"github.com/frontdoor-vdi/frontdoor/internal/rawio"
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
// parkAfter it parks: it arms itself to start on src's readiness (rawio.Sock.StartOnReadable)
// and the goroutine ends, so an idle connection costs memory for its sockets and this
// struct only.
//
// A half starts in copy mode: it reads whatever is queued into a pooled buffer, taken only
// once bytes are there, and writes it on, which for the few hundred bytes of a short exchange
// is one read and one write per burst and no readiness check. A read that fills the buffer
// switches it to bulk mode, where it waits for readability, asks how much is queued and
// splices larger amounts (HAProxy's splice-auto does the same); it goes back to copy mode
// when it parks.
type half struct {
	t        *tconn
	src, dst *rawio.Sock
	n        atomic.Int64 // bytes moved
	lastRead int64        // unix nanoseconds of this half's last byte; owned by the running half
	bulk     bool         // splice mode; owned by the running half
	pipe     rawio.Pipe   // owned by the running half
	// waitFirst makes the next read wait for a readiness event first: set after a short
	// read, which drained the socket, so that the read that would find nothing is spared.
	// Owned by the running half.
	waitFirst bool
	err       error
	arm       rawio.Arm // h, armed on src while no goroutine runs it

	// readFn is readInto bound once, so that a read does not allocate a closure; buf, got and
	// rerr are its results.
	readFn func(fd uintptr) bool
	buf    *[]byte
	got    int
	rerr   error
}

// init prepares h to copy src to dst for t.
func (h *half) init(t *tconn, src, dst *rawio.Sock, now int64) {
	h.t, h.src, h.dst = t, src, dst
	h.lastRead = now
	h.readFn = h.readInto
	h.arm.Starter = h
}

// start runs the in half in the caller's goroutine, which holds a count of the server's wait
// group for it. The out half starts parked: it gets a goroutine of its own once the backend
// has sent something (or closed), so until the backend answers no goroutine waits for it.
func (t *tconn) start() {
	now := time.Now().UnixNano()
	t.last.Store(now)
	client, backend := t.ss.client.(rawConn).Sock, t.ss.backend.(rawConn).Sock
	t.in.init(t, client, backend, now)
	t.out.init(t, backend, client, now)
	if !t.out.park() {
		t.out.spawn()
	}
	t.in.run()
}

// park arms h to start in a goroutine of its own once its source is readable or closed. On
// true, h belongs to its socket and the caller must stop touching it.
func (h *half) park() bool {
	onPark := h.t.s.onPark // read before h may start elsewhere
	h.pipe.Close()
	h.bulk = false
	h.waitFirst = false // it starts only when there is something to read
	if !h.src.StartOnReadable(&h.arm) {
		return false
	}
	if onPark != nil {
		onPark()
	}
	return true
}

// Start is h's start by its socket's readiness: in a goroutine of its own, or handed to the
// server's onArmedStart.
func (h *half) Start() {
	if f := h.t.s.onArmedStart; f != nil {
		f(h)
		return
	}
	h.spawn()
}

// spawn runs h in a goroutine of its own.
func (h *half) spawn() {
	h.t.s.wg.Add(1)
	go h.runOwn()
}

// runOwn is run in a goroutine of its own: its quiet time counts from now.
func (h *half) runOwn() {
	defer h.t.s.wg.Done()
	h.lastRead = time.Now().UnixNano()
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
			if avail, err = h.src.WaitReadable(); err == nil {
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
				h.pipe.Close()
				h.end(errIdle)
				return
			}
			if now.Sub(time.Unix(0, h.lastRead)) >= parkAfter && h.park() {
				return
			}
			h.src.SetReadDeadline(now.Add(min(parkAfter, last.Add(t.idle).Sub(now))))
		default:
			h.pipe.Close()
			h.end(err)
			return
		}
	}
}

// copy waits for bytes on src, reads what is queued (up to smallCopy) and writes it to dst.
// It returns io.EOF at the peer's FIN.
func (h *half) copy() (int64, error) {
	err := h.src.ErrOf(h.src.ReadWith(h.readFn))
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
	w, err := h.dst.Write((*bp)[:n])
	return int64(w), err
}

// readInto is the read callback of copy: it reads into a pooled buffer and keeps it unless
// nothing was there, and reports false (wait) on EAGAIN.
func (h *half) readInto(fd uintptr) bool {
	if h.waitFirst {
		h.waitFirst = false
		// Every byte or FIN that came after the short read brings an event; one that came
		// with it may have brought its event before, so the FIN it left is read at once.
		if !h.src.PeerDone() && !h.src.Urgent() {
			return false
		}
	}
	bp := h.t.s.bufs.get()
	r, e := rawio.ReadFD(fd, *bp)
	if e == unix.EAGAIN {
		h.t.s.bufs.put(bp)
		return false
	}
	h.buf, h.got, h.rerr = bp, r, nil
	if e != 0 {
		h.got, h.rerr = 0, e
	}
	return true
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
// (and an out half that never ran) are taken back before the close could start them and
// are ended here with why.
func (t *tconn) kill(why error) {
	in, out := t.in.src.Disarm(&t.in.arm), t.out.src.Disarm(&t.out.arm)
	t.in.src.Close()
	t.out.src.Close()
	if in {
		t.in.end(why)
	}
	if out {
		t.out.end(why)
	}
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

// splice moves up to n bytes from src to dst through the half's pipe, which it opens on
// first use; bytes never enter user space. It returns io.EOF if src is at EOF before any
// byte moved.
func (h *half) splice(n int) (int64, error) {
	if err := h.pipe.Open(); err != nil {
		// Out of descriptors or pipe memory: move the bytes through user space instead.
		return h.move(min(n, smallCopy))
	}
	return h.pipe.Move(h.src, h.dst, n)
}
