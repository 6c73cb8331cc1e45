package proxy

import (
	"bufio"
	"bytes"
	"crypto/rand"
	"crypto/sha256"
	"crypto/tls"
	"io"
	"log/slog"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/frontdoor-vdi/frontdoor/internal/testbuf"
	"github.com/frontdoor-vdi/frontdoor/proxy/proxyproto"
)

// These tests run the standard engine on every system: it is the only one elsewhere than
// Linux, and on Linux they pick it (newStdEngine) beside the raw default the other tests use.

// startStd builds a Server on the standard engine, listens and serves it; cleanup closes it.
// The access log goes to logs if it is not nil.
func startStd(t *testing.T, cfg Config, logs *testbuf.Buffer) *Server {
	t.Helper()
	var w io.Writer = io.Discard
	if logs != nil {
		w = logs
	}
	s, err := newServer(cfg, Options{Logger: slog.New(slog.NewTextHandler(w, nil))}, newStdEngine)
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := s.tcp.(stdEngine); !ok {
		t.Fatalf("engine %T, want the standard one", s.tcp)
	}
	return serveTest(t, s)
}

func TestStdEngineEchoesALargeTransferIntact(t *testing.T) {
	be := startTCP(t, echo)
	s := startStd(t, Config{Listeners: []Listener{tcpListener("l", "p")}, Pools: []Pool{onePool("p", be.addr())}}, nil)
	c := dial(t, s.Addr("l"))
	src := make([]byte, 8<<20)
	rand.Read(src)
	want := sha256.Sum256(src)
	go func() {
		c.Write(src)
		c.CloseWrite()
	}()
	h := sha256.New()
	n, err := io.Copy(h, c)
	if err != nil || n != int64(len(src)) || !bytes.Equal(h.Sum(nil), want[:]) {
		t.Fatalf("got %d bytes (%v) with sha256 %x, want %d with %x", n, err, h.Sum(nil), len(src), want)
	}
}

func TestStdEngineEndsConnectionsAsTheRawOneDoes(t *testing.T) {
	for _, tc := range []struct {
		name        string
		noHalfClose bool
		backend     func(*net.TCPConn)
		client      func(t *testing.T, c *net.TCPConn)
		reason      string
	}{
		{
			name: "the client's FIN is passed on and the backend answers after it",
			backend: func(c *net.TCPConn) {
				b, _ := io.ReadAll(c)
				c.Write([]byte("got " + string(b)))
				c.CloseWrite()
			},
			client: func(t *testing.T, c *net.TCPConn) {
				c.Write([]byte("question"))
				c.CloseWrite()
				if got, err := io.ReadAll(c); err != nil || string(got) != "got question" {
					t.Fatalf("got %q, %v; want %q", got, err, "got question")
				}
			},
			reason: "eof",
		},
		{
			name:        "without half-close the backend's FIN ends the connection",
			noHalfClose: true,
			backend: func(c *net.TCPConn) {
				b := make([]byte, 64)
				n, _ := c.Read(b)
				c.Write([]byte("answer to " + string(b[:n])))
			},
			client: func(t *testing.T, c *net.TCPConn) {
				c.Write([]byte("question"))
				if got, err := io.ReadAll(c); err != nil || string(got) != "answer to question" {
					t.Fatalf("got %q, %v; want %q and the proxy's FIN", got, err, "answer to question")
				}
			},
			reason: "eof",
		},
		{
			name: "a backend's reset closes the client",
			backend: func(c *net.TCPConn) {
				c.Write([]byte("hello\n"))
				io.ReadFull(c, make([]byte, 4))
				c.SetLinger(0)
			},
			client: func(t *testing.T, c *net.TCPConn) {
				if got := readLine(t, c); got != "hello" {
					t.Fatalf("got %q, want hello", got)
				}
				c.Write([]byte("ping"))
				expectClosed(t, c)
			},
			reason: "backend_error",
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			be := startTCP(t, tc.backend)
			var logs testbuf.Buffer
			l := tcpListener("l", "p")
			l.NoHalfClose = tc.noHalfClose
			s := startStd(t, Config{Listeners: []Listener{l}, Pools: []Pool{onePool("p", be.addr())}}, &logs)
			tc.client(t, dial(t, s.Addr("l")))
			waitLog(t, &logs, "reason="+tc.reason)
		})
	}
}

func TestStdEngineIdleTimeout(t *testing.T) {
	t.Run("a quiet connection is closed and logged as idle", func(t *testing.T) {
		be := startTCP(t, echo)
		var logs testbuf.Buffer
		l := tcpListener("l", "p")
		l.IdleTimeout = 100 * time.Millisecond
		s := startStd(t, Config{Listeners: []Listener{l}, Pools: []Pool{onePool("p", be.addr())}}, &logs)
		c := dial(t, s.Addr("l"))
		c.Write([]byte("x"))
		if _, err := io.ReadFull(c, make([]byte, 1)); err != nil {
			t.Fatal(err)
		}
		start := time.Now()
		expectClosed(t, c)
		if d := time.Since(start); d < 50*time.Millisecond {
			t.Fatalf("closed after %v, before the idle timeout", d)
		}
		waitLog(t, &logs, "reason=idle")
	})
	t.Run("one-way traffic is not idle", func(t *testing.T) {
		be := startTCP(t, func(c *net.TCPConn) {
			for range 12 {
				if _, err := c.Write([]byte("tick\n")); err != nil {
					return
				}
				time.Sleep(20 * time.Millisecond)
			}
			c.CloseWrite()
			io.Copy(io.Discard, c)
		})
		l := tcpListener("l", "p")
		l.IdleTimeout = 60 * time.Millisecond
		s := startStd(t, Config{Listeners: []Listener{l}, Pools: []Pool{onePool("p", be.addr())}}, nil)
		got, err := io.ReadAll(dial(t, s.Addr("l")))
		if err != nil || strings.Count(string(got), "tick") != 12 {
			t.Fatalf("got %q, %v; want 12 ticks", got, err)
		}
	})
}

func TestStdEngineRoutesTLSByServerNameAndSendsTheProxyHeader(t *testing.T) {
	cert := selfSigned(t)
	a, d := tlsBackend(t, "A", cert), tlsBackend(t, "D", cert)
	s := startStd(t, Config{
		Listeners: []Listener{{Name: "tls", Address: loopback, Protocol: TLS, Pool: "default",
			Routes: []Route{{ServerNames: []string{"a.example.com"}, Pool: "pa"}}}},
		Pools: []Pool{onePool("pa", a), onePool("default", d)},
	}, nil)
	for sni, want := range map[string]string{"a.example.com": "A a.example.com", "other.example.org": "D other.example.org"} {
		c := tls.Client(dial(t, s.Addr("tls")), &tls.Config{ServerName: sni, InsecureSkipVerify: true})
		if err := c.Handshake(); err != nil {
			t.Fatal(err)
		}
		if got := readLine(t, c); got != want {
			t.Fatalf("%s: got %q, want %q", sni, got, want)
		}
	}

	headers := make(chan proxyproto.Header, 1)
	be := startTCP(t, func(c *net.TCPConn) {
		br := bufio.NewReader(c)
		h, err := proxyproto.Read(br)
		if err != nil {
			return
		}
		headers <- h
		b := make([]byte, 4)
		io.ReadFull(br, b)
		c.Write(b)
	})
	p := onePool("p", be.addr())
	p.SendProxy = "v2"
	s2 := startStd(t, Config{Listeners: []Listener{tcpListener("l", "p")}, Pools: []Pool{p}}, nil)
	c := dial(t, s2.Addr("l"))
	c.Write([]byte("ping"))
	if _, err := io.ReadFull(c, make([]byte, 4)); err != nil {
		t.Fatal(err)
	}
	h := <-headers
	if want := c.LocalAddr().(*net.TCPAddr).AddrPort(); h.Source != want || h.Destination != s2.Addr("l") {
		t.Fatalf("header %v -> %v, want %v -> %v", h.Source, h.Destination, want, s2.Addr("l"))
	}
}

func TestStdEngineCloseCutsOpenConnections(t *testing.T) {
	be := startTCP(t, echo)
	var logs testbuf.Buffer
	s := startStd(t, Config{Listeners: []Listener{tcpListener("l", "p")}, Pools: []Pool{onePool("p", be.addr())}}, &logs)
	c := dial(t, s.Addr("l"))
	c.Write([]byte("x"))
	if _, err := io.ReadFull(c, make([]byte, 1)); err != nil {
		t.Fatal(err)
	}
	if conns, _ := s.Active(); conns != 1 {
		t.Fatalf("%d connections active, want 1", conns)
	}
	s.Close()
	expectClosed(t, c)
	if conns, _ := s.Active(); conns != 0 {
		t.Fatalf("%d connections active after Close, want 0", conns)
	}
	waitLog(t, &logs, "reason=closed")
}

// waitLog waits for the access log to hold want (a connection's line comes when it ends).
func waitLog(t *testing.T, logs *testbuf.Buffer, want string) {
	t.Helper()
	for i := 0; !strings.Contains(logs.String(), want); i++ {
		if i == 500 {
			t.Fatalf("access log %q lacks %s", logs.String(), want)
		}
		time.Sleep(10 * time.Millisecond)
	}
}
