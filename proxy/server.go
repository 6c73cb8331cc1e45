package proxy

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/netip"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

// Server runs the listeners of a Config and forwards their connections and flows.
type Server struct {
	opts Options
	log  *slog.Logger
	m    *metrics
	aff  *affinity // nil when affinity is off
	// tcp opens, connects and relays the TCP connections: the raw engine on Linux, the
	// standard library's elsewhere (see tcpEngine).
	tcp  tcpEngine
	bufs copyBufs // buffers of copies through user space
	// rawTCP is the raw engine's state (Linux; empty elsewhere, and unused with the
	// standard engine).
	rawTCP

	state atomic.Pointer[state] // pools and listener settings, swapped by Reload

	lifetime // ends with Close

	mu        sync.Mutex // guards listeners, sessions, conns, perClient, serving, closed, draining
	listeners map[string]*listener
	sessions  map[*session]struct{}
	conns     int
	perClient map[netip.Addr]int
	flowCount atomic.Int64 // UDP flows over all listeners
	idle      *sync.Cond   // on mu; broadcast when conns drops to 0
	serving   bool
	closed    bool
	draining  bool // Shutdown has begun: Reload refuses
}

// state is what Reload replaces.
type state struct {
	cfg       Config
	pools     map[string]*pool
	listeners map[string]*Listener
}

// listener is one open socket.
type listener struct {
	cfg    Listener // address and protocol; routes and pools are read from state
	tcp    tcpAcceptor
	udp    *udpListener
	m      *listenerMetrics
	active atomic.Int64  // connections or flows
	done   chan struct{} // closed when the accept or read loop has returned
}

// lifetime is what a Server's Close ends: its context, and the goroutines it waits for.
type lifetime struct {
	ctx    context.Context // cancelled by Close
	cancel context.CancelFunc
	wg     sync.WaitGroup // accept loops, connection and flow goroutines, the expiry loop
}

// New checks cfg and builds a Server; nothing is opened until Listen.
func New(cfg Config, opts Options) (*Server, error) {
	return newServer(cfg, opts, defaultEngine)
}

// newServer is New with the TCP engine that newEngine makes for the server.
func newServer(cfg Config, opts Options, newEngine func(*Server) (tcpEngine, error)) (*Server, error) {
	cfg.SetDefaults()
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	opts.setDefaults()
	m, err := newMetrics(opts.Registry)
	if err != nil {
		return nil, fmt.Errorf("registering proxy metrics: %w", err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	s := &Server{
		opts: opts, log: opts.Logger.With("component", "proxy"), m: m,
		lifetime:  lifetime{ctx: ctx, cancel: cancel},
		listeners: make(map[string]*listener),
		sessions:  make(map[*session]struct{}),
		perClient: make(map[netip.Addr]int),
	}
	s.idle = sync.NewCond(&s.mu)
	if s.tcp, err = newEngine(s); err != nil {
		cancel()
		return nil, err
	}
	if cfg.AffinityTTL > 0 {
		s.aff = newAffinity(cfg.AffinityTTL, cfg.AffinityMax, opts.Now)
	}
	s.state.Store(s.buildState(cfg, nil))
	return s, nil
}

func (s *Server) buildState(cfg Config, old *state) *state {
	st := &state{cfg: cfg, pools: make(map[string]*pool), listeners: make(map[string]*Listener)}
	for _, p := range cfg.Pools {
		var op *pool
		if old != nil {
			op = old.pools[p.Name]
		}
		st.pools[p.Name] = newPool(p, op, s.m)
	}
	for i := range cfg.Listeners {
		st.listeners[cfg.Listeners[i].Name] = &cfg.Listeners[i]
	}
	return st
}

// Listen opens every listener's socket.
func (s *Server) Listen() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return ErrClosed
	}
	for _, lc := range s.state.Load().cfg.Listeners {
		if _, ok := s.listeners[lc.Name]; ok {
			continue
		}
		l, err := s.open(lc)
		if err != nil {
			return err
		}
		s.listeners[lc.Name] = l
	}
	return nil
}

func (s *Server) open(lc Listener) (*listener, error) {
	l := &listener{cfg: lc, m: s.m.listener(lc.Name), done: make(chan struct{})}
	switch lc.Protocol {
	case UDP:
		u, err := s.listenUDP(l)
		if err != nil {
			return nil, fmt.Errorf("listening on udp %s: %w", lc.Address, err)
		}
		l.udp = u
	default:
		var deferAccept time.Duration
		if lc.DeferAccept {
			deferAccept = lc.HandshakeTimeout
		}
		ln, err := s.tcp.listen(lc.Address, lc.KeepAlive, deferAccept)
		if err != nil {
			return nil, fmt.Errorf("listening on tcp %s: %w", lc.Address, err)
		}
		l.tcp = ln
	}
	return l, nil
}

// Addr returns the bound address of the named listener (useful with port 0), or an invalid
// AddrPort when there is no such open listener.
func (s *Server) Addr(listener string) netip.AddrPort {
	s.mu.Lock()
	defer s.mu.Unlock()
	l, ok := s.listeners[listener]
	if !ok {
		return netip.AddrPort{}
	}
	if l.tcp != nil {
		return l.tcp.Addr()
	}
	return l.udp.local
}

// Serve runs the listeners until ctx is done (then it closes the server) or Close is called.
// It returns nil after a clean stop, or the error that stopped the server on its own (the
// raw TCP engine's poller failing).
func (s *Server) Serve(ctx context.Context) error {
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		return ErrClosed
	}
	if len(s.listeners) == 0 {
		s.mu.Unlock()
		return errors.New("proxy: Serve before Listen")
	}
	s.serving = true
	for _, l := range s.listeners {
		s.startLocked(l)
	}
	s.wg.Add(1)
	go s.expiryLoop()
	s.tcp.start()
	s.mu.Unlock()
	select {
	case <-ctx.Done():
		return s.Close()
	case <-s.ctx.Done():
		return s.tcp.failure() // nil unless the server stopped on its own
	}
}

func (s *Server) startLocked(l *listener) {
	s.wg.Add(1)
	if l.tcp != nil {
		go s.acceptLoop(l)
	} else if l.udp.raw != nil {
		go s.rawReadLoop(l)
	} else {
		go s.readLoop(l)
	}
}

// expiryLoop ends idle UDP flows and drops expired affinity entries.
func (s *Server) expiryLoop() {
	defer s.wg.Done()
	defer func() {
		if r := recover(); r != nil {
			s.log.Error("expiry loop panicked", "panic", r)
		}
	}()
	t := s.opts.NewTicker(time.Second)
	defer t.Stop()
	for {
		select {
		case <-s.ctx.Done():
			return
		case <-t.C():
			s.expire()
		}
	}
}

// expire runs one expiry pass; the expiry loop calls it every second. Quiet TCP connections
// whose halves are parked are ended here (running halves watch their own idle timeout).
func (s *Server) expire() {
	s.aff.sweep()
	now := time.Now()
	var idle []*session
	s.mu.Lock()
	for ss := range s.sessions {
		if t := ss.t; t != nil && t.expired(now) {
			idle = append(idle, ss)
		}
	}
	s.mu.Unlock()
	s.killSessions(idle, errIdle)
	s.mu.Lock()
	ls := make([]*listener, 0, len(s.listeners))
	for _, l := range s.listeners {
		ls = append(ls, l)
	}
	s.mu.Unlock()
	for _, l := range ls {
		if l.udp != nil {
			l.udp.expire(s.opts.Now())
		}
	}
}

// Verdict tells the server that a backend's health changed; up false means it went down
// (a draining backend, which keeps what it carries, is up here). A backend going down loses
// its affinity bindings and its UDP flows (their next datagram opens a flow to an up
// backend); TCP connections already established are left alone.
func (s *Server) Verdict(backend string, up bool) {
	if up {
		return
	}
	s.aff.forget(backend)
	s.mu.Lock()
	ls := make([]*listener, 0, len(s.listeners))
	for _, l := range s.listeners {
		ls = append(ls, l)
	}
	s.mu.Unlock()
	for _, l := range ls {
		if l.udp != nil {
			l.udp.dropBackend(backend)
		}
	}
}

// Reload replaces pools, routes, listener settings, limits and the affinity TTL and bound
// without touching established connections and flows (nor the bindings made; affinity stays
// off if it was off). Listeners new in cfg are opened (and served, if the server is
// serving); listeners gone from cfg, or whose address or protocol changed, stop accepting and
// their connections drain on their own (UDP flows end, since their replies leave from the
// listening socket).
func (s *Server) Reload(cfg Config) error {
	cfg.SetDefaults()
	if err := cfg.Validate(); err != nil {
		return err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return ErrClosed
	}
	if s.draining {
		return ErrDraining
	}
	want := make(map[string]Listener, len(cfg.Listeners))
	for _, lc := range cfg.Listeners {
		want[lc.Name] = lc
		if l, ok := s.listeners[lc.Name]; ok && lc.Address == l.cfg.Address && lc.Protocol == l.cfg.Protocol {
			if changed := socketChanges(l.cfg, lc); len(changed) > 0 {
				return fmt.Errorf("proxy listener %s: %s apply when its socket opens: give it a new address or restart",
					lc.Name, strings.Join(changed, ", "))
			}
		}
	}
	var stop []*listener
	for name, l := range s.listeners {
		if lc, ok := want[name]; !ok || lc.Address != l.cfg.Address || lc.Protocol != l.cfg.Protocol {
			stop = append(stop, l)
			delete(s.listeners, name)
		}
	}
	var opened []*listener
	for _, lc := range cfg.Listeners {
		if _, ok := s.listeners[lc.Name]; ok {
			continue
		}
		l, err := s.open(lc)
		if err != nil {
			for _, o := range opened {
				o.closeSocket()
			}
			for _, l := range stop {
				s.listeners[l.cfg.Name] = l
			}
			return err
		}
		opened = append(opened, l)
	}
	s.state.Store(s.buildState(cfg, s.state.Load()))
	s.aff.resize(cfg.AffinityTTL, cfg.AffinityMax)
	for _, l := range stop {
		l.closeSocket()
	}
	for _, l := range opened {
		s.listeners[l.cfg.Name] = l
		if s.serving {
			s.startLocked(l)
		}
	}
	s.log.Info("proxy reloaded", "listeners", len(cfg.Listeners), "pools", len(cfg.Pools))
	return nil
}

// socketChanges names the settings of a listener that are read only when its socket opens
// and differ between a and b.
func socketChanges(a, b Listener) []string {
	var changed []string
	for _, c := range []struct {
		name string
		diff bool
	}{
		{"keep_alive", a.KeepAlive != b.KeepAlive},
		{"defer_accept", a.DeferAccept != b.DeferAccept},
		{"socket_buffer", a.SocketBuffer != b.SocketBuffer},
		{"max_datagram", a.MaxDatagram != b.MaxDatagram},
		{"batch", a.Batch != b.Batch},
		{"udp_coalesce", a.UDPCoalesce != b.UDPCoalesce},
	} {
		if c.diff {
			changed = append(changed, c.name)
		}
	}
	return changed
}

func (l *listener) closeSocket() {
	if l.tcp != nil {
		l.tcp.Close()
	} else {
		l.udp.close()
	}
}

// Shutdown drains the server: listeners stop accepting at once, and established connections
// and flows may finish until ctx is done, when the rest are closed. A udp listener keeps its
// socket, which its flows' replies leave from, but opens no new flow; a flow finishes when it
// has been idle for the listener's idle timeout. If it had to cut connections or flows, it
// returns ctx's error, wrapped with how many; if the server stopped on its own meanwhile (the
// raw TCP engine's poller failed), that error.
func (s *Server) Shutdown(ctx context.Context) error {
	s.mu.Lock()
	s.draining = true
	for _, l := range s.listeners {
		if l.udp != nil {
			l.udp.draining.Store(true)
		} else {
			l.closeSocket()
		}
	}
	s.mu.Unlock()
	done := make(chan struct{})
	go func() {
		s.waitSessions()
		close(done)
	}()
	select {
	case <-done:
		s.Close()
		return s.tcp.failure() // set if the server stopped on its own meanwhile
	case <-ctx.Done():
		conns, flows := s.Active()
		s.Close()
		<-done
		return fmt.Errorf("%w: closed %d connections and %d udp flows still open", ctx.Err(), conns, flows)
	}
}

// waitSessions returns when no connection is open, every accept loop has returned and no
// UDP flow is left (or the server is closed).
func (s *Server) waitSessions() {
	s.mu.Lock()
	ls := make([]*listener, 0, len(s.listeners))
	for _, l := range s.listeners {
		if l.tcp != nil {
			ls = append(ls, l)
		}
	}
	serving := s.serving
	s.mu.Unlock()
	if serving {
		for _, l := range ls {
			<-l.done
		}
	}
	s.mu.Lock()
	for s.conns > 0 {
		s.idle.Wait()
	}
	s.mu.Unlock()
	// Flows end one by one as they go idle: look again every 100ms.
	for s.flowCount.Load() > 0 && s.ctx.Err() == nil {
		t := time.NewTimer(100 * time.Millisecond)
		select {
		case <-t.C:
		case <-s.ctx.Done():
			t.Stop()
		}
	}
}

// Close stops everything at once: listeners, connections and flows. It waits for every
// goroutine of the server to return.
func (s *Server) Close() error {
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		s.wg.Wait()
		return nil
	}
	s.closed = true
	s.cancel()
	for _, l := range s.listeners {
		l.closeSocket()
	}
	sessions := make([]*session, 0, len(s.sessions))
	for ss := range s.sessions {
		sessions = append(sessions, ss)
	}
	s.mu.Unlock()
	s.killSessions(sessions, net.ErrClosed)
	s.tcp.stop()
	s.wg.Wait()
	s.tcp.release()
	return nil
}

// Active returns the TCP connections open and the UDP flows alive.
func (s *Server) Active() (conns int, flows int64) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.conns, s.flowCount.Load()
}
