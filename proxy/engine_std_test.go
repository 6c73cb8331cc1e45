package proxy

import (
	"bufio"
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

// These tests run the standard engine on every system, beside the default one the other tests
// use (on 64-bit Linux the raw engine). The tests of the TCP path that run over both engines
// are in tcp_test.go (eachEngine).

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
