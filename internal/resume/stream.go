package resume

import (
	"errors"
	"fmt"
	"io"
	"sync"
	"time"
)

// Options configure a Stream.
type Options struct {
	// Timeout ends a stream that has had no transport for this long. Default: 180s (Citrix's
	// session reliability timeout).
	Timeout time.Duration
	// MaxBuffer bounds the bytes an end keeps that the other end has not acknowledged. When
	// it is full the end stops reading its program (which TCP then slows down); nothing is
	// dropped. Default: 4 MiB.
	MaxBuffer int
	// AckDelay is how long received bytes may wait for their acknowledgement when less than
	// 64 KiB are waiting. Default: 20ms.
	AckDelay time.Duration
	// OnBreak is called, on a goroutine of its own, when a transport fails (not when the
	// stream ends): the client then finds another transport. It may come after the next
	// transport was attached (Attached says so). Optional.
	OnBreak func(err error)
	// OnEnd is called once when the stream is over, with nil for a clean end (both sides
	// sent everything and said so). Optional.
	OnEnd func(err error)
}

// maxPongs bounds the pongs an end owes: pings beyond it are dropped (a flood of pings
// costs the far end nothing but its own pongs).
const maxPongs = 16

// ackEvery is how many received bytes make an acknowledgement due at once.
const ackEvery = 64 << 10

// Stream is one end of a resumable stream: it carries the bytes of local (the program at this
// end: a viewer's connection, or the desktop server's) over the transport attached, and keeps
// local open while no transport is.
type Stream struct {
	id    ID
	o     Options
	local io.ReadWriteCloser
	done  chan struct{}

	dmu sync.Mutex // serializes deliveries to local, and the end of stream after them

	mu        sync.Mutex // guards everything below
	cond      *sync.Cond // broadcast on every change the goroutines wait for
	sending              // what goes to the far end
	receiving            // what comes from it
	t         io.ReadWriteCloser
	gen       uint64 // counts transports attached
	idle      *time.Timer
	pongs     []uint64 // tokens of pings to answer, at most maxPongs
	// closing is a reset to send before ending.
	closing string
	ended   bool
	err     error
	stats   Stats
}

// sending is a Stream's sending half: the bytes read from local that the far end has not
// acknowledged, and its end. Guarded by the Stream's mu.
type sending struct {
	buf      []byte // read from local, not acknowledged; buf[0] is at offset base
	base     uint64
	sent     uint64 // next offset to send on the current transport
	eof      bool   // local's read side ended: the end follows buf
	finSent  bool   // the end was sent on the current transport
	finAcked bool   // the far end has the end
}

// receiving is a Stream's receiving half: what was delivered to local, what to acknowledge and
// when, and the far end's end. Guarded by the Stream's mu.
type receiving struct {
	recv     uint64 // bytes delivered to local
	acked    uint64 // received as the last acknowledgement said
	ackedFin bool   // the last acknowledgement said fin
	ackDue   bool
	ackForce bool // acknowledge at once: a transport was attached
	ackTimer *time.Timer
	finAt    uint64 // the far end's end offset, when finKnown
	finKnown bool
	finDone  bool // the far end's end was passed on to local
}

// Stats count what a stream carried.
type Stats struct {
	Sent, Received uint64 // bytes read from local and sent; bytes delivered to local
	Resent         uint64 // bytes sent again after a transport changed
	Duplicates     uint64 // bytes received twice and dropped
	Transports     int    // transports attached
	Breaks         int    // transports that failed
}

// New returns a stream carrying local; Attach gives it its first transport. Until then, and
// whenever its transport fails, it waits for one up to Options.Timeout.
func New(id ID, local io.ReadWriteCloser, o Options) *Stream {
	if o.Timeout <= 0 {
		o.Timeout = 180 * time.Second
	}
	if o.MaxBuffer <= 0 {
		o.MaxBuffer = 4 << 20
	}
	if o.AckDelay <= 0 {
		o.AckDelay = 20 * time.Millisecond
	}
	s := &Stream{id: id, o: o, local: local, done: make(chan struct{})}
	s.cond = sync.NewCond(&s.mu)
	s.idle = time.AfterFunc(o.Timeout, s.timedOut)
	go s.readLocal()
	go s.write()
	return s
}

// ID returns the stream's ID.
func (s *Stream) ID() ID { return s.id }

// Done is closed when the stream is over.
func (s *Stream) Done() <-chan struct{} { return s.done }

// Attached reports whether the stream rides a transport now: OnBreak's word of a failed one
// comes on a goroutine of its own, and may come after the stream was attached to the next.
func (s *Stream) Attached() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.t != nil && !s.ended
}

// Err returns why the stream ended: nil while it runs or after a clean end.
func (s *Stream) Err() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.err
}

// Stats returns what the stream carried so far.
func (s *Stream) Stats() Stats {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.stats
}

// Position returns what a hello or reply says for this end: the bytes received and whether
// the far end's end was received.
func (s *Stream) Position() (received uint64, fin bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.recv, s.finDone
}

// Attach makes t the stream's transport, the far end having received peerRecv bytes (and the
// end, with peerFin), and sends again what followed. A transport attached before is closed.
func (s *Stream) Attach(t io.ReadWriteCloser, peerRecv uint64, peerFin bool) error {
	s.mu.Lock()
	if s.ended {
		s.mu.Unlock()
		t.Close()
		return ErrClosed
	}
	if peerRecv < s.base || peerRecv > s.base+uint64(len(s.buf)) || (peerFin && (!s.eof || peerRecv != s.base+uint64(len(s.buf)))) {
		err := fmt.Errorf("%w: the far end has %d bytes, this end kept %d from %d", ErrProtocol, peerRecv, len(s.buf), s.base)
		s.mu.Unlock()
		t.Close()
		s.Abort(err)
		return err
	}
	s.trimLocked(peerRecv)
	if peerFin {
		s.finAcked = true
	}
	old := s.t
	s.t = t
	s.gen++
	gen := s.gen
	if s.stats.Transports > 0 {
		s.stats.Resent += s.base + uint64(len(s.buf)) - peerRecv
	}
	s.stats.Transports++
	s.sent = s.base
	s.finSent = false
	s.ackForce = true // tell the far end where this end stands
	s.idle.Stop()
	s.cond.Broadcast()
	s.mu.Unlock()
	if old != nil {
		old.Close()
	}
	go s.readTransport(t, gen)
	return nil
}

// Abort ends the stream now, telling the far end (when a transport is attached) that it is
// over; local is closed.
func (s *Stream) Abort(err error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.abortLocked(err)
}

func (s *Stream) abortLocked(err error) {
	if s.ended || s.closing != "" {
		return
	}
	reason := "closed"
	if err != nil {
		reason = err.Error()
	}
	if s.t == nil {
		s.endLocked(err)
		return
	}
	s.closing = reason
	s.err = err
	s.cond.Broadcast()
}

// endLocked ends the stream: local and the transport are closed, the waiters released.
func (s *Stream) endLocked(err error) {
	if s.ended {
		return
	}
	s.ended = true
	if s.err == nil {
		s.err = err
	}
	s.idle.Stop()
	if s.ackTimer != nil {
		s.ackTimer.Stop()
	}
	if s.t != nil {
		s.t.Close()
		s.t = nil
	}
	s.local.Close()
	s.cond.Broadcast()
	close(s.done)
	if s.o.OnEnd != nil {
		go s.o.OnEnd(s.err)
	}
}

func (s *Stream) timedOut() {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.t == nil && !s.ended {
		s.endLocked(fmt.Errorf("%w (%s)", ErrTimeout, s.o.Timeout))
	}
}

// breakLocked forgets the transport of generation gen after it failed.
func (s *Stream) breakLocked(gen uint64, err error) {
	if gen != s.gen || s.t == nil || s.ended {
		return
	}
	if s.closing != "" || (s.finAcked && s.finDone && s.ackedFin) {
		// Over already: the reset is sent, or both ends have everything (the far end may
		// close the moment our last acknowledgement reaches it, before this end's writer
		// has seen its write return).
		s.endLocked(nil)
		return
	}
	s.t.Close()
	s.t = nil
	s.stats.Breaks++
	s.idle.Reset(s.o.Timeout)
	s.cond.Broadcast()
	if s.o.OnBreak != nil {
		go s.o.OnBreak(err)
	}
}

// trimLocked drops the buffered bytes before off, which the far end has.
func (s *Stream) trimLocked(off uint64) {
	if off <= s.base {
		return
	}
	s.buf = s.buf[off-s.base:]
	s.base = off
	if len(s.buf) == 0 {
		s.buf = nil // let a large buffer go
	}
	if s.sent < s.base {
		s.sent = s.base
	}
}

// readLocal reads local into the buffer while there is room.
func (s *Stream) readLocal() {
	tmp := make([]byte, 32<<10)
	for {
		s.mu.Lock()
		for !s.ended && s.closing == "" && len(s.buf) >= s.o.MaxBuffer {
			s.cond.Wait()
		}
		if s.ended || s.closing != "" {
			s.mu.Unlock()
			return
		}
		room := min(s.o.MaxBuffer-len(s.buf), len(tmp))
		s.mu.Unlock()
		n, err := s.local.Read(tmp[:room])
		s.mu.Lock()
		if n > 0 && !s.ended {
			s.buf = append(s.buf, tmp[:n]...)
			s.stats.Sent += uint64(n)
		}
		if err != nil {
			if errors.Is(err, io.EOF) || s.finDone {
				// A local without a write half is closed when the far end ends: its read
				// half ends with it.
				s.eof = true
			} else {
				s.abortLocked(fmt.Errorf("reading the local connection: %w", err))
			}
		}
		s.cond.Broadcast()
		s.mu.Unlock()
		if err != nil {
			return
		}
	}
}

// workLocked reports whether the writer has something to send on a transport.
func (s *Stream) workLocked() bool {
	return s.closing != "" || s.sent < s.base+uint64(len(s.buf)) || (s.eof && !s.finSent) || s.ackNeededLocked() || len(s.pongs) > 0
}

func (s *Stream) ackNeededLocked() bool {
	return s.ackForce || s.recv-s.acked >= ackEvery || (s.ackDue && (s.recv != s.acked || s.finDone != s.ackedFin))
}

// writeBatch is the most bytes of frames one write hands the transport: four TLS records.
// A transport that sends them in one system call (BatchTLS) sends a busy stream's bytes in a
// quarter of the calls and segments.
const writeBatch = 4 * MaxData

// outBufs lends the writer its buffer for one write: an idle stream holds none.
var outBufs = sync.Pool{New: func() any { b := make([]byte, 0, writeBatch+64); return &b }}

// write sends the buffered bytes, acknowledgements and the end on the current transport.
func (s *Stream) write() {
	for {
		s.mu.Lock()
		for !s.ended && (s.t == nil || !s.workLocked()) {
			s.cond.Wait()
		}
		if s.ended {
			s.mu.Unlock()
			return
		}
		t, gen := s.t, s.gen
		ob := outBufs.Get().(*[]byte)
		out := (*ob)[:0]
		if s.closing != "" {
			out = appendReset(out, s.closing)
			s.mu.Unlock()
			t.Write(out)
			*ob = out
			outBufs.Put(ob)
			s.mu.Lock()
			s.endLocked(s.err)
			s.mu.Unlock()
			return
		}
		for _, tok := range s.pongs {
			out = appendPong(out, tok)
		}
		s.pongs = s.pongs[:0]
		if s.ackNeededLocked() {
			out = appendAck(out, s.recv, s.finDone)
			s.acked, s.ackedFin, s.ackDue, s.ackForce = s.recv, s.finDone, false, false
		}
		sent, finSent := s.sent, s.finSent
		end := s.base + uint64(len(s.buf))
		// Frames up to writeBatch, cut so that the write fills whole TLS records (16 KiB):
		// a frame of MaxData bytes and its header would add a record of a few bytes, a
		// system call and a segment to each.
		for sent < end && len(out)+dataHeader < writeBatch {
			room := min(writeBatch-len(out), MaxData*(1+len(out)/MaxData)-len(out)) - dataHeader
			if room < MaxData/2 {
				room = min(MaxData, writeBatch-len(out)-dataHeader)
			}
			n := min(end-sent, uint64(room))
			out = appendData(out, sent, s.buf[sent-s.base:sent-s.base+n])
			sent += n
		}
		if sent == end && s.eof && !finSent {
			out = appendFin(out, end)
			finSent = true
		}
		s.mu.Unlock()
		_, err := t.Write(out)
		*ob = out
		outBufs.Put(ob)
		s.mu.Lock()
		switch {
		case err != nil:
			s.breakLocked(gen, err)
		case gen == s.gen:
			s.sent, s.finSent = max(sent, s.sent), finSent || s.finSent
			s.checkDoneLocked()
		}
		s.mu.Unlock()
	}
}

// checkDoneLocked ends the stream cleanly once both ends have everything and said so.
func (s *Stream) checkDoneLocked() {
	if s.finAcked && s.finDone && s.ackedFin {
		s.endLocked(nil)
	}
}

// readTransport takes the frames of transport t (generation gen) until it fails or is
// replaced.
func (s *Stream) readTransport(t io.ReadWriteCloser, gen uint64) {
	buf := make([]byte, MaxData)
	var f frame
	for {
		err := readFrame(t, buf, &f)
		if err == nil {
			err = s.take(&f, gen)
		}
		if err != nil {
			s.mu.Lock()
			switch {
			case errors.Is(err, ErrProtocol):
				s.mu.Unlock()
				s.Abort(err)
				return
			case errors.Is(err, errStale):
			default:
				s.breakLocked(gen, err)
			}
			s.mu.Unlock()
			return
		}
	}
}

// errStale stops the reader of a transport that was replaced.
var errStale = errors.New("transport replaced")

// take acts on one frame of the transport of generation gen.
func (s *Stream) take(f *frame, gen uint64) error {
	switch f.typ {
	case frameData:
		return s.deliver(f.off, f.data, gen)
	case frameAck:
		s.mu.Lock()
		defer s.mu.Unlock()
		if gen != s.gen || s.ended {
			return errStale
		}
		end := s.base + uint64(len(s.buf))
		if f.off > end || (f.fin && (!s.eof || f.off != end)) {
			return fmt.Errorf("%w: acknowledgement of %d, read %d", ErrProtocol, f.off, end)
		}
		s.trimLocked(f.off)
		if f.fin {
			s.finAcked = true
		}
		s.checkDoneLocked()
		s.cond.Broadcast()
	case frameFin:
		s.dmu.Lock()
		defer s.dmu.Unlock()
		s.mu.Lock()
		if gen != s.gen || s.ended {
			s.mu.Unlock()
			return errStale
		}
		if s.finKnown && s.finAt != f.off || f.off < s.recv {
			s.mu.Unlock()
			return fmt.Errorf("%w: end at %d, received %d", ErrProtocol, f.off, s.recv)
		}
		s.finAt, s.finKnown = f.off, true
		s.mu.Unlock()
		s.passFin()
	case framePing:
		s.mu.Lock()
		defer s.mu.Unlock()
		if gen != s.gen || s.ended {
			return errStale
		}
		if len(s.pongs) < maxPongs {
			s.pongs = append(s.pongs, f.off)
			s.cond.Broadcast()
		}
	case framePong:
		// This end sends no pings: nothing to time.
	case frameReset:
		s.mu.Lock()
		defer s.mu.Unlock()
		if gen != s.gen {
			return errStale
		}
		err := ErrReset
		if f.reason != "" {
			err = fmt.Errorf("%w: %s", ErrReset, f.reason)
		}
		s.endLocked(err)
		return errStale
	}
	return nil
}

// deliver writes the bytes of a data frame at off that local does not have yet.
func (s *Stream) deliver(off uint64, data []byte, gen uint64) error {
	s.dmu.Lock()
	defer s.dmu.Unlock()
	s.mu.Lock()
	if gen != s.gen || s.ended {
		s.mu.Unlock()
		return errStale
	}
	recv := s.recv
	if off > recv || (s.finKnown && off+uint64(len(data)) > s.finAt) {
		s.mu.Unlock()
		return fmt.Errorf("%w: data at %d, received %d", ErrProtocol, off, recv)
	}
	skip := recv - off
	if skip >= uint64(len(data)) {
		s.stats.Duplicates += uint64(len(data))
		s.mu.Unlock()
		return nil
	}
	s.stats.Duplicates += skip
	data = data[skip:]
	s.mu.Unlock()
	if _, err := s.local.Write(data); err != nil {
		s.Abort(fmt.Errorf("writing the local connection: %w", err))
		return errStale
	}
	s.mu.Lock()
	s.recv += uint64(len(data))
	s.stats.Received += uint64(len(data))
	if s.recv-s.acked >= ackEvery {
		s.cond.Broadcast()
	} else if s.ackTimer == nil {
		s.ackTimer = time.AfterFunc(s.o.AckDelay, s.ackNow)
	} else {
		s.ackTimer.Reset(s.o.AckDelay)
	}
	s.mu.Unlock()
	s.passFin()
	return nil
}

func (s *Stream) ackNow() {
	s.mu.Lock()
	s.ackDue = true
	s.cond.Broadcast()
	s.mu.Unlock()
}

// passFin passes the far end's end on to local once every byte before it was delivered:
// local's write half is closed (its whole connection when it has no write half). Called with
// dmu held.
func (s *Stream) passFin() {
	s.mu.Lock()
	if !s.finKnown || s.finDone || s.recv != s.finAt || s.ended {
		s.mu.Unlock()
		return
	}
	s.finDone = true
	s.ackDue = true
	s.cond.Broadcast()
	s.mu.Unlock()
	if cw, ok := s.local.(interface{ CloseWrite() error }); ok {
		cw.CloseWrite()
	} else {
		s.local.Close()
	}
}
