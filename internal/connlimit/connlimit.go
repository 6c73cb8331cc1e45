// Package connlimit bounds the connections a listener hands to its server, at accept, before
// any TLS or HTTP work: at most Max at once, at most PerSource from one source (an IPv4
// address, an IPv6 /64), and, once Max are open, a new connection takes the place of the
// oldest one that is waiting for a request (its TLS handshake and first headers, or the next
// request of a kept-alive connection) or whose requests all wait for something a client
// controls or the server paces (a body still to come, a turn: Handler, Pace), so that
// connections that stall cannot keep new ones out. An http.Server tells the listener which
// connections are in a request through ConnState, and which request is whose through
// ConnContext; its Handler bounds the requests a source has in flight and the wait for a
// body.
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
	"errors"
	"net"
	"net/http"
	"net/netip"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/frontdoor-vdi/frontdoor/internal/timeshare"
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
	// BusySource is how many connections a source may hold open before its next ones are
	// gated: the work a gated connection starts once its first bytes arrive (a TLS server's
	// key exchange and signature, about half a millisecond of CPU, done before it writes)
	// waits for one of BusySlots, taken when the first read returns and given back at the
	// first write or close. A source that holds many connections at once is an office
	// behind one NAT or an abuser; either way its handshakes no longer all become runnable
	// at once, hundreds of them queued in the Go scheduler ahead of the requests of every
	// other client. A connection that sends nothing takes no slot. Default 0: no gate.
	BusySource int
	// BusySlots is how many gated connections do that work at once. Default: 1.
	BusySlots int
	// BusyShare bounds the time the gated connections' first work takes, in CPUs (0.25: a
	// quarter of one): a slot's work starts once the work before it is paid for at that
	// share (internal/timeshare), so that on a node of one CPU a source's flood of full
	// handshakes cannot take the CPU whole, one slot at a time. Default 0: BusySlots alone.
	BusyShare float64
	// BusyWait bounds a gated connection's wait for a slot; past it, its first read fails
	// and its server closes it. Default: 5s.
	BusyWait time.Duration
	// RequestsPerSource is the most requests one source may have in flight at once through
	// Handler; the next is answered 503 with Retry-After and its connection closed. It
	// bounds what one source holds in handlers, kept-alive connections between requests
	// not counted. Default 0: no bound.
	RequestsPerSource int
	// BodyTimeout bounds the wait for a request's body through Handler: a body that has not
	// arrived whole within it fails its read and its connection closes. Default: 5s.
	BodyTimeout time.Duration
}

// Listener is a net.Listener that enforces Options. Set its ConnState as the http.Server's
// ConnState so that it knows which connections are in a request; without it every open
// connection counts as waiting for one.
type Listener struct {
	net.Listener
	max, perSource int
	exempt         []netip.Prefix
	busySource     int
	busy           chan struct{}    // the gated connections' slots
	share          *timeshare.Share // their share of the time; nil: none
	busyWait       time.Duration
	perSourceReqs  int
	bodyTimeout    time.Duration

	mu   sync.Mutex // guards the fields below
	room sync.Cond  // signalled when a connection is released or starts waiting; L is &mu
	// open counts the connections accepted and not yet closed.
	open     int
	bySource map[netip.Prefix]int
	// requests counts the requests in flight through Handler per source.
	requests map[netip.Prefix]int
	// waiting holds the open connections that wait for their client — for a request, or
	// for a request's body — oldest first; queued those whose requests all wait their turn
	// at something the server paces (Pace). A new connection takes a waiting one's place
	// first: one that waits for its client loses less than one the server is about to serve.
	waiting list.List
	queued  list.List
	closed  bool
	// counts are the counters of Stats (its Open and Waiting are read from the above).
	counts Stats
}

// New wraps l.
func New(l net.Listener, o Options) *Listener {
	if o.Max < 1 {
		o.Max = 1
	}
	cl := &Listener{Listener: l, max: o.Max, perSource: o.PerSource, exempt: o.Exempt, bySource: map[netip.Prefix]int{},
		busySource: o.BusySource, busyWait: o.BusyWait, perSourceReqs: o.RequestsPerSource, bodyTimeout: o.BodyTimeout,
		requests: map[netip.Prefix]int{}}
	if cl.bodyTimeout <= 0 {
		cl.bodyTimeout = 5 * time.Second
	}
	if cl.busySource > 0 {
		cl.busy = make(chan struct{}, max(o.BusySlots, 1))
		if cl.busyWait <= 0 {
			cl.busyWait = 5 * time.Second
		}
		if o.BusyShare > 0 {
			cl.share = timeshare.New(o.BusyShare)
		}
	}
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
		if bounded && l.perSource > 0 && l.bySource[src] >= l.perSource {
			l.counts.Refused++
			l.mu.Unlock()
			nc.Close()
			continue
		}
		// Room may have gone while this connection was accepted (the connection that
		// waited entered a request): wait for it with the connection in hand.
		for !l.closed && l.open >= l.max && l.waiting.Len()+l.queued.Len() == 0 {
			l.room.Wait()
		}
		if l.closed {
			l.mu.Unlock()
			nc.Close()
			return nil, net.ErrClosed
		}
		var victim *conn
		if l.open >= l.max {
			from := &l.waiting
			if from.Len() == 0 {
				from = &l.queued
			}
			victim = from.Front().Value.(*conn)
			l.releaseLocked(victim)
			l.counts.Shed++
		}
		c := &conn{Conn: nc, l: l, src: src, bounded: bounded, gone: make(chan struct{})}
		l.open++
		l.counts.Accepted++
		if bounded {
			l.bySource[src]++
			if l.busy != nil && l.bySource[src] > l.busySource {
				c.gate.Store(gateWaiting)
				c.closing = make(chan struct{})
				l.counts.Gated++
			}
		}
		c.elem, c.in = l.waiting.PushBack(c), &l.waiting
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
	for !l.closed && l.open >= l.max && l.waiting.Len()+l.queued.Len() == 0 {
		l.room.Wait()
	}
	if l.closed {
		return net.ErrClosed
	}
	return nil
}

// source returns the key a connection from a counts under, and whether PerSource bounds it.
func (l *Listener) source(a net.Addr) (netip.Prefix, bool) {
	if (l.perSource <= 0 && l.perSourceReqs <= 0 && l.busySource <= 0) || a == nil {
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
	return SourceOf(ip), true
}

// SourceOf is the source an address counts against: an IPv4 address, or the /64 of an IPv6
// one (one host's usual share), so that a client does not get a fresh budget from each
// address of its /64.
func SourceOf(a netip.Addr) netip.Prefix {
	a = a.Unmap().WithZone("")
	bits := 32
	if a.Is6() {
		bits = 64
	}
	p, _ := a.Prefix(bits)
	return p
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
		c.active = false
		l.unplaceLocked(c)
	case http.StateActive, http.StateHijacked:
		c.active = true
	}
	l.placeLocked(c)
}

// Hold says that c, a connection l returned, is in use for good (a channel past its
// ticket): it is never closed to make room. For servers that are not an http.Server.
func (l *Listener) Hold(nc net.Conn) { l.ConnState(nc, http.StateActive) }

// placeLocked puts c in the waiting list or takes it out, as its state says: it waits
// when no request is under way (its handshake and first headers, or kept alive between
// requests), or when every request of it under way waits for something the server paces —
// its body, a turn (Pace) — and so would lose nothing but that wait if closed.
func (l *Listener) placeLocked(c *conn) {
	if c.released {
		return
	}
	var want *list.List
	switch {
	case !c.active:
		want = &l.waiting
	case c.requests > 0 && c.pacing+c.turns == c.requests && c.pacing > 0:
		want = &l.waiting // a body to come
	case c.requests > 0 && c.turns == c.requests:
		want = &l.queued
	}
	if want == c.in {
		return
	}
	l.unplaceLocked(c)
	if want != nil {
		c.elem, c.in = want.PushBack(c), want
		l.room.Signal()
	}
}

// unplaceLocked takes c out of the list it is in.
func (l *Listener) unplaceLocked(c *conn) {
	if c.elem != nil {
		c.in.Remove(c.elem)
	}
	c.elem, c.in = nil, nil
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
	l.unplaceLocked(c)
	close(c.gone)
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
	// source's bound; Shed those closed to make room for a new one; Gated those whose first
	// work waited for a slot (BusySource); BusyRequests the requests answered 503 past
	// RequestsPerSource.
	Accepted, Refused, Shed, Gated, BusyRequests uint64
}

// Stats returns the listener's counts.
func (l *Listener) Stats() Stats {
	l.mu.Lock()
	defer l.mu.Unlock()
	st := l.counts
	st.Open, st.Waiting = l.open, l.waiting.Len()+l.queued.Len()
	return st
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
		prometheus.NewCounterFunc(prometheus.CounterOpts{Name: "frontdoor_listener_connections_gated_total", ConstLabels: labels,
			Help: "Connections from a source holding many whose first work (the TLS handshake) waited for a slot."}, func() float64 { return float64(l.Stats().Gated) }),
		prometheus.NewCounterFunc(prometheus.CounterOpts{Name: "frontdoor_listener_requests_refused_total", ConstLabels: labels,
			Help: "Requests answered 503 because their source had as many in flight as it may."}, func() float64 { return float64(l.Stats().BusyRequests) }),
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
	// active is set while the server says c is in a request (ConnState); requests counts
	// its requests in Handler, pacing those of them that wait for their body and turns
	// those that wait their turn (Pace). All guarded by l.mu.
	active                  bool
	requests, pacing, turns int
	// in is the list c.elem is in (l.waiting or l.queued), if any; guarded by l.mu.
	in *list.List
	// gone is closed when c gives its place back (closed, or shed for a new one).
	gone chan struct{}
	gate atomic.Int32 // gateNone, gateWaiting or gateHeld
	// heldAt is when c's held slot's work began (Unix nanoseconds), for the share.
	heldAt atomic.Int64
	// head, seen and need follow a gated connection's first message (firstMessage); only
	// its reads touch them.
	head       [5]byte
	seen, need int
	// closing is closed by Close, for a read waiting for a slot; nil unless gated.
	closing   chan struct{}
	closeOnce sync.Once
}

// The states of a gated connection (conn.gate).
const (
	gateNone    int32 = iota // not gated, or done with its slot
	gateWaiting              // gated: takes a slot when its first read returns
	gateHeld                 // holds a slot until its first write or close
)

// errBusyWait is the read error of a gated connection that waited BusyWait for a slot.
var errBusyWait = errors.New("connlimit: source busy, no slot within the wait")

// Read reads; a gated connection takes a slot once a message has arrived whole, before it
// returns the last of it: a TLS record when the bytes start one (a ClientHello that a slow
// or stalled client sends in pieces holds no slot meanwhile), else the bytes of one read.
// Until its first write, a gated connection that reads again gives its slot back first:
// its server waits on the client again (a client that sent a tiny first record and
// stalled would otherwise hold the slot), and the next whole record takes one again.
func (c *conn) Read(b []byte) (int, error) {
	g := c.gate.Load() // gateNone on every read of an ungated or settled connection
	if g == gateHeld && c.gate.CompareAndSwap(gateHeld, gateWaiting) {
		c.giveBack()
		c.seen, c.need, g = 0, 0, gateWaiting
	}
	n, err := c.Conn.Read(b)
	if n > 0 && g == gateWaiting && c.gate.Load() == gateWaiting && c.firstMessage(b[:n]) {
		t := time.NewTimer(c.l.busyWait)
		defer t.Stop()
		select {
		case c.l.busy <- struct{}{}:
			if !c.gate.CompareAndSwap(gateWaiting, gateHeld) {
				<-c.l.busy // closed meanwhile
				break
			}
			if err := c.waitTurn(t); err != nil {
				return 0, err
			}
		case <-c.closing:
			return 0, net.ErrClosed
		case <-t.C:
			c.gate.Store(gateNone)
			return 0, errBusyWait
		}
	}
	return n, err
}

// firstMessage adds b to the bytes a gated connection has read since it last held a slot
// and reports whether a message is now whole: a TLS record (type 22, handshake) of the length its header
// gives, or any first bytes that do not start one.
func (c *conn) firstMessage(b []byte) bool {
	if c.need == 0 {
		k := copy(c.head[c.seen:], b)
		if c.seen+k < len(c.head) {
			c.seen += k
			return false // not yet a record header
		}
		c.need = c.seen + len(b) // not TLS: these bytes are the message
		if c.head[0] == 22 {
			c.need = len(c.head) + (int(c.head[3])<<8 | int(c.head[4]))
		}
	}
	c.seen += len(b)
	return c.seen >= c.need
}

// waitTurn waits, holding its slot, until the share lets c's work start, or fails with
// errBusyWait when that is past the wait t bounds (giving the slot back), or when c closes.
func (c *conn) waitTurn(t *time.Timer) error {
	if s := c.l.share; s != nil {
		if wait := time.Until(s.Next(time.Now())); wait > 0 {
			if wait > c.l.busyWait {
				c.freeSlot()
				return errBusyWait
			}
			turn := time.NewTimer(wait)
			defer turn.Stop()
			select {
			case <-turn.C:
			case <-c.closing:
				c.freeSlot()
				return net.ErrClosed
			case <-t.C:
				c.freeSlot()
				return errBusyWait
			}
		}
	}
	c.heldAt.Store(time.Now().UnixNano())
	return nil
}

// giveBack gives back c's slot, its work charged to the share.
func (c *conn) giveBack() {
	if s := c.l.share; s != nil {
		if at := c.heldAt.Load(); at != 0 {
			s.Charge(time.Unix(0, at), time.Now())
		}
	}
	<-c.l.busy
}

// SyscallConn returns the raw connection under c, for a server that moves c's bytes in the
// kernel once c is past its gate (it has written): reads and writes through it are not
// gated.
func (c *conn) SyscallConn() (syscall.RawConn, error) {
	sc, ok := c.Conn.(syscall.Conn)
	if !ok {
		return nil, errors.New("connlimit: the connection has no raw connection")
	}
	return sc.SyscallConn()
}

// Write gives back a held slot, then writes.
func (c *conn) Write(b []byte) (int, error) {
	c.freeSlot()
	return c.Conn.Write(b)
}

// freeSlot gives back c's slot if it holds one, and ends its gate.
func (c *conn) freeSlot() {
	if c.gate.Swap(gateNone) == gateHeld {
		c.giveBack()
	}
}

// Close closes the connection and gives its place (and a held slot) back; a read waiting
// for a slot returns.
func (c *conn) Close() error {
	if c.closing != nil {
		c.closeOnce.Do(func() { close(c.closing) })
	}
	c.freeSlot()
	c.l.mu.Lock()
	c.l.releaseLocked(c)
	c.l.mu.Unlock()
	return c.Conn.Close()
}
