package gateway

import (
	"context"
	"crypto/tls"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/netip"
	"sync"
	"sync/atomic"
	"time"

	"github.com/frontdoor-vdi/frontdoor/internal/connlimit"
	"github.com/frontdoor-vdi/frontdoor/internal/quicguard"
	"github.com/frontdoor-vdi/frontdoor/ticket"
	"github.com/quic-go/quic-go"
	"golang.org/x/time/rate"
)

// QUIC is the gateway end of the QUIC transport (wire format in package ticket). It checks
// every channel's ticket with the site's verifier exactly as the TLS and UDP ports do, then
// splices TCP channels to the machine's port and relays UDP datagrams to it; with Track set it
// reports session events like the other ports. node serves it on a gateway's quic_port, with
// the caps of limits.go.
type QUIC struct {
	o     QUICOptions
	ln    *quic.Listener
	tr    *quic.Transport
	pc    net.PacketConn
	guard *quicguard.Guard
	log   *slog.Logger
	wg    sync.WaitGroup

	mu       sync.Mutex // guards conns, bySource, ticketless, closed, draining, serving
	conns    map[*quic.Conn]*qconn
	bySource map[netip.Addr]int // open connections by source (quicSource)
	// ticketless counts the open connections with no channel admitted yet.
	ticketless int
	// perSource and maxTicketless are the caps of refuseLocked: maxQUICPerSource and
	// maxQUICTicketless (tests lower them).
	perSource, maxTicketless int
	refusals                 *rate.Limiter // paces the log of refused connections
	closed                   bool
	draining                 bool          // Shutdown closed the listener: connected clients carry on
	serving                  bool          // Serve's accept loop runs, or ran
	accepted                 chan struct{} // closed when Serve's accept loop has returned

	drainMode atomic.Bool // Drain: no channel for a session not carried here (needs Track)
	sources   sourceLimits
}

// QUICOptions configure a QUIC gateway.
type QUICOptions struct {
	// Name names the gateway in logs and session events.
	Name string
	// Sessions, when set, refuses tickets of sessions that are no longer active.
	Sessions Sessions
	// Track, when set, counts the channels for session events (share the node's Tracker).
	Track *Tracker
	// Address is the UDP address to listen on, e.g. "127.0.71.1:4433". Required.
	Address string
	// TLS is the server TLS config (its certificate must name the gateway's IP). Required.
	TLS *tls.Config
	// Verifier checks channel tickets. Required.
	Verifier *ticket.Verifier
	// Machine resolves a machine name to its address. Required.
	Machine func(name string) (netip.Addr, bool)
	// MachineTLS is the client TLS config of the TCP channels to machines (see
	// Options.MachineTLS). Required.
	MachineTLS func() *tls.Config
	// Carried refuses used reconnect tickets of connected sessions (see Options.Carried).
	// Default: nil.
	Carried func(session string) bool
	// Reissue rotates the reconnect ticket at each admitted channel (see Options.Reissue).
	// Default: nil.
	Reissue func(claims ticket.Claims) (string, error)
	// TicketWithin closes a connection that has no channel admitted this long after its
	// handshake. Default: 5s.
	TicketWithin time.Duration
	// Logger receives the gateway's logs. Default: slog.Default().
	Logger *slog.Logger
}

// ListenQUIC opens the QUIC transport of g on port of its address: the same gateway, its
// channels on QUIC streams and DATAGRAM frames, with g's options and counts.
func (g *Gateway) ListenQUIC(port uint16) (*QUIC, error) {
	o := g.o
	return ListenQUIC(QUICOptions{Name: o.Name, Sessions: o.Sessions, Track: g.track, Address: netip.AddrPortFrom(o.Address, port).String(),
		TLS: o.TLS, Verifier: o.Verifier, Machine: o.Machine, MachineTLS: o.MachineTLS, Carried: o.Carried, Reissue: o.Reissue, Logger: o.Logger})
}

// ListenQUIC opens the QUIC gateway's socket; Serve runs it.
func ListenQUIC(o QUICOptions) (*QUIC, error) {
	if o.TLS == nil || o.MachineTLS == nil || o.Verifier == nil || o.Machine == nil || o.Address == "" {
		return nil, errors.New("quic gateway: Address, TLS, MachineTLS, Verifier and Machine are required")
	}
	if o.Logger == nil {
		o.Logger = slog.Default()
	}
	if o.TicketWithin == 0 {
		o.TicketWithin = 5 * time.Second
	}
	pc, err := net.ListenPacket("udp", o.Address)
	if err != nil {
		return nil, fmt.Errorf("quic gateway: %w", err)
	}
	tc := o.TLS.Clone()
	tc.NextProtos = []string{ticket.QUICALPN}
	// A flood of forged Initials costs a Retry each, or less (package quicguard), never a
	// handshake or a ticket check: the established flows do not wait.
	log := o.Logger.With("quic_gateway", o.Address)
	tr, guard, err := quicguard.Transport(pc.(*net.UDPConn), func(keep float64) {
		if keep < 1 {
			log.Warn("a flood of new QUIC connections: the kernel sheds most of them", "let_through", keep)
		} else {
			log.Info("the flood of new QUIC connections is over")
		}
	})
	if err != nil {
		pc.Close()
		return nil, fmt.Errorf("quic gateway: %w", err)
	}
	ln, err := tr.Listen(tc, &quic.Config{EnableDatagrams: true, MaxIdleTimeout: 10 * time.Second, KeepAlivePeriod: time.Second,
		MaxIncomingStreams: maxStreamsPerConn, MaxIncomingUniStreams: -1})
	if err != nil {
		guard.Close()
		tr.Close()
		pc.Close()
		return nil, fmt.Errorf("quic gateway: %w", err)
	}
	return &QUIC{o: o, ln: ln, tr: tr, pc: pc, guard: guard, log: log, conns: map[*quic.Conn]*qconn{}, bySource: map[netip.Addr]int{},
		perSource: maxQUICPerSource, maxTicketless: maxQUICTicketless, refusals: rate.NewLimiter(rate.Every(10*time.Second), 1),
		accepted: make(chan struct{})}, nil
}

// Addr returns the listening address.
func (g *QUIC) Addr() net.Addr { return g.ln.Addr() }

// Serve accepts connections until ctx ends or Close is called.
func (g *QUIC) Serve(ctx context.Context) error {
	g.mu.Lock()
	if g.serving {
		g.mu.Unlock()
		return errors.New("quic gateway: Serve called twice")
	}
	g.serving = true
	if !g.closed { // under mu: a Close that comes later waits for the probe answerer
		g.wg.Add(1)
		go func() { defer g.wg.Done(); g.answerProbes() }()
	}
	g.mu.Unlock()
	defer close(g.accepted)
	stop := context.AfterFunc(ctx, func() { g.Close() })
	defer stop()
	for {
		c, err := g.ln.Accept(ctx)
		if err != nil {
			g.mu.Lock()
			draining := g.draining
			g.mu.Unlock()
			if !draining || ctx.Err() != nil {
				g.Close()
			}
			return nil // draining: Shutdown closes once its clients are gone
		}
		g.mu.Lock()
		if g.closed {
			g.mu.Unlock()
			c.CloseWithError(0, "gateway closed")
			return nil
		}
		src := quicSource(c.RemoteAddr())
		if why := g.refuseLocked(src); why != "" {
			g.mu.Unlock()
			if g.refusals.Allow() {
				g.log.Warn("quic connection refused", "client", c.RemoteAddr().String(), "reason", why)
			}
			c.CloseWithError(0, "busy")
			continue
		}
		q := &qconn{sessions: map[string]time.Time{}, src: src}
		g.conns[c] = q
		g.bySource[src]++
		g.ticketless++
		g.wg.Add(1)
		g.mu.Unlock()
		go func() {
			defer g.wg.Done()
			g.serveConn(c)
			g.mu.Lock()
			delete(g.conns, c)
			if g.bySource[src]--; g.bySource[src] <= 0 {
				delete(g.bySource, src)
			}
			if !q.ticketed {
				g.ticketless--
			}
			g.mu.Unlock()
		}()
	}
}

// answerProbes echoes probe datagrams (ticket.ProbePayload, which is no QUIC packet) until
// the socket closes, so that health probes read the QUIC port as any UDP port.
func (g *QUIC) answerProbes() {
	buf := make([]byte, 2048)
	for {
		n, from, err := g.tr.ReadNonQUICPacket(context.Background(), buf)
		if err != nil {
			return
		}
		if string(buf[:n]) == ticket.ProbePayload {
			g.tr.WriteTo(buf[:n], from)
		}
	}
}

// Clients returns the current address of every connected client (after a migration, the new
// one).
func (g *QUIC) Clients() []netip.AddrPort {
	g.mu.Lock()
	defer g.mu.Unlock()
	var out []netip.AddrPort
	for c := range g.conns {
		if a, err := netip.ParseAddrPort(c.RemoteAddr().String()); err == nil {
			out = append(out, a)
		}
	}
	return out
}

// Drain puts the QUIC end in drain mode (on) or takes it out: with Track set, it opens no
// channel for a session that has none on this gateway (its TLS and UDP ports or this end),
// as the Gateway's Drain does; without Track it cannot tell and takes every session.
func (g *QUIC) Drain(on bool) { g.drainMode.Store(on) }

// Shutdown drains the QUIC end: it takes no new connection (handshakes in flight are
// refused) while the connected clients carry on, opening channels as before. Once none is
// left, or ctx ends, Close cuts the rest; Shutdown then says how many were cut.
func (g *QUIC) Shutdown(ctx context.Context) error {
	g.mu.Lock()
	g.draining = true
	closed, serving := g.closed, g.serving
	g.mu.Unlock()
	if closed {
		return g.Close()
	}
	g.ln.Close()
	if serving {
		// Clients whose handshake was done at the close are still in the accept queue:
		// Serve takes them before it returns, and they are counted with the rest.
		select {
		case <-g.accepted:
		case <-ctx.Done():
		}
	}
	n := waitNone(ctx, nil, func() int {
		g.mu.Lock()
		defer g.mu.Unlock()
		return len(g.conns)
	})
	g.Close()
	if n > 0 {
		return fmt.Errorf("quic gateway %s: cut %d connections still open: %w", g.o.Name, n, ctx.Err())
	}
	return nil
}

// Close closes every connection and the socket, then waits for the connections' goroutines.
func (g *QUIC) Close() error {
	g.mu.Lock()
	if !g.closed {
		g.closed = true
		for c := range g.conns {
			c.CloseWithError(0, "gateway closed")
		}
		g.ln.Close()
		g.tr.Close()
		g.guard.Close()
		g.pc.Close()
	}
	g.mu.Unlock()
	g.wg.Wait()
	return nil
}

// qconn is what a QUIC gateway knows of a client's connection: the sessions its channels
// carry, each with the earliest issue time of the tickets that opened them.
type qconn struct {
	sessions map[string]time.Time // guarded by QUIC.mu
	src      netip.Addr           // the client's source (quicSource)
	ticketed bool                 // a channel was admitted; guarded by QUIC.mu
}

// quicSource is the source a connection counts against: an IPv4 address, or an IPv6 /64
// (connlimit.SourceOf, as the HTTPS listeners count).
func quicSource(a net.Addr) netip.Addr {
	ap, err := netip.ParseAddrPort(a.String())
	if err != nil {
		return netip.Addr{}
	}
	return connlimit.SourceOf(ap.Addr()).Addr()
}

// refuseLocked says why a new connection from src is refused, "" when it is not: the
// gateway's cap of connections, its source's share of it (one address could otherwise take
// every place), or too many connections that have shown no ticket yet (which cost the
// gateway a handshake and a place each, and a client nothing).
func (g *QUIC) refuseLocked(src netip.Addr) string {
	switch {
	case len(g.conns) >= maxQUICConns:
		return "the gateway holds its cap of connections"
	case g.bySource[src] >= g.perSource:
		return "its source holds its share of the connections"
	case g.ticketless >= g.maxTicketless:
		return "too many connections without a ticket yet"
	}
	return ""
}

// CloseSession cuts the connections that carry channels of session (after a logoff).
func (g *QUIC) CloseSession(id string) { g.CloseSessionBefore(id, ticket.AllIssued) }

// CloseSessionBefore cuts the connections that carry channels of session opened by tickets
// issued before before (after a steal: the old endpoint's).
func (g *QUIC) CloseSessionBefore(id string, before time.Time) {
	g.mu.Lock()
	var cut []*quic.Conn
	for c, q := range g.conns {
		if at, ok := q.sessions[id]; ok && at.Before(before) {
			cut = append(cut, c)
		}
	}
	g.mu.Unlock()
	for _, c := range cut {
		c.CloseWithError(0, "session ended")
	}
}

// carry records that c carries a channel of session opened by a ticket issued at issued; it
// refuses a session that has its cap of connections here already.
func (g *QUIC) carry(c *quic.Conn, session string, issued time.Time) error {
	g.mu.Lock()
	defer g.mu.Unlock()
	q := g.conns[c]
	if q == nil {
		return ErrClosed // closed meanwhile
	}
	at, ok := q.sessions[session]
	if !ok {
		n := 0
		for _, o := range g.conns {
			if _, carries := o.sessions[session]; carries {
				n++
			}
		}
		if n >= maxQUICPerSession {
			return ErrSessionCap
		}
	}
	if !ok || issued.Before(at) {
		q.sessions[session] = issued
	}
	if !q.ticketed {
		q.ticketed = true
		g.ticketless--
	}
	return nil
}

// qflows are one connection's UDP flows toward the machine, by port.
type qflows struct {
	mu sync.Mutex // guards m
	m  map[uint16]*machineFlow
}

func (g *QUIC) serveConn(c *quic.Conn) {
	fl := &qflows{m: map[uint16]*machineFlow{}}
	// A connection that opens no channel within TicketWithin is closed: a client's
	// keepalives alone do not hold a gateway's state.
	idle := time.AfterFunc(g.o.TicketWithin, func() {
		g.mu.Lock()
		q := g.conns[c]
		carries := q != nil && len(q.sessions) > 0
		g.mu.Unlock()
		if !carries {
			c.CloseWithError(0, "no ticket")
		}
	})
	defer idle.Stop()
	var wg sync.WaitGroup
	defer func() {
		c.CloseWithError(0, "")
		fl.mu.Lock()
		for _, u := range fl.m {
			u.Close()
		}
		fl.mu.Unlock()
		wg.Wait()
	}()
	wg.Add(1)
	go func() {
		defer wg.Done()
		for {
			b, err := c.ReceiveDatagram(context.Background())
			if err != nil {
				return
			}
			if len(b) < 2 {
				continue
			}
			fl.mu.Lock()
			u := fl.m[binary.BigEndian.Uint16(b)]
			fl.mu.Unlock()
			if u != nil {
				u.sendFrame(b) // the same frame, port first, on the machine's leg
			}
		}
	}()
	for {
		st, err := c.AcceptStream(context.Background())
		if err != nil {
			return
		}
		wg.Add(1)
		go func() { defer wg.Done(); g.serveStream(c, st, fl, &wg) }()
	}
}

// serveStream reads a channel's header and ticket, checks it, and opens the channel.
func (g *QUIC) serveStream(c *quic.Conn, st *quic.Stream, fl *qflows, wg *sync.WaitGroup) {
	deny := func(reason string, err error) {
		if errors.Is(err, ticket.ErrLoginExpired) {
			g.log.Info("quic channel refused: the login's factor lifetime is over, the client must log in again", "client", c.RemoteAddr().String(), "err", err)
		} else {
			g.log.Warn("quic channel denied", "client", c.RemoteAddr().String(), "reason", reason, "err", err)
		}
		st.Write([]byte{ticket.DeniedStatus(err)})
		st.Close()
		st.CancelRead(0)
	}
	st.SetDeadline(time.Now().Add(5 * time.Second))
	ch, tok, err := ticket.ReadChannel(st)
	if errors.Is(err, ticket.ErrChannelKind) || errors.Is(err, ticket.ErrFrame) {
		deny("bad channel header", err)
		return
	}
	if err != nil {
		st.CancelRead(0)
		st.CancelWrite(0)
		return
	}
	port := ch.Port
	if a, err := netip.ParseAddrPort(c.RemoteAddr().String()); err == nil && !g.sources.allow(a.Addr().Unmap()) {
		deny("source", ErrSourceRate)
		return
	}
	if g.drainMode.Load() && g.o.Track != nil {
		// Looked at before Check, which would use up a launch ticket another gateway can take.
		if c, err := g.o.Verifier.Peek(tok); err == nil && !g.o.Track.carries(c.Session, g.o.Name) {
			deny("draining: no new session", nil)
			return
		}
	}
	claims, err := g.o.Verifier.Check(tok, "", ch)
	if err == nil && claims.Mode == ticket.ModeDirect {
		err = ErrDirectTicket
	}
	if err == nil && claims.Reused && g.o.Carried != nil && g.o.Carried(claims.Session) {
		err = ErrUsedWhileCarried
	}
	if err != nil {
		deny("ticket", err)
		return
	}
	if g.o.Sessions != nil && !g.o.Sessions.Active(claims.Session) {
		deny("session not active", nil)
		return
	}
	addr, ok := g.o.Machine(claims.Machine)
	if !ok {
		deny("unknown machine "+claims.Machine, nil)
		return
	}
	if err := g.carry(c, claims.Session, claims.Issued); err != nil {
		deny("session", err)
		return
	}
	if g.o.Verifier.Revoked(claims) || (g.o.Sessions != nil && !g.o.Sessions.Active(claims.Session)) {
		deny("session ended or revoked", nil) // between the check and carry, which a cut would miss
		return
	}
	if g.o.Track != nil {
		g.o.Track.open(claims.Session, g.o.Name)
		defer g.o.Track.close(claims.Session, g.o.Name)
	}
	target := netip.AddrPortFrom(addr, port)
	if ch.Proto == "tcp" {
		g.spliceTCP(st, claims, target, tok, deny)
		return
	}
	u, err := dialMachineFlow(context.Background(), g.tr, g.o.MachineTLS(), 2*time.Second, claims.Machine, target, tok)
	if err != nil {
		deny("machine", err)
		return
	}
	fl.mu.Lock()
	if old := fl.m[port]; old != nil {
		old.Close()
	}
	fl.m[port] = u
	fl.mu.Unlock()
	if err := admitted(st, g.o.Reissue, claims, g.log); err != nil {
		u.Close()
		return
	}
	st.SetDeadline(time.Time{})
	g.log.Info("quic flow admitted", "session", claims.Session, "channel", ch.String(), "client", c.RemoteAddr().String())
	// The machine's datagrams go back as they came, port first, until either leg ends.
	for {
		m, err := u.next()
		if err != nil {
			break
		}
		if c.SendDatagram(m) != nil {
			break
		}
	}
	u.Close()
	st.CancelRead(0)
	st.Close()
}

// spliceTCP dials the machine, passes the ticket on, answers the status and copies both ways.
func (g *QUIC) spliceTCP(st *quic.Stream, claims ticket.Claims, target netip.AddrPort, tok string, deny func(string, error)) {
	up, err := dialMachine(context.Background(), g.o.MachineTLS(), 2*time.Second, claims.Machine, target)
	if err != nil {
		deny("machine unreachable", err)
		return
	}
	defer up.Close()
	up.SetDeadline(time.Now().Add(5 * time.Second))
	var status [1]byte
	if err := ticket.WriteFrame(up, tok); err == nil {
		_, err = io.ReadFull(up, status[:])
	}
	if err != nil || status[0] != ticket.StatusOK {
		deny("machine refused", err)
		return
	}
	up.SetDeadline(time.Time{})
	if err := admitted(st, g.o.Reissue, claims, g.log); err != nil {
		return
	}
	st.SetDeadline(time.Time{})
	done := make(chan struct{})
	go func() {
		defer close(done)
		if _, err := io.Copy(up, st); err != nil {
			up.Close()
			return
		}
		up.CloseWrite()
	}()
	io.Copy(st, up)
	st.Close()
	up.Close()
	st.CancelRead(0)
	<-done
}
