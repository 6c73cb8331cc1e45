package gateway

import (
	"bytes"
	"context"
	"crypto/ecdsa"
	"crypto/ed25519"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"io"
	"log/slog"
	"math/big"
	"net"
	"net/http"
	"net/netip"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/frontdoor-vdi/frontdoor/agent"
	"github.com/frontdoor-vdi/frontdoor/internal/siteid"
	"github.com/frontdoor-vdi/frontdoor/internal/testkit"
	"github.com/frontdoor-vdi/frontdoor/pki"
	"github.com/frontdoor-vdi/frontdoor/ticket"
	"github.com/quic-go/quic-go"
)

func TestMain(m *testing.M) { testkit.Main(m) }

// siteCA is the tests' site CA: it issues the gateways' and the machines' certificates.
var siteCA = sync.OnceValue(func() *pki.CA {
	cert, key, err := pki.GenerateCA("gateway-test")
	if err != nil {
		panic(err)
	}
	ca, err := pki.NewCA(cert, key, slog.New(slog.NewTextHandler(io.Discard, nil)))
	if err != nil {
		panic(err)
	}
	return ca
})

// machineTLS makes gateway name's client TLS configs toward machines.
func machineTLS(name, ip string) func() *tls.Config {
	return siteCA().Party(siteid.RoleGateway, name, []netip.Addr{netip.MustParseAddr(ip)}).ClientTLS(nil)
}

// sessions is a Sessions that records events.
type sessions struct {
	mu     sync.Mutex
	active map[string]bool
	events []string
	ch     chan string
}

func newSessions(ids ...string) *sessions {
	s := &sessions{active: map[string]bool{}, ch: make(chan string, 100)}
	for _, id := range ids {
		s.active[id] = true
	}
	return s
}
func (s *sessions) Active(id string) bool { s.mu.Lock(); defer s.mu.Unlock(); return s.active[id] }
func (s *sessions) Connected(_ context.Context, id, gw string) {
	s.ch <- "connected " + id + " " + gw
}
func (s *sessions) Disconnected(_ context.Context, id, gw string) {
	s.ch <- "disconnected " + id + " " + gw
}

func (s *sessions) want(t *testing.T, ev string) {
	t.Helper()
	select {
	case got := <-s.ch:
		if got != ev {
			t.Fatalf("event %q, want %q", got, ev)
		}
	case <-time.After(5 * time.Second):
		t.Fatalf("no event, want %q", ev)
	}
}

func selfSigned(t *testing.T) (*tls.Config, *x509.CertPool) {
	t.Helper()
	key, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "gw"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
		IPAddresses: []net.IP{net.ParseIP("127.0.50.1"), net.ParseIP("127.0.50.2")}, IsCA: true,
		BasicConstraintsValid: true, KeyUsage: x509.KeyUsageDigitalSignature | x509.KeyUsageCertSign}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	cert, _ := x509.ParseCertificate(der)
	pool := x509.NewCertPool()
	pool.AddCert(cert)
	return &tls.Config{Certificates: []tls.Certificate{{Certificate: [][]byte{der}, PrivateKey: key}}}, pool
}

// machine runs the agent's display simulator for vda-1 on 127.0.60.1 and returns its port.
func machine(t *testing.T, pub ed25519.PublicKey) (uint16, func()) {
	t.Helper()
	return machineAt(t, pub, "vda-1", "127.0.60.1")
}

// machineAt runs the display simulator of machine name on ip, with a certificate for ip and
// the addresses in also, and returns its port.
func machineAt(t *testing.T, pub ed25519.PublicKey, name, ip string, also ...string) (uint16, func()) {
	t.Helper()
	addrs := []netip.Addr{netip.MustParseAddr(ip)}
	for _, a := range also {
		addrs = append(addrs, netip.MustParseAddr(a))
	}
	cert, err := siteCA().PartyCertificate(siteid.RoleMachine, name, addrs)
	if err != nil {
		t.Fatal(err)
	}
	id, err := agent.NewIdentity(name, cert, siteCA().Pool())
	if err != nil {
		t.Fatal(err)
	}
	desktop := echoDesktop(t)
	for i := 0; i < 20; i++ {
		l, err := net.Listen("tcp", ip+":0")
		if err != nil {
			t.Fatal(err)
		}
		port := uint16(l.Addr().(*net.TCPAddr).Port)
		l.Close()
		d, err := agent.NewDisplay(agent.DisplayOptions{Machine: name, Address: addrs[0],
			TCPPorts: []uint16{port}, UDPPorts: []uint16{port}, UDPIdle: time.Minute,
			Desktop: agent.Desktop{Protocol: "vnc", Network: "tcp", Address: desktop, Port: port}, EchoDatagrams: true,
			Verifier: ticket.NewVerifier(pub, ticket.NewMemoryLedger(0, nil), nil), Identity: id,
			Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
		if err != nil {
			t.Fatal(err)
		}
		if err := d.Listen(); err != nil {
			continue
		}
		done := make(chan error)
		go func() { done <- d.Serve(context.Background()) }()
		return port, func() { d.Close(); <-done }
	}
	t.Fatal("no free port")
	return 0, nil
}

type rig struct {
	gw     *Gateway
	signer *ticket.Signer
	v      *ticket.Verifier
	pool   *x509.CertPool
	port   uint16
	health uint16
	s      *sessions
	addr   string
}

func start(t *testing.T, name, ip string, port uint16, s *sessions, signer *ticket.Signer, v *ticket.Verifier, tr *Tracker) *rig {
	t.Helper()
	return startHealth(t, name, ip, port, 0, s, signer, v, tr)
}

// startHealth is start with a health port (0: none).
func startHealth(t *testing.T, name, ip string, port, health uint16, s *sessions, signer *ticket.Signer, v *ticket.Verifier, tr *Tracker) *rig {
	t.Helper()
	return startFor(t, "127.0.60.1", name, ip, port, health, s, signer, v, tr)
}

// startFor is startHealth with machine vda-1 reached at machineIP.
func startFor(t *testing.T, machineIP, name, ip string, port, health uint16, s *sessions, signer *ticket.Signer, v *ticket.Verifier, tr *Tracker) *rig {
	t.Helper()
	return startWith(t, machineIP, name, ip, port, health, s, signer, v, tr, nil)
}

// serveGateway builds the gateway of o (track nil: a tracker of its own), opens its sockets
// and serves it until the test ends: gatewaytest.Start, which this package's tests cannot
// import (it imports gateway).
func serveGateway(t *testing.T, o Options, track *Tracker) *Gateway {
	t.Helper()
	g, err := New(o, track)
	if err != nil {
		t.Fatal(err)
	}
	if err := g.Listen(); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- g.Serve(ctx) }()
	t.Cleanup(func() { cancel(); <-done })
	return g
}

// startWith is startFor with the gateway's options changed by edit (nil: none), before New.
func startWith(t *testing.T, machineIP, name, ip string, port, health uint16, s *sessions, signer *ticket.Signer, v *ticket.Verifier, tr *Tracker, edit func(*Options)) *rig {
	t.Helper()
	tlsc, pool := selfSigned(t)
	o := Options{Name: name, Address: netip.MustParseAddr(ip), TCPPorts: []uint16{port}, UDPPorts: []uint16{port}, PlainUDP: true,
		HealthPort: health, TLS: tlsc, MachineTLS: machineTLS(name, ip), Verifier: v, Sessions: s, UDPIdle: 200 * time.Millisecond,
		Machine: func(n string) (netip.Addr, bool) { return netip.MustParseAddr(machineIP), n == "vda-1" },
		Logger:  slog.New(slog.NewTextHandler(io.Discard, nil))}
	if edit != nil {
		edit(&o)
	}
	g := serveGateway(t, o, tr)
	return &rig{gw: g, signer: signer, v: v, pool: pool, port: port, health: health, s: s, addr: ip}
}

func keys(t *testing.T) (*ticket.Signer, *ticket.Verifier, ed25519.PublicKey) {
	_, key, _ := ed25519.GenerateKey(rand.Reader)
	pub := key.Public().(ed25519.PublicKey)
	return ticket.NewSigner(key, nil), ticket.NewVerifier(pub, ticket.NewMemoryLedger(0, nil), nil), pub
}

// startOne runs gateway gw-1 on 127.0.50.1 in front of machine vda-1, for sessions s-1
// and s-2, with a health port if health is set.
func startOne(t *testing.T, health ...bool) (*rig, *sessions) {
	t.Helper()
	signer, v, pub := keys(t)
	port, stop := machine(t, pub)
	t.Cleanup(stop)
	s := newSessions("s-1", "s-2")
	var hp uint16
	if len(health) > 0 && health[0] {
		l, err := net.Listen("tcp", "127.0.50.1:0")
		if err != nil {
			t.Fatal(err)
		}
		hp = uint16(l.Addr().(*net.TCPAddr).Port)
		l.Close()
	}
	return startHealth(t, "gw-1", "127.0.50.1", port, hp, s, signer, v, nil), s
}

// launchTCP opens a TCP channel of session s-1 with a launch ticket and waits for the
// session's connected event.
func (r *rig) launchTCP(t *testing.T) *chanConn {
	t.Helper()
	c, st := r.dialTCP(t, r.issue(t, ticket.Launch, "s-1", "vda-1"))
	if st != ticket.StatusOK {
		t.Fatalf("launch ticket: status %d, want OK", st)
	}
	r.s.want(t, "connected s-1 "+r.gw.o.Name)
	return c
}

func (r *rig) issue(t *testing.T, kind ticket.Kind, session, machine string) string {
	t.Helper()
	return r.issueMode(t, kind, session, machine, ticket.ModeGateway)
}

// issueMode is issue for a session in mode.
func (r *rig) issueMode(t *testing.T, kind ticket.Kind, session, machine, mode string) string {
	t.Helper()
	tok, _, err := r.signer.Issue(ticket.Claims{Kind: kind, Session: session, Machine: machine, Mode: mode,
		Channels: []ticket.Channel{{Port: r.port, Proto: "tcp"}, {Port: r.port, Proto: "udp"}}}, time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	return tok
}

// dialTCP opens a TCP channel and a desktop stream on it, and returns the conn and the
// status byte (StatusDenied too when the machine refused the stream).
func (r *rig) dialTCP(t *testing.T, tok string) (*chanConn, byte) {
	t.Helper()
	c, err := tls.Dial("tcp", netip.AddrPortFrom(netip.MustParseAddr(r.addr), r.port).String(), &tls.Config{RootCAs: r.pool})
	if err != nil {
		t.Fatal(err)
	}
	if err := ticket.WriteFrame(c, tok); err != nil {
		t.Fatal(err)
	}
	var st [1]byte
	c.SetReadDeadline(time.Now().Add(5 * time.Second))
	if _, err := io.ReadFull(c, st[:]); err != nil {
		c.Close()
		return nil, ticket.StatusDenied
	}
	c.SetReadDeadline(time.Time{})
	if st[0] != ticket.StatusOK {
		return &chanConn{Conn: c}, st[0]
	}
	cc, err := openStream(c)
	if err != nil {
		c.Close()
		return nil, ticket.StatusDenied
	}
	return cc, st[0]
}

func TestTCPChannelCarriesDataAfterATicket(t *testing.T) {
	r, s := startOne(t)

	c := r.launchTCP(t)
	echoes(t, c, 4<<20)
	c.Close()
	s.want(t, "disconnected s-1 gw-1")
}

func TestBadTicketsAreDenied(t *testing.T) {
	r, _ := startOne(t)
	otherSigner, _, _ := keys(t)
	forged := (&rig{signer: otherSigner, port: r.port}).issue(t, ticket.Launch, "s-1", "vda-1")
	good := r.issue(t, ticket.Launch, "s-1", "vda-1")
	if c, st := r.dialTCP(t, good); st != ticket.StatusOK {
		t.Fatal("good ticket denied")
	} else {
		c.Close()
	}
	for name, tok := range map[string]string{
		"forged":            forged,
		"replayed":          good,
		"garbage":           "hello",
		"unknown machine":   r.issue(t, ticket.Launch, "s-1", "vda-9"),
		"session not alive": r.issue(t, ticket.Launch, "s-3", "vda-1"),
		"direct-mode":       r.issueMode(t, ticket.Reconnect, "s-2", "vda-1", ticket.ModeDirect), // L8 of the security review
	} {
		if c, st := r.dialTCP(t, tok); st != ticket.StatusDenied {
			c.Close()
			t.Errorf("%s ticket: status %d, want denied", name, st)
		}
	}
}

func TestUDPFlowNeedsATicketAndIdlesOut(t *testing.T) {
	r, s := startOne(t)
	gwAddr := &net.UDPAddr{IP: net.ParseIP("127.0.50.1"), Port: int(r.port)}
	c, err := net.DialUDP("udp", nil, gwAddr)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	buf := make([]byte, 2048)
	// Data before a ticket is dropped without state.
	c.Write([]byte("no ticket"))
	c.Write([]byte(ticket.ProbePayload))
	c.SetReadDeadline(time.Now().Add(2 * time.Second))
	n, err := c.Read(buf)
	if err != nil || string(buf[:n]) != ticket.ProbePayload {
		t.Fatalf("probe answer %q, %v", buf[:n], err)
	}
	if r.gw.Flows() != 0 {
		t.Fatalf("%d flows before any ticket", r.gw.Flows())
	}
	c.Write(ticket.Datagram(r.issue(t, ticket.Launch, "s-1", "vda-1")))
	n, err = c.Read(buf)
	if err != nil || string(buf[:n]) != ticket.UDPReady {
		t.Fatalf("ticket answer %q, %v", buf[:n], err)
	}
	s.want(t, "connected s-1 gw-1")
	for i := 0; i < 100; i++ {
		msg := []byte{byte(i), 1, 2, 3}
		c.Write(msg)
		n, err := c.Read(buf)
		if err != nil || !bytes.Equal(buf[:n], msg) {
			t.Fatalf("datagram %d: %q, %v", i, buf[:n], err)
		}
	}
	s.want(t, "disconnected s-1 gw-1") // idle timeout 200ms
	if r.gw.Flows() != 0 {
		t.Fatalf("%d flows after idle timeout", r.gw.Flows())
	}
}

func TestReconnectThroughAnotherGatewayKeepsTheSessionConnected(t *testing.T) {
	signer, v, pub := keys(t)
	port, stop := machine(t, pub)
	defer stop()
	s := newSessions("s-1")
	tr := NewTracker(s)
	a := start(t, "gw-a", "127.0.50.1", port, s, signer, v, tr)
	b := start(t, "gw-b", "127.0.50.2", port, s, signer, v, tr)
	reconnect := a.issue(t, ticket.Reconnect, "s-1", "vda-1")

	ca, st := a.dialTCP(t, a.issue(t, ticket.Launch, "s-1", "vda-1"))
	if st != ticket.StatusOK {
		t.Fatal("launch denied")
	}
	s.want(t, "connected s-1 gw-a")
	cb, st := b.dialTCP(t, reconnect)
	if st != ticket.StatusOK {
		t.Fatal("reconnect through gw-b denied")
	}
	// gw-a shuts down: its channel is cut, but the session stays connected through gw-b.
	a.gw.Close()
	ca.SetReadDeadline(time.Now().Add(5 * time.Second))
	if _, err := ca.Read(make([]byte, 1)); err == nil {
		t.Fatal("channel through a closed gateway still open")
	}
	ca.Close()
	cb.Write([]byte("still here"))
	got := make([]byte, 10)
	if _, err := io.ReadFull(cb, got); err != nil || string(got) != "still here" {
		t.Fatalf("gw-b channel: %q, %v", got, err)
	}
	select {
	case ev := <-s.ch:
		t.Fatalf("unexpected event %q while gw-b holds a channel", ev)
	default:
	}
	cb.Close()
	s.want(t, "disconnected s-1 gw-b")
}

func TestHealthPortAnswersAndDrains(t *testing.T) {
	signer, v, _ := keys(t)
	tlsc, pool := selfSigned(t)
	l, _ := net.Listen("tcp", "127.0.50.1:0")
	hp := uint16(l.Addr().(*net.TCPAddr).Port)
	l.Close()
	g := serveGateway(t, Options{Name: "gw", Address: netip.MustParseAddr("127.0.50.1"), HealthPort: hp, TLS: tlsc, Verifier: v,
		MachineTLS: machineTLS("gw", "127.0.50.1"), Sessions: newSessions(), Machine: func(string) (netip.Addr, bool) { return netip.Addr{}, false }}, nil)
	_ = signer
	hc := &http.Client{Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool}, DisableKeepAlives: true}}
	url := "https://127.0.50.1:" + itoa(hp) + "/favicon.ico"
	for _, tc := range []struct {
		drain bool
		want  int
	}{{false, 200}, {true, 503}, {false, 200}} {
		g.Drain(tc.drain)
		req, _ := http.NewRequest(http.MethodHead, url, nil)
		resp, err := hc.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != tc.want {
			t.Errorf("drain=%v: HEAD status %d, want %d", tc.drain, resp.StatusCode, tc.want)
		}
	}
}

func itoa(p uint16) string { return big.NewInt(int64(p)).String() }

func TestShutdownKeepsItsSessionsAndTakesNoNewOne(t *testing.T) {
	r, s := startOne(t, true)
	c := r.launchTCP(t)
	gwUDP := &net.UDPAddr{IP: net.ParseIP("127.0.50.1"), Port: int(r.port)}
	u, err := net.DialUDP("udp", nil, gwUDP)
	if err != nil {
		t.Fatal(err)
	}
	defer u.Close()
	buf := make([]byte, 2048)
	u.SetReadDeadline(time.Now().Add(5 * time.Second))
	u.Write(ticket.Datagram(r.issue(t, ticket.Launch, "s-1", "vda-1")))
	if n, err := u.Read(buf); err != nil || string(buf[:n]) != ticket.UDPReady {
		t.Fatalf("ticket answer %q, %v", buf[:n], err)
	}

	done := make(chan error, 1)
	go func() { done <- r.gw.Shutdown(context.Background()) }()
	testkit.WaitFor(t, "the gateway draining", r.gw.drains)
	if st := r.healthStatus(t); st != http.StatusServiceUnavailable {
		t.Fatalf("health while draining: %d, want 503", st)
	}
	// The open flow carries on (within its 200ms idle timeout).
	u.Write([]byte("udp too"))
	if n, err := u.Read(buf); err != nil || string(buf[:n]) != "udp too" {
		t.Fatalf("udp flow while draining: %q, %v", buf[:n], err)
	}
	// The session carried here may open more channels; s-2, new here, may not, and its
	// launch ticket stays unused for another gateway.
	if c2, st := r.dialTCP(t, r.issue(t, ticket.Launch, "s-1", "vda-1")); st != ticket.StatusOK {
		t.Fatal("a new channel of the session carried here was refused while draining")
	} else {
		c2.Close()
	}
	tok2 := r.issue(t, ticket.Launch, "s-2", "vda-1")
	if c2, st := r.dialTCP(t, tok2); st != ticket.StatusDenied {
		c2.Close()
		t.Fatal("a new session got a channel while draining")
	}
	if _, err := r.v.Check(tok2, "", ticket.Channel{Port: r.port, Proto: "tcp"}); err != nil {
		t.Fatalf("the refused launch ticket: %v, want it unused", err)
	}
	// The UDP port answers probes, and opens no flow for the new session.
	u2, err := net.DialUDP("udp", nil, gwUDP)
	if err != nil {
		t.Fatal(err)
	}
	defer u2.Close()
	u2.SetReadDeadline(time.Now().Add(5 * time.Second))
	u2.Write([]byte(ticket.ProbePayload))
	if n, err := u2.Read(buf); err != nil || string(buf[:n]) != ticket.ProbePayload {
		t.Fatalf("probe answer while draining %q, %v", buf[:n], err)
	}
	u2.Write(ticket.Datagram(r.issue(t, ticket.Launch, "s-2", "vda-1")))
	u2.SetReadDeadline(time.Now().Add(300 * time.Millisecond))
	if n, err := u2.Read(buf); err == nil {
		t.Fatalf("a new session's UDP client got %q while draining", buf[:n])
	}
	// The open TCP channel carries on.
	c.SetDeadline(time.Now().Add(5 * time.Second))
	c.Write([]byte("still here"))
	got := make([]byte, 10)
	if _, err := io.ReadFull(c, got); err != nil || string(got) != "still here" {
		t.Fatalf("tcp channel while draining: %q, %v", got, err)
	}
	select {
	case err := <-done:
		t.Fatalf("Shutdown returned %v with channels open", err)
	default:
	}
	// The flow idles out (200ms) and the client closes its channel: the drain ends.
	c.Close()
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("Shutdown: %v", err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("Shutdown did not return once the channels ended")
	}
	s.want(t, "disconnected s-1 gw-1")
	if n := r.gw.Channels(); n != 0 {
		t.Fatalf("%d channels after Shutdown", n)
	}
}

// A gateway without a health port has nothing that says it drains: it goes quiet instead,
// so that its probes find it down, and carries its sessions on.
func TestShutdownWithoutAHealthPortReadsDown(t *testing.T) {
	r, _ := startOne(t)
	c := r.launchTCP(t)
	defer c.Close()
	done := make(chan error, 1)
	go func() { done <- r.gw.Shutdown(context.Background()) }()
	addr := netip.AddrPortFrom(netip.MustParseAddr(r.addr), r.port).String()
	testkit.WaitFor(t, "the TCP port refusing connections while draining", func() bool {
		nc, err := net.DialTimeout("tcp", addr, time.Second)
		if err != nil {
			return true
		}
		nc.Close()
		return false
	})
	u, err := net.DialUDP("udp", nil, &net.UDPAddr{IP: net.ParseIP(r.addr), Port: int(r.port)})
	if err != nil {
		t.Fatal(err)
	}
	defer u.Close()
	u.Write([]byte(ticket.ProbePayload))
	u.SetReadDeadline(time.Now().Add(300 * time.Millisecond))
	if n, err := u.Read(make([]byte, 64)); err == nil {
		t.Fatalf("a probe got %d bytes back from a draining gateway without a health port", n)
	}
	c.SetDeadline(time.Now().Add(5 * time.Second))
	c.Write([]byte("still here"))
	got := make([]byte, 10)
	if _, err := io.ReadFull(c, got); err != nil || string(got) != "still here" {
		t.Fatalf("tcp channel while draining: %q, %v", got, err)
	}
	c.Close()
	if err := <-done; err != nil {
		t.Fatalf("Shutdown: %v", err)
	}
}

// healthStatus is the status of HEAD /favicon.ico on the rig's health port.
func (r *rig) healthStatus(t *testing.T) int {
	t.Helper()
	hc := &http.Client{Timeout: 5 * time.Second, Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: r.pool}, DisableKeepAlives: true}}
	req, _ := http.NewRequest(http.MethodHead, "https://"+net.JoinHostPort(r.addr, itoa(r.health))+"/favicon.ico", nil)
	resp, err := hc.Do(req)
	if err != nil {
		t.Fatalf("health: %v", err)
	}
	resp.Body.Close()
	return resp.StatusCode
}

func TestShutdownCutsWhatIsOpenAtTheDeadline(t *testing.T) {
	r, s := startOne(t)
	c := r.launchTCP(t)
	defer c.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
	defer cancel()
	err := r.gw.Shutdown(ctx)
	if err == nil || !strings.Contains(err.Error(), "cut 1 channels") {
		t.Fatalf("Shutdown at its deadline: %v, want 1 channel cut", err)
	}
	c.SetReadDeadline(time.Now().Add(5 * time.Second))
	if _, err := c.Read(make([]byte, 1)); err == nil {
		t.Fatal("channel still open after the drain's deadline")
	}
	s.want(t, "disconnected s-1 gw-1")
}

// An admin's drain refuses new sessions and keeps the carried ones, until it is lifted.
func TestDrainModeRefusesNewSessionsUntilLifted(t *testing.T) {
	r, _ := startOne(t, true)
	c := r.launchTCP(t)
	defer c.Close()
	r.gw.Drain(true)
	if st := r.healthStatus(t); st != http.StatusServiceUnavailable {
		t.Fatalf("health in drain mode: %d, want 503", st)
	}
	if c2, st := r.dialTCP(t, r.issue(t, ticket.Launch, "s-2", "vda-1")); st != ticket.StatusDenied {
		c2.Close()
		t.Fatal("a new session got a channel in drain mode")
	}
	if c2, st := r.dialTCP(t, r.issue(t, ticket.Launch, "s-1", "vda-1")); st != ticket.StatusOK {
		t.Fatal("the carried session was refused a channel in drain mode")
	} else {
		c2.Close()
	}
	r.gw.Drain(false)
	if st := r.healthStatus(t); st != http.StatusOK {
		t.Fatalf("health after the drain: %d, want 200", st)
	}
	c2, st := r.dialTCP(t, r.issue(t, ticket.Launch, "s-2", "vda-1"))
	if st != ticket.StatusOK {
		t.Fatal("a new session refused after the drain was lifted")
	}
	c2.Close()
}

// Lifting an admin's drain does not undo a shutdown's.
func TestAdminLiftDoesNotReopenAShutdown(t *testing.T) {
	r, _ := startOne(t, true)
	c := r.launchTCP(t)
	defer c.Close()
	r.gw.Drain(true)
	done := make(chan error, 1)
	go func() { done <- r.gw.Shutdown(context.Background()) }()
	testkit.WaitFor(t, "the gateway shutting down", r.gw.shutting.Load)
	r.gw.Drain(false)
	if st := r.healthStatus(t); st != http.StatusServiceUnavailable {
		t.Fatalf("health of a shutting gateway after an admin's lift: %d, want 503", st)
	}
	if c2, st := r.dialTCP(t, r.issue(t, ticket.Launch, "s-2", "vda-1")); st != ticket.StatusDenied {
		c2.Close()
		t.Fatal("a shutting gateway took a new session after an admin's lift")
	}
	c.Close()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
}

// A gateway's QUIC end in drain mode opens channels for the sessions the gateway carries on
// any of its transports, and for no other.
func TestQUICDrainModeCountsTheGatewaysOtherTransports(t *testing.T) {
	r, _ := startOne(t, true)
	tlsc, pool := selfSigned(t)
	q, err := ListenQUIC(QUICOptions{Name: r.gw.o.Name, Address: net.JoinHostPort(r.addr, "0"), TLS: tlsc, Verifier: r.v,
		MachineTLS: machineTLS(r.gw.o.Name, r.addr),
		Track:      r.gw.track, Logger: slog.New(slog.NewTextHandler(io.Discard, nil)),
		Machine: func(n string) (netip.Addr, bool) { return netip.MustParseAddr("127.0.60.1"), n == "vda-1" }})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	served := make(chan error, 1)
	go func() { served <- q.Serve(ctx) }()
	defer func() { cancel(); <-served; q.Close() }()
	qc, err := quic.DialAddr(ctx, q.Addr().String(), &tls.Config{RootCAs: pool, NextProtos: []string{ticket.QUICALPN}},
		&quic.Config{EnableDatagrams: true})
	if err != nil {
		t.Fatal(err)
	}
	defer qc.CloseWithError(0, "")
	// stream opens a TCP channel over QUIC with tok and returns its status and the stream.
	stream := func(tok string) (byte, *quic.Stream) {
		t.Helper()
		st, err := qc.OpenStreamSync(ctx)
		if err != nil {
			t.Fatal(err)
		}
		st.Write([]byte{ticket.QUICKindTCP, byte(r.port >> 8), byte(r.port)})
		if err := ticket.WriteFrame(st, tok); err != nil {
			t.Fatal(err)
		}
		st.SetReadDeadline(time.Now().Add(5 * time.Second))
		var b [1]byte
		if _, err := io.ReadFull(st, b[:]); err != nil {
			return ticket.StatusDenied, st
		}
		return b[0], st
	}
	c := r.launchTCP(t) // s-1 is carried on the gateway's TLS port
	q.Drain(true)
	st, s1 := stream(r.issue(t, ticket.Launch, "s-1", "vda-1"))
	if st != ticket.StatusOK {
		t.Fatal("in drain mode the QUIC end refused a session the gateway carries on its TLS port")
	}
	s1.Close()
	tok2 := r.issue(t, ticket.Launch, "s-2", "vda-1")
	if st, s := stream(tok2); st != ticket.StatusDenied {
		s.Close()
		t.Fatal("in drain mode the QUIC end took a new session")
	}
	if _, err := r.v.Check(tok2, "", ticket.Channel{Port: r.port, Proto: "tcp"}); err != nil {
		t.Fatalf("the refused ticket: %v, want it unused", err)
	}
	// Once s-1 has no channel left here, it is a new session too.
	c.Close()
	s1.CancelRead(0)
	testkit.WaitFor(t, "s-1 no longer carried once its channels closed", func() bool { return !r.gw.track.carries("s-1", r.gw.o.Name) })
	if st, s := stream(r.issue(t, ticket.Launch, "s-1", "vda-1")); st != ticket.StatusDenied {
		s.Close()
		t.Fatal("in drain mode the QUIC end took a session it no longer carries")
	}
}
