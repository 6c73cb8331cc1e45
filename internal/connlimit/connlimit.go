// Package connlimit bounds the connections a listener hands to its server, at accept, before
// any TLS or HTTP work: at most Max at once, at most PerSource from one source (an IPv4
// address, an IPv6 /64), and, once Max are open, a new connection takes the place of the
// oldest one that is waiting for a request (its TLS handshake and first headers, or the next
// request of a kept-alive connection), so that connections that stall cannot keep new ones
// out. An http.Server tells the listener which connections are in a request through
// ConnState.
//
// Why close the oldest waiting connection rather than give every connection less time for
// its handshake and headers once the listener fills: it needs no clock and no threshold,
// does nothing until the listener is full (an honest client on a slow link keeps its
// server's full timeouts until then), and when it is full each new connection costs
// exactly one of those that wait, the one that has waited longest. A connection that
// finishes its handshake and headers in milliseconds is not the oldest for long; one that
// stalls soon is. Under a flood of new connections a waiting one lasts about Max ÷ the
// flood's rate (4,096 at 2,000 a second: 2 s), which is enough for an honest handshake.
package connlimit

import (
	"container/list"
	"crypto/tls"
	"net"
	"net/http"
	"net/netip"
	"sync"

	"github.com/prometheus/client_golang/prometheus"
)

// Options configures a Listener.
type Options struct {
	// Max is the most connections open at once. Required: at least 1.
	Max int
	// PerSource is the most connections open at once from one source: an IPv4 address, or
	// the /64 of an IPv6 address (one host's usual share). The connections past it are
	// closed as they are accepted. Default 0: no bound per source.
	PerSource int
	// Exempt lists the source addresses PerSource does not bound, such as load balancers
	// whose connections carry many clients. Connections whose source is not an IP address
	// are not bounded per source either. Default: none.
	Exempt []netip.Prefix
}

// Listener is a net.Listener that enforces Options. Set its ConnState as the http.Server's
// ConnState so that it knows which connections are in a request; without it every open
// connection counts as waiting for one.
type Listener struct {
	net.Listener
	max, perSource int
	exempt         []netip.Prefix

	mu   sync.Mutex // guards the fields below
	room sync.Cond  // signalled when a connection is released or starts waiting; L is &mu
	// open counts the connections accepted and not yet closed.
	open     int
	bySource map[netip.Prefix]int
	// waiting holds the open connections that wait for a request, oldest first.
	waiting  list.List
	closed   bool
	accepted uint64 // connections handed on
	refused  uint64 // connections closed at accept past PerSource
	shed     uint64 // connections closed to make room
}

// New wraps l.
func New(l net.Listener, o Options) *Listener {
	if o.Max < 1 {
		o.Max = 1
	}
	cl := &Listener{Listener: l, max: o.Max, perSource: o.PerSource, exempt: o.Exempt, bySource: map[netip.Prefix]int{}}
	cl.room.L = &cl.mu
	return cl
}

// Accept returns the next connection within the bounds. It waits while Max connections are
// open and none of them waits for a request; when Max are open and some do, it closes the
// oldest of those for the new one. A connection past its source's bound is closed at once
// and Accept goes on to the next.
func (l *Listener) Accept() (net.Conn, error) {
	for {
		if err := l.waitForRoom(); err != nil {
			return nil, err
		}
		nc, err := l.Listener.Accept()
		if err != nil {
			return nil, err
		}
		src, bounded := l.source(nc.RemoteAddr())
		l.mu.Lock()
		if bounded && l.bySource[src] >= l.perSource {
			l.refused++
			l.mu.Unlock()
			nc.Close()
			continue
		}
		// Room may have gone while this connection was accepted (the connection that
		// waited entered a request): wait for it with the connection in hand.
		for !l.closed && l.open >= l.max && l.waiting.Len() == 0 {
			l.room.Wait()
		}
		if l.closed {
			l.mu.Unlock()
			nc.Close()
			return nil, net.ErrClosed
		}
		var victim *conn
		if l.open >= l.max {
			victim = l.waiting.Front().Value.(*conn)
			l.releaseLocked(victim)
			l.shed++
		}
		c := &conn{Conn: nc, l: l, src: src, bounded: bounded}
		l.open++
		l.accepted++
		if bounded {
			l.bySource[src]++
		}
		c.elem = l.waiting.PushBack(c)
		l.mu.Unlock()
		if victim != nil {
			victim.Conn.Close()
		}
		return c, nil
	}
}

// waitForRoom waits until a connection can be taken: fewer than Max are open, or one of them
// waits for a request and can make room.
func (l *Listener) waitForRoom() error {
	l.mu.Lock()
	defer l.mu.Unlock()
	for !l.closed && l.open >= l.max && l.waiting.Len() == 0 {
		l.room.Wait()
	}
	if l.closed {
		return net.ErrClosed
	}
	return nil
}

// source returns the key a connection from a counts under, and whether PerSource bounds it.
func (l *Listener) source(a net.Addr) (netip.Prefix, bool) {
	if l.perSource <= 0 || a == nil {
		return netip.Prefix{}, false
	}
	var ap netip.AddrPort
	if ta, ok := a.(*net.TCPAddr); ok {
		ap = ta.AddrPort()
	} else if p, err := netip.ParseAddrPort(a.String()); err == nil {
		ap = p
	}
	ip := ap.Addr().Unmap().WithZone("")
	if !ip.IsValid() {
		return netip.Prefix{}, false
	}
	for _, p := range l.exempt {
		if p.Contains(ip) {
			return netip.Prefix{}, false
		}
	}
	bits := 32
	if ip.Is6() {
		bits = 64
	}
	p, _ := ip.Prefix(bits)
	return p, true
}

// ConnState follows an http.Server's connections (set it as the server's ConnState): a
// connection in a request is never closed to make room; a new one and one kept alive
// between requests are.
func (l *Listener) ConnState(nc net.Conn, st http.ConnState) {
	if tc, ok := nc.(*tls.Conn); ok {
		nc = tc.NetConn()
	}
	c, ok := nc.(*conn)
	if !ok || c.l != l {
		return
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if c.released {
		return
	}
	switch st {
	case http.StateIdle:
		// Waiting again, since now: the newest of those that wait.
		if c.elem != nil {
			l.waiting.Remove(c.elem)
		}
		c.elem = l.waiting.PushBack(c)
		l.room.Signal()
	case http.StateActive, http.StateHijacked:
		if c.elem != nil {
			l.waiting.Remove(c.elem)
			c.elem = nil
		}
	}
}

// releaseLocked gives back c's place, once.
func (l *Listener) releaseLocked(c *conn) {
	if c.released {
		return
	}
	c.released = true
	l.open--
	if c.bounded {
		if l.bySource[c.src]--; l.bySource[c.src] <= 0 {
			delete(l.bySource, c.src)
		}
	}
	if c.elem != nil {
		l.waiting.Remove(c.elem)
		c.elem = nil
	}
	l.room.Signal()
}

// Close closes the listener; an Accept waiting for room returns net.ErrClosed. The
// connections it returned stay open.
func (l *Listener) Close() error {
	l.mu.Lock()
	l.closed = true
	l.room.Broadcast()
	l.mu.Unlock()
	return l.Listener.Close()
}

// Stats is a listener's counts.
type Stats struct {
	// Open is the connections open now; Waiting those of them that wait for a request.
	Open, Waiting int
	// Accepted counts the connections handed on; Refused those closed at accept past their
	// source's bound; Shed those closed to make room for a new one.
	Accepted, Refused, Shed uint64
}

// Stats returns the listener's counts.
func (l *Listener) Stats() Stats {
	l.mu.Lock()
	defer l.mu.Unlock()
	return Stats{Open: l.open, Waiting: l.waiting.Len(), Accepted: l.accepted, Refused: l.refused, Shed: l.shed}
}

// Register adds the listener's gauge of open connections and its counters of refused and
// shed connections to reg, with labels (such as the listener's name) on each.
func (l *Listener) Register(reg prometheus.Registerer, labels prometheus.Labels) error {
	for _, c := range []prometheus.Collector{
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "frontdoor_listener_connections_open", ConstLabels: labels,
			Help: "Connections the listener holds open."}, func() float64 { return float64(l.Stats().Open) }),
		prometheus.NewCounterFunc(prometheus.CounterOpts{Name: "frontdoor_listener_connections_refused_total", ConstLabels: labels,
			Help: "Connections closed at accept because their source held as many as it may."}, func() float64 { return float64(l.Stats().Refused) }),
		prometheus.NewCounterFunc(prometheus.CounterOpts{Name: "frontdoor_listener_connections_shed_total", ConstLabels: labels,
			Help: "Connections waiting for a request closed to make room for a new one while the listener was full."}, func() float64 { return float64(l.Stats().Shed) }),
	} {
		if err := reg.Register(c); err != nil {
			return err
		}
	}
	return nil
}

// conn is a connection of a Listener; closing it gives its place back.
type conn struct {
	net.Conn
	l       *Listener
	src     netip.Prefix // the source it counts under, if bounded
	bounded bool
	// elem is c's place in l.waiting while it waits for a request; released is set once
	// its place was given back. Both guarded by l.mu.
	elem     *list.Element
	released bool
}

// Close closes the connection and gives its place back.
func (c *conn) Close() error {
	c.l.mu.Lock()
	c.l.releaseLocked(c)
	c.l.mu.Unlock()
	return c.Conn.Close()
}
