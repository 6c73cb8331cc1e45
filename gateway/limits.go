package gateway

import (
	"errors"
	"net"
	"net/netip"
	"sync"
	"time"

	"github.com/frontdoor-vdi/frontdoor/internal/connlimit"
	"github.com/frontdoor-vdi/frontdoor/internal/ratemap"
)

// A gateway's caps, whatever the tickets say: one session's open channels (TCP channels, UDP
// flows and QUIC streams alike; a session opens 2 to 4), one QUIC connection's streams, the
// QUIC connections at once and one session's of them, and the new channels a second from one
// client address (before any ticket check: a source that floods pays nothing but its own
// refusals; generous, as many users may share a NAT's address).
const (
	maxPerSession     = 16
	maxStreamsPerConn = 16
	maxQUICConns      = 10000
	maxQUICPerSession = 4
	// maxQUICPerSource bounds one source's QUIC connections (an IPv4 address, an IPv6 /64):
	// a NAT's users each hold one a session, and one address cannot take every place.
	maxQUICPerSource = 1000
	// maxQUICTicketless bounds the QUIC connections that have shown no ticket yet (each
	// holds a place for up to TicketWithin).
	maxQUICTicketless = 1000
	newPerSource      = 200
	newPerSourceBurst = 400
	maxSourcesTracked = 1 << 16
	// maxTCPConns bounds the connections a TCP channel port holds at once (a channel holds
	// its client's and, to the machine, one more descriptor); when all are taken a new one
	// takes the place of the oldest that has not shown its ticket yet (connlimit). An
	// admitted channel is never closed for another. A quarter of them may come from one
	// source: an office behind one NAT holds a channel or two per user, for hours. As many as
	// the QUIC connections: a gateway process of 20,000 descriptors carries about 10,000
	// channels (bench/desktop.sh's capacity run holds 9,900 streams through one port).
	maxTCPConns = 10000
)

// ErrSessionCap refuses a channel past its session's cap on this gateway.
var ErrSessionCap = errors.New("the session has as many channels open here as a session may")

// ErrDirectTicket refuses a direct-mode ticket at a gateway: it is the machine's to check, and
// no gateway rotates it, so through a gateway it would escape rotation.
var ErrDirectTicket = errors.New("a direct-mode ticket opens channels at its machine, not at a gateway")

// ErrUsedWhileCarried refuses a reconnect ticket used already while its session is connected.
var ErrUsedWhileCarried = errors.New("a reconnect ticket used already, while its session is connected")

// ErrSourceRate refuses a channel from a client address that opens them too fast.
var ErrSourceRate = errors.New("too many new channels from this address")

// sourceLimits paces the new channels of each source: an IPv4 address, or an IPv6 /64
// (connlimit.SourceOf), so that a client does not get a fresh pace from each address of its
// /64. At maxSourcesTracked sources only idle paces are forgotten (internal/ratemap): a flood
// of addresses resets no busy source's pace.
type sourceLimits struct {
	mu sync.Mutex // guards m
	m  *ratemap.Map[netip.Prefix]
}

// paced reports whether c, a connection just accepted on a TCP channel port or the HTTPS
// port, may go on: its source has not opened connections faster than its pace.
func (g *Gateway) paced(c net.Conn) bool {
	a, err := netip.ParseAddrPort(c.RemoteAddr().String())
	return err != nil || g.sources.allow(a.Addr().Unmap())
}

// allow reports whether a new channel from a may go on.
func (s *sourceLimits) allow(a netip.Addr) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.m == nil {
		s.m = ratemap.New[netip.Prefix](newPerSource, newPerSourceBurst, maxSourcesTracked)
	}
	now := time.Now()
	return s.m.Get(connlimit.SourceOf(a), now).AllowN(now, 1)
}
