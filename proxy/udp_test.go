package proxy

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/netip"
	"os"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/frontdoor-vdi/frontdoor/internal/testclock"
)

// udpEcho is a loopback UDP server that answers each datagram with name + ":" + payload.
func udpEcho(t *testing.T, name string) netip.AddrPort {
	t.Helper()
	c, err := net.ListenUDP("udp", net.UDPAddrFromAddrPort(loopback))
	if err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		buf := make([]byte, 65535)
		for {
			n, from, err := c.ReadFromUDPAddrPort(buf)
			if err != nil {
				return
			}
			c.WriteToUDPAddrPort(append([]byte(name+":"), buf[:n]...), from)
		}
	}()
	t.Cleanup(func() {
		c.Close()
		wg.Wait()
	})
	return c.LocalAddr().(*net.UDPAddr).AddrPort()
}

func udpClient(t *testing.T) *net.UDPConn {
	t.Helper()
	c, err := net.ListenUDP("udp", net.UDPAddrFromAddrPort(loopback))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

// exchange sends msg to the proxy and returns the reply and where it came from.
func exchange(t *testing.T, c *net.UDPConn, to netip.AddrPort, msg string) (string, netip.AddrPort) {
	t.Helper()
	buf := make([]byte, 70000)
	for attempt := 0; attempt < 5; attempt++ {
		if _, err := c.WriteToUDPAddrPort([]byte(msg), to); err != nil {
			t.Fatal(err)
		}
		c.SetReadDeadline(time.Now().Add(time.Second))
		n, from, err := c.ReadFromUDPAddrPort(buf)
		if err == nil {
			return string(buf[:n]), from
		}
	}
	t.Fatalf("no reply to %q", msg)
	return "", netip.AddrPort{}
}

func udpListenerCfg(pool string) Listener {
	return Listener{Name: "udp", Address: loopback, Protocol: UDP, Pool: pool}
}

// udpMode is how a test's UDP listener is read: through the Go poller, or by a blocking
// worker that coalesces (Options.BlockingUDP, Listener.UDPCoalesce).
type udpMode struct{ blocking bool }

func (m udpMode) opts(o Options) Options {
	o.BlockingUDP = m.blocking
	return o
}

func (m udpMode) listener(l Listener) Listener {
	if m.blocking {
		l.UDPCoalesce = time.Millisecond
	}
	return l
}

// forUDPModes runs test once per udpMode.
func forUDPModes(t *testing.T, test func(t *testing.T, m udpMode)) {
	t.Run("poller", func(t *testing.T) { test(t, udpMode{}) })
	t.Run("blocking", func(t *testing.T) {
		defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(runtime.GOMAXPROCS(0) + UDPWorkers))
		test(t, udpMode{blocking: true})
	})
}

func TestUDPFlowsFromManySourcePorts(t *testing.T) { forUDPModes(t, testUDPFlowsFromManySourcePorts) }

func testUDPFlowsFromManySourcePorts(t *testing.T, m udpMode) {
	a, b := udpEcho(t, "a"), udpEcho(t, "b")
	reg := prometheus.NewRegistry()
	s := startServer(t, Config{
		Listeners: []Listener{m.listener(udpListenerCfg("p"))},
		Pools:     []Pool{{Name: "p", Balance: RoundRobin, Backends: []Backend{{Name: "a", Address: a}, {Name: "b", Address: b}}}},
	}, m.opts(Options{Registry: reg}))
	if got := s.listeners["udp"].udp.raw != nil; got != m.blocking {
		t.Fatalf("listener read by a blocking worker: %v, want %v", got, m.blocking)
	}
	proxy := s.Addr("udp")
	const clients, msgs = 40, 5
	var wg sync.WaitGroup
	errs := make(chan error, clients)
	seen := make([]string, clients)
	for i := range clients {
		c := udpClient(t)
		wg.Add(1)
		go func() {
			defer wg.Done()
			buf := make([]byte, 2000)
			for j := range msgs {
				msg := fmt.Sprintf("c%d-m%d", i, j)
				// Datagrams may be lost under load: resend after a timeout, and skip a
				// late reply to an earlier message.
				var reply string
				var from netip.AddrPort
				for sent := 0; reply == ""; sent++ {
					if sent == 5 {
						errs <- fmt.Errorf("client %d: no reply to %s", i, msg)
						return
					}
					c.WriteToUDPAddrPort([]byte(msg), proxy)
					c.SetReadDeadline(time.Now().Add(2 * time.Second))
					for {
						n, f, err := c.ReadFromUDPAddrPort(buf)
						if err != nil {
							break // lost: send again
						}
						if _, p, _ := bytes.Cut(buf[:n], []byte(":")); string(p) == msg {
							reply, from = string(buf[:n]), f
							break
						}
						// A late reply to an earlier message: keep reading.
					}
				}
				if from != proxy {
					errs <- fmt.Errorf("reply came from %v, want the listening socket %v", from, proxy)
					return
				}
				backend, payload, _ := bytes.Cut([]byte(reply), []byte(":"))
				if string(payload) != msg {
					errs <- fmt.Errorf("client %d got %q for %q", i, reply, msg)
					return
				}
				if seen[i] == "" {
					seen[i] = string(backend)
				} else if seen[i] != string(backend) {
					errs <- fmt.Errorf("client %d moved from %s to %s within its flow", i, seen[i], backend)
					return
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	count := map[string]int{}
	for _, b := range seen {
		count[b]++
	}
	if count["a"] != clients/2 || count["b"] != clients/2 {
		t.Errorf("flows per backend %v, want %d each", count, clients/2)
	}
	if got := gatherValue(t, reg, "frontdoor_proxy_udp_flows_total", nil); got != clients {
		t.Errorf("udp_flows_total = %v, want %d", got, clients)
	}
}

func TestUDPFlowTableIsBoundedAndFlowsExpire(t *testing.T) {
	forUDPModes(t, testUDPFlowTableIsBoundedAndFlowsExpire)
}

func testUDPFlowTableIsBoundedAndFlowsExpire(t *testing.T, m udpMode) {
	be := udpEcho(t, "a")
	clock := testclock.New(time.Unix(1000, 0))
	l := m.listener(udpListenerCfg("p"))
	l.IdleTimeout = time.Minute
	s := startServer(t, Config{
		Listeners: []Listener{l},
		Pools:     []Pool{onePool("p", be)},
		Limits:    Limits{MaxFlows: 2},
	}, m.opts(Options{Now: clock.Now, NewTicker: func(time.Duration) Ticker { return stoppedTicker{} }}))
	proxy := s.Addr("udp")
	c1, c2, c3 := udpClient(t), udpClient(t), udpClient(t)
	exchange(t, c1, proxy, "one")
	exchange(t, c2, proxy, "two")
	// A third flow is over the bound: its datagram is dropped.
	c3.WriteToUDPAddrPort([]byte("three"), proxy)
	c3.SetReadDeadline(time.Now().Add(200 * time.Millisecond))
	if n, _, err := c3.ReadFromUDPAddrPort(make([]byte, 100)); err == nil {
		t.Fatalf("third flow got a %d-byte reply over the bound", n)
	}
	clock.Advance(time.Minute)
	s.expire()
	if n := s.flowCount.Load(); n != 0 {
		t.Fatalf("%d flows left after the idle timeout", n)
	}
	if got, _ := exchange(t, c3, proxy, "three"); got != "a:three" {
		t.Fatalf("got %q after expiry, want a:three", got)
	}
}

type stoppedTicker struct{}

func (stoppedTicker) C() <-chan time.Time { return nil }
func (stoppedTicker) Stop()               {}

func TestUDPFlowMovesWhenItsBackendGoesDown(t *testing.T) {
	forUDPModes(t, testUDPFlowMovesWhenItsBackendGoesDown)
}

func testUDPFlowMovesWhenItsBackendGoesDown(t *testing.T, m udpMode) {
	a, b := udpEcho(t, "a"), udpEcho(t, "b")
	var mu sync.Mutex
	down := map[string]bool{}
	s := startServer(t, Config{
		Listeners: []Listener{m.listener(udpListenerCfg("p"))},
		Pools:     []Pool{{Name: "p", Affinity: true, Backends: []Backend{{Name: "a", Address: a}, {Name: "b", Address: b}}}},
	}, m.opts(Options{Health: HealthFunc(func(n string) bool {
		mu.Lock()
		defer mu.Unlock()
		return !down[n]
	})}))
	c := udpClient(t)
	first, _ := exchange(t, c, s.Addr("udp"), "x")
	name := first[:1]
	mu.Lock()
	down[name] = true
	mu.Unlock()
	s.Verdict(name, false)
	second, _ := exchange(t, c, s.Addr("udp"), "x")
	if second[:1] == name {
		t.Fatalf("flow stayed on %s after it went down", name)
	}
}

// TestUDPOverIPv6AndOversizedDatagrams: an IPv6 listener forwards to an IPv4 backend and
// replies from its own address; a datagram longer than MaxDatagram is dropped and counted,
// and the flow carries on.
func TestUDPOverIPv6AndOversizedDatagrams(t *testing.T) {
	forUDPModes(t, testUDPOverIPv6AndOversizedDatagrams)
}

func testUDPOverIPv6AndOversizedDatagrams(t *testing.T, m udpMode) {
	v6 := netip.MustParseAddrPort("[::1]:0")
	if c, err := net.ListenUDP("udp", net.UDPAddrFromAddrPort(v6)); err != nil {
		t.Skipf("no IPv6 loopback: %v", err)
	} else {
		c.Close()
	}
	be := udpEcho(t, "a")
	reg := prometheus.NewRegistry()
	l := m.listener(udpListenerCfg("p"))
	l.Address, l.MaxDatagram = v6, 600
	s := startServer(t, Config{Listeners: []Listener{l}, Pools: []Pool{onePool("p", be)}}, m.opts(Options{Registry: reg}))
	proxy := s.Addr("udp")
	c, err := net.ListenUDP("udp", net.UDPAddrFromAddrPort(v6))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if got, from := exchange(t, c, proxy, "hello"); got != "a:hello" || from != proxy {
		t.Fatalf("got %q from %v, want a:hello from %v", got, from, proxy)
	}
	c.WriteToUDPAddrPort(make([]byte, 601), proxy)
	if got, _ := exchange(t, c, proxy, "after"); got != "a:after" {
		t.Fatalf("got %q after an oversized datagram", got)
	}
	if got := gatherValue(t, reg, "frontdoor_proxy_errors_total", map[string]string{"reason": "udp_truncated"}); got != 1 {
		t.Errorf("udp_truncated errors = %v, want 1", got)
	}
}

// TestUDPRepliesFromManyFlowsInBursts: backends that answer each datagram with a burst longer
// than a batch reach every client, in order, from the listener's address; a reply longer than
// MaxDatagram is dropped and counted.
func TestUDPRepliesFromManyFlowsInBursts(t *testing.T) {
	forUDPModes(t, testUDPRepliesFromManyFlowsInBursts)
}

func testUDPRepliesFromManyFlowsInBursts(t *testing.T, m udpMode) {
	const burst, clients = 50, 16
	be, err := net.ListenUDP("udp", net.UDPAddrFromAddrPort(loopback))
	if err != nil {
		t.Fatal(err)
	}
	be.SetWriteBuffer(1 << 20)
	done := make(chan struct{})
	go func() {
		defer close(done)
		buf := make([]byte, 2048)
		for {
			n, from, err := be.ReadFromUDPAddrPort(buf)
			if err != nil {
				return
			}
			be.WriteToUDPAddrPort(make([]byte, 700), from) // longer than MaxDatagram
			for i := range burst {
				be.WriteToUDPAddrPort(fmt.Appendf(nil, "%s#%d", buf[:n], i), from)
			}
		}
	}()
	t.Cleanup(func() {
		be.Close()
		<-done
	})
	reg := prometheus.NewRegistry()
	l := m.listener(udpListenerCfg("p"))
	l.Batch, l.MaxDatagram = 8, 600
	s := startServer(t, Config{Listeners: []Listener{l}, Pools: []Pool{onePool("p", be.LocalAddr().(*net.UDPAddr).AddrPort())}},
		m.opts(Options{Registry: reg}))
	proxy := s.Addr("udp")
	var wg sync.WaitGroup
	errs := make(chan error, clients)
	for i := range clients {
		c := udpClient(t)
		c.SetReadBuffer(1 << 20)
		wg.Add(1)
		go func() {
			defer wg.Done()
			msg := fmt.Sprintf("client%d", i)
			if _, err := c.WriteToUDPAddrPort([]byte(msg), proxy); err != nil {
				errs <- err
				return
			}
			buf := make([]byte, 2048)
			for j := range burst {
				c.SetReadDeadline(time.Now().Add(5 * time.Second))
				n, from, err := c.ReadFromUDPAddrPort(buf)
				if want := fmt.Sprintf("%s#%d", msg, j); err != nil || string(buf[:n]) != want || from != proxy {
					errs <- fmt.Errorf("%s: reply %d = %q from %v, %v; want %q from %v", msg, j, buf[:n], from, err, want, proxy)
					return
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	if got := gatherValue(t, reg, "frontdoor_proxy_errors_total", map[string]string{"reason": "udp_truncated"}); got != clients {
		t.Errorf("udp_truncated errors = %v, want %d", got, clients)
	}
}

// TestUDPBackendGoneIsAPassiveSignal: when a backend's port closes, the ICMP port unreachable
// reaches health as a passive signal and ends the flow, whichever side of the flow sees it.
func TestUDPBackendGoneIsAPassiveSignal(t *testing.T) {
	forUDPModes(t, testUDPBackendGoneIsAPassiveSignal)
}

func testUDPBackendGoneIsAPassiveSignal(t *testing.T, m udpMode) {
	be, err := net.ListenUDP("udp", net.UDPAddrFromAddrPort(loopback))
	if err != nil {
		t.Fatal(err)
	}
	addr := be.LocalAddr().(*net.UDPAddr).AddrPort()
	go func() {
		buf := make([]byte, 2048)
		for {
			n, from, err := be.ReadFromUDPAddrPort(buf)
			if err != nil {
				return
			}
			be.WriteToUDPAddrPort(buf[:n], from)
		}
	}()
	reported := make(chan string, 16)
	reg := prometheus.NewRegistry()
	s := startServer(t, Config{Listeners: []Listener{m.listener(udpListenerCfg("p"))}, Pools: []Pool{{Name: "p",
		Backends: []Backend{{Name: "gone", Address: addr}}}}},
		m.opts(Options{Registry: reg, Passive: func(name string, _ netip.AddrPort, err error) {
			select {
			case reported <- fmt.Sprintf("%s: %v", name, err):
			default:
			}
		}}))
	c := udpClient(t)
	if got, _ := exchange(t, c, s.Addr("udp"), "x"); got != "x" {
		t.Fatalf("got %q through the live backend", got)
	}
	be.Close()
	deadline := time.After(5 * time.Second)
	for {
		c.WriteToUDPAddrPort([]byte("y"), s.Addr("udp"))
		select {
		case got := <-reported:
			if !strings.HasPrefix(got, "gone: ") || !strings.Contains(got, "refused") {
				t.Fatalf("passive signal %q, want the backend gone and connection refused", got)
			}
			if n := gatherValue(t, reg, "frontdoor_proxy_errors_total", map[string]string{"reason": "udp_backend"}); n < 1 {
				t.Errorf("udp_backend errors = %v, want at least 1", n)
			}
			return
		case <-deadline:
			t.Fatal("no passive signal after the backend's port closed")
		case <-time.After(50 * time.Millisecond):
		}
	}
}

// TestUDPListenersLeaveNoDescriptors: a udp listener closed before it served, one replaced
// by a reload while its flows carry datagrams, and a server closed with flows open all give
// back every socket and epoll set they opened.
func TestUDPListenersLeaveNoDescriptors(t *testing.T) {
	forUDPModes(t, testUDPListenersLeaveNoDescriptors)
}

func testUDPListenersLeaveNoDescriptors(t *testing.T, m udpMode) {
	be := udpEcho(t, "a")
	base := openFiles(t)
	cfg := Config{Listeners: []Listener{m.listener(udpListenerCfg("p"))}, Pools: []Pool{onePool("p", be)}}
	opts := m.opts(Options{Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})

	s, err := New(cfg, opts)
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Listen(); err != nil {
		t.Fatal(err)
	}
	s.Close()
	waitOpenFiles(t, base, "after a Close before Serve")

	s, err = New(cfg, opts)
	if err != nil {
		t.Fatal(err)
	}
	errc := listenAndServe(t, s)
	var clients []*net.UDPConn
	for range 4 {
		c := udpClient(t)
		if got, _ := exchange(t, c, s.Addr("udp"), "x"); got != "a:x" {
			t.Fatalf("got %q", got)
		}
		clients = append(clients, c)
	}
	// Datagrams keep coming while the listener is replaced and then the server closed.
	stop := make(chan struct{})
	done := make(chan struct{})
	go func() {
		defer close(done)
		for i := 0; i < 100000; i++ {
			select {
			case <-stop:
				return
			default:
			}
			clients[i%len(clients)].WriteToUDPAddrPort([]byte("y"), s.Addr("udp"))
			if i%64 == 63 {
				time.Sleep(time.Millisecond)
			}
		}
	}()
	moved := cfg
	moved.Listeners = []Listener{m.listener(udpListenerCfg("p"))}
	moved.Listeners[0].Name = "udp2"
	if err := s.Reload(moved); err != nil {
		t.Fatal(err)
	}
	c := udpClient(t)
	if got, _ := exchange(t, c, s.Addr("udp2"), "z"); got != "a:z" {
		t.Fatalf("got %q from the new listener", got)
	}
	close(stop)
	<-done
	s.Close()
	if err := <-errc; err != nil {
		t.Fatalf("Serve: %v", err)
	}
	for _, c := range append(clients, c) {
		c.Close()
	}
	waitOpenFiles(t, base, "after a reload and a Close with flows open")
}

// openFiles counts this process's open descriptors.
func openFiles(t *testing.T) int {
	t.Helper()
	fds, err := os.ReadDir("/proc/self/fd")
	if err != nil {
		t.Skipf("no /proc/self/fd: %v", err)
	}
	return len(fds)
}

// waitOpenFiles waits (bounded) until at most base descriptors are open.
func waitOpenFiles(t *testing.T, base int, when string) {
	t.Helper()
	n := openFiles(t)
	for deadline := time.Now().Add(3 * time.Second); n > base && time.Now().Before(deadline); n = openFiles(t) {
		time.Sleep(10 * time.Millisecond)
	}
	if n > base {
		t.Fatalf("%s: %d descriptors open, %d before", when, n, base)
	}
}

func TestUDPFlowsCarryOnThroughADrain(t *testing.T) { forUDPModes(t, testUDPFlowsCarryOnThroughADrain) }

// While the server drains, a udp listener keeps forwarding for the flows it has, from the
// same socket, and opens no new one; the drain ends when the last flow has gone idle.
func testUDPFlowsCarryOnThroughADrain(t *testing.T, m udpMode) {
	be := udpEcho(t, "a")
	clock := testclock.New(time.Unix(1000, 0))
	l := m.listener(udpListenerCfg("p"))
	l.IdleTimeout = time.Minute
	s := startServer(t, Config{Listeners: []Listener{l}, Pools: []Pool{onePool("p", be)}},
		m.opts(Options{Now: clock.Now, NewTicker: func(time.Duration) Ticker { return stoppedTicker{} }}))
	proxy := s.Addr("udp")
	old, late := udpClient(t), udpClient(t)
	exchange(t, old, proxy, "before")

	done := make(chan error, 1)
	go func() { done <- s.Shutdown(context.Background()) }()
	draining := func() bool {
		s.mu.Lock()
		defer s.mu.Unlock()
		return s.listeners["udp"].udp.draining.Load()
	}
	for i := 0; !draining(); i++ {
		if i == 200 {
			t.Fatal("the listener is not draining")
		}
		time.Sleep(5 * time.Millisecond)
	}
	if got, from := exchange(t, old, proxy, "during"); got != "a:during" || from != proxy {
		t.Fatalf("during the drain: got %q from %v, want a:during from %v", got, from, proxy)
	}
	late.WriteToUDPAddrPort([]byte("new"), proxy)
	late.SetReadDeadline(time.Now().Add(300 * time.Millisecond))
	if n, _, err := late.ReadFromUDPAddrPort(make([]byte, 100)); err == nil {
		t.Fatalf("a new flow got a %d-byte reply during the drain", n)
	}
	select {
	case err := <-done:
		t.Fatalf("Shutdown returned %v with a flow alive", err)
	default:
	}
	clock.Advance(time.Minute)
	s.expire()
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("Shutdown = %v", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("Shutdown still waiting after the last flow went idle")
	}
}
