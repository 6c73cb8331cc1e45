package proxy

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"net"
	"net/netip"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/frontdoor-vdi/frontdoor/internal/testbuf"
)

func TestShutdownDrainsThenCuts(t *testing.T) {
	be := startTCP(t, echo)
	s := startServer(t, Config{Listeners: []Listener{tcpListener("l", "p")}, Pools: []Pool{onePool("p", be.addr())}}, Options{})
	addr := s.Addr("l")
	c := dial(t, addr)
	c.Write([]byte("a"))
	io.ReadFull(c, make([]byte, 1))

	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- s.Shutdown(ctx) }()
	// New connections are refused once the listener is closed...
	for i := 0; ; i++ {
		nc, err := net.DialTCP("tcp", nil, net.TCPAddrFromAddrPort(addr))
		if err != nil {
			break
		}
		nc.Close()
		if i == 100 {
			t.Fatal("listener still accepting during drain")
		}
		time.Sleep(5 * time.Millisecond)
	}
	// ...while the established one keeps working.
	c.Write([]byte("b"))
	if _, err := io.ReadFull(c, make([]byte, 1)); err != nil {
		t.Fatalf("established connection broke during drain: %v", err)
	}
	select {
	case err := <-done:
		t.Fatalf("Shutdown returned %v with a connection open", err)
	default:
	}
	cancel() // the deadline passes: the rest is cut
	if err := <-done; !errors.Is(err, context.Canceled) || !strings.Contains(err.Error(), "closed 1 connections") {
		t.Fatalf("Shutdown = %v, want context.Canceled and the one connection it closed", err)
	}
	expectClosed(t, c)
}

func TestShutdownReturnsWhenConnectionsFinish(t *testing.T) {
	be := startTCP(t, echo)
	s := startServer(t, Config{Listeners: []Listener{tcpListener("l", "p")}, Pools: []Pool{onePool("p", be.addr())}}, Options{})
	c := dial(t, s.Addr("l"))
	c.Write([]byte("a"))
	io.ReadFull(c, make([]byte, 1))
	done := make(chan error, 1)
	go func() { done <- s.Shutdown(context.Background()) }()
	c.CloseWrite()
	io.ReadAll(c)
	if err := <-done; err != nil {
		t.Fatalf("Shutdown = %v", err)
	}
}

func TestReloadSwapsPoolsWithoutDroppingSessions(t *testing.T) {
	old, neu := startTCP(t, named("old")), startTCP(t, named("new"))
	cfg := Config{Listeners: []Listener{tcpListener("l", "p")}, Pools: []Pool{onePool("p", old.addr())}}
	s := startServer(t, cfg, Options{})
	c := dial(t, s.Addr("l"))
	if got := readLine(t, c); got != "old" {
		t.Fatalf("got %q", got)
	}
	cfg.Pools = []Pool{onePool("p", neu.addr())}
	cfg.Listeners = append(cfg.Listeners, tcpListener("added", "p"))
	if err := s.Reload(cfg); err != nil {
		t.Fatal(err)
	}
	if got := readLine(t, dial(t, s.Addr("l"))); got != "new" {
		t.Fatalf("after reload got %q, want new", got)
	}
	if got := readLine(t, dial(t, s.Addr("added"))); got != "new" {
		t.Fatalf("added listener got %q, want new", got)
	}
	c.Write([]byte("still\n"))
	if got := readLine(t, c); got != "still" {
		t.Fatalf("established session got %q after reload", got)
	}
	bad := cfg
	bad.Pools = []Pool{{Name: "p", Balance: "random"}}
	if err := s.Reload(bad); err == nil {
		t.Fatal("Reload accepted an unknown balance policy")
	}
}

func TestAccessLogAndMetricsPerConnection(t *testing.T) {
	be := startTCP(t, echo)
	var logs testbuf.Buffer
	reg := prometheus.NewRegistry()
	s := startServer(t, Config{Listeners: []Listener{tcpListener("l", "p")}, Pools: []Pool{onePool("p", be.addr())}},
		Options{Logger: slog.New(slog.NewTextHandler(&logs, nil)), Registry: reg,
			Locator: LocatorFunc(func(netip.Addr) string { return "hq" })})
	c := dial(t, s.Addr("l"))
	c.Write([]byte("hello"))
	c.CloseWrite()
	if got, _ := io.ReadAll(c); string(got) != "hello" {
		t.Fatalf("echo got %q", got)
	}
	c.Close()
	s.Close()
	line := logs.String()
	for _, want := range []string{"msg=closed", "proto=tcp", "listener=l", "zone=hq", "backend=a", "bytes_in=5", "bytes_out=5", "reason=eof"} {
		if !strings.Contains(line, want) {
			t.Errorf("access log %q lacks %q", line, want)
		}
	}
	for _, m := range []struct {
		name   string
		labels map[string]string
		want   float64
	}{
		{"frontdoor_proxy_connections_total", map[string]string{"listener": "l"}, 1},
		{"frontdoor_proxy_connections_active", map[string]string{"listener": "l"}, 0},
		{"frontdoor_proxy_bytes_total", map[string]string{"listener": "l", "direction": "in"}, 5},
		{"frontdoor_proxy_bytes_total", map[string]string{"listener": "l", "direction": "out"}, 5},
		{"frontdoor_proxy_backend_connections_total", map[string]string{"pool": "p", "backend": "a"}, 1},
		{"frontdoor_proxy_backend_bytes_total", map[string]string{"pool": "p", "backend": "a", "direction": "in"}, 5},
	} {
		if got := gatherValue(t, reg, m.name, m.labels); got != m.want {
			t.Errorf("%s%v = %v, want %v", m.name, m.labels, got, m.want)
		}
	}
}

// A reload that comes while the server drains is refused: it would open listeners that take
// new connections, which the drain neither wants nor waits for.
func TestReloadDuringADrainIsRefused(t *testing.T) {
	be := startTCP(t, echo)
	cfg := Config{Listeners: []Listener{tcpListener("l", "p")}, Pools: []Pool{onePool("p", be.addr())}}
	s := startServer(t, cfg, Options{})
	c := dial(t, s.Addr("l"))
	c.Write([]byte("a")) // keeps the drain going
	io.ReadFull(c, make([]byte, 1))
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	done := make(chan error, 1)
	go func() { done <- s.Shutdown(ctx) }()
	for i := 0; ; i++ {
		s.mu.Lock()
		draining := s.draining
		s.mu.Unlock()
		if draining {
			break
		}
		if i == 200 {
			t.Fatal("Shutdown has not begun")
		}
		time.Sleep(5 * time.Millisecond)
	}
	cfg.Listeners = append(cfg.Listeners, tcpListener("l2", "p"))
	if err := s.Reload(cfg); !errors.Is(err, ErrDraining) {
		t.Fatalf("Reload during a drain = %v, want ErrDraining", err)
	}
	if s.Addr("l2").IsValid() {
		t.Fatal("a reload during the drain opened a listener")
	}
	cancel()
	<-done
}

// Settings read only when a listener's socket opens cannot change on a listener that keeps
// its socket: the reload is refused rather than taken and ignored.
func TestReloadRefusesSocketSettingsOfAKeptListener(t *testing.T) {
	be := startTCP(t, echo)
	cfg := Config{Listeners: []Listener{tcpListener("l", "p")}, Pools: []Pool{onePool("p", be.addr())}}
	s := startServer(t, cfg, Options{})
	addr := s.Addr("l")
	changed := cfg
	changed.Listeners = []Listener{tcpListener("l", "p")} // the same address as configured
	changed.Listeners[0].DeferAccept = true
	err := s.Reload(changed)
	if err == nil || !strings.Contains(err.Error(), "defer_accept") {
		t.Fatalf("Reload = %v, want a refusal naming defer_accept", err)
	}
	// Moved to a new address, the listener opens a new socket with the new settings.
	changed.Listeners[0].Address = netip.MustParseAddrPort("127.0.0.2:0")
	if err := s.Reload(changed); err != nil {
		t.Fatal(err)
	}
	if s.Addr("l") == addr {
		t.Fatal("the listener kept its old socket")
	}
	c := dial(t, s.Addr("l"))
	c.Write([]byte("x"))
	if _, err := io.ReadFull(c, make([]byte, 1)); err != nil {
		t.Fatalf("through the reopened listener: %v", err)
	}
}
