package health

import (
	"bytes"
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
	tlsRefuse := listenTCP(t) // a TLS stack that answers every ClientHello with an alert
	serveTCP(t, tls.NewListener(tlsRefuse, &tls.Config{GetCertificate: func(*tls.ClientHelloInfo) (*tls.Certificate, error) {
		return nil, errors.New("no certificate for you")
	}}), func(c net.Conn) { c.(*tls.Conn).Handshake() })
	garbage := listenTCP(t) // answers anything with a line that is not TLS
	serveTCP(t, garbage, func(c net.Conn) {
		c.SetDeadline(time.Now().Add(5 * time.Second))
		io.WriteString(c, "HTTP/1.1 400 Bad Request\r\n\r\n")
		io.Copy(io.Discard, c)
	})
	hangUp := listenTCP(t) // accepts and closes at once
	serveTCP(t, hangUp, func(net.Conn) {})
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
		{"a tls port with the name check that never answers times out", addrPort(t, tlsMute.Addr()), Check{Kind: KindTLS, ServerName: "gw.lab.test", VerifyName: true}, ErrTimeout},
		{"a tls hello answered with an alert is a bad reply", addrPort(t, tlsRefuse.Addr()), Check{Kind: KindTLS, ServerName: "gw.lab.test"}, ErrBadReply},
		{"a tls hello answered with garbage is a bad reply", addrPort(t, garbage.Addr()), Check{Kind: KindTLS}, ErrBadReply},
		{"a tls hello to a port that hangs up is down", addrPort(t, hangUp.Addr()), Check{Kind: KindTLS}, errAny},
		{"a tls hello to a closed port is refused", closedPort(t, "tcp"), Check{Kind: KindTLS}, syscall.ECONNREFUSED},
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

func TestClientHelloIsOneHandshakeRecord(t *testing.T) {
	for _, name := range []string{"", "gw.lab.test"} {
		var h helloCache
		b, err := h.get(name)
		if err != nil {
			t.Fatalf("server name %q: %v", name, err)
		}
		if again, _ := h.get(name); &again[0] != &b[0] {
			t.Errorf("server name %q: the hello is made again on the second use", name)
		}
		if b[0] != recordHandshake || b[5] != 1 || 5+(int(b[3])<<8|int(b[4])) != len(b) {
			t.Errorf("server name %q: record % x... of %d bytes is not one ClientHello", name, b[:6], len(b))
		}
		if name != "" && !bytes.Contains(b, []byte(name)) {
			t.Errorf("the hello does not carry the server name %q", name)
		}
	}
}

func TestHelloReply(t *testing.T) {
	ap := netip.MustParseAddrPort("127.0.0.1:443")
	tests := []struct {
		name  string
		reply []byte
		up    bool
	}{
		{"a ServerHello record is up", []byte{0x16, 3, 3, 0, 0x7a, 2, 0}, true},
		{"a TLS 1.0 ServerHello record is up", []byte{0x16, 3, 1, 0, 0x7a, 2, 0}, true},
		{"a handshake record that is not a ServerHello is down", []byte{0x16, 3, 3, 0, 0x7a, 11, 0}, false},
		{"an alert is down", []byte{0x15, 3, 3, 0, 2, 2, 40}, false},
		{"an HTTP answer is down", []byte("HTTP/1.1 400"), false},
		{"a short answer is down", []byte{0x16, 3, 3}, false},
		{"no answer is down", nil, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := helloReply(ap, tt.reply[:min(len(tt.reply), helloReplyLen)])
			if (err == nil) != tt.up || (err != nil && !errors.Is(err, ErrBadReply)) {
				t.Errorf("helloReply(% x) = %v, want up %v", tt.reply, err, tt.up)
			}
		})
	}
}
