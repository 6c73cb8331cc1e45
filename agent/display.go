// Package agent is the VDA side of frontdoor: it serves a machine's display ports, each
// channel opened with a ticket, and carries each desktop stream to the desktop server it
// fronts (a VNC or RDP server on loopback or a Unix socket, or its builtin desktop), a stream
// outliving the channels that carry it (session reliability, package resume); it keeps track of the
// machine's sessions — a session whose client vanished stays "disconnected" until a timeout —
// and reports load and direct-mode session events to a front door of its own zone, else of the
// primary zone, never of another satellite zone. Its display ports speak the frames of package
// ticket, inside TLS on the TCP ports and inside QUIC on the UDP ports (quic.go).
package agent

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/netip"
	"slices"
	"sync"
	"time"

	"github.com/frontdoor-vdi/frontdoor/configs"
	"github.com/frontdoor-vdi/frontdoor/internal/desktop"
	"github.com/frontdoor-vdi/frontdoor/internal/resume"
	"github.com/frontdoor-vdi/frontdoor/ticket"
)

// ErrNotFromGateway refuses a gateway-mode channel that does not come from a gateway.
var ErrNotFromGateway = errors.New("a gateway-mode channel must come from a gateway of the site")

// ErrSessionCap refuses a channel past a session's cap at the machine.
var ErrSessionCap = errors.New("the session has as many channels open at the machine as a session may")

// maxPerSession bounds one session's open channels at a machine (a session opens 2 to 4;
// through several gateways for a moment after a move).
const maxPerSession = 32

// full reports whether session has its cap of channels open.
func (d *Display) full(session string) bool {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.open[session] >= maxPerSession
}

// Session states as the agent sees them.
const (
	StateConnected    = "connected"
	StateDisconnected = "disconnected"
)

// EventFunc receives the events of direct-mode sessions (in gateway mode the gateway reports
// them); it forwards them to the front door.
type EventFunc func(ctx context.Context, session, event string)

// DisplayOptions configure a Display.
type DisplayOptions struct {
	// Machine is this machine's name; tickets for other machines are refused.
	Machine string
	// Address is the IP address to listen on.
	Address netip.Addr
	// TCPPorts and UDPPorts are the display ports.
	TCPPorts, UDPPorts []uint16
	// Verifier checks tickets with the site's public key.
	Verifier *ticket.Verifier
	// Identity is the machine's certificate, which the display ports present (TLS on the
	// TCP ports, QUIC on the UDP ports); they take gateway-mode channels only from a client
	// that presents a gateway's certificate of the site CA. Required.
	Identity *Identity
	// DisconnectTimeout ends a disconnected session's record. Default: 1h.
	DisconnectTimeout time.Duration
	// UDPIdle ends a UDP channel's connection after this long without a packet (the QUIC
	// idle timeout). Default: 30s.
	UDPIdle time.Duration
	// RevokeFor is how long the tickets of a session the front door ended (End) stay refused:
	// the site's tickets.reconnect_ttl. Default: 24h.
	RevokeFor time.Duration
	// Report receives connected/disconnected events. Optional.
	Report EventFunc
	// Live returns the sessions the site holds live on this machine (Reporter.Live): a
	// direct-mode channel of a session the machine does not hold — the first after a launch,
	// or any after the agent restarted and forgot which sessions ended — is admitted only if
	// it is listed and its ticket was not revoked (a steal), and refused when no front door
	// answers. Default: nil, no such check
	// (gateway-mode channels are checked against the site's ledger by the gateway).
	Live func(ctx context.Context) (SiteSessions, error)
	// Desktop is the desktop server the display port carries. Default: the builtin desktop
	// on the first TCP port.
	Desktop Desktop
	// Zone is the machine's zone, which the builtin desktop shows. Default: "".
	Zone string
	// ReliabilityTimeout is how long a desktop stream waits for its client after its
	// channel broke. Default: 180s.
	ReliabilityTimeout time.Duration
	// ReliabilityBuffer bounds a stream's unacknowledged bytes per direction. Default: 4 MiB.
	ReliabilityBuffer int
	// EchoDatagrams makes the UDP display ports echo every datagram, as the builtin desktop's
	// do, whatever the desktop: a stand-in for a desktop protocol's UDP transport (tests,
	// benchmarks). Otherwise a VNC or RDP desktop's UDP channels echo only the clients'
	// keepalives. Default: false.
	EchoDatagrams bool
	// DesktopCheckEvery is how often the agent checks that its desktop server takes
	// connections (not for the builtin desktop). Default: 5s.
	DesktopCheckEvery time.Duration
	// Logger receives logs. Default: slog.Default().
	Logger *slog.Logger
}

// Display serves a machine's display ports.
type Display struct {
	o       DisplayOptions
	log     *slog.Logger
	done    chan struct{}
	ctx     context.Context // ends with Close
	cancel  context.CancelFunc
	wg      sync.WaitGroup
	builtin *desktop.Desktop

	mu        sync.Mutex // guards listeners, packets, open, state, since, conns, streams, relays, closed
	listeners []net.Listener
	packets   []*udpPort
	open      map[string]int         // session -> open channels
	state     map[string]string      // session -> connected|disconnected
	since     map[string]time.Time   // session -> when it was disconnected
	conns     map[io.Closer]ticketOf // open channels -> the ticket that opened them
	direct    map[string]bool        // sessions launched in direct mode
	gone      map[string]bool        // sessions the front door ended whose channels are closing
	streams   map[resume.ID]*stream  // live desktop streams, attached or waiting for their client
	relays    map[relayKey]*udpRelay // flows of the desktop's UDP transport to the server
	closed    bool
}

// ticketOf is what a machine keeps of the ticket that opened a channel.
type ticketOf struct {
	session string
	issued  time.Time
}

// ForMachine returns options with the machine's name, zone, address, display ports, desktop
// and session reliability from the configuration (after SetDefaults); the caller adds the
// verifier and the rest.
func ForMachine(cfg *configs.Config, m configs.Machine) (DisplayOptions, error) {
	o := DisplayOptions{Machine: m.Name, Zone: m.Zone, ReliabilityTimeout: cfg.Site.Sessions.ReliabilityTimeout.D(),
		ReliabilityBuffer: cfg.Site.Sessions.ReliabilityBuffer}
	dk, err := DesktopFor(cfg, m)
	if err != nil {
		return o, err
	}
	o.Desktop = dk
	if !m.Address.IsValid() {
		return o, fmt.Errorf("machine %s: no address", m.Name)
	}
	o.Address = m.Address
	for _, p := range m.DisplayPorts {
		port, proto, err := configs.ParsePortSpec(p)
		if err != nil {
			return o, fmt.Errorf("machine %s: %w", m.Name, err)
		}
		if proto == "tcp" {
			o.TCPPorts = append(o.TCPPorts, uint16(port))
		} else {
			o.UDPPorts = append(o.UDPPorts, uint16(port))
		}
	}
	return o, nil
}

// NewDisplay returns a Display; Listen opens its ports.
func NewDisplay(o DisplayOptions) (*Display, error) {
	if o.Verifier == nil || o.Identity == nil || !o.Address.IsValid() || o.Machine == "" {
		return nil, errors.New("agent: Machine, Address, Verifier and Identity are required")
	}
	if o.DisconnectTimeout == 0 {
		o.DisconnectTimeout = time.Hour
	}
	if o.RevokeFor == 0 {
		o.RevokeFor = 24 * time.Hour
	}
	if o.UDPIdle == 0 {
		o.UDPIdle = 30 * time.Second
	}
	if o.Logger == nil {
		o.Logger = slog.Default()
	}
	if o.Report == nil {
		o.Report = func(context.Context, string, string) {}
	}
	if o.Desktop.Protocol == "" {
		o.Desktop = Desktop{Protocol: configs.DesktopBuiltin, Port: 8443}
		if len(o.TCPPorts) > 0 {
			o.Desktop.Port = o.TCPPorts[0]
		}
	}
	if o.Desktop.Protocol != configs.DesktopBuiltin && (o.Desktop.Network == "" || o.Desktop.Address == "") {
		return nil, fmt.Errorf("agent: the %s desktop needs the server's address", o.Desktop.Protocol)
	}
	if o.ReliabilityTimeout == 0 {
		o.ReliabilityTimeout = 180 * time.Second
	}
	if o.ReliabilityBuffer == 0 {
		o.ReliabilityBuffer = 4 << 20
	}
	if o.DesktopCheckEvery == 0 {
		o.DesktopCheckEvery = 5 * time.Second
	}
	d := &Display{o: o, log: o.Logger.With("machine", o.Machine), done: make(chan struct{}),
		open: map[string]int{}, state: map[string]string{}, since: map[string]time.Time{},
		conns: map[io.Closer]ticketOf{}, direct: map[string]bool{}, gone: map[string]bool{}, streams: map[resume.ID]*stream{},
		relays: map[relayKey]*udpRelay{}}
	d.ctx, d.cancel = context.WithCancel(context.Background())
	if o.Desktop.Protocol == configs.DesktopBuiltin {
		d.builtin = desktop.New(desktop.Options{Logger: d.log})
	}
	return d, nil
}

// Listen opens the display ports.
func (d *Display) Listen() error {
	d.mu.Lock()
	defer d.mu.Unlock()
	for _, p := range d.o.TCPPorts {
		l, err := net.Listen("tcp", netip.AddrPortFrom(d.o.Address, p).String())
		if err != nil {
			d.closeLocked()
			return fmt.Errorf("agent %s: %w", d.o.Machine, err)
		}
		d.listeners = append(d.listeners, l)
	}
	if len(d.o.TCPPorts) > 0 && !slices.Contains(d.o.TCPPorts, d.o.Desktop.Port) {
		d.closeLocked()
		return fmt.Errorf("agent %s: the desktop's channel %d/tcp is not a display port", d.o.Machine, d.o.Desktop.Port)
	}
	if d.exposedDesktop() {
		d.log.Warn("the desktop server takes connections from elsewhere than this agent: anyone who reaches it needs no ticket; make it listen on loopback or a Unix socket only", "desktop", d.o.Desktop.String())
	}
	if err := d.checkDesktop(context.Background()); err != nil {
		d.log.Error("the desktop server does not answer: channels will be refused until it does", "desktop", d.o.Desktop.String(), "err", err)
	}
	for _, p := range d.o.UDPPorts {
		c, err := net.ListenUDP("udp", net.UDPAddrFromAddrPort(netip.AddrPortFrom(d.o.Address, p)))
		if err != nil {
			d.closeLocked()
			return fmt.Errorf("agent %s: %w", d.o.Machine, err)
		}
		q, err := d.listenQUIC(c)
		if err != nil {
			c.Close()
			d.closeLocked()
			return fmt.Errorf("agent %s: %w", d.o.Machine, err)
		}
		d.packets = append(d.packets, q)
	}
	return nil
}

// Serve runs until ctx ends or Close is called.
func (d *Display) Serve(ctx context.Context) error {
	d.mu.Lock()
	for _, l := range d.listeners {
		port := uint16(l.Addr().(*net.TCPAddr).Port)
		d.wg.Add(1)
		go func() { defer d.wg.Done(); d.acceptTCP(l, port) }()
	}
	for _, p := range d.packets {
		port := uint16(p.tr.Conn.LocalAddr().(*net.UDPAddr).Port)
		d.wg.Add(1)
		go func() { defer d.wg.Done(); d.serveQUIC(p, port) }()
	}
	d.wg.Add(1)
	go func() { defer d.wg.Done(); d.janitor() }()
	if d.o.Desktop.Protocol != configs.DesktopBuiltin && len(d.o.TCPPorts) > 0 {
		d.wg.Add(1)
		go func() { defer d.wg.Done(); d.watchDesktop() }()
	}
	d.mu.Unlock()
	select {
	case <-ctx.Done():
	case <-d.done:
	}
	return d.Close()
}

// Close stops the display and cuts its channels.
func (d *Display) Close() error {
	d.mu.Lock()
	if !d.closed {
		d.closed = true
		close(d.done)
		d.cancel()
		d.closeLocked()
		for c := range d.conns {
			c.Close()
		}
	}
	d.mu.Unlock()
	d.wg.Wait()
	return nil
}

func (d *Display) closeLocked() {
	for _, l := range d.listeners {
		l.Close()
	}
	for _, p := range d.packets {
		p.close()
	}
}

// Sessions returns the state of every session the machine knows.
func (d *Display) Sessions() map[string]string {
	d.mu.Lock()
	defer d.mu.Unlock()
	out := make(map[string]string, len(d.state))
	for k, v := range d.state {
		out[k] = v
	}
	return out
}

// Connected returns the sessions with a channel open at the machine.
func (d *Display) Connected() []string {
	d.mu.Lock()
	defer d.mu.Unlock()
	out := make([]string, 0, len(d.open))
	for s, n := range d.open {
		if n > 0 {
			out = append(out, s)
		}
	}
	return out
}

// Held returns the sessions the machine knows (connected or disconnected).
func (d *Display) Held() []string {
	d.mu.Lock()
	defer d.mu.Unlock()
	out := make([]string, 0, len(d.state))
	for s := range d.state {
		out = append(out, s)
	}
	return out
}

var _ Ends = (*Display)(nil)

// Count returns the number of sessions (connected or disconnected) on the machine.
func (d *Display) Count() int {
	d.mu.Lock()
	defer d.mu.Unlock()
	return len(d.state)
}

func (d *Display) opened(session, mode string) {
	d.mu.Lock()
	if mode == "direct" {
		d.direct[session] = true
	}
	report := d.direct[session]
	d.open[session]++
	first := d.open[session] == 1
	if first {
		d.state[session] = StateConnected
		delete(d.since, session)
	}
	d.mu.Unlock()
	if first {
		d.log.Info("session connected", "session", session, "mode", mode)
		if report {
			d.o.Report(context.Background(), session, StateConnected)
		}
	}
}

func (d *Display) released(session string) {
	d.mu.Lock()
	d.open[session]--
	last := d.open[session] <= 0
	report := d.direct[session]
	switch {
	case last && d.gone[session]: // ended: forgotten, not disconnected
		delete(d.open, session)
		delete(d.state, session)
		delete(d.gone, session)
	case last:
		delete(d.open, session)
		d.state[session] = StateDisconnected
		d.since[session] = time.Now()
	}
	d.mu.Unlock()
	if last {
		d.log.Info("session disconnected", "session", session)
		if report {
			d.o.Report(context.Background(), session, StateDisconnected)
		}
	}
}

// End ends a session the front door says has ended (logged off, expired): its tickets are
// refused from then on, its channels are cut, and the machine forgets it without reporting a
// disconnect.
func (d *Display) End(session string) {
	if err := d.o.Verifier.Revoke(session, d.o.RevokeFor); err != nil {
		d.log.Warn("revoking the tickets of an ended session", "session", session, "err", err)
	}
	d.mu.Lock()
	delete(d.direct, session)
	_, known := d.state[session]
	if d.open[session] > 0 {
		d.gone[session] = true
	} else {
		delete(d.state, session)
		delete(d.since, session)
	}
	d.mu.Unlock()
	n := d.cut(session, ticket.AllIssued)
	if known {
		d.log.Info("session ended by the front door: channels cut, tickets refused", "session", session, "channels", n)
	}
}

// RevokeBefore refuses the tickets of session issued before before and cuts the channels
// they opened (the front door gave the session to another endpoint); the session goes on.
func (d *Display) RevokeBefore(session string, before time.Time) {
	if err := d.o.Verifier.RevokeBefore(session, before, d.o.RevokeFor); err != nil {
		d.log.Warn("revoking the older tickets of a session", "session", session, "err", err)
	}
	if n := d.cut(session, before); n > 0 {
		d.log.Info("session taken by another endpoint: the old one's channels cut", "session", session, "channels", n)
	}
}

// track registers c as an open channel of claims' session, so that a cut of the session and
// Close close it, until untrack. It reports false, c not registered, when the display is
// closed or the ticket was revoked between its check and the registration (which a cut
// would miss).
func (d *Display) track(c io.Closer, claims ticket.Claims) (untrack func(), ok bool) {
	d.mu.Lock()
	if d.closed {
		d.mu.Unlock()
		return nil, false
	}
	d.conns[c] = ticketOf{claims.Session, claims.Issued}
	d.mu.Unlock()
	untrack = func() {
		d.mu.Lock()
		delete(d.conns, c)
		d.mu.Unlock()
	}
	if d.o.Verifier.Revoked(claims) {
		untrack()
		return nil, false
	}
	return untrack, true
}

// cut closes the channels of session opened by tickets issued before before, and returns how
// many.
func (d *Display) cut(session string, before time.Time) int {
	d.mu.Lock()
	var conns []io.Closer
	for c, t := range d.conns {
		if t.session == session && t.issued.Before(before) {
			conns = append(conns, c)
		}
	}
	d.mu.Unlock()
	for _, c := range conns {
		c.Close() // its handler releases it
	}
	return len(conns)
}

// check verifies a channel's ticket for this machine; a direct-mode ticket of a session the
// machine does not hold must also name a session the site holds live (liveInSite).
func (d *Display) check(tok string, ch ticket.Channel) (ticket.Claims, error) {
	c, err := d.o.Verifier.Check(tok, d.o.Machine, ch)
	if err == nil && c.Mode == ticket.ModeDirect {
		err = d.liveInSite(c)
	}
	return c, err
}

// ErrNotLive refuses a direct-mode ticket of a session the site does not hold live (logged
// off, expired, or of another machine).
var ErrNotLive = errors.New("the site holds no such live session on this machine")

// ErrSiteUnreachable refuses a direct-mode ticket the machine cannot vouch for: no front door
// answered whether its session lives.
var ErrSiteUnreachable = errors.New("no front door answered whether the session lives")

// liveTries and liveRetry: a session the site does not list is asked about this many times,
// the first pause liveRetry and each next one twice as long (350 ms in all), before its
// channel is refused.
const (
	liveTries = 4
	liveRetry = 50 * time.Millisecond
)

// liveInSite lets a direct-mode channel of session in only if the machine holds the session
// (it followed the site's ends since), else if the site says it lives: a machine's agent that
// restarted has forgotten which sessions the site ended, and a direct-mode reconnect ticket
// lives for hours. With no front door to ask, such a channel is refused.
func (d *Display) liveInSite(c ticket.Claims) error {
	d.mu.Lock()
	_, held := d.state[c.Session]
	d.mu.Unlock()
	if held || d.o.Live == nil {
		return nil
	}
	ctx, cancel := context.WithTimeout(d.ctx, 3*time.Second)
	defer cancel()
	var live SiteSessions
	for try := 0; ; try++ {
		var err error
		if live, err = d.o.Live(ctx); err != nil {
			return fmt.Errorf("%w: %w", ErrSiteUnreachable, err)
		}
		if slices.Contains(live.Sessions, c.Session) {
			break
		}
		// A session launched a moment ago at another front door may not be in the view of
		// the one that answers yet (its watch is milliseconds behind), and its client
		// connects at once: ask again a few times before refusing.
		if try == liveTries-1 {
			return ErrNotLive
		}
		t := time.NewTimer(liveRetry << try)
		select {
		case <-t.C:
		case <-ctx.Done():
			t.Stop()
			return ErrNotLive
		}
	}
	if before := live.RevokedBefore[c.Session]; c.Issued.Before(before) {
		// Another endpoint took the session: this ticket is the old one's. The machine
		// learns it for good.
		d.RevokeBefore(c.Session, before)
		return ticket.ErrRevoked
	}
	return nil
}

// janitor forgets sessions disconnected for longer than the timeout.
func (d *Display) janitor() {
	t := time.NewTicker(max(min(d.o.DisconnectTimeout/4, time.Second), 10*time.Millisecond))
	defer t.Stop()
	for {
		select {
		case <-d.done:
			return
		case <-t.C:
		}
		now := time.Now()
		d.mu.Lock()
		for s, at := range d.since {
			if now.Sub(at) > d.o.DisconnectTimeout {
				delete(d.since, s)
				delete(d.state, s)
				delete(d.direct, s)
			}
		}
		d.mu.Unlock()
	}
}
