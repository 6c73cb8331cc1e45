//go:build linux

package main

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"errors"
	"fmt"
	"io"
	"math/big"
	"net"
	"net/netip"
	"sync"
	"sync/atomic"
	"syscall"
	"time"
)

// lineServer is a TCP listener that writes msg on every connection; Kill closes it (connects
// are refused) and Restart listens on the same port again.
type lineServer struct {
	addr string
	msg  string
	mu   sync.Mutex // guards ln
	ln   net.Listener
	wg   sync.WaitGroup
}

func newLineServer(msg string) (*lineServer, error) {
	s := &lineServer{addr: "127.0.0.1:0", msg: msg}
	if err := s.Restart(); err != nil {
		return nil, err
	}
	s.addr = s.ln.Addr().String()
	return s, nil
}

func (s *lineServer) Port() int { return s.ln.Addr().(*net.TCPAddr).Port }

func (s *lineServer) Restart() error {
	ln, err := net.Listen("tcp", s.addr)
	if err != nil {
		return err
	}
	s.mu.Lock()
	s.ln = ln
	s.mu.Unlock()
	s.wg.Go(func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go func() {
				defer c.Close()
				c.SetDeadline(time.Now().Add(5 * time.Second))
				io.WriteString(c, s.msg+"\n")
			}()
		}
	})
	return nil
}

func (s *lineServer) Kill() {
	s.mu.Lock()
	s.ln.Close()
	s.mu.Unlock()
	s.wg.Wait()
}

// backlogServer accepts (and closes) connections until Blackhole, which stops accepting and
// fills the accept queue (listen backlog 0) so that the kernel drops new SYNs: to a prober a
// powered-off host, packets silently dropped.
type backlogServer struct {
	fd      int
	port    int
	stopped atomic.Bool
	resume  chan struct{}
	parked  chan struct{} // the loop stopped accepting; buffered
	fillers []net.Conn
	done    chan struct{}
}

func newBacklogServer() (*backlogServer, error) {
	fd, err := syscall.Socket(syscall.AF_INET, syscall.SOCK_STREAM|syscall.SOCK_CLOEXEC, 0)
	if err != nil {
		return nil, err
	}
	if err := syscall.Bind(fd, &syscall.SockaddrInet4{Addr: [4]byte{127, 0, 0, 1}}); err != nil {
		return nil, err
	}
	if err := syscall.Listen(fd, 0); err != nil {
		return nil, err
	}
	sa, err := syscall.Getsockname(fd)
	if err != nil {
		return nil, err
	}
	s := &backlogServer{fd: fd, port: sa.(*syscall.SockaddrInet4).Port, resume: make(chan struct{}), parked: make(chan struct{}, 1), done: make(chan struct{})}
	go s.loop()
	return s, nil
}

func (s *backlogServer) loop() {
	defer close(s.done)
	for {
		nfd, _, err := syscall.Accept(s.fd)
		if err != nil {
			if errors.Is(err, syscall.EINTR) || errors.Is(err, syscall.ECONNABORTED) {
				continue
			}
			return
		}
		syscall.Close(nfd)
		if s.stopped.Load() {
			s.parked <- struct{}{}
			<-s.resume
		}
	}
}

// Blackhole stops accepting and fills the queue. It returns the instant from which no
// connect can succeed: the start of the first filler connect that timed out after the accept
// loop parked. Before it parks, the loop may still take a connection that was queued when a
// filler's SYN was dropped, which frees a place in the queue for one more connect (a probe's,
// up to the filler's 100ms timeout after the instant that filler started).
func (s *backlogServer) Blackhole() (time.Time, error) {
	s.stopped.Store(true)
	addr := fmt.Sprintf("127.0.0.1:%d", s.port)
	parked := false
	for range 16 {
		start := time.Now()
		c, err := net.DialTimeout("tcp", addr, 100*time.Millisecond)
		if err == nil {
			s.fillers = append(s.fillers, c)
		} else if parked {
			return start, nil
		}
		if !parked {
			// A connection is queued now (this one or one before it): the loop takes it
			// and parks.
			select {
			case <-s.parked:
				parked = true
			case <-time.After(time.Second):
				return time.Time{}, errors.New("the accept loop did not stop")
			}
		}
	}
	return time.Time{}, errors.New("the accept queue never filled")
}

// Restore drops the fillers and accepts again.
func (s *backlogServer) Restore() {
	for _, c := range s.fillers {
		c.(*net.TCPConn).SetLinger(0)
		c.Close()
	}
	s.fillers = nil
	s.stopped.Store(false)
	select {
	case s.resume <- struct{}{}:
	case <-time.After(100 * time.Millisecond): // the loop was not parked
	}
}

func (s *backlogServer) Close() {
	syscall.Shutdown(s.fd, syscall.SHUT_RDWR)
	syscall.Close(s.fd)
	s.stopped.Store(false)
	select {
	case s.resume <- struct{}{}:
	default:
	}
	select {
	case <-s.done:
	case <-time.After(time.Second):
	}
}

// tlsServer completes TLS handshakes until Mute, after which it accepts connections and
// never answers a ClientHello: a hung TLS service.
type tlsServer struct {
	ln   net.Listener
	mute atomic.Bool
	cfg  *tls.Config
}

// newTLSServer listens on a free port of host.
func newTLSServer(cert tls.Certificate, host netip.Addr) (*tlsServer, error) {
	ln, err := net.Listen("tcp", netip.AddrPortFrom(host, 0).String())
	if err != nil {
		return nil, err
	}
	s := &tlsServer{ln: ln, cfg: &tls.Config{Certificates: []tls.Certificate{cert}}}
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go s.handle(c)
		}
	}()
	return s, nil
}

func (s *tlsServer) Port() int { return s.ln.Addr().(*net.TCPAddr).Port }

func (s *tlsServer) handle(c net.Conn) {
	defer c.Close()
	c.SetDeadline(time.Now().Add(5 * time.Second))
	if s.mute.Load() {
		io.Copy(io.Discard, c)
		return
	}
	tc := tls.Server(c, s.cfg)
	if tc.Handshake() == nil {
		io.Copy(io.Discard, tc)
	}
}

// selfSigned returns a throwaway ECDSA certificate.
func selfSigned(name string) (tls.Certificate, error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return tls.Certificate{}, err
	}
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: name}, DNSNames: []string{name},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(24 * time.Hour),
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		return tls.Certificate{}, err
	}
	return tls.Certificate{Certificate: [][]byte{der}, PrivateKey: key}, nil
}

// udpEcho answers every datagram to a free port of host with its payload.
func udpEcho(host netip.Addr) (net.PacketConn, error) {
	pc, err := net.ListenPacket("udp", netip.AddrPortFrom(host, 0).String())
	if err != nil {
		return nil, err
	}
	go func() {
		buf := make([]byte, 1500)
		for {
			n, from, err := pc.ReadFrom(buf)
			if err != nil {
				return
			}
			pc.WriteTo(buf[:n], from)
		}
	}()
	return pc, nil
}
