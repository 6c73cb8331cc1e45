package proxy

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/netip"
	"os"
	"sync"
	"testing"
	"time"

	"github.com/frontdoor-vdi/frontdoor/internal/testbuf"
	"github.com/frontdoor-vdi/frontdoor/internal/testkit"
)

func TestMain(m *testing.M) {
	if os.Getenv(spliceHelperEnv) != "" {
		os.Exit(runSpliceHelper())
	}
	testkit.Main(m)
}

const spliceHelperEnv = "FRONTDOOR_PROXY_SPLICE_HELPER_BACKEND"

// spliceHelperStdEnv, set, makes the helper's proxy run the standard engine.
const spliceHelperStdEnv = "FRONTDOOR_PROXY_SPLICE_HELPER_STD"

// runSpliceHelper runs a proxy in this (child) process in front of the backend named by the
// environment, prints its address and serves until stdin closes.
func runSpliceHelper() int {
	be, err := netip.ParseAddrPort(os.Getenv(spliceHelperEnv))
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 2
	}
	engine := defaultEngine
	if os.Getenv(spliceHelperStdEnv) != "" {
		engine = newStdEngine
	}
	s, err := newServer(Config{
		Listeners: []Listener{tcpListener("l", "p")},
		Pools:     []Pool{onePool("p", be)},
	}, Options{}, engine)
	if err == nil {
		err = s.Listen()
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 2
	}
	fmt.Println(s.Addr("l"))
	ctx, cancel := context.WithCancel(context.Background())
	go func() {
		io.Copy(io.Discard, os.Stdin)
		cancel()
	}()
	if err := s.Serve(ctx); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	return 0
}

var loopback = netip.MustParseAddrPort("127.0.0.1:0")

// tcpBackend is a loopback TCP server whose handler runs per connection.
type tcpBackend struct {
	ln    *net.TCPListener
	wg    sync.WaitGroup
	mu    sync.Mutex // guards conns
	conns []net.Conn
}

func (b *tcpBackend) addr() netip.AddrPort { return b.ln.Addr().(*net.TCPAddr).AddrPort() }

// startTCP starts a backend; handler gets each connection and must return when it is closed.
func startTCP(t *testing.T, handler func(c *net.TCPConn)) *tcpBackend {
	t.Helper()
	ln, err := net.ListenTCP("tcp", net.TCPAddrFromAddrPort(loopback))
	if err != nil {
		t.Fatal(err)
	}
	b := &tcpBackend{ln: ln}
	b.wg.Add(1)
	go func() {
		defer b.wg.Done()
		for {
			c, err := ln.AcceptTCP()
			if err != nil {
				return
			}
			b.mu.Lock()
			b.conns = append(b.conns, c)
			b.mu.Unlock()
			b.wg.Add(1)
			go func() {
				defer b.wg.Done()
				defer c.Close()
				handler(c)
			}()
		}
	}()
	t.Cleanup(b.close)
	return b
}

func (b *tcpBackend) close() {
	b.ln.Close()
	b.mu.Lock()
	for _, c := range b.conns {
		c.Close()
	}
	b.mu.Unlock()
	b.wg.Wait()
}

// echo copies a connection back to itself and half-closes at EOF.
func echo(c *net.TCPConn) {
	io.Copy(c, c)
	c.CloseWrite()
}

// named answers every connection with its name and a newline, then echoes.
func named(name string) func(*net.TCPConn) {
	return func(c *net.TCPConn) {
		c.Write([]byte(name + "\n"))
		echo(c)
	}
}

// startServer builds, listens and serves a Server; cleanup closes it.
func startServer(t *testing.T, cfg Config, opts Options) *Server {
	t.Helper()
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.NewTextHandler(io.Discard, nil))
	}
	s, err := New(cfg, opts)
	if err != nil {
		t.Fatal(err)
	}
	return serveTest(t, s)
}

// testEngines are the TCP engines that tests of the TCP path run over (eachEngine): the
// system's default and the standard one (the same one, twice, where it is the default).
var testEngines = []struct {
	name string
	new  func(*Server) (tcpEngine, error)
}{{"default", defaultEngine}, {"std", newStdEngine}}

// eachEngine runs f as a subtest over each of testEngines; its start builds a Server on that
// engine, listens and serves it (as startServer does).
func eachEngine(t *testing.T, f func(t *testing.T, start func(Config, Options) *Server)) {
	for _, e := range testEngines {
		t.Run(e.name, func(t *testing.T) {
			f(t, func(cfg Config, opts Options) *Server {
				t.Helper()
				if opts.Logger == nil {
					opts.Logger = slog.New(slog.NewTextHandler(io.Discard, nil))
				}
				s, err := newServer(cfg, opts, e.new)
				if err != nil {
					t.Fatal(err)
				}
				return serveTest(t, s)
			})
		})
	}
}

// logTo is Options whose logger writes to logs.
func logTo(logs *testbuf.Buffer) Options {
	return Options{Logger: slog.New(slog.NewTextHandler(logs, nil))}
}

// serveTest listens and serves s (made by New, perhaps with test settings changed) until the
// test ends.
func serveTest(t *testing.T, s *Server) *Server {
	t.Helper()
	errc := listenAndServe(t, s)
	t.Cleanup(func() {
		s.Close()
		if err := <-errc; err != nil {
			t.Errorf("Serve: %v", err)
		}
	})
	return s
}

// listenAndServe listens and serves s in a goroutine; Serve's result comes on the channel.
func listenAndServe(t *testing.T, s *Server) <-chan error {
	t.Helper()
	if err := s.Listen(); err != nil {
		t.Fatal(err)
	}
	errc := make(chan error, 1)
	go func() { errc <- s.Serve(context.Background()) }()
	return errc
}

func dial(t *testing.T, a netip.AddrPort) *net.TCPConn {
	t.Helper()
	c, err := net.DialTCP("tcp", nil, net.TCPAddrFromAddrPort(a))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	c.SetDeadline(time.Now().Add(10 * time.Second))
	return c
}

// readLine reads up to and including '\n' byte by byte (so nothing after it is consumed).
func readLine(t *testing.T, c net.Conn) string {
	t.Helper()
	var b bytes.Buffer
	one := make([]byte, 1)
	for {
		if _, err := io.ReadFull(c, one); err != nil {
			t.Fatalf("reading line after %q: %v", b.String(), err)
		}
		if one[0] == '\n' {
			return b.String()
		}
		b.WriteByte(one[0])
	}
}

// expectClosed checks that the peer closes c (EOF or reset) without sending data.
func expectClosed(t *testing.T, c net.Conn) {
	t.Helper()
	c.SetReadDeadline(time.Now().Add(5 * time.Second))
	n, err := c.Read(make([]byte, 1))
	if err == nil || errors.Is(err, os.ErrDeadlineExceeded) {
		t.Fatalf("connection still open: read %d bytes, err %v", n, err)
	}
}

func tcpListener(name string, pool string) Listener {
	return Listener{Name: name, Address: loopback, Protocol: TCP, Pool: pool}
}

func onePool(name string, addrs ...netip.AddrPort) Pool {
	p := Pool{Name: name}
	for i, a := range addrs {
		p.Backends = append(p.Backends, Backend{Name: string(rune('a' + i)), Address: a})
	}
	return p
}

// expectRefused checks that a connection to a is refused, reset or closed at once.
func expectRefused(t *testing.T, a netip.AddrPort) {
	t.Helper()
	c, err := net.DialTCP("tcp", nil, net.TCPAddrFromAddrPort(a))
	if err != nil {
		return // reset before the handshake completed on our side
	}
	defer c.Close()
	expectClosed(t, c)
}
