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

// flow is one client's UDP channel: a connected socket toward the machine.
type flow struct {
	client  netip.AddrPort
	up      *net.UDPConn
	last    atomic.Int64 // unix nanos of the last datagram either way
	ch      *channel
	closeMu sync.Once
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
			f.last.Store(time.Now().UnixNano())
			f.up.Write(buf[:n])
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
		f.last.Store(time.Now().UnixNano())
		f.up.Write(b)
		return
	}
	tok, ok := ticket.ParseDatagram(b)
	if !ok {
		return // not ours: drop without state
	}
	ch := ticket.Channel{Port: p.port, Proto: "udp"}
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
	// From the gateway's own address: the machine takes gateway-mode flows from gateways'
	// addresses only (agent.DisplayOptions.Gateways).
	up, err := net.DialUDP("udp", net.UDPAddrFromAddrPort(netip.AddrPortFrom(p.g.o.Address, 0)), net.UDPAddrFromAddrPort(netip.AddrPortFrom(addr, p.port)))
	if err != nil {
		p.g.log.Warn("machine unreachable", "session", claims.Session, "machine", claims.Machine, "err", err)
		return
	}
	f = &flow{client: from, up: up}
	f.last.Store(time.Now().UnixNano())
	f.ch = &channel{session: claims.Session, issued: claims.Issued, close: func() { p.drop(f) }}
	if !p.g.open(f.ch) {
		up.Close()
		return
	}
	if p.g.o.Verifier.Revoked(claims) || !p.g.o.Sessions.Active(claims.Session) {
		p.g.release(f.ch) // ended or revoked between the check and the registration
		up.Close()
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
	// The ticket goes on to the machine's agent, whose ticket.UDPReady reaches the client.
	up.Write(b)
	p.g.wg.Add(1)
	go func() { defer p.g.wg.Done(); p.replies(f) }()
}

// replies forwards the machine's datagrams to the client from the listening socket.
func (p *udpPort) replies(f *flow) {
	buf := make([]byte, 64<<10)
	for {
		n, err := f.up.Read(buf)
		if err != nil {
			if ne, ok := err.(net.Error); ok && ne.Timeout() {
				continue
			}
			p.drop(f)
			return
		}
		f.last.Store(time.Now().UnixNano())
		p.conn.WriteToUDPAddrPort(buf[:n], f.client)
	}
}

// drop removes a flow and closes its socket once.
func (p *udpPort) drop(f *flow) {
	f.closeMu.Do(func() {
		p.mu.Lock()
		if p.flows[f.client] == f {
			delete(p.flows, f.client)
		}
		p.mu.Unlock()
		f.up.Close()
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
