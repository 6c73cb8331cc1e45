package agent

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"slices"
	"strconv"
	"sync"
	"time"

	"github.com/frontdoor-vdi/frontdoor/configs"
	"github.com/frontdoor-vdi/frontdoor/internal/desktop"
	"github.com/frontdoor-vdi/frontdoor/internal/resume"
	"github.com/frontdoor-vdi/frontdoor/internal/siteid"
	"github.com/frontdoor-vdi/frontdoor/ticket"
)

// Desktop is the desktop server a machine's agent fronts: every stream on its display port
// gets a connection of its own to the server.
type Desktop struct {
	// Protocol is configs.DesktopBuiltin (the agent draws the desktop itself), DesktopVNC or
	// DesktopRDP.
	Protocol string
	// Network and Address say where the server is ("tcp" and host:port, or "unix" and a
	// path); empty for the builtin desktop.
	Network, Address string
	// Port is the TCP display port that carries the desktop.
	Port uint16
	// UDPPort is the UDP display port that carries the desktop's UDP transport (RDP's), 0 for
	// none: its channels' datagrams go to the server's address over UDP (udprelay.go).
	UDPPort uint16
}

// ErrNoDesktop refuses a channel on a TCP display port that carries no desktop.
var ErrNoDesktop = errors.New("no desktop on this display port")

// DesktopFor returns machine m's desktop from the configuration (after SetDefaults).
func DesktopFor(cfg *configs.Config, m configs.Machine) (Desktop, error) {
	d := cfg.DesktopOf(m)
	out := Desktop{Protocol: d.Protocol}
	port, _, err := configs.ParsePortSpec(d.Channel)
	if err != nil {
		return out, fmt.Errorf("machine %s: desktop channel: %w", m.Name, err)
	}
	out.Port = uint16(port)
	if d.Protocol != configs.DesktopBuiltin {
		s, err := configs.ParseDesktopServer(d.Protocol, d.Server)
		if err != nil {
			return out, fmt.Errorf("machine %s: desktop server: %w", m.Name, err)
		}
		out.Network, out.Address = s.Network, s.Address
	}
	if u := d.UDPChannel(m.DisplayPorts); u != "" {
		port, _, _ := configs.ParsePortSpec(u)
		out.UDPPort = uint16(port)
	}
	return out, nil
}

// String names the desktop for logs: "vnc at unix:/run/vnc.sock".
func (d Desktop) String() string {
	if d.Protocol == configs.DesktopBuiltin || d.Address == "" {
		return d.Protocol
	}
	return d.Protocol + " at " + d.Network + ":" + d.Address
}

// stream is a desktop stream at the machine: a resumable stream between the client and the
// desktop server's connection, which outlives the channels that carry it.
type stream struct {
	s       *resume.Stream
	session string
	user    string
	mu      sync.Mutex // guards path
	path    string     // the gateway that carries it, or "direct"
}

// Close aborts the stream: a cut (logoff, steal) ends it for good.
func (st *stream) Close() error {
	st.s.Abort(errors.New("the session was ended"))
	return nil
}

func (st *stream) setPath(p string) {
	st.mu.Lock()
	st.path = p
	st.mu.Unlock()
}

func (st *stream) info(machine, zone string) desktop.Info {
	st.mu.Lock()
	defer st.mu.Unlock()
	return desktop.Info{Machine: machine, Zone: zone, User: st.user, Session: st.session, Path: st.path}
}

// hold keeps a held probe's channel open, idle, until the client closes it, the session's
// tickets are cut (it is one of the session's channels) or a byte comes (no stream rides
// it); then it closes it.
func (d *Display) hold(c net.Conn, claims ticket.Claims) {
	defer c.Close()
	untrack, ok := d.track(c, claims)
	if !ok {
		return
	}
	defer untrack()
	c.SetDeadline(time.Time{})
	c.Read(make([]byte, 1))
}

// pathOf names the way a channel came: the gateway whose certificate it presented, or
// "direct".
func pathOf(cs tls.ConnectionState) string {
	if len(cs.VerifiedChains) > 0 && len(cs.VerifiedChains[0]) > 0 {
		if role, name, ok := siteid.Of(cs.VerifiedChains[0][0]); ok && role == siteid.RoleGateway {
			return name
		}
	}
	return ticket.ModeDirect
}

// serveStream takes the hello of an admitted channel that came by path (pathOf): a new
// stream gets a connection to the desktop server, a resumed one gets the channel as its new
// transport. The stream owns c from there; on error c is the caller's to close.
func (d *Display) serveStream(c net.Conn, path string, claims ticket.Claims) error {
	h, err := resume.ReadHello(c)
	if err != nil {
		return fmt.Errorf("reading the stream's hello: %w", err)
	}
	if h.Probe {
		rep := resume.Reply{Status: resume.StatusOK}
		if err := d.checkDesktop(d.ctx); err != nil {
			rep = resume.Reply{Status: resume.StatusUnavailable, Reason: err.Error()}
			d.log.Warn("desktop server unreachable", "session", claims.Session, "desktop", d.o.Desktop.String(), "err", err)
		}
		if err := resume.WriteReply(c, rep); err != nil || !h.Hold || rep.Status != resume.StatusOK {
			return errors.New("a probe")
		}
		d.hold(c, claims)
		return nil
	}
	if h.Resume {
		d.mu.Lock()
		st := d.streams[h.ID]
		if st != nil && st.session == claims.Session {
			d.conns[st] = ticketOf{claims.Session, claims.Issued}
		}
		d.mu.Unlock()
		if st == nil || st.session != claims.Session {
			resume.WriteReply(c, resume.Reply{Status: resume.StatusUnknown})
			return fmt.Errorf("stream %s: %w", h.ID, resume.ErrUnknown)
		}
		recv, fin := st.s.Position()
		if err := resume.WriteReply(c, resume.Reply{Status: resume.StatusOK, Received: recv, Fin: fin, Reason: resume.Capabilities}); err != nil {
			return err
		}
		c.SetDeadline(time.Time{})
		st.setPath(path)
		d.log.Info("desktop stream resumed", "session", claims.Session, "stream", h.ID.String(), "via", path)
		return st.s.Attach(c, h.Received, h.Fin)
	}
	d.mu.Lock()
	_, dup := d.streams[h.ID]
	d.mu.Unlock()
	if dup {
		resume.WriteReply(c, resume.Reply{Status: resume.StatusRefused, Reason: "stream id in use"})
		return errors.New("a new stream with the id of a live one")
	}
	st := &stream{session: claims.Session, user: claims.User, path: path}
	local, err := d.dialDesktop(st)
	if err != nil {
		d.log.Warn("desktop server unreachable", "session", claims.Session, "desktop", d.o.Desktop.String(), "err", err)
		resume.WriteReply(c, resume.Reply{Status: resume.StatusUnavailable, Reason: err.Error()})
		return err
	}
	st.s = resume.New(h.ID, local, resume.Options{Timeout: d.o.ReliabilityTimeout, MaxBuffer: d.o.ReliabilityBuffer,
		OnEnd: func(err error) { d.streamEnded(st, err) }})
	d.mu.Lock()
	if d.closed {
		d.mu.Unlock()
		st.s.Abort(errors.New("the agent stops"))
		return errors.New("the agent stops")
	}
	d.streams[h.ID] = st
	d.conns[st] = ticketOf{claims.Session, claims.Issued}
	d.mu.Unlock()
	d.opened(claims.Session, claims.Mode)
	if d.o.Verifier.Revoked(claims) {
		// Revoked between the check and the registration, which a cut would miss.
		st.s.Abort(ticket.ErrRevoked)
		return ticket.ErrRevoked
	}
	if err := resume.WriteReply(c, resume.Reply{Status: resume.StatusOK, Reason: resume.Capabilities}); err != nil {
		st.s.Abort(err)
		return err
	}
	c.SetDeadline(time.Time{})
	d.log.Info("desktop stream opened", "session", claims.Session, "stream", h.ID.String(), "via", path, "desktop", d.o.Desktop.Protocol)
	return st.s.Attach(c, 0, false)
}

// streamEnded forgets a stream that is over.
func (d *Display) streamEnded(st *stream, err error) {
	d.mu.Lock()
	delete(d.streams, st.s.ID())
	delete(d.conns, st)
	d.mu.Unlock()
	d.released(st.session)
	if err != nil {
		d.log.Info("desktop stream ended", "session", st.session, "stream", st.s.ID().String(), "reason", err)
	}
}

// dialDesktop connects a new stream to the desktop server: the builtin desktop in this
// process, or the configured server.
func (d *Display) dialDesktop(st *stream) (net.Conn, error) {
	if d.o.Desktop.Protocol == configs.DesktopBuiltin {
		a, b := net.Pipe()
		d.wg.Add(1)
		go func() {
			defer d.wg.Done()
			defer b.Close()
			d.builtin.Serve(d.ctx, b, func() desktop.Info { return st.info(d.o.Machine, d.o.Zone) })
		}()
		return a, nil
	}
	return d.dialServer(d.ctx)
}

// dialServer connects to the configured desktop server within 3s.
func (d *Display) dialServer(ctx context.Context) (net.Conn, error) {
	ctx, cancel := context.WithTimeout(ctx, 3*time.Second)
	defer cancel()
	var nd net.Dialer
	return nd.DialContext(ctx, d.o.Desktop.Network, d.o.Desktop.Address)
}

// checkDesktop reports whether the desktop server takes a connection (the builtin one
// always does).
func (d *Display) checkDesktop(ctx context.Context) error {
	if d.o.Desktop.Protocol == configs.DesktopBuiltin {
		return nil
	}
	c, err := d.dialServer(ctx)
	if err != nil {
		return fmt.Errorf("desktop server %s: %w", d.o.Desktop, err)
	}
	c.Close()
	return nil
}

// watchDesktop checks the desktop server every DesktopCheckEvery. While it does not answer,
// the desktop's display port is closed: the front doors' probes of the machine, which
// connect to its TCP display ports, then see it down and send no new session there; it opens
// again when the server answers. Streams already open are not touched.
func (d *Display) watchDesktop() {
	t := time.NewTicker(d.o.DesktopCheckEvery)
	defer t.Stop()
	up := true
	for {
		select {
		case <-d.done:
			return
		case <-t.C:
		}
		err := d.checkDesktop(d.ctx)
		switch {
		case err != nil && up:
			if d.closeDesktopPort() {
				up = false
				d.log.Error("the desktop server does not answer: its display port is closed until it does, so that the machine reads down", "desktop", d.o.Desktop.String(), "port", d.o.Desktop.Port, "err", err)
			}
		case err == nil && !up:
			if lerr := d.openDesktopPort(); lerr != nil {
				d.log.Warn("the desktop server answers again, but its display port does not open", "port", d.o.Desktop.Port, "err", lerr)
				continue
			}
			up = true
			d.log.Info("the desktop server answers again: its display port is open", "desktop", d.o.Desktop.String(), "port", d.o.Desktop.Port)
		}
	}
}

// closeDesktopPort closes the desktop's display port listener; false when it is not open.
func (d *Display) closeDesktopPort() bool {
	d.mu.Lock()
	defer d.mu.Unlock()
	for i, l := range d.listeners {
		if uint16(l.Addr().(*net.TCPAddr).Port) == d.o.Desktop.Port {
			l.Close()
			d.listeners = slices.Delete(d.listeners, i, i+1)
			return true
		}
	}
	return false
}

// openDesktopPort listens on the desktop's display port again and accepts its channels.
func (d *Display) openDesktopPort() error {
	l, err := net.Listen("tcp", netip.AddrPortFrom(d.o.Address, d.o.Desktop.Port).String())
	if err != nil {
		return err
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.closed {
		l.Close()
		return nil
	}
	d.listeners = append(d.listeners, l)
	d.wg.Add(1)
	go func() { defer d.wg.Done(); d.acceptTCP(l, d.o.Desktop.Port) }()
	return nil
}

// exposedDesktop reports whether the desktop server also takes connections on the machine's
// own address, where others could reach it without a ticket.
func (d *Display) exposedDesktop() bool {
	if d.o.Desktop.Network != "tcp" {
		return false
	}
	ap, err := netip.ParseAddrPort(d.o.Desktop.Address)
	if err != nil {
		return false
	}
	if !ap.Addr().Unmap().IsLoopback() {
		return true
	}
	if d.o.Address.IsLoopback() || d.o.Address.IsUnspecified() {
		return false
	}
	c, err := net.DialTimeout("tcp", net.JoinHostPort(d.o.Address.String(), strconv.Itoa(int(ap.Port()))), time.Second)
	if err != nil {
		return false
	}
	c.Close()
	return true
}
