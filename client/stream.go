package client

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"time"

	"github.com/frontdoor-vdi/frontdoor/internal/resume"
)

// cstream is the desktop stream of one viewer connection: a resumable stream (package
// resume) between the viewer's connection and the desktop server's at the machine, carried by
// a TCP channel of the current link and moved to the next link when that one breaks.
type cstream struct {
	port uint16
	rs   *resume.Stream
	link *link // the link whose channel carries it; guarded by Session.mu
}

// deadliner is a transport whose deadline can be set (a TLS connection, a QUIC stream).
type deadliner interface{ SetDeadline(time.Time) error }

// openTransportLocked opens a TCP channel to port on l's route with the session's reconnect
// ticket (rotated by a gateway) and returns it, with ticketMu held by the caller.
func (s *Session) openTransportLocked(ctx context.Context, l *link, port uint16) (io.ReadWriteCloser, error) {
	return s.openTransportWithLocked(ctx, l, port, func(d *Descriptor) string {
		if tok := s.reconnectTicket(d); tok != "" {
			return tok
		}
		return d.LaunchTicket
	})
}

// openTransportWithLocked is openTransportLocked with the ticket tok picks from the
// session's descriptor; the next ticket a gateway hands out replaces the reconnect ticket.
func (s *Session) openTransportWithLocked(ctx context.Context, l *link, port uint16, tok func(*Descriptor) string) (io.ReadWriteCloser, error) {
	s.mu.Lock()
	d := s.desc
	s.mu.Unlock()
	var t io.ReadWriteCloser
	var next string
	var err error
	if l.gw != nil && s.o.QUIC != nil {
		t, next, err = s.quicTCP(ctx, l.gw, port, tok(d))
	} else {
		var c net.Conn
		c, next, err = s.dialTCP(ctx, l.via, port, tok(d))
		t = c
	}
	s.rotate(d, next)
	if err != nil {
		return nil, fmt.Errorf("%d/tcp via %s: %w", port, l.via, err)
	}
	return t, nil
}

// hello sends a stream's hello on t and reads the machine's reply, within the dial timeout
// and the time the machine takes to reach its desktop server.
func (s *Session) hello(t io.ReadWriteCloser, h resume.Hello) (resume.Reply, error) {
	if dl, ok := t.(deadliner); ok {
		dl.SetDeadline(time.Now().Add(s.o.DialTimeout + 5*time.Second))
		defer dl.SetDeadline(time.Time{})
	}
	if err := resume.WriteHello(t, h); err != nil {
		return resume.Reply{}, err
	}
	rep, err := resume.ReadReply(t)
	if err != nil {
		return rep, fmt.Errorf("the machine's answer to the stream: %w", err)
	}
	return rep, nil
}

// openStream opens a new desktop stream for local on the TCP channel on port, through the
// current link (waiting for one while the session reconnects, and moving on to the next
// when the current one fails), until ctx ends. The stream owns local from then on.
func (s *Session) openStream(ctx context.Context, port uint16, local net.Conn) (*cstream, error) {
	var last error
	for try := 0; ; try++ {
		if err := s.WaitUp(ctx); err != nil {
			return nil, errors.Join(err, last)
		}
		s.mu.Lock()
		l := s.link
		s.mu.Unlock()
		if l == nil {
			continue
		}
		s.ticketMu.Lock()
		t, err := s.openTransportLocked(ctx, l, port)
		s.ticketMu.Unlock()
		if err == nil {
			id := resume.NewID()
			var rep resume.Reply
			if rep, err = s.hello(t, resume.Hello{ID: id}); err == nil {
				if err := rep.Err(); err != nil {
					t.Close()
					return nil, fmt.Errorf("%d/tcp: %w", port, err)
				}
				return s.startStream(id, port, l, t, local)
			}
			t.Close()
		}
		if errors.Is(err, ErrLoginExpired) || ctx.Err() != nil {
			return nil, err
		}
		last = err
		s.fail(l, err) // the route failed: the session moves on, and so does this stream
	}
}

// startStream makes the stream of a channel t that the machine took, and registers it.
func (s *Session) startStream(id resume.ID, port uint16, l *link, t io.ReadWriteCloser, local net.Conn) (*cstream, error) {
	cs := &cstream{port: port, link: l}
	cs.rs = resume.New(id, local, resume.Options{Timeout: s.o.ReliabilityTimeout, MaxBuffer: s.o.ReliabilityBuffer,
		OnBreak: func(err error) { s.streamBroke(cs, err) },
		OnEnd:   func(error) { s.streamEnded(cs) }})
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		t.Close()
		cs.rs.Abort(ErrClosed)
		return nil, ErrClosed
	}
	s.streams[cs] = struct{}{}
	s.mu.Unlock()
	l.keep(t)
	s.releaseHold(l) // the stream's channel keeps the session connected now
	if err := cs.rs.Attach(t, 0, false); err != nil {
		return nil, err
	}
	return cs, nil
}

// streamBroke moves a stream whose channel broke: when it rode the current link the whole
// link is cut and every stream follows the session to its next link; when the session is
// on another link already, the stream resumes there.
func (s *Session) streamBroke(cs *cstream, err error) {
	if cs.rs.Attached() {
		return // a late word of a transport the stream has left: it rides another now
	}
	s.mu.Lock()
	l, cur := cs.link, s.link
	s.mu.Unlock()
	switch {
	case l == cur && l != nil:
		s.fail(l, fmt.Errorf("%d/tcp: %w", cs.port, err))
	case cur != nil:
		s.wg.Add(1)
		go func() {
			defer s.wg.Done()
			s.ticketMu.Lock()
			err := s.resumeStreamLocked(s.ctx, cur, cs)
			s.ticketMu.Unlock()
			if err != nil {
				s.fail(cur, err)
			}
		}()
	}
	// Otherwise the session is reconnecting, and its next link takes the stream along.
}

func (s *Session) streamEnded(cs *cstream) {
	s.mu.Lock()
	delete(s.streams, cs)
	last := len(s.streams) == 0 && !s.closed
	s.mu.Unlock()
	if last {
		s.holdAfter()
	}
}

// resumeStreamLocked resumes cs on l, with ticketMu held. An error is the route's; a
// machine that no longer knows the stream ends it (the viewer's connection closes).
func (s *Session) resumeStreamLocked(ctx context.Context, l *link, cs *cstream) error {
	t, err := s.openTransportLocked(ctx, l, cs.port)
	if err != nil {
		return err
	}
	recv, fin := cs.rs.Position()
	rep, err := s.hello(t, resume.Hello{Resume: true, ID: cs.rs.ID(), Received: recv, Fin: fin})
	if err != nil {
		t.Close()
		return err
	}
	if err := rep.Err(); err != nil {
		t.Close()
		s.log.Info("desktop stream not resumed", "port", cs.port, "reason", err)
		cs.rs.Abort(err)
		return nil
	}
	s.mu.Lock()
	cs.link = l
	s.mu.Unlock()
	l.keep(t)
	s.releaseHold(l)
	cs.rs.Attach(t, rep.Received, rep.Fin) // an error ends the stream, not the route
	return nil
}

// probeLocked proves a new link l's route for the desktop: a channel with tok (the launch
// ticket for a session's first link, else the reconnect ticket) and a probe hello, which the
// machine answers with whether its desktop server takes connections. When no stream rides
// the link, the channel stays open as its hold (holdOn). With ticketMu held.
func (s *Session) probeLocked(ctx context.Context, l *link, tok func() string) error {
	dk := s.Desktop()
	if !s.hasChannel(dk.Channel.Port, "tcp") {
		return nil
	}
	s.mu.Lock()
	n := len(s.streams)
	s.mu.Unlock()
	t, err := s.openTransportWithLocked(ctx, l, dk.Channel.Port, func(*Descriptor) string { return tok() })
	if err != nil {
		return err
	}
	if err := s.probe(t, n == 0); err != nil {
		t.Close()
		return fmt.Errorf("%s: %w", dk.Channel, err)
	}
	if n > 0 {
		t.Close()
		return nil
	}
	s.holdOn(l, t)
	return nil
}

// probe sends a probe hello on t, asking the machine to hold the channel when hold is set,
// and reads the answer.
func (s *Session) probe(t io.ReadWriteCloser, hold bool) error {
	rep, err := s.hello(t, resume.Hello{Probe: true, Hold: hold, ID: resume.NewID()})
	if err != nil {
		return err
	}
	if err := rep.Err(); err != nil {
		return fmt.Errorf("%w: %w", ErrDesktop, err)
	}
	return nil
}

// holdOn keeps t, a held probe's channel, open, idle, as l's hold while no stream rides the
// link: the gateway counts it, so the session reads connected while no viewer is, and its
// end tells the client at once that the gateway (or the path) died. A stream that starts on
// the link releases it (releaseHold); the last one to end opens another (holdAfter).
func (s *Session) holdOn(l *link, t io.ReadWriteCloser) {
	h := &heldChannel{t: t}
	s.swapHold(l, h)
	l.keep(t)
	s.wg.Add(1)
	go func() {
		defer s.wg.Done()
		_, err := t.Read(make([]byte, 1)) // nothing comes: it ends with the channel
		t.Close()
		if h.released.Load() {
			return
		}
		if err == nil {
			err = fmt.Errorf("%w: a byte on the held channel", resume.ErrProtocol)
		}
		s.fail(l, fmt.Errorf("the desktop's held channel: %w", err))
	}()
}

// releaseHold closes l's hold, on purpose: a stream rides the link now.
func (s *Session) releaseHold(l *link) { s.swapHold(l, nil) }

// swapHold makes h l's hold and closes the one before, on purpose (its end cuts nothing).
func (s *Session) swapHold(l *link, h *heldChannel) {
	l.mu.Lock()
	old := l.hold
	l.hold = h
	l.mu.Unlock()
	if old != nil {
		old.released.Store(true)
		old.t.Close()
	}
}

// Holding reports whether the current link holds its idle desktop channel (no viewer's stream
// rides it, and no channel's admission is under way): a gateway lost now takes no ticket
// with it that the client has not heard of.
func (s *Session) Holding() bool {
	s.mu.Lock()
	l := s.link
	s.mu.Unlock()
	if l == nil {
		return false
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.hold != nil
}

// holdAfter gives the current link a hold again once its last stream has ended.
func (s *Session) holdAfter() {
	s.wg.Add(1)
	go func() {
		defer s.wg.Done()
		s.ticketMu.Lock()
		defer s.ticketMu.Unlock()
		s.mu.Lock()
		l, n, closed := s.link, len(s.streams), s.closed
		s.mu.Unlock()
		if l == nil || n > 0 || closed || l.down.Load() {
			return
		}
		l.mu.Lock()
		held := l.hold != nil
		l.mu.Unlock()
		port := s.Desktop().Channel.Port
		if held || !s.hasChannel(port, "tcp") {
			return
		}
		t, err := s.openTransportLocked(s.ctx, l, port)
		if err == nil {
			if err = s.probe(t, true); err != nil {
				t.Close()
			}
		}
		if err != nil {
			if s.ctx.Err() == nil && !errors.Is(err, ErrDesktop) {
				s.fail(l, fmt.Errorf("holding the desktop's channel: %w", err))
			}
			return
		}
		s.holdOn(l, t)
	}()
}

// resumeStreamsLocked resumes on l every live stream not carried by it, with ticketMu held.
func (s *Session) resumeStreamsLocked(ctx context.Context, l *link) error {
	s.mu.Lock()
	var todo []*cstream
	for cs := range s.streams {
		if cs.link != l {
			todo = append(todo, cs)
		}
	}
	s.mu.Unlock()
	for _, cs := range todo {
		select {
		case <-cs.rs.Done():
			continue
		default:
		}
		if err := s.resumeStreamLocked(ctx, l, cs); err != nil {
			return fmt.Errorf("resuming a desktop stream: %w", err)
		}
	}
	return nil
}

// abortStreams ends every stream (the session is closed).
func (s *Session) abortStreams() {
	s.mu.Lock()
	all := make([]*cstream, 0, len(s.streams))
	for cs := range s.streams {
		all = append(all, cs)
	}
	s.mu.Unlock()
	for _, cs := range all {
		cs.rs.Abort(ErrClosed)
		<-cs.rs.Done()
	}
}
