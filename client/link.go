package client

import (
	"bytes"
	"context"
	"crypto/tls"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/netip"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/frontdoor-vdi/frontdoor/internal/starve"

	"github.com/coder/websocket"
	"github.com/frontdoor-vdi/frontdoor/internal/siteid"
	"github.com/frontdoor-vdi/frontdoor/ticket"
)

// keepaliveMagic starts a keepalive datagram: keepaliveMagic and an 8-byte sequence number.
// The machine echoes it like any datagram.
const keepaliveMagic = "FDKA"

// link is one generation of a session's channels, all opened on one route with one ticket.
type link struct {
	via      route
	routeIdx int    // index of via in the routes of the descriptor it came from
	ticket   string // "launch" or "reconnect"
	udp      map[uint16]*udpLink
	quics    []*quicLink // the QUIC connections carrying channels: a gateway's first, or a machine's UDP ports
	gw       *quicLink   // the gateway's QUIC connection, which carries TCP channels with Options.QUIC
	opened   time.Time

	down atomic.Bool
	// mu guards cutAt, reason, transports, hold, and udp and quics while connect fills them
	// (a held channel's end may tear the link down meanwhile)
	mu         sync.Mutex
	cutAt      time.Time
	reason     string
	transports []io.Closer // the TCP channels of desktop streams riding the link
	// hold is the link's idle desktop channel while no stream rides it (Session.holdLocked).
	hold     *heldChannel
	downOnce sync.Once
}

// heldChannel is a link's idle desktop channel (resume.Hello.Hold); released is set when the
// client closes it on purpose (a stream rides the link now), so that its end cuts nothing.
type heldChannel struct {
	t        io.ReadWriteCloser
	released atomic.Bool
}

// keep registers a desktop stream's channel, which teardown closes; on a link already down
// it is closed at once (its stream moves on).
func (l *link) keep(t io.Closer) {
	l.mu.Lock()
	l.transports = append(l.transports, t)
	l.mu.Unlock()
	if l.down.Load() {
		t.Close()
	}
}

// udpLink is one UDP flow of a link.
type udpLink struct {
	port     uint16
	conn     io.ReadWriteCloser // a connected UDP socket, or a flow of QUIC datagrams
	lastEcho atomic.Int64       // unix nanos of the last keepalive echo
	asked    time.Time          // the first keepalive sent since it (keepalive's own)
	held     bool               // a silence past the timeout is held now (keepalive's own)
	seq      uint64             // keepalive sequence; used by the keepalive goroutine only
}

// teardown closes every channel of the link and its attached local connections, once.
func (l *link) teardown() { l.downOnce.Do(l.closeAll) }

// closeAll closes every channel of the link and its attached local connections.
func (l *link) closeAll() {
	l.mu.Lock()
	ts := l.transports
	l.transports = nil
	udps := make([]*udpLink, 0, len(l.udp))
	for _, u := range l.udp {
		udps = append(udps, u)
	}
	quics := slices.Clone(l.quics)
	l.mu.Unlock()
	for _, t := range ts {
		t.Close()
	}
	for _, u := range udps {
		u.conn.Close()
	}
	for _, q := range quics {
		q.close()
	}
}

// errBrokeWhileBuilt: the link's held channel ended while connect still opened the others.
var errBrokeWhileBuilt = errors.New("the link broke while it was being set up")

// connect opens the session's UDP channels on r, with d's launch ticket (kind "launch") or
// with its reconnect ticket, which every channel a gateway admits rotates, and resumes its
// desktop streams there (each TCP channel is a viewer connection's, opened when it comes:
// openStream); on error none stays open.
func (s *Session) connect(ctx context.Context, r route, d *Descriptor, kind string, idx int) (*link, error) {
	s.ticketMu.Lock()
	defer s.ticketMu.Unlock()
	tok := func() string {
		if kind == "launch" {
			return d.LaunchTicket
		}
		return s.reconnectTicket(d)
	}
	if tok() == "" {
		return nil, fmt.Errorf("descriptor has no %s ticket", kind)
	}
	l := &link{via: r, routeIdx: idx, ticket: kind, udp: map[uint16]*udpLink{}}
	// Through a gateway, one QUIC connection to its QUIC port carries the UDP channels (and
	// with Options.QUIC every channel); plain UDP only to a gateway without one. Directly,
	// each UDP channel is a QUIC connection to the machine's port.
	allQUIC := s.o.QUIC != nil && r.machine == ""
	var gw *quicLink
	if r.machine == "" && (allQUIC || (r.quicPort != 0 && slices.ContainsFunc(s.chans, func(c Channel) bool { return c.Proto == "udp" }))) {
		port := r.quicPort
		if allQUIC && s.o.QUIC.Port != 0 {
			port = s.o.QUIC.Port
		}
		q, err := s.dialQUIC(ctx, r, port)
		if err != nil {
			return nil, fmt.Errorf("quic: %w", err)
		}
		gw = q
		l.mu.Lock()
		l.gw = q
		l.quics = append(l.quics, q)
		l.mu.Unlock()
	}
	// The TCP channels first: they carry a gateway's word on a refused ticket (a login
	// past its lifetime), which a plain UDP flow does not.
	if err := s.resumeStreamsLocked(ctx, l); err != nil {
		l.teardown()
		return nil, err
	}
	if err := s.probeLocked(ctx, l, tok); err != nil {
		l.teardown()
		return nil, err
	}
	for _, ch := range s.chans {
		var err error
		var next string // the next reconnect ticket, from a gateway
		switch {
		case ch.Proto == "udp":
			var c io.ReadWriteCloser
			switch q := gw; {
			case q != nil:
				c, next, err = s.quicUDP(ctx, q, ch.Port, tok())
			case r.machine != "":
				if q, err = s.dialQUIC(ctx, r, ch.Port); err == nil {
					l.mu.Lock()
					l.quics = append(l.quics, q)
					l.mu.Unlock()
					c, next, err = s.quicUDP(ctx, q, ch.Port, tok())
				}
			default:
				c, next, err = s.dialUDP(ctx, r, ch.Port, tok())
			}
			if err == nil {
				u := &udpLink{port: ch.Port, conn: c}
				u.lastEcho.Store(s.now().UnixNano())
				l.mu.Lock()
				l.udp[ch.Port] = u
				l.mu.Unlock()
			}
		}
		// Taken even from a link that fails later: the gateway has used up the current one.
		s.rotate(d, next)
		if err != nil {
			l.teardown()
			return nil, fmt.Errorf("%s: %w", ch, err)
		}
	}
	if l.down.Load() {
		// Its held channel ended meanwhile (the gateway closed it at once), and its teardown
		// ran before the channels opened since: a link that nobody would cut again.
		l.closeAll()
		return nil, errBrokeWhileBuilt
	}
	l.opened = s.now()
	return l, nil
}

// dialTCP opens one TCP channel: TLS to a gateway, or to the machine whose certificate names
// it, within DialTimeout, then the ticket frame and the status (with a gateway's next
// reconnect ticket) within StatusTimeout. Through a gateway's TLS port the channel is sealed
// when the gateway seals it (see ticket.FrameMagicSealed): the channel returned is then TLS
// to the machine, through the gateway.
func (s *Session) dialTCP(ctx context.Context, r route, port uint16, tok string) (net.Conn, string, error) {
	seal := r.machine == "" && !s.viaWebSocket(r)
	c, next, err := s.dialTCPWith(ctx, r, port, tok, seal)
	if seal && errors.Is(err, errNoStatus) {
		// A gateway of an earlier version closes at the sealed frame, before it reads the
		// ticket: the plain frame, with the same ticket, is what it takes.
		return s.dialTCPWith(ctx, r, port, tok, false)
	}
	return c, next, err
}

// viaWebSocket reports whether the channels on r ride WebSockets to a gateway's HTTPS port.
func (s *Session) viaWebSocket(r route) bool {
	return s.o.WebSocket && r.machine == "" && r.httpsPort != 0
}

// dialTCPWith is dialTCP asking for a sealed channel (through a gateway's TLS port) or not.
func (s *Session) dialTCPWith(ctx context.Context, r route, port uint16, tok string, seal bool) (net.Conn, string, error) {
	dctx, dcancel := context.WithTimeout(ctx, s.o.DialTimeout)
	defer dcancel()
	addr := netip.AddrPortFrom(r.addr, port).String()
	// TCP keepalives notice a gateway that vanished without a word within about 3s, even on
	// a session without a UDP flow.
	nd := &net.Dialer{KeepAliveConfig: net.KeepAliveConfig{Enable: true, Idle: time.Second, Interval: time.Second, Count: 2}}
	if s.o.LocalAddr.IsValid() {
		nd.LocalAddr = net.TCPAddrFromAddrPort(netip.AddrPortFrom(s.o.LocalAddr, 0))
	}
	var c, raw net.Conn
	var err error
	if s.viaWebSocket(r) {
		c, err = dialWebSocket(dctx, nd, s.tlsFor(r), netip.AddrPortFrom(r.addr, r.httpsPort), port)
	} else if raw, err = nd.DialContext(dctx, "tcp", addr); err == nil {
		tc := tls.Client(raw, s.tlsFor(r))
		if err = tc.HandshakeContext(dctx); err != nil {
			raw.Close()
		}
		c = tc
	}
	if err != nil {
		return nil, "", err
	}
	ctx, cancel := context.WithTimeout(ctx, s.o.StatusTimeout)
	defer cancel()
	dl, _ := ctx.Deadline()
	c.SetDeadline(dl)
	stop := context.AfterFunc(ctx, func() { c.SetDeadline(time.Unix(1, 0)) })
	defer stop()
	open := ticket.WriteFrame
	if seal {
		open = ticket.WriteSealedFrame
	}
	if err := open(c, tok); err != nil {
		c.Close()
		return nil, "", err
	}
	next, pin, err := readStatus(c)
	if err == nil && pin != nil {
		if !seal {
			err = fmt.Errorf("%w (sealed, unasked)", ErrTicketDenied)
		} else if inner, uerr := unseal(ctx, raw, *pin, tok); uerr == nil {
			c = inner
		} else {
			err = uerr
		}
	}
	if err != nil {
		c.Close()
		return nil, next, err
	}
	if !stop() {
		c.Close()
		return nil, next, ctx.Err()
	}
	c.SetDeadline(time.Time{})
	return c, next, nil
}

// unseal makes a sealed channel's TLS connection to the machine on raw, whose certificate
// must have pin, and shows it the channel's ticket tok.
func unseal(ctx context.Context, raw net.Conn, pin [32]byte, tok string) (net.Conn, error) {
	c := tls.Client(raw, &tls.Config{
		MinVersion: tls.VersionTLS13,
		// The gateway, which checked the machine's certificate against the site CA, named its
		// key (pin): the client need not hold the site CA, and VerifyConnection checks the pin.
		InsecureSkipVerify: true,
		VerifyConnection: func(st tls.ConnectionState) error {
			if len(st.PeerCertificates) == 0 || ticket.Pin(st.PeerCertificates[0]) != pin {
				return fmt.Errorf("%w (its key is not the one the gateway named)", ErrNotTheMachine)
			}
			return nil
		},
	})
	if err := c.HandshakeContext(ctx); err != nil {
		raw.Close()
		return nil, fmt.Errorf("sealed channel to the machine: %w", err)
	}
	if err := ticket.WriteFrame(c, tok); err != nil {
		raw.Close()
		return nil, err
	}
	return c, nil
}

// dialWebSocket opens a channel to port over a WebSocket on the gateway's HTTPS port at gw
// (the gateway's ChannelPath), as a byte stream that lives until it is closed.
func dialWebSocket(ctx context.Context, nd *net.Dialer, tc *tls.Config, gw netip.AddrPort, port uint16) (net.Conn, error) {
	tr := &http.Transport{DialContext: nd.DialContext, TLSClientConfig: tc, ForceAttemptHTTP2: false, DisableKeepAlives: true}
	u := fmt.Sprintf("wss://%s%s?port=%d", gw, webSocketPath, port)
	ws, resp, err := websocket.Dial(ctx, u, &websocket.DialOptions{HTTPClient: &http.Client{Transport: tr}})
	if err != nil {
		if resp != nil {
			return nil, fmt.Errorf("WebSocket to %s: %s", gw, resp.Status)
		}
		return nil, fmt.Errorf("WebSocket to %s: %w", gw, err)
	}
	return websocket.NetConn(context.Background(), ws, websocket.MessageBinary), nil
}

// webSocketPath is where a gateway's HTTPS port takes channels (gateway.ChannelPath).
const webSocketPath = "/v1/channel"

// errNoStatus: the far end closed the channel without a status.
var errNoStatus = errors.New("closed without a status")

// readStatus reads a channel's status: nil for StatusOK, with the next reconnect ticket for
// StatusRotated, with the machine's pin and maybe the next ticket for StatusSealed,
// ErrLoginExpired for StatusLoginExpired, ErrTicketDenied otherwise.
func readStatus(r io.Reader) (next string, pin *[32]byte, err error) {
	var st [1]byte
	if _, err := io.ReadFull(r, st[:]); err != nil {
		if errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) {
			return "", nil, fmt.Errorf("%w (%w)", ErrTicketDenied, errNoStatus)
		}
		return "", nil, err
	}
	switch st[0] {
	case ticket.StatusOK:
		return "", nil, nil
	case ticket.StatusRotated:
		next, err := ticket.ReadFrame(r)
		if err != nil {
			return "", nil, fmt.Errorf("the next reconnect ticket: %w", err)
		}
		return next, nil, nil
	case ticket.StatusSealed:
		pin, next, err := ticket.ReadSealed(r)
		if err != nil {
			return "", nil, fmt.Errorf("the sealed channel's status: %w", err)
		}
		return next, &pin, nil
	case ticket.StatusLoginExpired:
		return "", nil, fmt.Errorf("%w: %w", ErrTicketDenied, ErrLoginExpired)
	}
	return "", nil, ErrTicketDenied
}

// tlsFor returns the TLS config of a channel on r: the gateway's certificate checked against
// its IP address, or the machine's against its name.
func (s *Session) tlsFor(r route) *tls.Config {
	tc := &tls.Config{RootCAs: s.o.RootCAs, ServerName: r.addr.String(), MinVersion: tls.VersionTLS12}
	if r.machine != "" {
		tc.VerifyConnection = func(st tls.ConnectionState) error {
			if len(st.PeerCertificates) == 0 || !siteid.Is(st.PeerCertificates[0], siteid.RoleMachine, r.machine) {
				return fmt.Errorf("%w: %s", ErrNotTheMachine, r)
			}
			return nil
		}
	}
	return tc
}

// dialUDP opens one plain UDP flow to a gateway without a QUIC port: the ticket datagram, sent again every 100ms until the machine's
// ticket.UDPReady (or the echo of the ticket datagram) comes back within DialTimeout.
func (s *Session) dialUDP(ctx context.Context, r route, port uint16, tok string) (*net.UDPConn, string, error) {
	c, err := net.DialUDP("udp", nil, net.UDPAddrFromAddrPort(netip.AddrPortFrom(r.addr, port)))
	if err != nil {
		return nil, "", err
	}
	ctx, cancel := context.WithTimeout(ctx, s.o.DialTimeout)
	defer cancel()
	stop := context.AfterFunc(ctx, func() { c.SetReadDeadline(time.Unix(1, 0)) })
	defer stop()
	dg := ticket.Datagram(tok)
	buf := make([]byte, 2048)
	for try := 0; try < 50; try++ {
		if _, err := c.Write(dg); err != nil {
			c.Close()
			return nil, "", err
		}
		if ctx.Err() == nil {
			c.SetReadDeadline(time.Now().Add(100 * time.Millisecond))
		}
		for {
			n, err := c.Read(buf)
			if err != nil {
				var ne net.Error
				if errors.As(err, &ne) && ne.Timeout() && ctx.Err() == nil {
					break // send the ticket again
				}
				c.Close()
				if ctx.Err() != nil {
					return nil, "", fmt.Errorf("no answer to the ticket datagram: %w", ctx.Err())
				}
				return nil, "", err
			}
			if bytes.HasPrefix(buf[:n], []byte(ticket.UDPReady)) || bytes.Equal(buf[:n], dg) {
				next := ""
				if len(buf[:n]) > len(ticket.UDPReady) && !bytes.Equal(buf[:n], dg) {
					next = string(buf[len(ticket.UDPReady):n])
				}
				if !stop() {
					c.Close()
					return nil, next, ctx.Err()
				}
				c.SetReadDeadline(time.Time{})
				return c, next, nil
			}
		}
	}
	c.Close()
	return nil, "", errors.New("no answer to the ticket datagram")
}

// run starts the link's goroutines: a reader per channel and the UDP keepalive.
func (s *Session) run(l *link) {
	for _, u := range l.udp {
		s.wg.Add(1)
		go func() { defer s.wg.Done(); s.readUDP(l, u) }()
	}
	if len(l.udp) > 0 {
		s.wg.Add(1)
		go func() { defer s.wg.Done(); s.keepalive(l) }()
	}
	for _, q := range l.quics {
		s.wg.Add(1)
		go func() { defer s.wg.Done(); s.quicDemux(l, q) }()
	}
}

// readUDP takes the flow's datagrams: keepalive echoes mark the flow alive, ticket answers are
// dropped, everything else goes to the session's queue for the port.
func (s *Session) readUDP(l *link, u *udpLink) {
	buf := make([]byte, 64<<10)
	q := s.udpIn[u.port]
	for {
		n, err := u.conn.Read(buf)
		if err != nil {
			s.fail(l, fmt.Errorf("%d/udp: %w", u.port, err))
			return
		}
		b := buf[:n]
		switch {
		case n == len(keepaliveMagic)+8 && string(b[:len(keepaliveMagic)]) == keepaliveMagic:
			u.lastEcho.Store(s.now().UnixNano())
		case bytes.HasPrefix(b, []byte(ticket.FrameMagic)):
		default:
			select {
			case q <- bytes.Clone(b):
			default: // the reader is behind: drop, as a network would
			}
		}
	}
}

// keepalive sends a keepalive datagram on every UDP flow each KeepaliveInterval and cuts the
// link when a flow's echo is missing for KeepaliveTimeout, unless this process itself was
// late: see silenceHeld.
func (s *Session) keepalive(l *link) {
	t := time.NewTicker(s.o.KeepaliveInterval)
	defer t.Stop()
	msg := make([]byte, len(keepaliveMagic)+8)
	copy(msg, keepaliveMagic)
	var starved func(time.Time) time.Duration
	meter := starve.Process()
	if meter != nil {
		starved = meter.Longest
	}
	prev := time.Now()
	var late time.Time // the last tick that came a quarter of the timeout or more late
	var lateBy time.Duration
	for {
		select {
		case <-s.ctx.Done():
			return
		case <-t.C:
		}
		if l.down.Load() {
			return
		}
		tick := time.Now()
		if d := tick.Sub(prev) - s.o.KeepaliveInterval; d >= s.o.KeepaliveTimeout/4 {
			late, lateBy = tick, d
		}
		prev = tick
		if meter != nil {
			meter.Mark(tick)
		}
		now := s.now()
		for _, u := range l.udp {
			// The silence runs from the first keepalive sent since the last echo: a
			// keepalive not sent (this goroutine had not run yet) gets no echo.
			var silent time.Duration
			if echo := time.Unix(0, u.lastEcho.Load()); u.asked.After(echo) {
				silent = now.Sub(u.asked)
			} else {
				u.asked = now
			}
			if silent > s.o.KeepaliveTimeout {
				waited := silenceHeld(s.o.KeepaliveTimeout, silent, tick, late, lateBy, starved)
				if waited == 0 {
					s.fail(l, fmt.Errorf("%d/udp: no keepalive echo for %s", u.port, silent.Round(time.Millisecond)))
					return
				}
				if !u.held {
					s.log.Info("a keepalive echo is late while this process was late itself; not cut yet",
						"port", u.port, "silent", silent.Round(time.Millisecond), "late", waited.Round(time.Millisecond))
				}
				u.held = true
			} else {
				u.held = false
			}
			u.seq++
			binary.BigEndian.PutUint64(msg[len(keepaliveMagic):], u.seq)
			if _, err := u.conn.Write(msg); err != nil {
				s.fail(l, fmt.Errorf("%d/udp: %w", u.port, err))
				return
			}
		}
	}
}

// silenceHeld says whether a UDP flow silent for silent (past timeout) at tick is held
// rather than cut, and returns how late this process was (0: cut). An echo is read by this
// process, and one that came while the process stood still (its keepalive tick came lateBy
// late, the last time at late) or while its goroutines waited for a CPU (starved, from the
// runtime's scheduling latencies; nil without them) may sit unread in the socket. So a
// silence counts only once this process has been on time for a whole timeout, as the health
// checker's probes count (Lifeguard's local health awareness); a gateway that died behind a
// starved client is still cut, at three timeouts.
func silenceHeld(timeout, silent time.Duration, tick, late time.Time, lateBy time.Duration, starved func(time.Time) time.Duration) time.Duration {
	if silent >= 3*timeout {
		return 0
	}
	var waited time.Duration
	if !late.IsZero() && tick.Sub(late) < timeout {
		waited = lateBy
	}
	if starved != nil {
		if w := starved(tick.Add(-timeout)); w >= timeout/4 {
			waited = max(waited, w)
		}
	}
	return waited
}
