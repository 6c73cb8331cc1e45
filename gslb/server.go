package gslb

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"slices"
	"sync"
	"syscall"
	"time"

	"github.com/frontdoor-vdi/frontdoor/internal/acceptloop"
	"github.com/miekg/dns"
	"golang.org/x/sync/errgroup"
)

// ServerOptions configure the sockets of a Server.
type ServerOptions struct {
	// Address is host:port to listen on. Required.
	Address string
	// Protocols are udp and/or tcp. Default: [udp, tcp].
	Protocols []string
	// Logger logs serve errors. Default: none.
	Logger *slog.Logger
	// TCPIdleTimeout closes an idle TCP connection. Default: 8s.
	TCPIdleTimeout time.Duration
	// MaxTCPQueries is the most queries answered on one TCP connection. Default: 128.
	MaxTCPQueries int
	// BlockingUDP serves UDP with a worker blocked in recvmmsg on a socket kept out of the Go
	// poller (64-bit Linux, Address an IP address; see udp_linux.go). The worker holds a P
	// while it waits, so the process should have one to spare. Default: false
	// (workers wait through the Go poller).
	BlockingUDP bool
	// UDPCoalesce, with BlockingUDP, is how long the worker pauses after answering a batch
	// smaller than a full one before it reads again, so that the queries arriving meanwhile
	// are taken by one wake-up instead of one each (like a network card's interrupt
	// moderation). Under load an answer may wait up to this long; a query that finds the
	// worker idle is answered at once. Only with BlockingUDP and a socket it applies to.
	// Default: 0 (no pause).
	UDPCoalesce time.Duration
}

// Server runs a dns.Handler on UDP and TCP with its own dns.ServeMux.
// Use it as New → Listen → Serve(ctx) → Close.
type Server struct {
	opts ServerOptions
	mux  *dns.ServeMux
	fast fastFunc // the Handler's wire fast path for UDP, nil for other handlers
	log  *slog.Logger

	mu      sync.Mutex // guards pc, raw, ln, cancel, done and closed
	pc      net.PacketConn
	raw     *rawUDP // the UDP socket instead of pc where blocking workers serve (Linux)
	ln      net.Listener
	cancel  context.CancelFunc
	done    chan struct{}
	closed  bool
	serving bool
}

// NewServer returns a Server answering every name with h (h refuses names outside its
// domains).
func NewServer(h dns.Handler, opts ServerOptions) *Server {
	if len(opts.Protocols) == 0 {
		opts.Protocols = []string{"udp", "tcp"}
	}
	if opts.TCPIdleTimeout <= 0 {
		opts.TCPIdleTimeout = 8 * time.Second
	}
	if opts.MaxTCPQueries <= 0 {
		opts.MaxTCPQueries = 128
	}
	log := opts.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	mux := dns.NewServeMux()
	mux.Handle(".", h)
	s := &Server{opts: opts, mux: mux, log: log.With("component", "dns", "address", opts.Address)}
	if gh, ok := h.(*Handler); ok {
		s.fast = gh.fastUDP
	}
	return s
}

// Listen opens the sockets. With port 0 UDP and TCP get the same port.
func (s *Server) Listen() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return net.ErrClosed
	}
	udp, tcp := slices.Contains(s.opts.Protocols, "udp"), slices.Contains(s.opts.Protocols, "tcp")
	if !udp && !tcp {
		return fmt.Errorf("dns listener %s has neither udp nor tcp", s.opts.Address)
	}
	_, port, _ := net.SplitHostPort(s.opts.Address)
	var err error
	for try := 0; try < 20; try++ {
		err = s.listenLocked(udp, tcp)
		// A free UDP port whose TCP twin is taken: with port 0, try another.
		if err == nil || port != "0" || !udp || !tcp || !errors.Is(err, syscall.EADDRINUSE) {
			break
		}
	}
	return err
}

func (s *Server) listenLocked(udp, tcp bool) error {
	addr := s.opts.Address
	if udp {
		var raw *rawUDP
		if s.opts.BlockingUDP {
			var err error
			if raw, err = listenRawUDP(addr); err != nil {
				return err
			}
		}
		if raw != nil {
			s.raw = raw
			addr = raw.Local().String()
		} else {
			pc, err := net.ListenPacket("udp", addr)
			if err != nil {
				return fmt.Errorf("listening on udp %s: %w", addr, err)
			}
			s.pc = pc
			addr = pc.LocalAddr().String()
		}
	}
	if tcp {
		ln, err := net.Listen("tcp", addr)
		if err != nil {
			if s.pc != nil {
				s.pc.Close()
				s.pc = nil
			}
			if s.raw != nil {
				s.raw.Close()
				s.raw = nil
			}
			return fmt.Errorf("listening on tcp %s: %w", addr, err)
		}
		s.ln = acceptloop.Listener(ln) // miekg/dns retries a failed accept at once
	}
	return nil
}

// UDPAddr returns the UDP socket's address, or nil.
func (s *Server) UDPAddr() net.Addr {
	s.mu.Lock()
	defer s.mu.Unlock()
	switch {
	case s.raw != nil:
		return net.UDPAddrFromAddrPort(s.raw.Local())
	case s.pc != nil:
		return s.pc.LocalAddr()
	}
	return nil
}

// TCPAddr returns the TCP socket's address, or nil.
func (s *Server) TCPAddr() net.Addr {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.ln == nil {
		return nil
	}
	return s.ln.Addr()
}

// Serve answers queries until ctx is done or Close is called; both are a clean exit (nil).
func (s *Server) Serve(ctx context.Context) error {
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		return net.ErrClosed
	}
	if s.serving || (s.pc == nil && s.raw == nil && s.ln == nil) {
		s.mu.Unlock()
		return errors.New("dns server: Serve needs one Listen and runs once")
	}
	s.serving = true
	ctx, cancel := context.WithCancel(ctx)
	s.cancel, s.done = cancel, make(chan struct{})
	defer close(s.done)
	var servers []*dns.Server
	var loop *udpLoop
	var udpConn io.Closer
	switch {
	case s.raw != nil:
		loop, udpConn = rawUDPLoop(s.raw, s.mux, s.fast, s.opts.UDPCoalesce, s.log), s.raw
	case s.pc != nil:
		udpConn = s.pc
		if loop = usableUDPLoop(s.pc, s.mux, s.fast, s.log); loop == nil {
			servers = append(servers, &dns.Server{PacketConn: s.pc, Handler: s.mux, UDPSize: maxUDPRequest})
		}
	}
	if s.ln != nil {
		servers = append(servers, &dns.Server{
			Listener: s.ln, Handler: s.mux,
			IdleTimeout:   func() time.Duration { return s.opts.TCPIdleTimeout },
			MaxTCPQueries: s.opts.MaxTCPQueries,
			ReadTimeout:   s.opts.TCPIdleTimeout,
			WriteTimeout:  2 * time.Second,
		})
	}
	s.mu.Unlock()
	defer cancel()

	g, gctx := errgroup.WithContext(ctx)
	if loop != nil {
		for _, w := range loop.workers() {
			g.Go(w)
		}
		g.Go(func() error {
			<-gctx.Done()
			loop.shutdown()
			udpConn.Close() // ends the workers' reads
			return nil
		})
	}
	for _, srv := range servers {
		started := make(chan struct{})
		srv.NotifyStartedFunc = func() { close(started) }
		g.Go(func() error {
			err := srv.ActivateAndServe()
			if err != nil && gctx.Err() == nil && !errors.Is(err, net.ErrClosed) {
				return fmt.Errorf("serving dns: %w", err)
			}
			return nil
		})
		g.Go(func() error {
			select {
			case <-gctx.Done():
			case <-started:
				<-gctx.Done()
			}
			sctx, scancel := context.WithTimeout(context.Background(), 2*time.Second)
			defer scancel()
			select {
			case <-started:
				if err := srv.ShutdownContext(sctx); err != nil {
					s.log.Warn("dns shutdown", "err", err)
				}
			default:
				// Never started: closing the socket ends ActivateAndServe.
				if srv.PacketConn != nil {
					srv.PacketConn.Close()
				}
				if srv.Listener != nil {
					srv.Listener.Close()
				}
			}
			return nil
		})
	}
	err := g.Wait()
	s.mu.Lock()
	s.closeLocked()
	s.mu.Unlock()
	return err
}

// Close stops Serve, waits for it, and closes the sockets.
func (s *Server) Close() error {
	s.mu.Lock()
	s.closed = true
	cancel, done := s.cancel, s.done
	if cancel == nil {
		s.closeLocked()
	}
	s.mu.Unlock()
	if cancel != nil {
		cancel()
		<-done
	}
	return nil
}

func (s *Server) closeLocked() {
	if s.pc != nil {
		s.pc.Close()
	}
	if s.raw != nil {
		s.raw.Close()
	}
	if s.ln != nil {
		s.ln.Close()
	}
}
