package health

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"errors"
	"io"
	"math/big"
	"net"
	"net/http"
	"net/netip"
	"sync"
	"syscall"
	"testing"
	"time"
)

// testCert returns a self-signed certificate for name.
func testCert(t *testing.T, name string) tls.Certificate {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: name}, DNSNames: []string{name},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	return tls.Certificate{Certificate: [][]byte{der}, PrivateKey: key}
}

func addrPort(t *testing.T, a net.Addr) netip.AddrPort {
	t.Helper()
	ap, err := netip.ParseAddrPort(a.String())
	if err != nil {
		t.Fatal(err)
	}
	return ap
}

// serveTCP accepts on ln until it is closed, handing each conn to h.
func serveTCP(t *testing.T, ln net.Listener, h func(net.Conn)) {
	t.Helper()
	var wg sync.WaitGroup
	t.Cleanup(func() { ln.Close(); wg.Wait() })
	wg.Go(func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			wg.Go(func() { defer c.Close(); h(c) })
		}
	})
}

func listenTCP(t *testing.T) net.Listener {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	return ln
}

// silent reads a conn and never answers, until the peer goes away.
func silent(c net.Conn) {
	c.SetDeadline(time.Now().Add(10 * time.Second))
	io.Copy(io.Discard, c)
}

// serveHTTP answers every request on ln with status (over TLS when cert is not nil).
func serveHTTP(t *testing.T, ln net.Listener, status int, cert *tls.Certificate) {
	t.Helper()
	if cert != nil {
		ln = tls.NewListener(ln, &tls.Config{Certificates: []tls.Certificate{*cert}})
	}
	srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { w.WriteHeader(status) })}
	done := make(chan struct{})
	go func() { defer close(done); srv.Serve(ln) }()
	t.Cleanup(func() { srv.Close(); <-done })
}

// serveUDP answers each datagram with reply, or drops it when reply is nil.
func serveUDP(t *testing.T, reply []byte) netip.AddrPort {
	t.Helper()
	pc, err := net.ListenPacket("udp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	go func() {
		defer close(done)
		buf := make([]byte, 1500)
		for {
			_, from, err := pc.ReadFrom(buf)
			if err != nil {
				return
			}
			if reply != nil {
				pc.WriteTo(reply, from)
			}
		}
	}()
	t.Cleanup(func() { pc.Close(); <-done })
	return addrPort(t, pc.LocalAddr())
}

// closedPort returns a loopback port nothing listens on (tcp and udp).
func closedPort(t *testing.T, network string) netip.AddrPort {
	t.Helper()
	var a net.Addr
	if network == "udp" {
		pc, err := net.ListenPacket("udp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		a = pc.LocalAddr()
		pc.Close()
	} else {
		ln := listenTCP(t)
		a = ln.Addr()
		ln.Close()
	}
	return addrPort(t, a)
}

// fullBacklog returns a TCP listener that never accepts and whose accept queue is full, so
// the kernel drops new SYNs: a powered-off host as far as a connect can tell.
func fullBacklog(t *testing.T) netip.AddrPort {
	t.Helper()
	fd, err := syscall.Socket(syscall.AF_INET, syscall.SOCK_STREAM|syscall.SOCK_CLOEXEC, 0)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { syscall.Close(fd) })
	if err := syscall.Bind(fd, &syscall.SockaddrInet4{Addr: [4]byte{127, 0, 0, 1}}); err != nil {
		t.Fatal(err)
	}
	if err := syscall.Listen(fd, 0); err != nil {
		t.Fatal(err)
	}
	sa, err := syscall.Getsockname(fd)
	if err != nil {
		t.Fatal(err)
	}
	ap := netip.AddrPortFrom(netip.AddrFrom4([4]byte{127, 0, 0, 1}), uint16(sa.(*syscall.SockaddrInet4).Port))
	// Fill the queue: connects succeed until it is full, then time out.
	for i := range 8 {
		c, err := net.DialTimeout("tcp", ap.String(), 200*time.Millisecond)
		if err != nil {
			if i == 0 {
				t.Fatalf("first connect to the backlog listener: %v", err)
			}
			return ap
		}
		t.Cleanup(func() { c.Close() })
	}
	t.Fatal("the accept queue never filled")
	return ap
}

func TestNetProber(t *testing.T) {
	cert := testCert(t, "gw.lab.test")

	tcpUp := listenTCP(t)
	serveTCP(t, tcpUp, func(net.Conn) {})
	tlsUp := listenTCP(t)
	serveTCP(t, tls.NewListener(tlsUp, &tls.Config{Certificates: []tls.Certificate{cert}}), func(c net.Conn) {
		c.(*tls.Conn).Handshake()
	})
	tlsMute := listenTCP(t) // accepts, never answers the ClientHello
	serveTCP(t, tlsMute, silent)
	https200, https503, http404 := listenTCP(t), listenTCP(t), listenTCP(t)
	serveHTTP(t, https200, 200, &cert)
	serveHTTP(t, https503, 503, &cert)
	serveHTTP(t, http404, 404, nil)
	udpEcho := serveUDP(t, []byte("frontdoor-ok"))
	udpMute := serveUDP(t, nil)
	blackholed := fullBacklog(t)

	tests := []struct {
		name  string
		addr  netip.AddrPort
		check Check
		want  error // nil for up; a sentinel, or errAny for any failure
	}{
		{"a tcp connect to a listener is up", addrPort(t, tcpUp.Addr()), Check{Kind: KindTCP}, nil},
		{"a tcp connect to a closed port is down", closedPort(t, "tcp"), Check{Kind: KindTCP}, syscall.ECONNREFUSED},
		{"a tcp connect to a full backlog times out", blackholed, Check{Kind: KindTCP}, ErrTimeout},
		{"a tls handshake is up", addrPort(t, tlsUp.Addr()), Check{Kind: KindTLS}, nil},
		{"a tls handshake with the right name is up", addrPort(t, tlsUp.Addr()), Check{Kind: KindTLS, ServerName: "gw.lab.test", VerifyName: true}, nil},
		{"a tls handshake with the wrong name is down", addrPort(t, tlsUp.Addr()), Check{Kind: KindTLS, ServerName: "other.test", VerifyName: true}, errAny},
		{"a tls port that never answers times out", addrPort(t, tlsMute.Addr()), Check{Kind: KindTLS}, ErrTimeout},
		{"https HEAD /favicon.ico answering 200 is up", addrPort(t, https200.Addr()), Check{Kind: KindHTTPS, Method: "HEAD", Path: "/favicon.ico", ExpectStatus: 200}, nil},
		{"https answering 503 is draining", addrPort(t, https503.Addr()), Check{Kind: KindHTTPS, Method: "HEAD", Path: "/", ExpectStatus: 200}, ErrDraining},
		{"http answering 404 is a bad reply", addrPort(t, http404.Addr()), Check{Kind: KindHTTP, Method: "GET", Path: "/", ExpectStatus: 200}, ErrBadReply},
		{"a udp echo is up", udpEcho, Check{Kind: KindUDP, Send: []byte("x")}, nil},
		{"a udp reply with the expected prefix is up", udpEcho, Check{Kind: KindUDP, Send: []byte("x"), Expect: []byte("frontdoor")}, nil},
		{"a udp reply with another prefix is a bad reply", udpEcho, Check{Kind: KindUDP, Send: []byte("x"), Expect: []byte("pcoip")}, ErrBadReply},
		{"udp silence is never up", udpMute, Check{Kind: KindUDP, Send: []byte("x")}, ErrTimeout},
		{"a closed udp port (ICMP port-unreachable) is down", closedPort(t, "udp"), Check{Kind: KindUDP, Send: []byte("x")}, ErrPortUnreachable},
	}
	p := &NetProber{}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
			defer cancel()
			err := p.Probe(ctx, tt.addr, &tt.check)
			switch {
			case tt.want == nil && err != nil:
				t.Fatalf("Probe = %v, want up", err)
			case tt.want == errAny && err == nil, tt.want != nil && tt.want != errAny && !errors.Is(err, tt.want):
				t.Fatalf("Probe = %v, want %v", err, tt.want)
			}
		})
	}
}

var errAny = errors.New("any error")
