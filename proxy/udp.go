package proxy

import (
	"errors"
	"fmt"
	"net"
	"net/netip"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"golang.org/x/net/ipv4"
	"golang.org/x/net/ipv6"

	"github.com/frontdoor-vdi/frontdoor/internal/rawio"
)

// batchConn is what ipv4.PacketConn and ipv6.PacketConn share: recvmmsg and sendmmsg.
type batchConn interface {
	ReadBatch(ms []ipv4.Message, flags int) (int, error)
	WriteBatch(ms []ipv4.Message, flags int) (int, error)
}

var (
	_ batchConn = (*ipv4.PacketConn)(nil)
	_ batchConn = (*ipv6.PacketConn)(nil)
)

func newBatchConn(c *net.UDPConn) batchConn {
	if a, ok := c.LocalAddr().(*net.UDPAddr); ok && a.IP.To4() != nil {
		return ipv4.NewPacketConn(c)
	}
	return ipv6.NewPacketConn(c)
}

// udpListener is a UDP socket and its flow table.
type udpListener struct {
	s     *Server
	l     *listener
	conn  *net.UDPConn // the socket, read by readLoop; nil with raw
	pc    batchConn
	raw   *rawSocket // the socket with Options.BlockingUDP, read by rawReadLoop (udp_linux.go)
	local netip.AddrPort
	stop  atomic.Bool // set before the socket is closed
	// draining is set by Shutdown: the socket stays open for the flows there are (their
	// replies leave from it), and datagrams that would open a new flow are dropped.
	draining atomic.Bool

	// With raw, the flows' sockets are raw too and their replies are relayed by one worker
	// waiting on ep (rawRepliesLoop). Whoever sets epOwned first closes ep: rawReadLoop,
	// once it and that worker are done, or close when rawReadLoop never started.
	ep      *rawEpoll
	epOwned atomic.Bool

	msgs sync.Pool // of *[]ipv4.Message with receive buffers, for the flows' reply loops

	mu        sync.Mutex // guards flows, perClient, byID and lastID
	flows     map[netip.AddrPort]*flow
	perClient map[netip.Addr]int
	byID      map[uint64]*flow // the flows with raw sockets, by their id in ep
	lastID    uint64
}

// flow is one client address's conversation with one backend.
type flow struct {
	u       *udpListener
	client  netip.AddrPort
	peer    netip.AddrPort // client as the listening socket sees it (IPv4-mapped on IPv6)
	addr    *net.UDPAddr   // peer, for WriteBatch
	b       *backend
	pool    string
	zone    string
	conn    *net.UDPConn // connected to the backend; nil with raw
	pc      batchConn
	raw     *rawSocket // connected to the backend, when the listener is raw
	id      uint64     // key in the listener's byID, with raw
	start   time.Time
	last    atomic.Int64 // unix nanoseconds of the last datagram either way
	in, out atomic.Int64 // bytes
	closed  atomic.Bool
}

func (s *Server) listenUDP(l *listener) (*udpListener, error) {
	u := &udpListener{s: s, l: l, flows: make(map[netip.AddrPort]*flow), perClient: make(map[netip.Addr]int),
		byID: make(map[uint64]*flow)}
	if s.opts.BlockingUDP && rawio.Usable(l.cfg.Address) {
		r, err := listenRaw(l.cfg.Address, l.cfg.SocketBuffer)
		if err != nil {
			return nil, err
		}
		u.raw = r // nil where blocking workers do not exist
	}
	if u.raw != nil {
		ep, err := newRawEpoll(l.cfg.Batch)
		if err != nil {
			u.raw.Close()
			return nil, err
		}
		u.ep, u.local = ep, u.raw.Local()
	} else {
		c, err := net.ListenUDP("udp", net.UDPAddrFromAddrPort(l.cfg.Address))
		if err != nil {
			return nil, err
		}
		c.SetReadBuffer(l.cfg.SocketBuffer)
		c.SetWriteBuffer(l.cfg.SocketBuffer)
		u.conn, u.pc, u.local = c, newBatchConn(c), c.LocalAddr().(*net.UDPAddr).AddrPort()
	}
	u.msgs.New = func() any {
		ms := newMessages(l.cfg.Batch, l.cfg.MaxDatagram)
		return &ms
	}
	return u, nil
}

// newMessages makes n messages with one size+1-byte buffer each: a datagram that fills the
// extra byte was longer than size.
func newMessages(n, size int) []ipv4.Message {
	ms := make([]ipv4.Message, n)
	buf := make([]byte, n*(size+1))
	for i := range ms {
		ms[i].Buffers = [][]byte{buf[i*(size+1) : (i+1)*(size+1) : (i+1)*(size+1)]}
	}
	return ms
}

// readLoop reads datagrams from clients in batches and forwards each to its flow's backend.
func (s *Server) readLoop(l *listener) {
	defer s.wg.Done()
	defer close(l.done)
	u := l.udp
	defer u.closeFlows("closed")
	batch, size := l.cfg.Batch, l.cfg.MaxDatagram
	ms := newMessages(batch, size)
	dgs := make([]datagram, 0, batch)
	fw := newForwarder(batch)
	for {
		n, err := u.pc.ReadBatch(ms, 0)
		if err != nil {
			if errors.Is(err, net.ErrClosed) {
				return
			}
			l.m.err("udp_read")
			continue
		}
		dgs = dgs[:0]
		for i := range n {
			dgs = append(dgs, datagram{from: ms[i].Addr.(*net.UDPAddr).AddrPort(), data: ms[i].Buffers[0][:min(ms[i].N, size)], long: ms[i].N > size})
		}
		u.forward(dgs, fw, s.opts.Now())
	}
}

// datagram is one datagram read from the listening socket.
type datagram struct {
	from netip.AddrPort // as the socket reports it
	data []byte
	long bool // longer than MaxDatagram: dropped
}

// forwarder is a read loop's send side towards the backends: messages for flows through the
// Go poller, a rawSender for raw flows.
type forwarder struct {
	out  []ipv4.Message
	bufs [][]byte
	raw  *rawSender
}

// newForwarder returns a forwarder for batches of up to n datagrams.
func newForwarder(n int) *forwarder {
	fw := &forwarder{out: make([]ipv4.Message, n), bufs: make([][]byte, n), raw: newRawSender(n)}
	for i := range fw.out {
		fw.out[i].Buffers = make([][]byte, 1)
	}
	return fw
}

// forward sends datagrams read from the listening socket to their flows' backends; runs from
// the same client go out with one sendmmsg each. fw holds at least len(dgs) messages.
func (u *udpListener) forward(dgs []datagram, fw *forwarder, now time.Time) {
	l := u.l
	for i := 0; i < len(dgs); {
		from := dgs[i].from
		client := netip.AddrPortFrom(from.Addr().Unmap(), from.Port())
		f := u.flowFor(client, from, now)
		j := i + 1
		for j < len(dgs) && dgs[j].from == from {
			j++
		}
		k := 0
		var bytes int64
		for _, d := range dgs[i:j] {
			if d.long {
				l.m.err("udp_truncated")
				continue
			}
			fw.bufs[k] = d.data
			bytes += int64(len(d.data))
			k++
		}
		if f != nil && k > 0 {
			f.last.Store(now.UnixNano())
			f.in.Add(bytes)
			l.m.pktIn.Add(float64(k))
			l.m.bytesIn.Add(float64(bytes))
			f.b.m.bytesIn.Add(float64(bytes))
			f.send(fw, k)
		}
		i = j
	}
	clear(fw.bufs) // keep no datagram reachable
}

// send sends the first k of fw's buffers to the flow's backend.
func (f *flow) send(fw *forwarder, k int) {
	if f.raw != nil {
		err := fw.raw.Send(f.raw, netip.AddrPort{}, fw.bufs[:k])
		switch {
		case err == nil || errors.Is(err, net.ErrClosed) || f.closed.Load():
		case fromICMP(err):
			// The send took the socket's pending ICMP error; the replies worker will not see it.
			f.backendError(err)
		default:
			f.u.l.m.err("udp_send")
		}
		return
	}
	for i := range k {
		fw.out[i].Buffers[0] = fw.bufs[i]
	}
	writeAll(f.pc, fw.out[:k])
	for i := range k {
		fw.out[i].Buffers[0] = nil
	}
}

// fromICMP reports whether err is an ICMP error a connected socket reports for its peer: the
// port is closed, or the host or network cannot be reached.
func fromICMP(err error) bool {
	for _, e := range []error{syscall.ECONNREFUSED, syscall.EHOSTUNREACH, syscall.ENETUNREACH, syscall.EHOSTDOWN} {
		if errors.Is(err, e) {
			return true
		}
	}
	return false
}

// writeAll sends ms with as few sendmmsg calls as the socket allows; an error drops the rest
// (UDP is lossy anyway; a refused backend shows up on the flow's reply socket).
func writeAll(pc batchConn, ms []ipv4.Message) {
	for len(ms) > 0 {
		k, err := pc.WriteBatch(ms, 0)
		if err != nil || k <= 0 {
			return
		}
		ms = ms[k:]
	}
}

// flowFor returns the client's flow, opening one if there is none and the limits allow; it
// returns nil (the datagram is dropped) otherwise.
func (u *udpListener) flowFor(client, peer netip.AddrPort, now time.Time) *flow {
	u.mu.Lock()
	f := u.flows[client]
	u.mu.Unlock()
	if f != nil {
		return f
	}
	s, l := u.s, u.l
	st := s.state.Load()
	lim := st.cfg.Limits
	lc := s.listenerCfg(l)
	u.mu.Lock()
	defer u.mu.Unlock()
	reason := ""
	switch {
	case u.draining.Load():
		reason = "draining"
	case int(s.flowCount.Load()) >= lim.MaxFlows:
		reason = "limit_global"
	case lc.MaxConns > 0 && l.active.Load() >= int64(lc.MaxConns):
		reason = "limit_listener"
	case lim.MaxFlowsPerClient > 0 && u.perClient[client.Addr()] >= lim.MaxFlowsPerClient:
		reason = "limit_client"
	}
	if reason != "" {
		l.m.err(reason)
		return nil
	}
	p := st.pools[lc.Pool]
	if p == nil {
		l.m.err("no_backend")
		return nil
	}
	b := s.choose(p, client.Addr(), nil)
	if b == nil {
		l.m.err("no_backend")
		return nil
	}
	f = &flow{u: u, client: client, peer: peer, addr: net.UDPAddrFromAddrPort(peer), b: b, pool: p.cfg.Name,
		zone: s.opts.Locator.Zone(client.Addr()), start: now}
	if err := u.dial(f, lc.SocketBuffer); err != nil {
		if localFailure(err) {
			l.m.err("udp_socket") // this host's limits, not the backend's health
			return nil
		}
		l.m.err("connect")
		b.m.fails.Inc()
		s.opts.Passive(b.name, b.addr, err)
		return nil
	}
	if p.cfg.Affinity {
		s.aff.set(client.Addr(), b.name)
	}
	f.last.Store(now.UnixNano())
	u.flows[client] = f
	u.perClient[client.Addr()]++
	s.flowCount.Add(1)
	l.active.Add(1)
	l.m.flows.Inc()
	l.m.flowsActive.Inc()
	b.active.Add(1)
	b.m.conns.Inc()
	b.m.active.Inc()
	if f.raw == nil {
		s.wg.Add(1)
		go f.replies()
	}
	return f
}

// dial opens f's socket to its backend: a raw one, watched by the listener's replies worker,
// when the listener is raw; else one of package net with a goroutine of its own (replies).
// The caller holds u.mu.
func (u *udpListener) dial(f *flow, buf int) error {
	if u.raw != nil {
		c, err := dialRaw(f.b.addr, buf)
		if err != nil {
			return err
		}
		u.lastID++
		if err := u.ep.Add(c, u.lastID); err != nil {
			c.Close()
			return fmt.Errorf("%w: %w", errLocal, err)
		}
		f.raw, f.id = c, u.lastID
		u.byID[f.id] = f
		return nil
	}
	c, err := net.DialUDP("udp", nil, net.UDPAddrFromAddrPort(f.b.addr))
	if err != nil {
		return err
	}
	c.SetReadBuffer(buf)
	c.SetWriteBuffer(buf)
	f.conn, f.pc = c, newBatchConn(c)
	return nil
}

// errLocal marks a flow's socket that failed for a reason of this host's.
var errLocal = errors.New("flow socket")

// localFailure reports whether err opening a flow's socket is this host's (descriptor or
// memory limits, the epoll set) rather than a sign of the backend's health.
func localFailure(err error) bool {
	for _, e := range []error{errLocal, syscall.EMFILE, syscall.ENFILE, syscall.ENOBUFS, syscall.ENOMEM} {
		if errors.Is(err, e) {
			return true
		}
	}
	return false
}

// flowByID returns the raw flow with id, or nil once it has ended.
func (u *udpListener) flowByID(id uint64) *flow {
	u.mu.Lock()
	f := u.byID[id]
	u.mu.Unlock()
	return f
}

// backendError ends the flow after its backend socket reported err (an ICMP port unreachable
// surfaces as ECONNREFUSED), which is also a passive health signal.
func (f *flow) backendError(err error) {
	f.u.l.m.err("udp_backend")
	f.u.s.opts.Passive(f.b.name, f.b.addr, err)
	f.end("backend_error")
}

// countOut accounts k datagrams of bytes sent back to the client.
func (f *flow) countOut(k int, bytes int64) {
	l := f.u.l
	f.last.Store(f.u.s.opts.Now().UnixNano())
	f.out.Add(bytes)
	l.m.pktOut.Add(float64(k))
	l.m.bytesOut.Add(float64(bytes))
	f.b.m.bytesOut.Add(float64(bytes))
}

// replies forwards the backend's datagrams to the client from the listening socket, so the
// client sees them come from the address it sent to.
func (f *flow) replies() {
	s, l := f.u.s, f.u.l
	defer s.wg.Done()
	rc, err := f.conn.SyscallConn()
	if err != nil {
		return
	}
	for {
		if err := waitDatagram(rc); err != nil {
			if !errors.Is(err, net.ErrClosed) && !f.closed.Load() {
				f.backendError(err)
			}
			return
		}
		// Buffers are borrowed only while there are datagrams, so idle flows hold none.
		mp := f.u.msgs.Get().(*[]ipv4.Message)
		ms := *mp
		n, err := f.pc.ReadBatch(ms, 0)
		if err != nil {
			f.u.msgs.Put(mp)
			if !errors.Is(err, net.ErrClosed) && !f.closed.Load() {
				f.backendError(err)
			}
			return
		}
		var bytes int64
		k := 0
		for i := range n {
			if ms[i].N > l.cfg.MaxDatagram {
				l.m.err("udp_truncated")
				continue
			}
			full := ms[i].Buffers[0]
			ms[i].Buffers[0], ms[k].Buffers[0] = ms[k].Buffers[0], full[:ms[i].N]
			ms[k].Addr = f.addr
			bytes += int64(ms[i].N)
			k++
		}
		f.countOut(k, bytes)
		writeAll(f.u.pc, ms[:k])
		for i := range n {
			ms[i].Buffers[0] = ms[i].Buffers[0][:cap(ms[i].Buffers[0])]
			ms[i].Addr = nil
		}
		f.u.msgs.Put(mp)
	}
}

// end removes the flow from the table, closes its backend socket and logs it.
func (f *flow) end(reason string) {
	u := f.u
	u.mu.Lock()
	if u.flows[f.client] == f {
		delete(u.flows, f.client)
		if u.perClient[f.client.Addr()]--; u.perClient[f.client.Addr()] <= 0 {
			delete(u.perClient, f.client.Addr())
		}
	}
	if f.raw != nil {
		delete(u.byID, f.id)
	}
	u.mu.Unlock()
	if f.closed.Swap(true) {
		return
	}
	if f.raw != nil {
		// Out of the set first: a call in progress on the socket (a send waiting for room)
		// keeps it open past Close, and the replies worker would be told of it meanwhile.
		u.ep.Remove(f.raw)
		f.raw.Close()
	} else {
		f.conn.Close()
	}
	s, l := u.s, u.l
	s.flowCount.Add(-1)
	l.active.Add(-1)
	l.m.flowsActive.Dec()
	f.b.active.Add(-1)
	f.b.m.active.Dec()
	s.accessLog(accessEntry{proto: UDP, listener: l.cfg.Name, client: f.client, zone: f.zone, pool: f.pool,
		backend: f.b.name, in: f.in.Load(), out: f.out.Load(), start: f.start, reason: reason})
}

// expire ends the flows idle for the listener's idle timeout or longer.
func (u *udpListener) expire(now time.Time) {
	idle := u.s.listenerCfg(u.l).IdleTimeout
	var old []*flow
	u.mu.Lock()
	for _, f := range u.flows {
		if now.Sub(time.Unix(0, f.last.Load())) >= idle {
			old = append(old, f)
		}
	}
	u.mu.Unlock()
	for _, f := range old {
		f.end("idle")
	}
}

// dropBackend ends the flows to a backend that went down.
func (u *udpListener) dropBackend(name string) {
	var old []*flow
	u.mu.Lock()
	for _, f := range u.flows {
		if f.b.name == name {
			old = append(old, f)
		}
	}
	u.mu.Unlock()
	for _, f := range old {
		f.end("backend_down")
	}
}

func (u *udpListener) closeFlows(reason string) {
	u.mu.Lock()
	fs := make([]*flow, 0, len(u.flows))
	for _, f := range u.flows {
		fs = append(fs, f)
	}
	u.mu.Unlock()
	for _, f := range fs {
		f.end(reason)
	}
}

func (u *udpListener) close() {
	u.stop.Store(true)
	if u.raw != nil {
		u.raw.Close()
		if u.epOwned.CompareAndSwap(false, true) {
			u.ep.Close() // rawReadLoop never started its replies worker
		}
	} else {
		u.conn.Close()
	}
}
