package client

import (
	"context"
	"crypto/tls"
	"encoding/binary"
	"fmt"
	"io"
	"net"
	"net/netip"
	"sync"
	"sync/atomic"
	"time"

	"github.com/frontdoor-vdi/frontdoor/ticket"
	"github.com/quic-go/quic-go"
)

// The QUIC transport between client and gateway, and client and machine.
//
// One QUIC connection (ALPN QUICALPN) to a gateway's QUIC port carries a session's UDP
// channels, and with QUICOptions all of its channels; in direct mode each UDP channel is a
// QUIC connection to the machine's display port. Each channel opens
// with a bidirectional stream that starts with a kind byte ('t' for a TCP channel, 'u' for a UDP
// channel), the channel's port (2 bytes, big endian) and the ticket frame of package ticket;
// the gateway answers one status byte. A TCP channel's bytes then flow on its stream. A UDP
// channel's datagrams travel as QUIC DATAGRAM frames, each prefixed with the channel's port
// (2 bytes); its stream stays open for the flow's lifetime. Because QUIC names a connection by
// its IDs, not by the client's address, a session survives a change of the client's address
// (connection migration, MigrateQUIC).

// QUICALPN is the ALPN protocol of the QUIC transport (see package ticket for the format).
const QUICALPN = ticket.QUICALPN

// QUIC stream kinds.
const (
	quicKindTCP = ticket.QUICKindTCP
	quicKindUDP = ticket.QUICKindUDP
)

// QUICOptions carry every channel to gateways over QUIC, TCP ones too.
type QUICOptions struct {
	// Port is the gateways' QUIC (UDP) port. Default: the descriptor's quic_port.
	Port uint16
	// LocalAddr is the local UDP address to send from, e.g. "127.0.0.1:0". Default: any.
	LocalAddr string
}

// quicLink is the QUIC connection of one link.
type quicLink struct {
	conn *quic.Conn

	mu    sync.Mutex // guards trs, flows
	trs   []*quic.Transport
	flows map[uint16]*quicFlow
}

func (q *quicLink) close() {
	q.conn.CloseWithError(0, "closed")
	q.mu.Lock()
	trs := q.trs
	q.trs = nil
	q.mu.Unlock()
	for _, tr := range trs {
		tr.Close()
		tr.Conn.Close()
	}
}

// mutableConn is a UDP socket that can be silenced: while muted it drops what it would send
// and what it receives, as a network path that went away. It offers only net.PacketConn (and
// buffer sizes), so quic-go uses it through its plain code path.
type mutableConn struct {
	c     *net.UDPConn
	muted atomic.Bool
}

func (m *mutableConn) ReadFrom(b []byte) (int, net.Addr, error) {
	for {
		n, a, err := m.c.ReadFrom(b)
		if err != nil || !m.muted.Load() {
			return n, a, err
		}
	}
}

func (m *mutableConn) WriteTo(b []byte, a net.Addr) (int, error) {
	if m.muted.Load() {
		return len(b), nil
	}
	return m.c.WriteTo(b, a)
}

func (m *mutableConn) Close() error                       { return m.c.Close() }
func (m *mutableConn) LocalAddr() net.Addr                { return m.c.LocalAddr() }
func (m *mutableConn) SetDeadline(t time.Time) error      { return m.c.SetDeadline(t) }
func (m *mutableConn) SetReadDeadline(t time.Time) error  { return m.c.SetReadDeadline(t) }
func (m *mutableConn) SetWriteDeadline(t time.Time) error { return m.c.SetWriteDeadline(t) }
func (m *mutableConn) SetReadBuffer(n int) error          { return m.c.SetReadBuffer(n) }
func (m *mutableConn) SetWriteBuffer(n int) error         { return m.c.SetWriteBuffer(n) }

func (s *Session) quicConfig() *quic.Config {
	return &quic.Config{EnableDatagrams: true, HandshakeIdleTimeout: s.o.DialTimeout,
		MaxIdleTimeout: 3 * s.o.KeepaliveTimeout, KeepAlivePeriod: s.o.KeepaliveInterval}
}

// dialQUIC opens a QUIC connection to port of r: a gateway's QUIC port, or a machine's UDP
// display port.
func (s *Session) dialQUIC(ctx context.Context, r route, port uint16) (*quicLink, error) {
	local := ":0"
	if s.o.QUIC != nil && s.o.QUIC.LocalAddr != "" {
		local = s.o.QUIC.LocalAddr
	}
	la, err := net.ResolveUDPAddr("udp", local)
	if err != nil {
		return nil, err
	}
	uc, err := net.ListenUDP("udp", la)
	if err != nil {
		return nil, err
	}
	pc := &mutableConn{c: uc}
	tr := &quic.Transport{Conn: pc}
	ctx, cancel := context.WithTimeout(ctx, s.o.DialTimeout)
	defer cancel()
	tc := s.tlsFor(r)
	tc.NextProtos, tc.MinVersion = []string{QUICALPN}, tls.VersionTLS13
	c, err := tr.Dial(ctx, net.UDPAddrFromAddrPort(netip.AddrPortFrom(r.addr, port)), tc, s.quicConfig())
	if err != nil {
		tr.Close()
		pc.Close()
		return nil, err
	}
	return &quicLink{conn: c, trs: []*quic.Transport{tr}, flows: map[uint16]*quicFlow{}}, nil
}

// quicOpen opens a channel's stream and exchanges the ticket for the status (with a gateway's
// next reconnect ticket).
func (s *Session) quicOpen(ctx context.Context, q *quicLink, kind byte, port uint16, tok string) (*quic.Stream, string, error) {
	// The connection answered already: the time is the status's (StatusTimeout).
	ctx, cancel := context.WithTimeout(ctx, s.o.StatusTimeout)
	defer cancel()
	st, err := q.conn.OpenStreamSync(ctx)
	if err != nil {
		return nil, "", err
	}
	dl, _ := ctx.Deadline()
	st.SetDeadline(dl)
	ch := ticket.Channel{Port: port, Proto: "tcp"}
	if kind == quicKindUDP {
		ch.Proto = "udp"
	}
	err = ticket.WriteChannel(st, ch, tok)
	var next string
	if err == nil {
		var pin *[32]byte
		if next, pin, err = readStatus(st); err == nil && pin != nil {
			err = fmt.Errorf("%w (sealed, unasked)", ErrTicketDenied)
		}
	}
	if err != nil {
		st.CancelRead(0)
		st.CancelWrite(0)
		return nil, "", err
	}
	st.SetDeadline(time.Time{})
	return st, next, nil
}

// quicTCP opens a TCP channel as a QUIC stream.
func (s *Session) quicTCP(ctx context.Context, q *quicLink, port uint16, tok string) (io.ReadWriteCloser, string, error) {
	st, next, err := s.quicOpen(ctx, q, quicKindTCP, port, tok)
	if err != nil {
		return nil, "", err
	}
	return quicStream{st}, next, nil
}

// quicStream is a TCP channel on a QUIC stream; Close ends both directions.
type quicStream struct{ *quic.Stream }

func (q quicStream) Close() error {
	q.CancelRead(0)
	return q.Stream.Close()
}

// quicUDP opens a UDP channel whose datagrams ride the connection's DATAGRAM frames.
func (s *Session) quicUDP(ctx context.Context, q *quicLink, port uint16, tok string) (io.ReadWriteCloser, string, error) {
	st, next, err := s.quicOpen(ctx, q, quicKindUDP, port, tok)
	if err != nil {
		return nil, "", err
	}
	f := &quicFlow{port: port, q: q, st: st, in: make(chan []byte, 256), closed: make(chan struct{})}
	q.mu.Lock()
	q.flows[port] = f
	q.mu.Unlock()
	return f, next, nil
}

// quicFlow is a UDP channel carried in DATAGRAM frames.
type quicFlow struct {
	port   uint16
	q      *quicLink
	st     *quic.Stream
	in     chan []byte
	closed chan struct{}
	once   sync.Once
}

// Read returns the next datagram of the flow.
func (f *quicFlow) Read(b []byte) (int, error) {
	select {
	case d := <-f.in:
		return copy(b, d), nil
	case <-f.closed:
		return 0, net.ErrClosed
	case <-f.q.conn.Context().Done():
		return 0, fmt.Errorf("quic connection: %w", context.Cause(f.q.conn.Context()))
	}
}

// Write sends b as one DATAGRAM frame.
func (f *quicFlow) Write(b []byte) (int, error) {
	msg := make([]byte, 2+len(b))
	binary.BigEndian.PutUint16(msg, f.port)
	copy(msg[2:], b)
	if err := f.q.conn.SendDatagram(msg); err != nil {
		return 0, err
	}
	return len(b), nil
}

// Close ends the flow and its stream.
func (f *quicFlow) Close() error {
	f.once.Do(func() {
		close(f.closed)
		f.st.CancelRead(0)
		f.st.Close()
	})
	return nil
}

// quicDemux hands each received DATAGRAM frame of q to its flow until the connection ends,
// which cuts the link.
func (s *Session) quicDemux(l *link, q *quicLink) {
	for {
		b, err := q.conn.ReceiveDatagram(context.Background())
		if err != nil {
			s.fail(l, fmt.Errorf("quic connection: %w", err))
			return
		}
		if len(b) < 2 {
			continue
		}
		q.mu.Lock()
		f := q.flows[binary.BigEndian.Uint16(b)]
		q.mu.Unlock()
		if f == nil {
			continue
		}
		select {
		case f.in <- b[2:]:
		default: // the reader is behind: drop
		}
	}
}

// MigrateQUIC moves the session's QUIC connection to a new local UDP address (e.g.
// "127.0.0.2:0") — as when a laptop changes networks: it probes the new path, switches to it
// and silences the old socket (it neither sends nor receives from then on; it is closed with the
// link, because quic-go keeps the connection registered on the transport it was dialed from).
// The channels stay open: no cut, the same session.
func (s *Session) MigrateQUIC(ctx context.Context, localAddr string) error {
	s.mu.Lock()
	l := s.link
	s.mu.Unlock()
	if l == nil {
		return ErrDown
	}
	if len(l.quics) == 0 || l.via.machine != "" {
		return ErrNoQUIC
	}
	la, err := net.ResolveUDPAddr("udp", localAddr)
	if err != nil {
		return err
	}
	uc, err := net.ListenUDP("udp", la)
	if err != nil {
		return err
	}
	pc := &mutableConn{c: uc}
	tr := &quic.Transport{Conn: pc}
	fail := func(err error) error {
		tr.Close()
		pc.Close()
		return fmt.Errorf("migrating to %s: %w", localAddr, err)
	}
	q := l.quics[0] // the gateway's
	p, err := q.conn.AddPath(tr)
	if err != nil {
		return fail(err)
	}
	if err := p.Probe(ctx); err != nil {
		return fail(err)
	}
	if err := p.Switch(); err != nil {
		return fail(err)
	}
	q.mu.Lock()
	for _, o := range q.trs {
		o.Conn.(*mutableConn).muted.Store(true)
	}
	q.trs = append(q.trs, tr)
	q.mu.Unlock()
	s.emit(Event{Kind: EventMigrated, At: s.now(), Session: s.Descriptor().SessionID, Via: l.via.name, Address: pc.LocalAddr().String()})
	return nil
}
