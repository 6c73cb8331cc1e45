package client

import (
	"context"
	"crypto/x509"
	"errors"
	"fmt"
	"log/slog"
	"net/netip"
	"slices"
	"sync"
	"time"
)

// Options configure a Session.
type Options struct {
	// Descriptor is the launch's answer. Required.
	Descriptor *Descriptor
	// RootCAs verifies the gateways' TLS certificates (nil: the system pool). The client
	// checks the certificate against the gateway's IP address.
	RootCAs *x509.CertPool
	// Channels are the channels to open. Default: DefaultChannels (8443/tcp, 4172/udp).
	Channels []Channel
	// Relaunch makes a new launch, through another front door, when no gateway of the
	// descriptor takes the reconnect ticket; it returns the new descriptor and the front
	// door that answered. Default: nil (no relaunch; keep trying the descriptor's routes).
	Relaunch func(ctx context.Context) (*Descriptor, string, error)
	// OnEvent receives every event as it happens, from the session's goroutines; it must not
	// block. Default: nil.
	OnEvent func(Event)
	// DialTimeout bounds reaching a gateway or machine for one channel: the connection and
	// its TLS or QUIC handshake (a gateway that does not answer is given up this soon).
	// Default: 500ms.
	DialTimeout time.Duration
	// StatusTimeout bounds the wait for a channel's status once the gateway or machine
	// answered: a gateway admits a channel only after reaching the machine, and a client that
	// gave up after the gateway admitted it would have used up its reconnect ticket (the
	// gateway rotated it) for nothing. Default: 3s.
	StatusTimeout time.Duration
	// KeepaliveInterval is the period of UDP keepalive datagrams. Default: 200ms.
	KeepaliveInterval time.Duration
	// KeepaliveTimeout cuts the session when a UDP flow's keepalive echo is missing this
	// long while this process was on time to read it; a silence that a stall of this process
	// may explain is held, up to three times as long. Default: 1s.
	KeepaliveTimeout time.Duration
	// MaxBackoff caps the pause between reconnect rounds. Default: 300ms.
	MaxBackoff time.Duration
	// GiveUpAfter ends reconnecting this long after a cut (EventLost). Default: 2m, or
	// ReliabilityTimeout when longer.
	GiveUpAfter time.Duration
	// ReliabilityTimeout is how long a desktop stream waits for the session to come back
	// after its channel broke, the viewer's connection held open meanwhile. Default: the
	// site's (the descriptor's desktop.reliability_timeout_seconds), else 180s.
	ReliabilityTimeout time.Duration
	// ReliabilityBuffer bounds the bytes a stream keeps until the machine has them; when it
	// is full the viewer's connection is not read until the machine catches up. Default: 4 MiB.
	ReliabilityBuffer int
	// QUIC, when set, carries every channel to gateways over one QUIC connection (TCP
	// channels as streams too, not TLS). Without it the UDP channels alone ride QUIC, to the
	// gateway's quic_port. Direct mode ignores it. Default: nil.
	QUIC *QUICOptions
	// WebSocket carries the TCP channels to gateways over WebSockets on each gateway's HTTPS
	// port (its https_port: 443 on a site), as a browser's are: the way through a firewall
	// that passes HTTPS alone. A gateway without an HTTPS port gets TLS channels. Direct mode
	// and QUIC ignore it. Default: false.
	WebSocket bool
	// LocalAddr is the local address the TCP channels (and WebSockets) are dialled from,
	// on a host with several. Default: the system's choice.
	LocalAddr netip.Addr
	// Logger receives the session's logs. Default: slog.Default().
	Logger *slog.Logger
	// Now is the clock of events. Default: time.Now.
	Now func() time.Time
}

// Session is a launched session's open channels, kept up across gateway failures.
type Session struct {
	o     Options
	log   *slog.Logger
	now   func() time.Time
	chans []Channel
	udpIn map[uint16]chan []byte // received datagrams per UDP port, across links
	tl    Timeline

	ctx    context.Context
	cancel context.CancelFunc
	wg     sync.WaitGroup
	cuts   chan *link
	done   chan struct{} // closed when the session ends (Close or lost)

	// ticketMu serializes the channels' openings: each uses the reconnect ticket the last
	// one was given (a gateway rotates it), never one used already.
	ticketMu sync.Mutex

	mu        sync.Mutex // guards desc, link, up, err, closed, listeners, streams, and each stream's link
	streams   map[*cstream]struct{}
	desc      *Descriptor
	link      *link         // the open channels; nil while cut
	up        chan struct{} // closed while link is set
	err       error
	closed    bool
	listeners []listener
}

// setDefaults checks o and fills in the defaults of what it leaves unset.
func (o *Options) setDefaults() error {
	if o.Descriptor == nil {
		return errors.New("client: Options.Descriptor is required")
	}
	if len(o.Channels) == 0 {
		o.Channels = DefaultChannels
	}
	for _, c := range o.Channels {
		if (c.Proto != "tcp" && c.Proto != "udp") || c.Port == 0 {
			return fmt.Errorf("client: bad channel %s", c)
		}
	}
	if o.DialTimeout <= 0 {
		o.DialTimeout = 500 * time.Millisecond
	}
	if o.StatusTimeout <= 0 {
		o.StatusTimeout = 3 * time.Second
	}
	if o.KeepaliveInterval <= 0 {
		o.KeepaliveInterval = 200 * time.Millisecond
	}
	if o.KeepaliveTimeout <= 0 {
		o.KeepaliveTimeout = time.Second
	}
	if o.MaxBackoff <= 0 {
		o.MaxBackoff = 300 * time.Millisecond
	}
	if o.ReliabilityTimeout <= 0 {
		o.ReliabilityTimeout = 180 * time.Second
		if dk := o.Descriptor.Desktop; dk != nil && dk.ReliabilitySeconds > 0 {
			o.ReliabilityTimeout = time.Duration(dk.ReliabilitySeconds) * time.Second // the site's
		}
	}
	if o.GiveUpAfter <= 0 {
		// Reconnecting goes on as long as the machine keeps the desktop's streams.
		o.GiveUpAfter = max(2*time.Minute, o.ReliabilityTimeout)
	}
	if o.ReliabilityBuffer <= 0 {
		o.ReliabilityBuffer = 4 << 20
	}
	if o.Logger == nil {
		o.Logger = slog.Default()
	}
	if o.Now == nil {
		o.Now = time.Now
	}
	return nil
}

// Open opens the descriptor's channels — through its gateways in order, or directly to the
// machine — and keeps them up until Close. ctx bounds the first opening only.
func Open(ctx context.Context, o Options) (*Session, error) {
	if err := o.setDefaults(); err != nil {
		return nil, err
	}
	d := *o.Descriptor
	s := &Session{o: o, log: o.Logger.With("session", d.SessionID), now: o.Now, udpIn: map[uint16]chan []byte{},
		cuts: make(chan *link, 4), done: make(chan struct{}), desc: &d, up: make(chan struct{}), streams: map[*cstream]struct{}{}}
	for _, c := range o.Channels {
		if !slices.Contains(s.chans, c) {
			s.chans = append(s.chans, c)
		}
		if c.Proto == "udp" {
			s.udpIn[c.Port] = make(chan []byte, 256)
		}
	}
	s.ctx, s.cancel = context.WithCancel(context.Background())
	stop := context.AfterFunc(ctx, s.cancel)
	l, errs := s.openDescriptor(&d, -1, true)
	stop()
	if l == nil {
		s.cancel()
		if ctx.Err() != nil {
			return nil, ctx.Err()
		}
		return nil, fmt.Errorf("opening session %s: %w", d.SessionID, errors.Join(errs...))
	}
	s.install(l)
	s.emit(Event{Kind: EventUp, At: l.opened, Session: d.SessionID, Mode: d.Mode, Via: l.via.name, Address: l.via.addr.String(), Ticket: l.ticket})
	s.wg.Add(1)
	go func() { defer s.wg.Done(); s.supervise() }()
	return s, nil
}

// openDescriptor tries d's routes in order, starting after the route at index after, and
// returns the first link that opens. With fresh, the first try uses the launch ticket and the
// later ones the reconnect ticket (a launch ticket opens each channel once); otherwise every
// try uses the reconnect ticket.
func (s *Session) openDescriptor(d *Descriptor, after int, fresh bool) (*link, []error) {
	rs, err := routes(d)
	if err != nil {
		return nil, []error{err}
	}
	var errs []error
	for i := range rs {
		idx := (after + 1 + i) % len(rs)
		r := rs[idx]
		kind := "reconnect"
		if (fresh && i == 0) || s.reconnectTicket(d) == "" {
			kind = "launch"
		}
		l, err := s.connect(s.ctx, r, d, kind, idx)
		if err == nil {
			return l, nil
		}
		if s.ctx.Err() != nil {
			return nil, append(errs, s.ctx.Err())
		}
		err = fmt.Errorf("via %s: %w", r, err)
		errs = append(errs, err)
		s.emit(Event{Kind: EventAttempt, At: s.now(), Session: d.SessionID, Mode: d.Mode, Via: r.name, Address: r.addr.String(), Ticket: kind, Reason: err.Error()})
		if errors.Is(err, ErrLoginExpired) {
			break // every gateway of the site would say the same
		}
	}
	return nil, errs
}

// reconnectTicket returns d's reconnect ticket: the launch's, or the last one a gateway
// handed out (rotate).
func (s *Session) reconnectTicket(d *Descriptor) string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return d.ReconnectTicket
}

// rotate makes next d's reconnect ticket: a gateway took the current one for a channel (it
// opens each channel once) and answered with the next.
func (s *Session) rotate(d *Descriptor, next string) {
	if next == "" {
		return
	}
	s.mu.Lock()
	d.ReconnectTicket = next
	s.mu.Unlock()
}

// install makes l the session's link and starts its goroutines; after Close it closes l.
func (s *Session) install(l *link) bool {
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		l.down.Store(true)
		l.teardown()
		return false
	}
	s.link = l
	close(s.up)
	s.mu.Unlock()
	s.run(l)
	return true
}

// fail marks l broken (once) and tells the supervisor.
func (s *Session) fail(l *link, err error) {
	if !l.down.CompareAndSwap(false, true) {
		return
	}
	l.mu.Lock()
	l.cutAt, l.reason = s.now(), err.Error()
	l.mu.Unlock()
	l.teardown()
	s.mu.Lock()
	current := s.link == l
	if current {
		s.link = nil
		s.up = make(chan struct{})
	}
	s.mu.Unlock()
	if !current {
		return // a link that was never installed, or is already replaced
	}
	select {
	case s.cuts <- l:
	default:
	}
}

func (s *Session) emit(e Event) {
	s.tl.add(e)
	switch e.Kind {
	case EventAttempt:
		s.log.Debug("reconnect attempt failed", "via", e.Via, "address", e.Address, "reason", e.Reason)
	default:
		s.log.Info("session "+string(e.Kind), "via", e.Via, "address", e.Address, "reason", e.Reason, "gap", e.Gap)
	}
	if s.o.OnEvent != nil {
		s.o.OnEvent(e)
	}
}

// supervise waits for cuts and reconnects.
func (s *Session) supervise() {
	for {
		select {
		case <-s.ctx.Done():
			return
		case l := <-s.cuts:
			if !s.recover(l) {
				s.abortStreams() // the viewers' connections close: the session is over
				return
			}
		}
	}
}

// recover brings the session back after l broke: the reconnect ticket through the next
// gateways, then a new launch, in rounds with a capped backoff, until GiveUpAfter. The first
// new launch comes right after the first round fails; later ones are paced so that a client
// does not hammer the front doors. It returns false when the session is over.
func (s *Session) recover(l *link) bool {
	l.mu.Lock()
	cutAt, reason := l.cutAt, l.reason
	l.mu.Unlock()
	s.mu.Lock()
	d := s.desc
	s.mu.Unlock()
	oldSession := d.SessionID
	s.emit(Event{Kind: EventCut, At: cutAt, Session: d.SessionID, Mode: d.Mode, Via: l.via.name, Address: l.via.addr.String(), Reason: reason})
	after := l.routeIdx
	var backoff, relaunchGap time.Duration
	var nextRelaunch time.Time // new launches are paced: at once, then 1s, 2s, 4s... up to 10s apart
	for round := 0; round < 100000; round++ {
		nl, errs := s.openDescriptor(d, after, false)
		if err := errors.Join(errs...); nl == nil && errors.Is(err, ErrLoginExpired) {
			// A new launch with the credentials held would be a login the user never typed.
			s.loginRequired(d, cutAt, ErrLoginExpired)
			return false
		}
		relaunched, frontDoor := false, ""
		if nl == nil && s.ctx.Err() == nil && s.o.Relaunch != nil && !s.now().Before(nextRelaunch) {
			relaunchGap = min(max(2*relaunchGap, time.Second), 10*time.Second)
			nextRelaunch = s.now().Add(relaunchGap)
			nd, fd, err := s.relaunch()
			switch {
			case errors.Is(err, ErrUnauthorized):
				// The credentials held no longer log in (a one-time code is used up, a
				// password changed): retrying would only count failed logins against them.
				s.loginRequired(d, cutAt, err)
				return false
			case err != nil:
				s.emit(Event{Kind: EventAttempt, At: s.now(), Session: d.SessionID, Via: "launch", Reason: err.Error(), Gap: s.now().Sub(cutAt)})
			default:
				s.emit(Event{Kind: EventRelaunch, At: s.now(), Session: nd.SessionID, Mode: nd.Mode, FrontDoor: fd, Gap: s.now().Sub(cutAt)})
				s.mu.Lock()
				s.desc = nd
				s.mu.Unlock()
				d, after, relaunched, frontDoor = nd, -1, true, fd
				nl, _ = s.openDescriptor(d, -1, true)
			}
		}
		if s.ctx.Err() != nil {
			if nl != nil {
				nl.down.Store(true)
				nl.teardown()
			}
			return false
		}
		if nl != nil {
			if !s.install(nl) {
				return false
			}
			at := nl.opened
			s.emit(Event{Kind: EventBack, At: at, Session: d.SessionID, Mode: d.Mode, Via: nl.via.name, Address: nl.via.addr.String(),
				Ticket: nl.ticket, Gap: at.Sub(cutAt), SameSession: d.SessionID == oldSession, Relaunched: relaunched, FrontDoor: frontDoor})
			return true
		}
		if gap := s.now().Sub(cutAt); gap > s.o.GiveUpAfter {
			err := fmt.Errorf("%w: no gateway or front door answered for %s", ErrLost, gap.Round(time.Millisecond))
			s.emit(Event{Kind: EventLost, At: s.now(), Session: d.SessionID, Mode: d.Mode, Reason: err.Error(), Gap: gap})
			s.end(err)
			return false
		}
		backoff = min(max(2*backoff, 50*time.Millisecond), s.o.MaxBackoff)
		t := time.NewTimer(backoff)
		select {
		case <-s.ctx.Done():
			t.Stop()
			return false
		case <-t.C:
		}
	}
	s.end(fmt.Errorf("%w: too many reconnect rounds", ErrLost))
	return false
}

// loginRequired ends the session because only a new login brings it back (ErrLoginRequired).
func (s *Session) loginRequired(d *Descriptor, cutAt time.Time, cause error) {
	err := fmt.Errorf("%w: %w", ErrLoginRequired, cause)
	s.emit(Event{Kind: EventLost, At: s.now(), Session: d.SessionID, Mode: d.Mode, Reason: err.Error(), Gap: s.now().Sub(cutAt)})
	s.end(err)
}

func (s *Session) relaunch() (*Descriptor, string, error) {
	ctx, cancel := context.WithTimeout(s.ctx, 10*time.Second)
	defer cancel()
	d, fd, err := s.o.Relaunch(ctx)
	if err != nil {
		return nil, "", fmt.Errorf("new launch: %w", err)
	}
	if d == nil {
		return nil, "", errors.New("new launch: no descriptor")
	}
	c := *d
	return &c, fd, nil
}

// end records why the session is over and releases its waiters.
func (s *Session) end(err error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.err == nil {
		s.err = err
		close(s.done)
	}
}

// Close cuts the channels, stops reconnecting and closes the local listeners, then waits for
// the session's goroutines. It does not log the session off.
func (s *Session) Close() error {
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		s.wg.Wait()
		return nil
	}
	s.closed = true
	l := s.link
	s.link = nil
	ls := s.listeners
	s.listeners = nil
	d := s.desc
	s.mu.Unlock()
	s.cancel()
	for _, x := range ls {
		x.ln.Close()
	}
	s.abortStreams()
	if l != nil {
		l.down.Store(true)
		l.teardown()
	}
	s.wg.Wait()
	s.end(ErrClosed)
	s.emit(Event{Kind: EventClosed, At: s.now(), Session: d.SessionID, Mode: d.Mode})
	return nil
}

// Done is closed when the session ends: Close was called or it gave up reconnecting.
func (s *Session) Done() <-chan struct{} { return s.done }

// Err returns why the session ended (ErrClosed, or an error wrapping ErrLost or
// ErrLoginRequired), or nil while it runs.
func (s *Session) Err() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.err
}

// WaitUp waits until the channels are open (returning at once when they are).
func (s *Session) WaitUp(ctx context.Context) error {
	s.mu.Lock()
	up, closed := s.up, s.closed
	s.mu.Unlock()
	if closed {
		return ErrClosed
	}
	select {
	case <-up:
		return nil
	case <-s.done:
		return s.Err()
	case <-ctx.Done():
		return ctx.Err()
	}
}

// Up reports whether the channels are open (false while reconnecting).
func (s *Session) Up() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.link != nil
}

// Descriptor returns the session's current descriptor (after a relaunch, the new one).
func (s *Session) Descriptor() Descriptor {
	s.mu.Lock()
	defer s.mu.Unlock()
	return *s.desc
}

// Via returns the current route's gateway name ("direct" in direct mode) and address, or
// empty strings while reconnecting.
func (s *Session) Via() (name, address string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.link == nil {
		return "", ""
	}
	return s.link.via.name, s.link.via.addr.String()
}

// Timeline returns the session's events so far.
func (s *Session) Timeline() []Event { return s.tl.Events() }
