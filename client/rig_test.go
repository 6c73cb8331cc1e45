package client

import (
	"context"
	"crypto/ecdsa"
	"crypto/ed25519"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/json"
	"io"
	"log/slog"
	"math/big"
	"net"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/frontdoor-vdi/frontdoor/agent"
	"github.com/frontdoor-vdi/frontdoor/gateway"
	"github.com/frontdoor-vdi/frontdoor/gateway/gatewaytest"
	"github.com/frontdoor-vdi/frontdoor/internal/siteid"
	"github.com/frontdoor-vdi/frontdoor/internal/testkit"
	"github.com/frontdoor-vdi/frontdoor/pki"
	"github.com/frontdoor-vdi/frontdoor/ticket"
	"github.com/miekg/dns"
)

func TestMain(m *testing.M) { testkit.Main(m) }

var quiet = slog.New(slog.NewTextHandler(io.Discard, nil))

// siteCA issues the test machine's and gateways' certificates; clients trust it (testCA).
var siteCA = sync.OnceValue(func() *pki.CA {
	cert, key, err := pki.GenerateCA("client-test")
	if err != nil {
		panic(err)
	}
	ca, err := pki.NewCA(cert, key, quiet)
	if err != nil {
		panic(err)
	}
	return ca
})

// machineTLS makes gateway name's client TLS configs toward the machine.
func machineTLS(name string) func() *tls.Config {
	return siteCA().Party(siteid.RoleGateway, name, nil).ClientTLS(nil)
}

// The loopback addresses of the test site.
const (
	machineIP = "127.0.70.1"
	gwA       = "127.0.71.1"
	gwB       = "127.0.71.2"
	fd1       = "127.0.72.1"
	fd2       = "127.0.72.2"
)

// site is a small loopback site: one machine (the agent's display simulator), gateways in
// front of it, and the keys and certificates they share.
type site struct {
	t      *testing.T
	signer *ticket.Signer
	pub    ed25519.PublicKey
	gwVer  *ticket.Verifier // one ledger for the node's gateways
	tls    *tls.Config
	pool   *x509.CertPool
	port   uint16 // the display port, used for tcp and udp
	track  *gateway.Tracker
	gws    map[string]*gateway.Gateway
	stops  map[string]func()
	quic   map[string]*gateway.QUIC
	// desktop is the desktop server the machine fronts: nil for its builtin desktop.
	desktop *agent.Desktop
}

// alwaysActive is a gateway.Sessions for which every session is live.
type alwaysActive struct{}

func (alwaysActive) Active(string) bool                           { return true }
func (alwaysActive) Connected(context.Context, string, string)    {}
func (alwaysActive) Disconnected(context.Context, string, string) {}

func newSite(t *testing.T) *site { return newSiteWith(t, nil) }

// newSiteWith is newSite with a machine that fronts desktop (nil: its builtin one); a UDPPort
// of desktop's puts its UDP transport on the display port.
func newSiteWith(t *testing.T, desktop *agent.Desktop) *site {
	t.Helper()
	_, key, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	pub := key.Public().(ed25519.PublicKey)
	tc, pool := testCA(t)
	s := &site{t: t, signer: ticket.NewSigner(key, nil), pub: pub, tls: tc, pool: pool,
		gwVer: ticket.NewVerifier(pub, ticket.NewMemoryLedger(0, nil), nil),
		track: gateway.NewTracker(alwaysActive{}), gws: map[string]*gateway.Gateway{}, stops: map[string]func(){},
		quic: map[string]*gateway.QUIC{}, desktop: desktop}
	s.startMachine()
	return s
}

// testCA returns a server TLS config whose self-signed certificate names every test address,
// and the pool that trusts it and the site CA (for a direct-mode machine).
func testCA(t *testing.T) (*tls.Config, *x509.CertPool) {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	var ips []net.IP
	for _, a := range []string{gwA, gwB, fd1, fd2, machineIP} {
		ips = append(ips, net.ParseIP(a))
	}
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "frontdoor test"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour), IPAddresses: ips,
		IsCA: true, BasicConstraintsValid: true, KeyUsage: x509.KeyUsageDigitalSignature | x509.KeyUsageCertSign}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	cert, _ := x509.ParseCertificate(der)
	pool := x509.NewCertPool()
	pool.AddCert(cert)
	pool.AppendCertsFromPEM(siteCA().CertPEM())
	return &tls.Config{Certificates: []tls.Certificate{{Certificate: [][]byte{der}, PrivateKey: key}}}, pool
}

// startMachine runs the display simulator of vda-1 on a port free for tcp and udp.
func (s *site) startMachine() {
	t := s.t
	for i := 0; i < 20; i++ {
		l, err := net.Listen("tcp", machineIP+":0")
		if err != nil {
			t.Fatal(err)
		}
		port := uint16(l.Addr().(*net.TCPAddr).Port)
		l.Close()
		o := agent.DisplayOptions{Machine: "vda-1", Address: netip.MustParseAddr(machineIP),
			TCPPorts: []uint16{port}, UDPPorts: []uint16{port}, UDPIdle: time.Minute,
			Verifier: ticket.NewVerifier(s.pub, ticket.NewMemoryLedger(0, nil), nil), Identity: s.machineIdentity(), Logger: quiet}
		if s.desktop != nil {
			o.Desktop = *s.desktop
			o.Desktop.Port = port
			if s.desktop.UDPPort != 0 {
				o.Desktop.UDPPort = port
			}
		}
		d, err := agent.NewDisplay(o)
		if err != nil {
			t.Fatal(err)
		}
		if err := d.Listen(); err != nil {
			continue
		}
		done := make(chan error, 1)
		go func() { done <- d.Serve(context.Background()) }()
		t.Cleanup(func() { d.Close(); <-done })
		s.port = port
		return
	}
	t.Fatal("no free display port")
}

// machineIdentity is vda-1's certificate of the site CA.
func (s *site) machineIdentity() *agent.Identity {
	cert, err := siteCA().PartyCertificate(siteid.RoleMachine, "vda-1", []netip.Addr{netip.MustParseAddr(machineIP)})
	if err != nil {
		s.t.Fatal(err)
	}
	id, err := agent.NewIdentity("vda-1", cert, siteCA().Pool())
	if err != nil {
		s.t.Fatal(err)
	}
	return id
}

// startGateway runs a gateway named name on ip with the display port.
func (s *site) startGateway(name, ip string) {
	t := s.t
	t.Helper()
	s.gws[name], s.stops[name] = gatewaytest.Start(t, gateway.Options{Name: name, Address: netip.MustParseAddr(ip),
		TCPPorts: []uint16{s.port}, UDPPorts: []uint16{s.port}, PlainUDP: true, TLS: s.tls, Reissue: s.reissue, MachineTLS: machineTLS(name), Verifier: s.gwVer, Sessions: alwaysActive{},
		Machine: func(n string) (netip.Addr, bool) { return netip.MustParseAddr(machineIP), n == "vda-1" },
		Logger:  quiet}, s.track)
}

// reissue rotates a session's reconnect ticket at every channel, as a node's gateways do.
func (s *site) reissue(c ticket.Claims) (string, error) {
	exp := c.Expires
	if c.Kind == ticket.Launch {
		exp = c.Issued.Add(time.Hour)
	}
	tok, _, err := s.signer.Reissue(c, exp)
	return tok, err
}

// channels are the session's channels in this site.
func (s *site) channels() []Channel {
	return []Channel{{Port: s.port, Proto: "tcp"}, {Port: s.port, Proto: "udp"}}
}

// descriptor issues a launch for session in mode through the named gateways.
func (s *site) descriptor(session, mode string, gws ...string) *Descriptor {
	t := s.t
	t.Helper()
	chans := []ticket.Channel{{Port: s.port, Proto: "tcp"}, {Port: s.port, Proto: "udp"}}
	lt, _, err := s.signer.Issue(ticket.Claims{Kind: ticket.Launch, Session: session, Machine: "vda-1", Mode: mode, Channels: chans}, time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	rt, _, err := s.signer.Issue(ticket.Claims{Kind: ticket.Reconnect, Session: session, Machine: "vda-1", Mode: mode, Channels: chans}, time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	d := &Descriptor{SessionID: session, Outcome: "new", Mode: mode, Machine: "vda-1", Zone: "z1", PreferredZone: "z1",
		PreferredSource: "user_location", Channels: s.channels(), LaunchTicket: lt, ReconnectTicket: rt,
		Trace:   []string{"preferred zone z1 (user location)", "step 3: new session on vda-1"},
		Desktop: &DesktopInfo{Protocol: "builtin", Channel: Channel{Port: s.port, Proto: "tcp"}}}
	if mode == ModeDirect {
		d.Address = machineIP
	}
	addrs := map[string]string{"gw-a": gwA, "gw-b": gwB}
	for _, g := range gws {
		d.Gateways = append(d.Gateways, GatewayEndpoint{Name: g, Zone: "z1", Addresses: []netip.Addr{netip.MustParseAddr(addrs[g])}})
	}
	return d
}

// frontDoor is a launch endpoint on loopback answering with descriptors from answer.
type frontDoor struct {
	srv      *httptest.Server
	mu       sync.Mutex // guards launches
	launches int
}

// startFrontDoors serves a launch endpoint on each ip at one common port and returns them and
// the port. Users: alice/secret; the resource "forbidden" is denied.
func (s *site) startFrontDoors(answer func(ip string) *Descriptor, ips ...string) ([]*frontDoor, uint16) {
	t := s.t
	t.Helper()
	for try := 0; try < 20; try++ {
		var lns []net.Listener
		port := "0"
		for _, ip := range ips {
			l, err := net.Listen("tcp", net.JoinHostPort(ip, port))
			if err != nil {
				break
			}
			lns = append(lns, l)
			port = strconv.Itoa(l.Addr().(*net.TCPAddr).Port)
		}
		if len(lns) < len(ips) {
			for _, l := range lns {
				l.Close()
			}
			continue
		}
		var fds []*frontDoor
		for i, ip := range ips {
			fd := &frontDoor{}
			fd.srv = httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				s.serveLaunch(w, r, fd, func() *Descriptor { return answer(ip) })
			}))
			fd.srv.Listener.Close()
			fd.srv.Listener = lns[i]
			fd.srv.TLS = s.tls.Clone()
			fd.srv.Config.ErrorLog = slog.NewLogLogger(quiet.Handler(), slog.LevelDebug)
			fd.srv.StartTLS()
			t.Cleanup(fd.srv.Close)
			fds = append(fds, fd)
		}
		p, _ := strconv.Atoi(port)
		return fds, uint16(p)
	}
	t.Fatal("no free launch port")
	return nil, 0
}

func (s *site) serveLaunch(w http.ResponseWriter, r *http.Request, fd *frontDoor, answer func() *Descriptor) {
	if r.Method != http.MethodPost || r.URL.Path != "/v1/launch" {
		http.NotFound(w, r)
		return
	}
	w.Header().Set("Content-Type", "application/json")
	if u, p, ok := r.BasicAuth(); !ok || u != "alice" || p != "secret" {
		w.WriteHeader(http.StatusUnauthorized)
		io.WriteString(w, `{"error":"authentication required"}`)
		return
	}
	var req struct{ Resource, Endpoint string }
	if err := json.NewDecoder(r.Body).Decode(&req); err != nil || req.Resource == "" {
		w.WriteHeader(http.StatusBadRequest)
		return
	}
	if req.Resource == "forbidden" {
		w.WriteHeader(http.StatusForbidden)
		io.WriteString(w, `{"error":"denied","reason":"alice is not entitled to forbidden","trace":["no group publishes forbidden to alice"]}`)
		return
	}
	fd.mu.Lock()
	fd.launches++
	fd.mu.Unlock()
	json.NewEncoder(w).Encode(answer())
}

// startDNS serves name's A records from addrs on 127.0.0.1 and returns the server's address.
func startDNS(t *testing.T, name string, addrs func() []string) string {
	t.Helper()
	pc, err := net.ListenPacket("udp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	h := dns.HandlerFunc(func(w dns.ResponseWriter, r *dns.Msg) {
		m := new(dns.Msg)
		m.SetReply(r)
		m.Authoritative = true
		if len(r.Question) != 1 || r.Question[0].Name != dns.Fqdn(name) {
			m.Rcode = dns.RcodeNameError
		} else if r.Question[0].Qtype == dns.TypeA {
			for _, a := range addrs() {
				m.Answer = append(m.Answer, &dns.A{Hdr: dns.RR_Header{Name: dns.Fqdn(name), Rrtype: dns.TypeA, Class: dns.ClassINET, Ttl: 5},
					A: net.ParseIP(a)})
			}
		}
		w.WriteMsg(m)
	})
	started := make(chan struct{})
	srv := &dns.Server{PacketConn: pc, Handler: h, NotifyStartedFunc: func() { close(started) }}
	done := make(chan error, 1)
	go func() { done <- srv.ActivateAndServe() }()
	<-started
	t.Cleanup(func() { srv.Shutdown(); <-done })
	return pc.LocalAddr().String()
}

// events collects a session's events for a test to wait on.
type events struct {
	ch chan Event
}

func newEvents() *events { return &events{ch: make(chan Event, 1000)} }

func (e *events) on(ev Event) {
	select {
	case e.ch <- ev:
	default:
	}
}

// wait returns the next event of kind, failing the test after a generous timeout.
func (e *events) wait(t *testing.T, kind EventKind) Event {
	t.Helper()
	timeout := time.After(20 * time.Second)
	for {
		select {
		case ev := <-e.ch:
			t.Logf("event: %s", ev)
			if ev.Kind == kind {
				return ev
			}
		case <-timeout:
			t.Fatalf("no %s event", kind)
		}
	}
}

func ctxT(t *testing.T) context.Context {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	t.Cleanup(cancel)
	return ctx
}
