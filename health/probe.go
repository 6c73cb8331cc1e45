package health

import (
	"bufio"
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/netip"
	"sync"
	"syscall"
	"time"
)

// NetProber runs probes over real sockets. The zero value is ready to use.
type NetProber struct {
	// RootCAs, when set, makes VerifyName checks also verify the chain against the roots it
	// returns at each probe (a site CA that is rotated changes them). Default: nil
	// (VerifyName checks the leaf's name only, as gateways often use an internal CA).
	RootCAs func() *x509.CertPool

	once     sync.Once
	sessions tls.ClientSessionCache // TLS resumption for HTTPS probes, which read the tickets
	hellos   helloCache             // ClientHello records of hello checks, by server name
}

var (
	_ ProbeFunc = (&NetProber{}).Probe
	_ StartFunc = (&NetProber{}).Start
)

// Probe probes addr once with check c; see ProbeFunc.
func (p *NetProber) Probe(ctx context.Context, addr netip.AddrPort, c *Check) error {
	switch c.Kind {
	case KindUDP:
		return asTimeout(ctx, probeUDP(ctx, addr, c))
	case KindTCP, KindTLS, KindHTTP, KindHTTPS:
		return asTimeout(ctx, p.probeTCP(ctx, addr, c))
	}
	return fmt.Errorf("probing %s: check kind %q: %w", addr, c.Kind, ErrInvalidTarget)
}

// Start starts one probe of addr with check c that ends by deadline and returns at once; see
// StartFunc. It runs Probe on a goroutine.
func (p *NetProber) Start(addr netip.AddrPort, c *Check, deadline time.Time, done func(error)) {
	go func() {
		ctx, cancel := context.WithDeadline(context.Background(), deadline)
		defer cancel()
		done(asTimeout(ctx, p.Probe(ctx, addr, c)))
	}()
}

// asTimeout wraps err with ErrTimeout when it comes from a deadline: the socket's (which
// may fire a moment before the context's) or the context's.
func asTimeout(ctx context.Context, err error) error {
	if err == nil || errors.Is(err, ErrTimeout) {
		return err
	}
	var ne net.Error
	if (errors.As(err, &ne) && ne.Timeout()) || errors.Is(err, context.DeadlineExceeded) ||
		errors.Is(ctx.Err(), context.DeadlineExceeded) {
		return fmt.Errorf("%w: %w", ErrTimeout, err)
	}
	return err
}

func (p *NetProber) probeTCP(ctx context.Context, addr netip.AddrPort, c *Check) error {
	// A deadline instead of a cancellable context: dialing with a context that can be
	// cancelled costs a goroutine per connect, and the timeout bounds the dial anyway.
	// No keep-alive: the connection lives for one probe, and each keep-alive option is
	// another system call.
	d := net.Dialer{KeepAlive: -1}
	dctx := context.Background()
	if dl, ok := ctx.Deadline(); ok {
		d.Deadline = dl
	} else {
		dctx = ctx
	}
	raw, err := d.DialContext(dctx, "tcp", addr.String())
	if err != nil {
		return fmt.Errorf("connecting to %s: %w", addr, err)
	}
	tc := raw.(*net.TCPConn)
	// Close with a reset: a prober that leaves TIME_WAIT behind runs out of ports.
	defer tc.Close()
	defer tc.SetLinger(0)
	if c.Kind == KindTCP {
		return nil
	}
	if dl, ok := ctx.Deadline(); ok {
		tc.SetDeadline(dl)
	}
	stop := context.AfterFunc(ctx, func() { tc.SetDeadline(time.Unix(1, 0)) })
	defer stop()
	var conn net.Conn = tc
	if c.Kind == KindTLS && !c.VerifyName {
		hello, err := p.hellos.get(c.ServerName)
		if err != nil {
			return err
		}
		return probeHello(tc, addr, hello)
	}
	if c.Kind == KindTLS || c.Kind == KindHTTPS {
		tlc := tls.Client(tc, p.tlsConfig(c))
		if err := tlc.HandshakeContext(ctx); err != nil {
			return fmt.Errorf("TLS handshake with %s: %w", addr, err)
		}
		conn = tlc
	}
	if c.Kind == KindTLS {
		return nil
	}
	return probeHTTP(conn, addr, c)
}

func (p *NetProber) tlsConfig(c *Check) *tls.Config {
	p.once.Do(func() { p.sessions = tls.NewLRUClientSessionCache(4096) })
	cfg := &tls.Config{
		ServerName:         c.ServerName,
		InsecureSkipVerify: true, // the name (and optionally the chain) is checked below
		ClientSessionCache: p.sessions,
		NextProtos:         []string{"http/1.1"},
		// A probe carries no secret: plain X25519 (no post-quantum hybrid key share, which
		// costs more than the rest of the handshake).
		CurvePreferences: []tls.CurveID{tls.X25519, tls.CurveP256},
	}
	if c.VerifyName {
		name := c.ServerName
		var roots *x509.CertPool
		if p.RootCAs != nil {
			roots = p.RootCAs()
		}
		cfg.VerifyConnection = func(cs tls.ConnectionState) error {
			if len(cs.PeerCertificates) == 0 {
				return errors.New("no certificate")
			}
			leaf := cs.PeerCertificates[0]
			if roots != nil {
				inter := x509.NewCertPool()
				for _, ic := range cs.PeerCertificates[1:] {
					inter.AddCert(ic)
				}
				_, err := leaf.Verify(x509.VerifyOptions{DNSName: name, Roots: roots, Intermediates: inter})
				return err
			}
			return leaf.VerifyHostname(name)
		}
	}
	return cfg
}

// probeHTTP sends one request on conn and checks the status.
func probeHTTP(conn net.Conn, addr netip.AddrPort, c *Check) error {
	host := c.ServerName
	if host == "" {
		host = addr.String()
	}
	req := c.Method + " " + c.Path + " HTTP/1.1\r\nHost: " + host +
		"\r\nUser-Agent: frontdoor-health\r\nConnection: close\r\n\r\n"
	if _, err := conn.Write([]byte(req)); err != nil {
		return fmt.Errorf("sending HTTP request to %s: %w", addr, err)
	}
	resp, err := http.ReadResponse(bufio.NewReaderSize(conn, 1024), &http.Request{Method: c.Method})
	if err != nil {
		return fmt.Errorf("reading HTTP response from %s: %w", addr, err)
	}
	resp.Body.Close()
	switch {
	case resp.StatusCode == c.ExpectStatus:
		return nil
	case resp.StatusCode == http.StatusServiceUnavailable:
		return fmt.Errorf("%s %s on %s answered 503: %w", c.Method, c.Path, addr, ErrDraining)
	}
	return fmt.Errorf("%s %s on %s answered %d, want %d: %w", c.Method, c.Path, addr, resp.StatusCode, c.ExpectStatus, ErrBadReply)
}

// probeUDP sends c.Send on a connected socket and waits for a reply. A connected socket
// sees the ICMP port-unreachable of a closed port as ECONNREFUSED. Each probe opens its own
// socket, so that a late reply can never pass for the answer to a later probe.
func probeUDP(ctx context.Context, addr netip.AddrPort, c *Check) error {
	conn, err := net.DialUDP("udp", nil, net.UDPAddrFromAddrPort(addr))
	if err != nil {
		return fmt.Errorf("opening UDP socket to %s: %w", addr, err)
	}
	defer conn.Close()
	if dl, ok := ctx.Deadline(); ok {
		conn.SetDeadline(dl)
	}
	stop := context.AfterFunc(ctx, func() { conn.SetDeadline(time.Unix(1, 0)) })
	defer stop()
	if _, err := conn.Write(c.Send); err != nil {
		return udpErr(addr, err)
	}
	var buf [1500]byte
	n, err := conn.Read(buf[:])
	if err != nil {
		return udpErr(addr, err)
	}
	if !bytes.HasPrefix(buf[:n], c.Expect) {
		return fmt.Errorf("UDP reply from %s does not start with %q: %w", addr, c.Expect, ErrBadReply)
	}
	return nil
}

func udpErr(addr netip.AddrPort, err error) error {
	if errors.Is(err, syscall.ECONNREFUSED) {
		return fmt.Errorf("UDP probe of %s: %w: %w", addr, ErrPortUnreachable, err)
	}
	var ne net.Error
	if errors.As(err, &ne) && ne.Timeout() {
		return fmt.Errorf("UDP probe of %s: no reply: %w", addr, ErrTimeout)
	}
	return fmt.Errorf("UDP probe of %s: %w", addr, err)
}
