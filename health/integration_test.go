package health

import (
	"context"
	"crypto/tls"
	"errors"
	"net"
	"net/netip"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"
)

// switchUDP answers datagrams unless dropping is set.
type switchUDP struct {
	pc       net.PacketConn
	dropping atomic.Bool
	done     chan struct{}
}

func newSwitchUDP(t *testing.T) *switchUDP {
	t.Helper()
	pc, err := net.ListenPacket("udp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	s := &switchUDP{pc: pc, done: make(chan struct{})}
	go func() {
		defer close(s.done)
		buf := make([]byte, 1500)
		for {
			n, from, err := pc.ReadFrom(buf)
			if err != nil {
				return
			}
			if !s.dropping.Load() {
				pc.WriteTo(buf[:n], from)
			}
		}
	}()
	t.Cleanup(func() { pc.Close(); <-s.done })
	return s
}

// waitEvent reads events until one matches or the deadline passes.
func waitEvent(t *testing.T, evs <-chan Event, what string, match func(Event) bool) Event {
	t.Helper()
	deadline := time.NewTimer(10 * time.Second)
	defer deadline.Stop()
	for {
		select {
		case e := <-evs:
			t.Logf("event %+v", e)
			if match(e) {
				return e
			}
		case <-deadline.C:
			t.Fatalf("no event: %s", what)
		}
	}
}

// TestCheckerAgainstRealListeners stops, blackholes and restarts the ports of a gateway on
// loopback and waits for the verdicts.
func TestCheckerAgainstRealListeners(t *testing.T) {
	cert := testCert(t, "gw.lab.test")
	var tlsMute atomic.Bool // the TLS port accepts but never answers a ClientHello
	tlsLn := listenTCP(t)
	serveTCP(t, tlsLn, func(c net.Conn) {
		if tlsMute.Load() {
			silent(c)
			return
		}
		tls.Server(c, &tls.Config{Certificates: []tls.Certificate{cert}}).Handshake()
	})
	tcpLn := listenTCP(t)
	tcpAddr := addrPort(t, tcpLn.Addr())
	var mu sync.Mutex // guards tcpLn across restarts
	serveTCP(t, tcpLn, func(net.Conn) {})
	udp := newSwitchUDP(t)
	udpAddr := addrPort(t, udp.pc.LocalAddr())

	m := Monitor{Interval: 20 * time.Millisecond, Timeout: 100 * time.Millisecond, Rise: 2, Fall: 2, Jitter: 0.1}
	gw := Target{Name: "gw", Addr: netip.MustParseAddr("127.0.0.1"), Monitor: m, Ports: []Port{
		{ID: TCP(addrPort(t, tlsLn.Addr()).Port()), Check: Check{Kind: KindTLS, ServerName: "gw.lab.test", VerifyName: true}},
		{ID: TCP(tcpAddr.Port())},
		{ID: UDP(udpAddr.Port())},
	}}
	c, err := New([]Target{gw}, Deps{})
	if err != nil {
		t.Fatal(err)
	}
	evs := make(chan Event, 1000)
	c.Subscribe(func(e Event) { evs <- e })
	errc := make(chan error, 1)
	go func() { errc <- c.Run(context.Background()) }()
	defer func() {
		c.Close()
		if err := <-errc; err != nil {
			t.Errorf("Run = %v", err)
		}
	}()
	down := func(p PortID) func(Event) bool {
		return func(e Event) bool { return e.VerdictChanged() && e.To == StateDown && e.Port == p }
	}
	up := func(e Event) bool { return e.VerdictChanged() && e.To == StateUp }

	// Stop the TCP service: refused connects.
	mu.Lock()
	tcpLn.Close()
	mu.Unlock()
	e := waitEvent(t, evs, "down after the tcp listener stopped", down(TCP(tcpAddr.Port())))
	if !errors.Is(e.Err, syscall.ECONNREFUSED) {
		t.Errorf("stopped listener: err %v, want ECONNREFUSED", e.Err)
	}
	if c.Eligible("gw") {
		t.Error("eligible with a required port down")
	}

	// Restart it on the same port.
	ln, err := net.Listen("tcp", tcpAddr.String())
	if err != nil {
		t.Fatalf("restarting the listener: %v", err)
	}
	serveTCP(t, ln, func(net.Conn) {})
	waitEvent(t, evs, "up after the tcp listener restarted", up)

	// Blackhole UDP: silence.
	udp.dropping.Store(true)
	e = waitEvent(t, evs, "down after udp went silent", down(UDP(udpAddr.Port())))
	if !errors.Is(e.Err, ErrTimeout) || e.Latency < m.Timeout/2 {
		t.Errorf("silent udp: err %v latency %v, want a timeout near %v", e.Err, e.Latency, m.Timeout)
	}
	udp.dropping.Store(false)
	waitEvent(t, evs, "up after udp answered again", up)

	// Blackhole TLS: the handshake never completes.
	tlsMute.Store(true)
	e = waitEvent(t, evs, "down after tls went mute", down(TCP(addrPort(t, tlsLn.Addr()).Port())))
	if !errors.Is(e.Err, ErrTimeout) {
		t.Errorf("mute tls: err %v, want a timeout", e.Err)
	}
	st, _ := c.Status("gw")
	if st.Ports[1].State != StateUp || st.Ports[2].State != StateUp {
		t.Errorf("other ports: %+v, want up", st.Ports)
	}
	tlsMute.Store(false)
	waitEvent(t, evs, "up after tls answered again", up)
}
