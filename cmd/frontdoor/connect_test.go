package main

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
	"encoding/pem"
	"errors"
	"io"
	"log/slog"
	"math/big"
	"net"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/coreos/go-oidc/v3/oidc"

	"github.com/frontdoor-vdi/frontdoor/agent"
	"github.com/frontdoor-vdi/frontdoor/client"
	"github.com/frontdoor-vdi/frontdoor/gateway"
	"github.com/frontdoor-vdi/frontdoor/gateway/gatewaytest"
	"github.com/frontdoor-vdi/frontdoor/internal/siteid"
	"github.com/frontdoor-vdi/frontdoor/internal/testbuf"
	"github.com/frontdoor-vdi/frontdoor/internal/testclock"
	"github.com/frontdoor-vdi/frontdoor/internal/testidp"
	"github.com/frontdoor-vdi/frontdoor/logins"
	"github.com/frontdoor-vdi/frontdoor/pki"
	"github.com/frontdoor-vdi/frontdoor/ticket"
	"github.com/miekg/dns"
)

// The loopback addresses of the connect tests.
const (
	connMachine = "127.0.73.1"
	connGwA     = "127.0.74.1"
	connGwB     = "127.0.74.2"
	connFD      = "127.0.75.1"
)

var connQuiet = slog.New(slog.NewTextHandler(io.Discard, nil))

type connectActive struct{}

func (connectActive) Active(string) bool                           { return true }
func (connectActive) Connected(context.Context, string, string)    {}
func (connectActive) Disconnected(context.Context, string, string) {}

// waitFor polls out until it contains want, for a generous while.
func waitFor(t *testing.T, out *testbuf.Buffer, want string) {
	t.Helper()
	for i := 0; i < 400; i++ {
		if strings.Contains(out.String(), want) {
			return
		}
		time.Sleep(50 * time.Millisecond)
	}
	t.Fatalf("output lacks %q:\n%s", want, out.String())
}

// connectSite runs a machine, two gateways (TLS and UDP, and QUIC), a launch endpoint and a
// DNS server on loopback and returns the connect flags that reach them, the stop function of
// gateway gw-a and the QUIC port.
func connectSite(t *testing.T, mode string) ([]string, func(), uint16) {
	t.Helper()
	return connectSiteWith(t, mode, connectLogin{})
}

// connectLogin is how connectSiteWith's launch endpoint logs users in and seals the login.
type connectLogin struct {
	otp      string            // the one-time code it wants beside the password; "" for none
	sso      *testidp.Provider // the identity provider whose ID tokens it takes instead; nil for none
	lifetime time.Duration     // sealed into the tickets from the login; 0 for none
	now      func() time.Time  // the gateways' clock; nil for time.Now
	// clientCAs, when set, verify client certificates: one whose common name is alice
	// logs in without a password.
	clientCAs *x509.CertPool
}

// connectSiteWith is connectSite with a login of lo.
func connectSiteWith(t *testing.T, mode string, lo connectLogin) ([]string, func(), uint16) {
	t.Helper()
	_, key, _ := ed25519.GenerateKey(rand.Reader)
	pub := key.Public().(ed25519.PublicKey)
	signer := ticket.NewSigner(key, nil)
	ckey, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	var ips []net.IP
	for _, a := range []string{connGwA, connGwB, connFD} {
		ips = append(ips, net.ParseIP(a))
	}
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(7), Subject: pkix.Name{CommonName: "connect test"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour), IPAddresses: ips,
		IsCA: true, BasicConstraintsValid: true, KeyUsage: x509.KeyUsageDigitalSignature | x509.KeyUsageCertSign}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &ckey.PublicKey, ckey)
	if err != nil {
		t.Fatal(err)
	}
	// The site CA issues the machine's and the gateways' certificates; the client trusts it
	// and the gateways' self-signed one.
	caCert, caKey, err := pki.GenerateCA("connect-test")
	if err != nil {
		t.Fatal(err)
	}
	site, err := pki.NewCA(caCert, caKey, connQuiet)
	if err != nil {
		t.Fatal(err)
	}
	caFile := filepath.Join(t.TempDir(), "ca.pem")
	if err := os.WriteFile(caFile, append(pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), caCert...), 0o600); err != nil {
		t.Fatal(err)
	}
	machineCert, err := site.PartyCertificate(siteid.RoleMachine, "vda-1", []netip.Addr{netip.MustParseAddr(connMachine)})
	if err != nil {
		t.Fatal(err)
	}
	identity, err := agent.NewIdentity("vda-1", machineCert, site.Pool())
	if err != nil {
		t.Fatal(err)
	}
	toMachine := func(gw string) func() *tls.Config { return site.Party(siteid.RoleGateway, gw, nil).ClientTLS(nil) }
	tlsc := &tls.Config{Certificates: []tls.Certificate{{Certificate: [][]byte{der}, PrivateKey: ckey}}}

	// The machine, on a port free for tcp and udp.
	var port uint16
	for i := 0; i < 20 && port == 0; i++ {
		l, err := net.Listen("tcp", connMachine+":0")
		if err != nil {
			t.Fatal(err)
		}
		p := uint16(l.Addr().(*net.TCPAddr).Port)
		l.Close()
		d, err := agent.NewDisplay(agent.DisplayOptions{Machine: "vda-1", Address: netip.MustParseAddr(connMachine),
			TCPPorts: []uint16{p}, UDPPorts: []uint16{p}, Logger: connQuiet, Identity: identity,
			Verifier: ticket.NewVerifier(pub, ticket.NewMemoryLedger(0, nil), nil)})
		if err != nil {
			t.Fatal(err)
		}
		if d.Listen() != nil {
			continue
		}
		done := make(chan error, 1)
		go func() { done <- d.Serve(context.Background()) }()
		t.Cleanup(func() { d.Close(); <-done })
		port = p
	}
	if port == 0 {
		t.Fatal("no free display port")
	}

	// Two gateways of one node.
	v := ticket.NewVerifier(pub, ticket.NewMemoryLedger(0, lo.now), lo.now)
	tr := gateway.NewTracker(connectActive{})
	stops := map[string]func(){}
	for name, ip := range map[string]string{"gw-a": connGwA, "gw-b": connGwB} {
		_, stops[name] = gatewaytest.Start(t, gateway.Options{Name: name, Address: netip.MustParseAddr(ip), TCPPorts: []uint16{port},
			UDPPorts: []uint16{port}, TLS: tlsc, MachineTLS: toMachine(name), Verifier: v, Sessions: connectActive{}, Logger: connQuiet,
			Machine: func(string) (netip.Addr, bool) { return netip.MustParseAddr(connMachine), true }}, tr)
	}

	// QUIC gateways on both gateway addresses, at one port.
	var quicPort uint16
	for try := 0; try < 20 && quicPort == 0; try++ {
		qa, err := gateway.ListenQUIC(gateway.QUICOptions{Address: connGwA + ":0", TLS: tlsc, Verifier: v, Logger: connQuiet, MachineTLS: toMachine("gw-a"),
			Machine: func(string) (netip.Addr, bool) { return netip.MustParseAddr(connMachine), true }})
		if err != nil {
			t.Fatal(err)
		}
		p := qa.Addr().(*net.UDPAddr).Port
		qb, err := gateway.ListenQUIC(gateway.QUICOptions{Address: net.JoinHostPort(connGwB, strconv.Itoa(p)), TLS: tlsc, Verifier: v, MachineTLS: toMachine("gw-b"),
			Logger: connQuiet, Machine: func(string) (netip.Addr, bool) { return netip.MustParseAddr(connMachine), true }})
		if err != nil {
			qa.Close()
			continue
		}
		gatewaytest.ServeQUIC(t, qa)
		gatewaytest.ServeQUIC(t, qb)
		quicPort = uint16(p)
	}
	if quicPort == 0 {
		t.Fatal("no free QUIC port")
	}

	// The launch endpoint answers with a descriptor built here.
	var ssoCheck *oidc.IDTokenVerifier
	if lo.sso != nil {
		p, err := oidc.NewProvider(context.Background(), lo.sso.Issuer)
		if err != nil {
			t.Fatal(err)
		}
		ssoCheck = p.Verifier(&oidc.Config{ClientID: lo.sso.ClientID})
	}
	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == logins.OIDCPath && lo.sso != nil {
			json.NewEncoder(w).Encode(logins.OIDCInfo{Issuer: lo.sso.Issuer, ClientID: lo.sso.ClientID, Scopes: []string{"openid"}})
			return
		}
		if lo.sso != nil {
			tok, ok := strings.CutPrefix(r.Header.Get("Authorization"), "Bearer ")
			if _, err := ssoCheck.Verify(r.Context(), tok); !ok || err != nil {
				w.WriteHeader(http.StatusUnauthorized)
				return
			}
		} else if byCert := lo.clientCAs != nil && len(r.TLS.VerifiedChains) > 0 && r.TLS.VerifiedChains[0][0].Subject.CommonName == "alice"; byCert {
			if _, _, basic := r.BasicAuth(); basic {
				w.WriteHeader(http.StatusUnauthorized) // a certificate login sends no password
				return
			}
		} else if u, p, ok := r.BasicAuth(); !ok || u != "alice" || p != "secret" || r.Header.Get(client.OTPHeader) != lo.otp {
			w.WriteHeader(http.StatusUnauthorized)
			return
		}
		chans := []ticket.Channel{{Port: port, Proto: "tcp"}, {Port: port, Proto: "udp"}}
		c := ticket.Claims{Session: "s-42", Machine: "vda-1", Mode: mode, Channels: chans, User: "alice", Factors: ticket.FactorPassword}
		if lo.lifetime > 0 {
			c.AuthTime = time.Now()
			c.LoginExpires = c.AuthTime.Add(lo.lifetime)
		}
		c.Kind = ticket.Launch
		lt, _, _ := signer.Issue(c, time.Minute)
		c.Kind = ticket.Reconnect
		rt, _, _ := signer.Issue(c, time.Hour)
		d := client.Descriptor{SessionID: "s-42", Outcome: "new", Step: 3, Mode: mode, Machine: "vda-1", Zone: "east",
			PreferredZone: "east", PreferredSource: "user_location", LocationZone: "east",
			Channels:     []client.Channel{{Port: port, Proto: "tcp"}, {Port: port, Proto: "udp"}},
			LaunchTicket: lt, ReconnectTicket: rt, Trace: []string{"preferred zone east: the user's location"}}
		if mode == client.ModeDirect {
			d.Address = connMachine
		} else {
			d.Gateways = []client.GatewayEndpoint{{Name: "gw-a", Zone: "east", Addresses: []netip.Addr{netip.MustParseAddr(connGwA)}, QUICPort: quicPort},
				{Name: "gw-b", Zone: "east", Addresses: []netip.Addr{netip.MustParseAddr(connGwB)}, QUICPort: quicPort}}
		}
		json.NewEncoder(w).Encode(d)
	}))
	srv.Listener.Close()
	ln, err := net.Listen("tcp", connFD+":0")
	if err != nil {
		t.Fatal(err)
	}
	srv.Listener = ln
	srv.TLS = tlsc
	if lo.clientCAs != nil {
		srv.TLS = tlsc.Clone()
		srv.TLS.ClientAuth, srv.TLS.ClientCAs = tls.VerifyClientCertIfGiven, lo.clientCAs
	}
	srv.Config.ErrorLog = slog.NewLogLogger(connQuiet.Handler(), slog.LevelDebug)
	srv.StartTLS()
	t.Cleanup(srv.Close)

	// The DNS server answers desk.test with the front door.
	pc, err := net.ListenPacket("udp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	started := make(chan struct{})
	dsrv := &dns.Server{PacketConn: pc, NotifyStartedFunc: func() { close(started) },
		Handler: dns.HandlerFunc(func(w dns.ResponseWriter, r *dns.Msg) {
			m := new(dns.Msg)
			m.SetReply(r)
			if r.Question[0].Qtype == dns.TypeA && r.Question[0].Name == "desk.test." {
				m.Answer = append(m.Answer, &dns.A{Hdr: dns.RR_Header{Name: "desk.test.", Rrtype: dns.TypeA, Class: dns.ClassINET, Ttl: 5},
					A: net.ParseIP(connFD)})
			}
			w.WriteMsg(m)
		})}
	ddone := make(chan error, 1)
	go func() { ddone <- dsrv.ActivateAndServe() }()
	<-started
	t.Cleanup(func() { dsrv.Shutdown(); <-ddone })

	p := strconv.Itoa(int(port))
	lp := strconv.Itoa(ln.Addr().(*net.TCPAddr).Port)
	return []string{"connect", "desk.test", "--user", "alice", "--password", "secret", "--resource", "desktop", "--dns", pc.LocalAddr().String(),
		"--launch-port", lp, "--ca", caFile, "--tcp", p, "--udp", p, "--echo", "100ms"}, stops["gw-a"], quicPort
}

// runConnectCmd runs frontdoor connect with args; stop cancels it and returns its error (the
// test's cleanup stops it too).
func runConnectCmd(t *testing.T, args []string) (out *testbuf.Buffer, stop func() error) {
	t.Helper()
	out = &testbuf.Buffer{}
	root := newRootCmd()
	root.SetOut(out)
	root.SetErr(out)
	root.SetArgs(args)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- root.ExecuteContext(ctx) }()
	var once sync.Once
	var err error
	stop = func() error { once.Do(func() { cancel(); err = <-done }); return err }
	t.Cleanup(func() { stop() })
	return out, stop
}

// viewerOn connects a viewer to connect's local port and reads the desktop's greeting; it
// keeps the connection (a desktop stream through the session's gateway) open.
func viewerOn(t *testing.T, local string) net.Conn {
	t.Helper()
	c, err := net.Dial("tcp", local)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	c.SetDeadline(time.Now().Add(20 * time.Second))
	got := make([]byte, 12)
	if _, err := io.ReadFull(c, got); err != nil || string(got) != "RFB 003.008\n" {
		t.Fatalf("the local port's first bytes %q, %v; want the desktop's greeting", got, err)
	}
	c.SetDeadline(time.Time{})
	return c
}

func isTimeout(err error) bool {
	var ne net.Error
	return errors.As(err, &ne) && ne.Timeout()
}

// freeLocal returns a free loopback address for --local.
func freeLocal(t *testing.T) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().String()
}

func TestConnectThroughAGatewaySurvivesItsShutdown(t *testing.T) {
	args, stopA, _ := connectSite(t, client.ModeGateway)
	local := freeLocal(t)
	out, stop := runConnectCmd(t, append(args, "--local", local))
	for _, want := range []string{"launched session s-42 through front door " + connFD, "machine vda-1 in zone east, gateway mode",
		"preferred zone east (user_location), location zone east", "preferred zone east: the user's location", "/tcp ok (",
		"/udp ok (3 datagrams"} {
		waitFor(t, out, want)
	}
	viewer := viewerOn(t, local) // a user watches the desktop through gw-a
	stopA()
	waitFor(t, out, "cut at ")
	waitFor(t, out, "(same session via gw-b "+connGwB+")")
	// The viewer's connection outlived the gateway: the server waits for its answer.
	viewer.SetReadDeadline(time.Now().Add(200 * time.Millisecond))
	if _, err := viewer.Read(make([]byte, 1)); !isTimeout(err) {
		t.Fatalf("the viewer's connection after the gateway's shutdown: %v, want it open and quiet", err)
	}
	if err := stop(); err != nil {
		t.Fatalf("connect: %v\n%s", err, out)
	}
	t.Logf("connect printed:\n%s", out)
	if !strings.Contains(out.String(), "session s-42: ") || !strings.Contains(out.String(), " back (0 after a new launch)") {
		t.Fatalf("no summary:\n%s", out)
	}
}

func TestConnectDirectWithALocalPort(t *testing.T) {
	args, _, _ := connectSite(t, client.ModeDirect)
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	local := l.Addr().String()
	l.Close()
	out, _ := runConnectCmd(t, append(args, "--local", local))
	waitFor(t, out, "machine address "+connMachine)
	waitFor(t, out, "local "+local+" leads to the ")
	// Every viewer connection gets the desktop server's greeting: a stream of its own.
	for range 2 {
		c, err := net.Dial("tcp", local)
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		c.SetDeadline(time.Now().Add(20 * time.Second))
		got := make([]byte, 12)
		if _, err := io.ReadFull(c, got); err != nil || string(got) != "RFB 003.008\n" {
			t.Fatalf("the local port's first bytes %q, %v; want the desktop's greeting", got, err)
		}
	}
}

func TestConnectOverQUIC(t *testing.T) {
	args, _, quicPort := connectSite(t, client.ModeGateway)
	out, stop := runConnectCmd(t, append(args, "--quic", strconv.Itoa(int(quicPort))))
	waitFor(t, out, "via gw-a "+connGwA+" (launch ticket)")
	waitFor(t, out, "/tcp ok (")
	waitFor(t, out, "/udp ok (3 datagrams")
	if err := stop(); err != nil {
		t.Fatalf("connect --quic: %v\n%s", err, out)
	}
}

// A user with a one-time code gives it with --otp; once the login is older than its factor
// lifetime, the gateway refuses the reconnect and connect stops, saying to log in again,
// instead of retrying.
func TestConnectWithACodeIsToldToLogInAgainAfterTheFactorLifetime(t *testing.T) {
	clk := testclock.New(time.Now())
	args, stopA, _ := connectSiteWith(t, client.ModeGateway, connectLogin{otp: "123456", lifetime: 10 * time.Minute, now: clk.Now})
	if _, errs, err := run(t, append(args, "--duration", "5s")...); !errors.Is(err, client.ErrUnauthorized) {
		t.Fatalf("connect without the code: %v\n%s", err, errs)
	}
	local := freeLocal(t)
	out, stop := runConnectCmd(t, append(args, "--otp", "123456", "--local", local))
	waitFor(t, out, "/tcp ok (")
	viewerOn(t, local)
	clk.Advance(20 * time.Minute)
	stopA()
	waitFor(t, out, "log in again: the login is older than the site's factor lifetime")
	if err := stop(); !errors.Is(err, client.ErrLoginRequired) {
		t.Fatalf("connect: %v, want %v\n%s", err, client.ErrLoginRequired, out)
	}
	if strings.Contains(out.String(), "relaunch at") {
		t.Fatalf("connect launched again with the code it held:\n%s", out)
	}
}

// With --sso, connect asks the front door for the site's identity provider, prints its login
// page, takes the browser's redirect on 127.0.0.1 and launches with the ID token.
func TestConnectWithSingleSignOn(t *testing.T) {
	idp := testidp.Start(t, "frontdoor-cli", "", "http://127.0.0.1/callback")
	args, _, _ := connectSiteWith(t, client.ModeGateway, connectLogin{sso: idp})
	sso := []string{"connect", "--sso"}
	for i := 1; i < len(args); i++ {
		if args[i] == "--user" || args[i] == "--password" {
			i++
			continue
		}
		sso = append(sso, args[i])
	}
	out, stop := runConnectCmd(t, sso)
	waitFor(t, out, "to sign in, open this page in a browser:\n  ")
	_, page, _ := strings.Cut(out.String(), "open this page in a browser:\n  ")
	page, _, _ = strings.Cut(page, "\n")
	resp, err := http.Get(page) // the browser: the provider signs alice in and redirects back
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("the redirect back to connect: %s", resp.Status)
	}
	waitFor(t, out, "launched session s-42")
	waitFor(t, out, "/tcp ok (")
	if err := stop(); err != nil {
		t.Fatalf("connect --sso: %v\n%s", err, out)
	}
}

// connect --cert --key logs in with a client certificate, without a user or a password.
func TestConnectWithAClientCertificate(t *testing.T) {
	caPEM, caKeyPEM, err := pki.GenerateCA("corp")
	if err != nil {
		t.Fatal(err)
	}
	ca, err := pki.NewCA(caPEM, caKeyPEM, connQuiet)
	if err != nil {
		t.Fatal(err)
	}
	certPEM, keyPEM, err := ca.IssueClient("alice", time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	certFile, keyFile := filepath.Join(dir, "alice.pem"), filepath.Join(dir, "alice.key")
	os.WriteFile(certFile, certPEM, 0o644)
	os.WriteFile(keyFile, keyPEM, 0o600)
	args, _, _ := connectSiteWith(t, client.ModeGateway, connectLogin{clientCAs: ca.Pool()})
	var login []string
	for i := 0; i < len(args); i++ {
		if args[i] == "--user" || args[i] == "--password" {
			i++
			continue
		}
		login = append(login, args[i])
	}
	if _, errs, err := run(t, append(login, "--duration", "5s")...); err == nil || !strings.Contains(err.Error(), "no user") {
		t.Fatalf("connect without a user, a password or a certificate: %v\n%s", err, errs)
	}
	out, stop := runConnectCmd(t, append(login, "--cert", certFile, "--key", keyFile))
	waitFor(t, out, "launched session s-42 through front door "+connFD)
	waitFor(t, out, "/tcp ok (")
	if err := stop(); err != nil {
		t.Fatalf("connect --cert: %v\n%s", err, out)
	}
	both := filepath.Join(dir, "alice-both.pem")
	os.WriteFile(both, append(certPEM, keyPEM...), 0o600)
	if _, errs, err := run(t, append(login, "--cert", both, "--duration", "2s")...); err != nil {
		t.Fatalf("connect --cert with the key in the same file: %v\n%s", err, errs)
	}
}

func TestConnectErrors(t *testing.T) {
	t.Setenv("FRONTDOOR_PASSWORD", "")
	for _, tc := range []struct {
		name string
		args []string
		want string
	}{
		{"no password", []string{"connect", "desk.test", "--user", "alice", "--resource", "r"}, "no password"},
		{"no user", []string{"connect", "desk.test", "--resource", "r", "--password", "x"}, "no user: give --user, or --sso to sign in through the site's identity provider, or a client certificate with --cert"},
		{"a key without a certificate", []string{"connect", "desk.test", "--user", "a", "--resource", "r", "--key", "k.pem"}, "--key goes with --cert"},
		{"a missing certificate", []string{"connect", "desk.test", "--resource", "r", "--cert", "/nonexistent/alice.pem"}, "reading the client certificate /nonexistent/alice.pem"},
		{"sso with a certificate", []string{"connect", "desk.test", "--resource", "r", "--sso", "--cert", "alice.pem"}, "give no --cert with it"},
		{"sso with a user", []string{"connect", "desk.test", "--resource", "r", "--sso", "--user", "alice"}, "give no --user or --otp"},
		{"bad port", []string{"connect", "desk.test", "--user", "a", "--resource", "r", "--password", "x", "--tcp", "70000"}, "not a port"},
		{"missing CA file", []string{"connect", "desk.test", "--user", "a", "--resource", "r", "--password", "x", "--ca", "/nonexistent/ca.pem"}, "reading CA file"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, errs, err := run(t, tc.args...)
			if err == nil || !strings.Contains(err.Error()+errs, tc.want) {
				t.Fatalf("err %v, stderr %q; want %q", err, errs, tc.want)
			}
		})
	}
}
