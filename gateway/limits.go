package gateway

import (
	"errors"
	"net/netip"
	"sync"

	"golang.org/x/time/rate"
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

// sourceLimits paces the new channels of each client address.
type sourceLimits struct {
	mu sync.Mutex
	m  map[netip.Addr]*rate.Limiter
}

// allow reports whether a new channel from a may go on to its ticket check. When more
// addresses than maxSourcesTracked come (a spoofed flood), every pace is forgotten: the map
// stays bounded, and honest clients lose nothing but a pause they would not have needed.
func (s *sourceLimits) allow(a netip.Addr) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	l := s.m[a]
	if l == nil {
		if s.m == nil || len(s.m) >= maxSourcesTracked {
			s.m = map[netip.Addr]*rate.Limiter{}
		}
		l = rate.NewLimiter(newPerSource, newPerSourceBurst)
		s.m[a] = l
	}
	return l.Allow()
}
