// Package gateway is frontdoor's secure gateway: it accepts a session's display channels — TLS
// streams on TCP ports and UDP flows — only after a valid ticket, and splices each to the
// session's machine. Ticket routing, not source-IP persistence, keeps a session's channels
// together: every channel names its session, and any gateway can take any session's channels
// with a reconnect ticket.
//
// Wire format. A TCP channel is a TLS connection whose first frame is Magic, a 2-byte big-endian
// length and the ticket; the gateway checks it, dials the machine's port of the same number
// over TLS (presenting its certificate of the site CA), passes the frame on (the machine's
// agent checks it too and so learns the channel's session), and answers StatusDenied (then
// closes), or StatusRotated and a frame with the session's next reconnect ticket (every
// channel rotates it: once the next one is used, the earlier ones are refused site-wide);
// from there bytes flow both ways. A UDP channel rides the QUIC end
// (QUIC, quic.go): a stream carries its ticket and DATAGRAM frames its datagrams; the gateway
// relays it to the machine's UDP port on a QUIC connection of its own (machineflow.go). Plain
// UDP flows on the UDP ports (Options.PlainUDP, off by default) start with one datagram
// holding Magic and the ticket, answered with Magic+"OK" once the machine took it. In direct
// mode the client speaks the same frames to the machine itself, TLS and QUIC alike. Anything
// else — a datagram from an unknown address that is not a valid ticket, a bad frame — is
// dropped without creating state; a bad ticket on TCP gets only StatusDenied, the reason goes
// to the log.
package gateway

import (
	"bytes"
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/netip"
	"sync"
	"sync/atomic"
	"time"

	"github.com/frontdoor-vdi/frontdoor/internal/acceptloop"
	"github.com/frontdoor-vdi/frontdoor/internal/connlimit"
	"github.com/frontdoor-vdi/frontdoor/internal/tlspolicy"
	"github.com/frontdoor-vdi/frontdoor/ticket"
	"github.com/quic-go/quic-go"
	"golang.org/x/time/rate"
)

// Sessions is what the gateway needs of the broker.
type Sessions interface {
	// Active reports whether session id is live (not ended); tickets of ended sessions are
	// refused.
	Active(id string) bool
	// Connected is called when a session's first channel opens on this gateway.
	Connected(ctx context.Context, id, gateway string)
	// Disconnected is called when a session's last channel on this gateway closes.
	Disconnected(ctx context.Context, id, gateway string)
}

// Options configure a Gateway.
type Options struct {
	// Name names the gateway in logs and session events.
	Name string
	// Address is the IP address to listen on.
	Address netip.Addr
	// TCPPorts are the TLS channel ports (e.g. 4172, 8443).
	TCPPorts []uint16
	// UDPPorts are the plain UDP channel ports (e.g. 4172, 8443). They always answer health
	// probes; they take flows only with PlainUDP (clients carry their UDP channels in QUIC
	// DATAGRAM frames on the gateway's QUIC end instead).
	UDPPorts []uint16
	// PlainUDP lets the UDP ports take flows whose ticket and datagrams cross the client's
	// leg unencrypted (the leg to the machine is QUIC either way). Default: false.
	PlainUDP bool
	// HealthPort is the gateway's HTTPS port. It serves HEAD/GET /favicon.ico (and any other
	// path): 200; 503 while draining; 500 while a TCP channel port cannot accept (out of
	// descriptors), which probes read as down. Browsers open TCP channels there over
	// WebSockets (ChannelPath). 0 for none.
	HealthPort uint16
	// WebOrigins are the host names (and addresses) of the site's pages that may open
	// channels over WebSockets: a WebSocket whose Origin names another host is refused.
	// Default: none (only clients that send no Origin, which no browser is).
	WebOrigins []string
	// TLS is the server TLS config of channel and health ports. Required.
	TLS *tls.Config
	// Verifier checks tickets. Required.
	Verifier *ticket.Verifier
	// Sessions receives session events. Required.
	Sessions Sessions
	// Machine resolves a machine name to its address. Required.
	Machine func(name string) (netip.Addr, bool)
	// MachineTLS makes the client TLS config of a channel to a machine (TLS for TCP, QUIC for
	// UDP), once per channel: it presents the gateway's certificate of the site CA and trusts
	// the CA (a rotation of the site CA changes both); each machine must present a
	// certificate that names it. Required.
	MachineTLS func() *tls.Config
	// Carried reports whether a session is connected anywhere in the site: a reconnect ticket
	// used already (ticket.Claims.Reused) is refused while its session is, since its client
	// would hold the next one; a client whose answer was lost is disconnected by then, or
	// comes back through a new launch. Default: nil (no such check).
	Carried func(session string) bool
	// Reissue signs the session's next reconnect ticket for a channel admitted with the
	// ticket of claims (ticket.Signer.Reissue): the gateway answers it with the status, so
	// that every use rotates the ticket. Default: nil (StatusOK alone, nothing rotates).
	Reissue func(claims ticket.Claims) (string, error)
	// DialTimeout bounds connecting to a machine. Default: 2s.
	DialTimeout time.Duration
	// HandshakeTimeout bounds the TLS handshake and ticket frame. Default: 5s.
	HandshakeTimeout time.Duration
	// UDPIdle closes a UDP flow after this long without traffic. Default: 30s.
	UDPIdle time.Duration
	// MaxFlows bounds the UDP flows per port. Default: 10000.
	MaxFlows int
	// MaxTCPConns bounds the connections of each TCP channel port (a quarter of them from
	// one source); when all are taken, a new one takes the place of the oldest that has not
	// shown its ticket yet. Default: 10,000.
	MaxTCPConns int
	// Logger receives gateway logs. Default: slog.Default().
	Logger *slog.Logger
}

// Gateway is one secure gateway: a set of listeners on one address.
type Gateway struct {
	o   Options
	log *slog.Logger
	// draining (Drain, an admin's) and shutting (Shutdown): the health port answers 503 and
	// only the sessions carried here get channels. Two flags, so that lifting an admin's
	// drain does not undo a shutdown's.
	draining atomic.Bool
	shutting atomic.Bool
	// quiet is set by Shutdown on a gateway without a health port: its UDP ports answer no
	// new address.
	quiet atomic.Bool
	track *Tracker
	// plainLog paces the log of refused plain UDP flows.
	plainLog *rate.Limiter

	mu         sync.Mutex // guards listeners, accepts, packets, channels, closed
	listeners  []net.Listener
	accepts    []*acceptloop.Loop // of the TCP channel ports, from Serve
	packets    []*udpPort
	machines   *quic.Transport // the UDP flows' legs to machines, from one socket
	channels   map[*channel]struct{}
	perSession map[string]int // open channels by session
	sources    sourceLimits
	closed     bool
	http       *http.Server
	wg         sync.WaitGroup
	done       chan struct{} // closed by Close
}

// channel is one open TCP channel or UDP flow of a session.
type channel struct {
	session string
	issued  time.Time // when the ticket that opened it was issued
	close   func()
}

// ErrClosed is returned by Serve after Close.
var ErrClosed = errors.New("gateway closed")

// New checks opts and returns a Gateway; Listen opens its sockets.
func New(o Options, track *Tracker) (*Gateway, error) {
	if o.TLS == nil || o.MachineTLS == nil || o.Verifier == nil || o.Sessions == nil || o.Machine == nil || !o.Address.IsValid() {
		return nil, errors.New("gateway: TLS, MachineTLS, Verifier, Sessions, Machine and Address are required")
	}
	if o.DialTimeout == 0 {
		o.DialTimeout = 2 * time.Second
	}
	if o.HandshakeTimeout == 0 {
		o.HandshakeTimeout = 5 * time.Second
	}
	if o.UDPIdle == 0 {
		o.UDPIdle = 30 * time.Second
	}
	if o.MaxFlows == 0 {
		o.MaxFlows = 10000
	}
	if o.MaxTCPConns == 0 {
		o.MaxTCPConns = maxTCPConns
	}
	if o.Logger == nil {
		o.Logger = slog.Default()
	}
	if track == nil {
		track = NewTracker(o.Sessions)
	}
	return &Gateway{o: o, log: o.Logger.With("gateway", o.Name), track: track, plainLog: rate.NewLimiter(rate.Every(10*time.Second), 1), channels: map[*channel]struct{}{}, perSession: map[string]int{}, done: make(chan struct{})}, nil
}

// Listen opens every TCP, UDP and health socket; on error none stays open.
func (g *Gateway) Listen() error {
	g.mu.Lock()
	defer g.mu.Unlock()
	fail := func(err error) error {
		for _, l := range g.listeners {
			l.Close()
		}
		for _, p := range g.packets {
			p.conn.Close()
		}
		if g.machines != nil {
			g.machines.Close()
			g.machines.Conn.Close()
		}
		g.listeners, g.packets, g.machines = nil, nil, nil
		return err
	}
	for _, p := range g.o.TCPPorts {
		l, err := net.Listen("tcp", netip.AddrPortFrom(g.o.Address, p).String())
		if err != nil {
			return fail(fmt.Errorf("gateway %s: %w", g.o.Name, err))
		}
		// Bounded before any TLS: a connection that has not shown its ticket gives its
		// place to a new one when all are taken; an admitted channel is held (handleTCP).
		g.listeners = append(g.listeners, connlimit.New(l, connlimit.Options{Max: g.o.MaxTCPConns, PerSource: max(1, g.o.MaxTCPConns/4)}))
	}
	for _, p := range g.o.UDPPorts {
		c, err := net.ListenUDP("udp", net.UDPAddrFromAddrPort(netip.AddrPortFrom(g.o.Address, p)))
		if err != nil {
			return fail(fmt.Errorf("gateway %s: %w", g.o.Name, err))
		}
		_ = c.SetReadBuffer(4 << 20)
		_ = c.SetWriteBuffer(4 << 20)
		g.packets = append(g.packets, newUDPPort(g, c, p))
	}
	if len(g.packets) > 0 {
		// From the gateway's own address, as a firewall in front of the machines expects.
		c, err := net.ListenUDP("udp", net.UDPAddrFromAddrPort(netip.AddrPortFrom(g.o.Address, 0)))
		if err != nil {
			return fail(fmt.Errorf("gateway %s: %w", g.o.Name, err))
		}
		g.machines = &quic.Transport{Conn: c}
	}
	if g.o.HealthPort != 0 {
		l, err := net.Listen("tcp", netip.AddrPortFrom(g.o.Address, g.o.HealthPort).String())
		if err != nil {
			return fail(fmt.Errorf("gateway %s: %w", g.o.Name, err))
		}
		// Browsers' channels ride it (WebSocket): bounded as a channel port.
		g.listeners = append(g.listeners, healthListener{connlimit.New(l, connlimit.Options{Max: g.o.MaxTCPConns, PerSource: max(1, g.o.MaxTCPConns/4)})})
	}
	return nil
}

// healthListener marks the HTTPS health listener.
type healthListener struct{ *connlimit.Listener }

// Serve runs the gateway until ctx ends or Close is called.
func (g *Gateway) Serve(ctx context.Context) error {
	g.mu.Lock()
	if g.closed {
		g.mu.Unlock()
		return ErrClosed
	}
	for _, l := range g.listeners {
		if hl, ok := l.(healthListener); ok {
			g.http = &http.Server{Handler: tlspolicy.Handler(g.serveHTTPS(hl.Listener)), ReadHeaderTimeout: 5 * time.Second,
				ReadTimeout: 10 * time.Second, WriteTimeout: 10 * time.Second, IdleTimeout: time.Minute,
				ConnState: hl.ConnState, ConnContext: httpsConnContext(hl.Listener), ErrorLog: slog.NewLogLogger(g.log.Handler(), slog.LevelDebug)}
			srv, ln := g.http, tls.NewListener(pacedListener{hl.Listener, g}, g.o.TLS)
			g.wg.Add(1)
			go func() { defer g.wg.Done(); srv.Serve(ln) }()
			continue
		}
		lp := g.acceptLoop(uint16(l.Addr().(*net.TCPAddr).Port), l.(*connlimit.Listener))
		g.accepts = append(g.accepts, lp)
		g.wg.Add(1)
		go func() { defer g.wg.Done(); lp.Run(l) }()
	}
	for _, p := range g.packets {
		g.wg.Add(2)
		go func() { defer g.wg.Done(); p.serve() }()
		go func() { defer g.wg.Done(); p.janitor() }()
	}
	g.mu.Unlock()
	select {
	case <-ctx.Done():
	case <-g.done:
	}
	g.Close()
	return nil
}

// Drain puts the gateway in drain mode (on) or takes it out: its health port answers 503, so
// health verdicts turn draining and load balancers and GSLB steer new sessions away, and it
// takes no channel of a session it does not carry already; the sessions it carries keep
// their channels and may open more. It is an admin's; Shutdown has a drain mode of its own,
// which Drain(false) does not lift. Without a health port (CanDrain false) nobody else
// learns of the drain.
func (g *Gateway) Drain(on bool) { g.draining.Store(on) }

// CanDrain reports whether the gateway has a health port to say that it drains.
func (g *Gateway) CanDrain() bool { return g.o.HealthPort != 0 }

// drains reports whether the gateway is in drain mode, an admin's or a shutdown's.
func (g *Gateway) drains() bool { return g.draining.Load() || g.shutting.Load() }

// cannotAccept reports whether a TCP channel port cannot accept now (out of descriptors or
// memory: acceptloop.Loop.Stalled).
func (g *Gateway) cannotAccept() bool {
	g.mu.Lock()
	defer g.mu.Unlock()
	for _, lp := range g.accepts {
		if lp.Stalled() {
			return true
		}
	}
	return false
}

// serveHealth answers the health port: 500 (down) while a channel port cannot accept, which a
// TCP check of that port does not see (the kernel completes its handshake all the same); 503
// while draining; else 200.
func (g *Gateway) serveHealth(w http.ResponseWriter, r *http.Request) {
	if g.cannotAccept() {
		http.Error(w, "the gateway cannot accept channels", http.StatusInternalServerError)
		return
	}
	if g.drains() {
		w.WriteHeader(http.StatusServiceUnavailable)
		return
	}
	if r.URL.Path == "/favicon.ico" {
		w.Header().Set("Content-Type", "image/x-icon")
	}
	w.WriteHeader(http.StatusOK)
}

// Shutdown drains the gateway before it closes, as a load balancer's member is quiesced: in
// drain mode (Drain) the sessions it carries keep their channels, and may open more, for as
// long as they last or ctx allows, and no new session comes (an admin's Drain(false) does not
// lift it). The channel ports stay open meanwhile (and answer probes), so a
// draining gateway reads as draining, not down. A gateway without a health port has nothing
// that says "draining": its TCP channel ports close and its UDP ports answer no new address,
// probes included, so that it reads down and nobody sends it new sessions. Once no channel
// is left, or ctx ends, Close ends the gateway and cuts what is still open; Shutdown then
// says how many were cut.
//
// A channel admitted just as the last one closes may find the gateway closed: its client
// gets no status and moves on with its reconnect ticket, as from any cut.
func (g *Gateway) Shutdown(ctx context.Context) error {
	g.shutting.Store(true)
	if g.o.HealthPort == 0 {
		g.quiet.Store(true)
		g.mu.Lock()
		for _, l := range g.listeners {
			l.Close()
		}
		g.mu.Unlock()
	}
	n := waitNone(ctx, g.done, g.Channels)
	g.Close()
	if n > 0 {
		return fmt.Errorf("gateway %s: cut %d channels still open: %w", g.o.Name, n, ctx.Err())
	}
	return nil
}

// waitNone checks open every 100ms until it reports none, ctx ends or closed is closed, and
// returns what it last reported.
func waitNone(ctx context.Context, closed <-chan struct{}, open func() int) int {
	t := time.NewTicker(100 * time.Millisecond)
	defer t.Stop()
	for {
		n := open()
		if n == 0 {
			return 0
		}
		select {
		case <-ctx.Done():
			return open()
		case <-closed:
			return 0 // closed by Close: nothing left to wait for
		case <-t.C:
		}
	}
}

// Close stops the listeners and cuts every channel (a shut-down gateway), then waits for its
// goroutines.
func (g *Gateway) Close() error {
	g.mu.Lock()
	if g.closed {
		g.mu.Unlock()
		g.wg.Wait()
		return nil
	}
	g.closed = true
	close(g.done)
	for _, l := range g.listeners {
		l.Close()
	}
	for _, p := range g.packets {
		p.conn.Close()
	}
	if g.http != nil {
		g.http.Close()
	}
	chans := make([]*channel, 0, len(g.channels))
	for c := range g.channels {
		chans = append(chans, c)
	}
	g.mu.Unlock()
	for _, c := range chans {
		c.close()
	}
	g.wg.Wait()
	if g.machines != nil {
		g.machines.Close()
		g.machines.Conn.Close()
	}
	return nil
}

// CloseSession cuts every channel of session on this gateway (after a logoff).
func (g *Gateway) CloseSession(id string) { g.CloseSessionBefore(id, ticket.AllIssued) }

// CloseSessionBefore cuts the channels of session on this gateway that tickets issued before
// before opened (after a steal: the old endpoint's).
func (g *Gateway) CloseSessionBefore(id string, before time.Time) {
	g.mu.Lock()
	var chans []*channel
	for c := range g.channels {
		if c.session == id && c.issued.Before(before) {
			chans = append(chans, c)
		}
	}
	g.mu.Unlock()
	for _, c := range chans {
		c.close()
	}
}

// Channels returns the number of open channels.
func (g *Gateway) Channels() int {
	g.mu.Lock()
	defer g.mu.Unlock()
	return len(g.channels)
}

// full reports whether session has its cap of channels open here.
func (g *Gateway) full(session string) bool {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.perSession[session] >= maxPerSession
}

// open registers a channel; it refuses when the gateway is closed or the session has its cap
// of channels here.
func (g *Gateway) open(c *channel) error {
	g.mu.Lock()
	if g.closed {
		g.mu.Unlock()
		return ErrClosed
	}
	if g.perSession[c.session] >= maxPerSession {
		g.mu.Unlock()
		return ErrSessionCap
	}
	g.perSession[c.session]++
	g.channels[c] = struct{}{}
	g.wg.Add(1) // until release: Close waits for the channel's goroutines
	g.mu.Unlock()
	g.track.open(c.session, g.o.Name)
	return nil
}

func (g *Gateway) release(c *channel) {
	g.mu.Lock()
	_, ok := g.channels[c]
	delete(g.channels, c)
	if ok {
		if g.perSession[c.session]--; g.perSession[c.session] <= 0 {
			delete(g.perSession, c.session)
		}
	}
	g.mu.Unlock()
	if ok {
		defer g.wg.Done()
		g.track.close(c.session, g.o.Name)
	}
}

// refused logs why a channel's ticket was refused: a login past its factor lifetime at Info
// (the client is told to log in again: nothing is wrong but the time), anything else at Warn.
func (g *Gateway) refused(err error, attrs ...any) {
	if errors.Is(err, ticket.ErrLoginExpired) {
		g.log.Info("channel refused: the login's factor lifetime is over, the client must log in again", append(attrs, "reason", err)...)
		return
	}
	g.log.Warn("channel denied", append(attrs, "reason", err)...)
}

// admitted answers a channel that opened: StatusOK, or, with reissue, StatusRotated and the
// session's next reconnect ticket, in one write.
func admitted(w io.Writer, reissue func(ticket.Claims) (string, error), c ticket.Claims, log *slog.Logger) error {
	next := nextTicket(reissue, c, log)
	if next == "" {
		_, err := w.Write([]byte{ticket.StatusOK})
		return err
	}
	var b bytes.Buffer
	b.WriteByte(ticket.StatusRotated)
	ticket.WriteFrame(&b, next)
	_, err := w.Write(b.Bytes())
	return err
}

// admittedSealed answers a sealed channel that opened: StatusSealed, the machine's pin and
// the session's next reconnect ticket (with reissue), in one write.
func admittedSealed(w io.Writer, reissue func(ticket.Claims) (string, error), c ticket.Claims, log *slog.Logger, pin [32]byte) error {
	return ticket.WriteSealed(w, pin, nextTicket(reissue, c, log))
}

// nextTicket is the session's next reconnect ticket, or "" without reissue or when none could
// be made (the channel opens without).
func nextTicket(reissue func(ticket.Claims) (string, error), c ticket.Claims, log *slog.Logger) string {
	if reissue == nil {
		return ""
	}
	next, err := reissue(c)
	if err != nil {
		log.Warn("no next reconnect ticket: the channel opens without", "session", c.Session, "err", err)
		return ""
	}
	return next
}

// admit checks a ticket for a channel and returns the machine's address.
func (g *Gateway) admit(tok string, ch ticket.Channel, client netip.AddrPort) (ticket.Claims, netip.Addr, error) {
	if g.drains() {
		// Looked at before Check, which would use up a launch ticket another gateway can take.
		if c, err := g.o.Verifier.Peek(tok); err == nil && !g.track.carries(c.Session, g.o.Name) {
			return c, netip.Addr{}, errors.New("the gateway drains: it takes no new session")
		}
	}
	c, err := g.o.Verifier.Check(tok, "", ch)
	if err != nil {
		return c, netip.Addr{}, err
	}
	if c.Mode == ticket.ModeDirect {
		return c, netip.Addr{}, ErrDirectTicket
	}
	if c.Reused && g.o.Carried != nil && g.o.Carried(c.Session) {
		return c, netip.Addr{}, ErrUsedWhileCarried
	}
	if !g.o.Sessions.Active(c.Session) {
		return c, netip.Addr{}, fmt.Errorf("session %s is not active", c.Session)
	}
	addr, ok := g.o.Machine(c.Machine)
	if !ok {
		return c, netip.Addr{}, fmt.Errorf("machine %q is unknown", c.Machine)
	}
	g.log.Info("channel admitted", "session", c.Session, "kind", c.Kind.String(), "channel", ch.String(), "client", client, "machine", c.Machine)
	return c, addr, nil
}
