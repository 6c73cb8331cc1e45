package drill

import (
	"errors"
	"io"
	"net"
	"net/netip"
	"sync"
	"sync/atomic"
	"time"
)

// Wire stands between clients and one front door host: it forwards TCP connections and UDP
// datagrams from a public address to the host's inner address, port for port, and injects
// the failures of seed 004: a power-off (Blackhole: nothing answers, nothing is reset —
// connections stay open and every byte and datagram is dropped) and a service down on one port
// (DownPort: the port refuses, its connections are cut).
type Wire struct {
	public, inner netip.Addr

	blackhole atomic.Bool
	holes     sync.Map // uint16 port -> true: blackholed ports
	wg        sync.WaitGroup

	mu    sync.Mutex // guards tcp, udp, conns, down, closed
	tcp   map[uint16]net.Listener
	udp   map[uint16]*net.UDPConn
	conns map[net.Conn]uint16
	down  map[uint16]bool
	flows map[uint16]map[netip.AddrPort]*net.UDPConn

	closed bool
}

// NewWire opens the public side of a wire for the given TCP and UDP ports.
func NewWire(public, inner netip.Addr, tcpPorts, udpPorts []uint16) (*Wire, error) {
	w := &Wire{public: public, inner: inner, tcp: map[uint16]net.Listener{}, udp: map[uint16]*net.UDPConn{},
		conns: map[net.Conn]uint16{}, down: map[uint16]bool{}, flows: map[uint16]map[netip.AddrPort]*net.UDPConn{}}
	for _, p := range tcpPorts {
		if err := w.listenTCP(p); err != nil {
			w.Close()
			return nil, err
		}
	}
	for _, p := range udpPorts {
		c, err := net.ListenUDP("udp", net.UDPAddrFromAddrPort(netip.AddrPortFrom(public, p)))
		if err != nil {
			w.Close()
			return nil, err
		}
		w.udp[p] = c
		w.flows[p] = map[netip.AddrPort]*net.UDPConn{}
	}
	// The UDP ports are served once the maps are whole: serving reads them.
	for p, c := range w.udp {
		w.wg.Add(1)
		go func() { defer w.wg.Done(); w.serveUDP(c, p) }()
	}
	return w, nil
}

func (w *Wire) listenTCP(p uint16) error {
	l, err := net.Listen("tcp", netip.AddrPortFrom(w.public, p).String())
	if err != nil {
		return err
	}
	w.tcp[p] = l
	w.wg.Add(1)
	go func() { defer w.wg.Done(); w.accept(l, p) }()
	return nil
}

// Blackhole turns the power-off of the whole host on or off.
func (w *Wire) Blackhole(on bool) { w.blackhole.Store(on) }

// BlackholePorts powers off the services on some ports only (a gateway on a host whose other
// services stay up).
func (w *Wire) BlackholePorts(ports ...uint16) {
	for _, p := range ports {
		w.holes.Store(p, true)
	}
}

// hole reports whether traffic on port p is dropped.
func (w *Wire) hole(p uint16) bool {
	if w.blackhole.Load() {
		return true
	}
	_, ok := w.holes.Load(p)
	return ok
}

// DownPort stops the service on one TCP port: the port refuses new connections and its open
// connections are cut. UpPort brings it back.
func (w *Wire) DownPort(p uint16) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.down[p] = true
	if l := w.tcp[p]; l != nil {
		l.Close()
		delete(w.tcp, p)
	}
	for c, port := range w.conns {
		if port == p {
			c.Close()
		}
	}
}

// StopUDP stops the service on UDP ports: their sockets close, so the host answers the
// clients' datagrams with port unreachable, and the flows through them end.
func (w *Wire) StopUDP(ports ...uint16) {
	w.mu.Lock()
	defer w.mu.Unlock()
	for _, p := range ports {
		if c := w.udp[p]; c != nil {
			c.Close()
			delete(w.udp, p)
		}
		for from, up := range w.flows[p] {
			up.Close()
			delete(w.flows[p], from)
		}
	}
}

// UpPort reopens a port closed by DownPort.
func (w *Wire) UpPort(p uint16) error {
	w.mu.Lock()
	defer w.mu.Unlock()
	if !w.down[p] || w.closed {
		return nil
	}
	delete(w.down, p)
	return w.listenTCP(p)
}

func (w *Wire) accept(l net.Listener, p uint16) {
	for {
		c, err := l.Accept()
		if err != nil {
			var ne net.Error
			if errors.As(err, &ne) && ne.Timeout() {
				continue
			}
			return
		}
		w.wg.Add(1)
		go func() { defer w.wg.Done(); w.forward(c, p) }()
	}
}

func (w *Wire) track(c net.Conn, p uint16) bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.closed {
		return false
	}
	w.conns[c] = p
	return true
}

func (w *Wire) untrack(c net.Conn) {
	w.mu.Lock()
	delete(w.conns, c)
	w.mu.Unlock()
}

func (w *Wire) forward(c net.Conn, p uint16) {
	defer c.Close()
	if !w.track(c, p) {
		return
	}
	defer w.untrack(c)
	if w.hole(p) {
		w.swallow(c)
		return
	}
	up, err := net.DialTimeout("tcp", netip.AddrPortFrom(w.inner, p).String(), time.Second)
	if err != nil {
		return // the host refuses: so does the wire (the client sees a close)
	}
	if !w.track(up, p) {
		up.Close()
		return
	}
	defer w.untrack(up)
	defer up.Close()
	cut := func() { c.Close(); up.Close() }
	done := make(chan struct{}, 2)
	go func() { w.pipe(up, c, p, cut); done <- struct{}{} }()
	go func() { w.pipe(c, up, p, cut); done <- struct{}{} }()
	<-done
	<-done
}

// pipe copies src to dst, dropping everything while the port is blackholed. At src's end it
// passes the half-close on; on an error it cuts both directions. While the port is
// blackholed nothing passes, not even an end: a host that dies behind a powered-off wire
// leaves its peers' connections open and silent until they give up.
func (w *Wire) pipe(dst, src net.Conn, p uint16, cut func()) {
	buf := make([]byte, 32<<10)
	for {
		n, err := src.Read(buf)
		if n > 0 && !w.hole(p) {
			if _, werr := dst.Write(buf[:n]); werr != nil {
				if w.hole(p) {
					continue // dst is the dead host: drop, as the blackhole would
				}
				cut()
				return
			}
		}
		if err != nil {
			if w.hole(p) {
				return // the other direction ends when the client gives up or the wire closes
			}
			if tc, ok := dst.(*net.TCPConn); ok && errors.Is(err, io.EOF) {
				tc.CloseWrite()
				return
			}
			cut()
			return
		}
	}
}

// swallow reads and drops everything until the peer gives up or the wire closes.
func (w *Wire) swallow(c net.Conn) {
	io.Copy(io.Discard, c)
}

func (w *Wire) serveUDP(c *net.UDPConn, p uint16) {
	buf := make([]byte, 64<<10)
	for {
		n, from, err := c.ReadFromUDPAddrPort(buf)
		if err != nil {
			return
		}
		if w.hole(p) {
			continue
		}
		w.mu.Lock()
		up := w.flows[p][from]
		if up == nil && !w.closed {
			up, err = net.DialUDP("udp", nil, net.UDPAddrFromAddrPort(netip.AddrPortFrom(w.inner, p)))
			if err == nil {
				w.flows[p][from] = up
				w.wg.Add(1)
				go func() { defer w.wg.Done(); w.replies(c, up, from, p) }()
			}
		}
		w.mu.Unlock()
		if up != nil {
			up.Write(buf[:n])
		}
	}
}

func (w *Wire) replies(c, up *net.UDPConn, client netip.AddrPort, p uint16) {
	defer func() {
		w.mu.Lock()
		for p, fl := range w.flows {
			if fl[client] == up {
				delete(w.flows[p], client)
			}
		}
		w.mu.Unlock()
		up.Close()
	}()
	buf := make([]byte, 64<<10)
	for {
		n, err := up.Read(buf)
		if err != nil {
			var ne net.Error
			if errors.As(err, &ne) && !ne.Timeout() {
				return
			}
			if errors.Is(err, net.ErrClosed) {
				return
			}
			continue
		}
		if !w.hole(p) {
			c.WriteToUDPAddrPort(buf[:n], client)
		}
	}
}

// Close stops the wire and cuts everything through it.
func (w *Wire) Close() error {
	w.mu.Lock()
	w.closed = true
	for _, l := range w.tcp {
		l.Close()
	}
	for _, c := range w.udp {
		c.Close()
	}
	for c := range w.conns {
		c.Close()
	}
	for _, fl := range w.flows {
		for _, up := range fl {
			up.Close()
		}
	}
	w.mu.Unlock()
	w.wg.Wait()
	return nil
}
