package proxy

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/netip"
	"slices"
	"time"

	"github.com/frontdoor-vdi/frontdoor/proxy/proxyproto"
)

// session is one proxied TCP connection.
type session struct {
	client  tcpConn
	backend tcpConn  // nil until connected
	t       tcpRelay // nil until both directions run
}

// killSessions closes both sockets of each session at once and ends its relay with why.
// Call it without mu held: ending a relay releases its session, which takes mu.
func (s *Server) killSessions(list []*session, why error) {
	type snap struct {
		client, backend tcpConn
		t               tcpRelay
	}
	snaps := make([]snap, 0, len(list))
	s.mu.Lock()
	for _, ss := range list {
		snaps = append(snaps, snap{ss.client, ss.backend, ss.t})
	}
	s.mu.Unlock()
	for _, sn := range snaps {
		if sn.t != nil {
			sn.t.kill(why)
			continue
		}
		sn.client.Close()
		if sn.backend != nil {
			sn.backend.Close()
		}
	}
}

// acceptLoop accepts l's connections and hands each admitted one to handle in a goroutine.
func (s *Server) acceptLoop(l *listener) {
	defer s.wg.Done()
	defer close(l.done)
	var backoff time.Duration
	for {
		c, peer, err := l.tcp.next()
		if err != nil {
			if errors.Is(err, net.ErrClosed) {
				return
			}
			// Out of file descriptors or similar: back off like net/http does.
			backoff = min(max(2*backoff, 5*time.Millisecond), time.Second)
			l.m.err("accept")
			s.log.Warn("accept failed", "listener", l.cfg.Name, "err", err, "retry_in", backoff)
			t := time.NewTimer(backoff)
			select {
			case <-t.C:
			case <-s.ctx.Done():
				t.Stop()
				return
			}
			continue
		}
		backoff = 0
		ss := &session{client: c}
		if reason := s.admit(l, peer.Addr(), ss); reason != "" {
			l.m.err(reason)
			c.resetOnClose()
			c.Close()
			continue
		}
		s.wg.Add(1)
		go s.handle(l, ss, peer)
	}
}

// admit applies the connection limits and registers ss; it returns the refusal reason or "".
func (s *Server) admit(l *listener, client netip.Addr, ss *session) string {
	lim := s.state.Load().cfg.Limits
	lc := s.listenerCfg(l)
	s.mu.Lock()
	defer s.mu.Unlock()
	switch {
	case s.closed:
		return "closed"
	case s.conns >= lim.MaxConns:
		return "limit_global"
	case lc.MaxConns > 0 && l.active.Load() >= int64(lc.MaxConns):
		return "limit_listener"
	case lim.MaxConnsPerClient > 0 && s.perClient[client] >= lim.MaxConnsPerClient:
		return "limit_client"
	}
	s.conns++
	s.perClient[client]++
	s.sessions[ss] = struct{}{}
	l.active.Add(1)
	return ""
}

func (s *Server) release(l *listener, peer netip.AddrPort, ss *session) {
	client := peer.Addr()
	s.mu.Lock()
	defer s.mu.Unlock()
	s.conns--
	if s.perClient[client]--; s.perClient[client] <= 0 {
		delete(s.perClient, client)
	}
	delete(s.sessions, ss)
	l.active.Add(-1)
	if s.conns == 0 {
		s.idle.Broadcast()
	}
}

// listenerCfg returns the current settings of l (Reload may have changed them).
func (s *Server) listenerCfg(l *listener) *Listener {
	if lc, ok := s.state.Load().listeners[l.cfg.Name]; ok {
		return lc
	}
	return &l.cfg
}

// accessEntry is what the access log line of one connection or flow says.
type accessEntry struct {
	proto, listener, sni, zone, pool, backend, reason string
	client, peer                                      netip.AddrPort // peer is the socket's remote end
	in, out                                           int64
	start                                             time.Time
}

func (s *Server) accessLog(e accessEntry) {
	if !s.log.Enabled(context.Background(), slog.LevelInfo) {
		return // spare the attributes' allocations
	}
	s.log.Info("closed", "proto", e.proto, "listener", e.listener, "client", e.client, "zone", e.zone,
		"sni", e.sni, "pool", e.pool, "backend", e.backend, "bytes_in", e.in, "bytes_out", e.out,
		"duration", s.opts.Now().Sub(e.start).Round(time.Microsecond), "reason", e.reason)
}

func (s *Server) handle(l *listener, ss *session, peer netip.AddrPort) {
	defer s.wg.Done()
	l.m.conns.Inc()
	l.m.active.Inc()
	e := accessEntry{proto: l.cfg.Protocol, listener: l.cfg.Name, client: peer, peer: peer, start: s.opts.Now()}
	handedOff := false
	defer func() {
		if !handedOff {
			ss.client.Close()
			l.m.active.Dec()
			s.release(l, peer, ss)
			s.accessLog(e)
		}
	}()
	c := ss.client
	lc := s.listenerCfg(l)
	st := s.state.Load()

	var pending []byte // bytes read while peeking, to send before splicing
	zone, zoneSet := "", false
	trusted := proxyproto.Trusted(lc.ProxyTrusted).Has(peer.Addr())
	poolName := lc.Pool
	if trusted || lc.Protocol == TLS {
		c.SetReadDeadline(time.Now().Add(lc.HandshakeTimeout))
		br := bufio.NewReaderSize(c, max(lc.MaxClientHello, 4096))
		if trusted {
			// The header is needed here (proxyproto.Client has the one rule of every
			// listener that reads them).
			client, h, err := proxyproto.Client(br, e.client, true)
			if err != nil {
				e.reason = "proxy_header"
				l.m.err("proxy_header")
				s.log.Debug("bad proxy header", "listener", l.cfg.Name, "peer", peer, "err", err)
				return
			}
			e.client = client
			if h.Zone != "" {
				zone, zoneSet = h.Zone, true
			}
		}
		if lc.Protocol == TLS {
			name, err := peekServerName(br, lc.MaxClientHello)
			if err != nil {
				e.reason = "client_hello"
				if errors.Is(err, ErrClientHelloTooLarge) {
					e.reason = "client_hello_too_large"
				}
				l.m.err(e.reason)
				s.log.Debug("bad client hello", "listener", l.cfg.Name, "peer", peer, "err", err)
				c.resetOnClose()
				return
			}
			e.sni = name
			poolName = route(lc, name)
			if poolName == "" {
				e.reason = "no_route"
				l.m.err("no_route")
				return
			}
		}
		if n := br.Buffered(); n > 0 {
			b, _ := br.Peek(n)
			pending = b
		}
		c.SetReadDeadline(time.Time{})
	}
	waitFirst := false
	if lc.Protocol == TCP && !trusted {
		// Whatever the client sent already goes with the connect (usually the whole first
		// request; with TCP_DEFER_ACCEPT it is there by definition).
		bp, n, err := c.readNow(&s.bufs)
		if err != nil {
			e.reason = "client_error"
			l.m.err("client_error")
			return
		}
		if bp != nil {
			defer s.bufs.put(bp)
			pending = (*bp)[:n]
			// A short read drained the socket: the in half waits for news before reading.
			waitFirst = n < len(*bp)
		}
	}
	if !zoneSet {
		zone = s.opts.Locator.Zone(e.client.Addr())
	}
	e.zone = zone
	p := st.pools[poolName]
	e.pool = poolName
	var hdr []byte
	if p != nil && (p.cfg.SendProxy == "v1" || p.cfg.SendProxy == "v2") {
		dst, err := c.localAddr()
		if err != nil {
			e.reason = "closed"
			return
		}
		h := proxyproto.Header{Source: e.client, Destination: dst, Zone: zone}
		if p.cfg.SendProxy == "v1" {
			hdr = proxyproto.AppendV1(nil, h)
		} else {
			hdr = proxyproto.AppendV2(nil, h)
		}
	}
	first := pending
	if len(hdr) > 0 {
		first = append(hdr, pending...)
	}
	b, bc, sent, err := s.connect(p, e.client.Addr(), lc.KeepAlive, first)
	if err != nil {
		e.reason = "connect"
		if errors.Is(err, ErrNoBackend) {
			e.reason = "no_backend"
		}
		l.m.err(e.reason)
		c.resetOnClose()
		return
	}
	e.backend = b.name
	s.mu.Lock()
	ss.backend = bc
	closed := s.closed
	s.mu.Unlock()
	if closed {
		bc.Close()
		e.reason = "closed"
		return
	}
	if sent < len(first) {
		if _, err := bc.writeAll(first[sent:]); err != nil {
			e.reason = "backend_write"
			l.m.err("backend_write")
			c.resetOnClose()
			bc.Close()
			return
		}
	}
	if len(pending) > 0 {
		e.in += int64(len(pending))
		l.m.bytesIn.Add(float64(len(pending)))
		b.m.bytesIn.Add(float64(len(pending)))
	}
	b.active.Add(1)
	b.m.conns.Inc()
	b.m.active.Inc()
	handedOff = true
	s.tcp.relay(relayArgs{l: l, ss: ss, b: b, e: e, idle: lc.IdleTimeout, halfClose: !lc.NoHalfClose,
		waitFirst: waitFirst}) // the client-to-backend direction runs in this goroutine
}

// route returns the pool of a server name on a TLS listener.
func route(lc *Listener, name string) string {
	if name != "" {
		for _, r := range lc.Routes {
			for _, pat := range r.ServerNames {
				if matchName(pat, name) {
					return r.Pool
				}
			}
		}
	}
	return lc.Pool
}

// connect dials a backend of p for client and sends first on it (see tcpEngine.dial for the
// count it returns), trying up to Retries other backends after a failure and reporting each
// failure to the passive reporter.
func (s *Server) connect(p *pool, client netip.Addr, keepAlive time.Duration, first []byte) (*backend, tcpConn, int, error) {
	if p == nil {
		return nil, nil, 0, ErrNoBackend
	}
	var tried []*backend
	var lastErr error
	for range p.cfg.Retries + 1 {
		b := s.choose(p, client, tried)
		if b == nil {
			break
		}
		c, sent, err := s.tcp.dial(s.ctx, b.addr, p.cfg.ConnectTimeout, keepAlive, first)
		if err == nil {
			if p.cfg.Affinity {
				s.aff.set(client, b.name)
			}
			return b, c, sent, nil
		}
		lastErr = err
		tried = append(tried, b)
		b.m.fails.Inc()
		if s.ctx.Err() != nil {
			break
		}
		s.opts.Passive(b.name, b.addr, err)
	}
	if lastErr != nil {
		return nil, nil, 0, fmt.Errorf("dialing pool %s: %w", p.cfg.Name, lastErr)
	}
	return nil, nil, 0, ErrNoBackend
}

// choose returns the backend for client: its affinity backend if the pool has affinity and
// that backend is in the pool, up and not yet tried; else the balancing policy's pick among
// the up backends not yet tried.
func (s *Server) choose(p *pool, client netip.Addr, tried []*backend) *backend {
	ok := func(b *backend) bool { return !slices.Contains(tried, b) && s.opts.Health.Up(b.name) }
	if p.cfg.Affinity {
		if name, found := s.aff.get(client); found {
			if b := p.byName(name); b != nil && ok(b) {
				s.m.affinityHits.Inc()
				return b
			}
		}
	}
	return p.pick(client, ok)
}
