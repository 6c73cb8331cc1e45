package gateway

import (
	"bytes"
	"context"
	"net"
	"net/netip"
	"sync"
	"sync/atomic"
	"time"

	"github.com/frontdoor-vdi/frontdoor/ticket"
	"golang.org/x/time/rate"
)

// udpPort serves one UDP channel port: a flow table keyed by client address. Its reader
// relays the datagrams of open flows and answers probes itself; a datagram from an address
// without a flow (a ticket, or a forgery) waits in a bounded queue for the port's ticket
// checker, which checks at most firstChecksPerSecond, so that a flood of them costs a bounded
// share of a core off the relay and loses its excess, never the open flows' datagrams. (A
// checker that never paused would hold a scheduler slot for good, and the reader would see
// its socket ready only every 10 ms.)
type udpPort struct {
	g       *Gateway
	conn    *net.UDPConn
	port    uint16
	pending chan firstDatagram // to the ticket checkers
	dropped atomic.Int64       // first datagrams lost to a full queue

	mu    sync.Mutex // guards flows
	flows map[netip.AddrPort]*flow
}

// firstDatagram is a datagram from an address without a flow, for the ticket checkers.
type firstDatagram struct {
	b    []byte
	from netip.AddrPort
}

// A UDP port's ticket checks: how many a second, and how many first datagrams wait.
const (
	firstChecksPerSecond = 4000 // a quarter of a core at ~60 µs each
	firstQueue           = 256
)

// flow is one client's UDP channel: its leg to the machine, once the machine took the ticket.
type flow struct {
	client  netip.AddrPort
	up      atomic.Pointer[machineFlow] // nil while the leg opens
	last    atomic.Int64                // unix nanos of the last datagram either way
	ch      *channel
	closeMu sync.Once
	closed  atomic.Bool
}

// send relays a client's datagram to the machine; before the leg is open it is lost, as the
// client's ticket datagrams it sends again until the gateway answers.
func (f *flow) send(b []byte) {
	f.last.Store(time.Now().UnixNano())
	if up := f.up.Load(); up != nil {
		up.Write(b)
	}
}

func newUDPPort(g *Gateway, c *net.UDPConn, port uint16) *udpPort {
	return &udpPort{g: g, conn: c, port: port, flows: map[netip.AddrPort]*flow{}, pending: make(chan firstDatagram, firstQueue)}
}

func (p *udpPort) serve() {
	var checkers sync.WaitGroup
	checks := rate.NewLimiter(firstChecksPerSecond, firstChecksPerSecond/100)
	checkers.Go(func() {
		for d := range p.pending {
			checks.Wait(context.Background()) // sleeps between checks under a flood
			p.first(d.b, d.from)
		}
	})
	buf := make([]byte, 64<<10)
	for {
		n, from, err := p.conn.ReadFromUDPAddrPort(buf)
		if err != nil {
			if ne, ok := err.(net.Error); ok && ne.Timeout() {
				continue
			}
			close(p.pending)
			checkers.Wait() // a flow they open from here on is closed just below
			p.closeAll()
			return
		}
		from = netip.AddrPortFrom(from.Addr().Unmap(), from.Port())
		p.mu.Lock()
		f := p.flows[from]
		p.mu.Unlock()
		switch {
		case f != nil:
			f.send(buf[:n])
		case string(buf[:n]) == ticket.ProbePayload:
			if !p.g.quiet.Load() {
				p.conn.WriteToUDPAddrPort(buf[:n], from)
			}
		default:
			select {
			case p.pending <- firstDatagram{b: bytes.Clone(buf[:n]), from: from}:
			default:
				p.dropped.Add(1) // a flood: the excess is lost, the open flows are not
			}
		}
	}
}

// first handles a datagram from an address that had no flow when it came: a ticket, or
// something to drop. A flow its twin opened meanwhile (the client sends its ticket again
// until it hears back) takes it as its own.
func (p *udpPort) first(b []byte, from netip.AddrPort) {
	if p.g.quiet.Load() {
		return // shutting down without a health port: read down, take nothing new (see Shutdown)
	}
	p.mu.Lock()
	f := p.flows[from]
	p.mu.Unlock()
	if f != nil {
		f.send(b)
		return
	}
	tok, ok := ticket.ParseDatagram(b)
	if !ok {
		return // not ours: drop without state
	}
	if !p.g.o.PlainUDP {
		p.g.plainRefused(from)
		return
	}
	ch := ticket.Channel{Port: p.port, Proto: "udp"}
	if !p.g.sources.allow(from.Addr().Unmap()) {
		p.g.log.Debug("flow denied", "client", from, "channel", ch.String(), "reason", ErrSourceRate)
		return
	}
	claims, addr, err := p.g.admit(tok, ch, from)
	if err != nil {
		p.g.log.Warn("flow denied", "client", from, "channel", ch.String(), "session", claims.Session, "reason", err)
		return
	}
	p.mu.Lock()
	full := len(p.flows) >= p.g.o.MaxFlows
	p.mu.Unlock()
	if full {
		p.g.log.Warn("flow table full", "port", p.port, "client", from)
		return
	}
	f = &flow{client: from}
	f.last.Store(time.Now().UnixNano())
	f.ch = &channel{session: claims.Session, issued: claims.Issued, close: func() { p.drop(f) }}
	if err := p.g.open(f.ch); err != nil {
		p.g.log.Warn("flow refused", "session", claims.Session, "channel", ch.String(), "client", from, "reason", err)
		return
	}
	if p.g.o.Verifier.Revoked(claims) || !p.g.o.Sessions.Active(claims.Session) {
		p.g.release(f.ch) // ended or revoked between the check and the registration
		return
	}
	p.mu.Lock()
	if old := p.flows[from]; old != nil {
		p.mu.Unlock()
		p.drop(old)
		p.mu.Lock()
	}
	p.flows[from] = f
	p.mu.Unlock()
	// The leg to the machine opens apart from the checker, which goes on with the next
	// datagram; the client's repeated ticket datagrams find the flow and are dropped.
	p.g.wg.Add(1)
	go func() { defer p.g.wg.Done(); p.relay(f, claims, netip.AddrPortFrom(addr, p.port), tok) }()
}

// plainRefused logs, at most every 10 s, that a plain flow was refused.
func (g *Gateway) plainRefused(from netip.AddrPort) {
	if g.plainLog.Allow() {
		g.log.Warn("plain UDP flow refused: UDP channels ride QUIC here (plain UDP is off)", "client", from)
	}
}

// relay opens f's leg to the machine, tells the client it is open (with the session's next
// reconnect ticket), then forwards the
// machine's datagrams to the client from the listening socket until either end goes.
func (p *udpPort) relay(f *flow, claims ticket.Claims, target netip.AddrPort, tok string) {
	defer p.drop(f)
	up, err := dialMachineFlow(context.Background(), p.g.machines, p.g.o.MachineTLS(), p.g.o.DialTimeout, claims.Machine, target, tok)
	if err != nil {
		p.g.log.Warn("machine unreachable", "session", f.ch.session, "machine", claims.Machine, "err", err)
		return
	}
	f.up.Store(up)
	if f.closed.Load() { // dropped while the leg opened
		up.Close()
		return
	}
	ready := []byte(ticket.UDPReady)
	if reissue := p.g.o.Reissue; reissue != nil {
		if next, err := reissue(claims); err == nil {
			ready = append(ready, next...) // plain, as the client chose: it read the last one too
		}
	}
	p.conn.WriteToUDPAddrPort(ready, f.client)
	for {
		m, err := up.next()
		if err != nil {
			return
		}
		f.last.Store(time.Now().UnixNano())
		p.conn.WriteToUDPAddrPort(m[2:], f.client)
	}
}

// drop removes a flow and closes its leg to the machine once.
func (p *udpPort) drop(f *flow) {
	f.closeMu.Do(func() {
		f.closed.Store(true)
		p.mu.Lock()
		if p.flows[f.client] == f {
			delete(p.flows, f.client)
		}
		p.mu.Unlock()
		if up := f.up.Load(); up != nil {
			up.Close()
		}
		p.g.release(f.ch)
	})
}

// janitor closes idle flows until the port closes.
func (p *udpPort) janitor() {
	idle := p.g.o.UDPIdle
	t := time.NewTicker(max(idle/4, 10*time.Millisecond))
	defer t.Stop()
	for {
		select {
		case <-p.g.done:
			return
		case <-t.C:
		}
		cutoff := time.Now().Add(-idle).UnixNano()
		var stale []*flow
		p.mu.Lock()
		for _, f := range p.flows {
			if f.last.Load() < cutoff {
				stale = append(stale, f)
			}
		}
		p.mu.Unlock()
		for _, f := range stale {
			p.drop(f)
		}
	}
}

func (p *udpPort) closeAll() {
	p.mu.Lock()
	fl := make([]*flow, 0, len(p.flows))
	for _, f := range p.flows {
		fl = append(fl, f)
	}
	p.mu.Unlock()
	for _, f := range fl {
		p.drop(f)
	}
}

// Flows returns the number of UDP flows of the gateway.
func (g *Gateway) Flows() int {
	g.mu.Lock()
	ps := append([]*udpPort(nil), g.packets...)
	g.mu.Unlock()
	n := 0
	for _, p := range ps {
		p.mu.Lock()
		n += len(p.flows)
		p.mu.Unlock()
	}
	return n
}
