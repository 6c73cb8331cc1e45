package lab

import (
	"context"
	"crypto/tls"
	"encoding/json"
	"errors"
	"io"
	"net"
	"net/http"
	"net/netip"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/frontdoor-vdi/frontdoor/broker"
	"github.com/frontdoor-vdi/frontdoor/client/admin"
	"github.com/frontdoor-vdi/frontdoor/configs"
	"github.com/frontdoor-vdi/frontdoor/internal/resume"
	"github.com/frontdoor-vdi/frontdoor/internal/rfb"
	"github.com/frontdoor-vdi/frontdoor/internal/siteid"
	"github.com/frontdoor-vdi/frontdoor/internal/testkit"
	"github.com/frontdoor-vdi/frontdoor/internal/testunbound"
	"github.com/frontdoor-vdi/frontdoor/ticket"
	"github.com/frontdoor-vdi/frontdoor/wire"
	"github.com/miekg/dns"
)

// testSite is the embedded lab site moved to 127.41-43 so that tests do not collide with a lab
// running on the same machine; edit, when set, changes its YAML first.
func testSite(t testing.TB, edit func(string) string) *configs.Config {
	t.Helper()
	c, err := MovedSite(41, edit)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// startLab runs the test site and waits until every gateway is up.
func startLab(t testing.TB) (*Lab, context.CancelFunc) {
	t.Helper()
	l, cancel, _ := startLabWith(t, Options{Config: testSite(t, nil)})
	return l, cancel
}

// startLabWith runs a lab with o (heartbeats every 200ms) and waits until every gateway is
// up; served is closed when Serve has returned, whose error the test's end checks.
func startLabWith(t testing.TB, o Options) (l *Lab, cancel context.CancelFunc, served <-chan struct{}) {
	t.Helper()
	testkit.Site(t)
	ctx, cancel := context.WithCancel(context.Background())
	o.HeartbeatInterval = 200 * time.Millisecond
	l, err := New(ctx, o)
	if err != nil {
		cancel()
		t.Fatal(err)
	}
	done := make(chan struct{})
	var serveErr error
	go func() {
		serveErr = l.Serve(ctx)
		close(done)
	}()
	t.Cleanup(func() {
		cancel()
		<-done
		if serveErr != nil {
			t.Errorf("Serve: %v", serveErr)
		}
	})
	if err := l.WaitReady(ctx); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(10 * time.Second)
	for _, g := range l.Config.Gateways {
		for v := verdict(t, l, g.Name); v != "up"; v = verdict(t, l, g.Name) {
			if time.Now().After(deadline) {
				t.Fatalf("gateway %s not up after 10s: %s", g.Name, v)
			}
			time.Sleep(20 * time.Millisecond)
		}
	}
	return l, cancel, done
}

// adminURL is the lab's admin API, on the first node that has one.
func adminURL(t testing.TB, l *Lab) string {
	t.Helper()
	u := l.adminURL()
	if u == "" {
		t.Fatal("the lab has no admin listener")
	}
	return u
}

// adminAPI is a client of the lab's admin API as user (the lab's admin: "admin").
func adminAPI(t testing.TB, l *Lab, user ...string) *admin.Client {
	t.Helper()
	u := "admin"
	if len(user) > 0 {
		u = user[0]
	}
	return &admin.Client{URL: adminURL(t, l), User: u, Password: "lab", TLS: l.TLSClientConfig(), Timeout: time.Minute}
}

// statusOf is the HTTP status of an admin API call's error: 200 for none.
func statusOf(t testing.TB, err error) int {
	t.Helper()
	var ae *admin.Error
	switch {
	case err == nil:
		return http.StatusOK
	case errors.As(err, &ae):
		return ae.Status
	}
	t.Fatal(err)
	return 0
}

// adminGet decodes the lab's admin API's answer to GET path (as the lab's admin) into out.
func adminGet(t testing.TB, l *Lab, path string, out any) {
	t.Helper()
	if err := adminAPI(t, l).Get(context.Background(), path, out); err != nil {
		t.Fatal(err)
	}
}

// adminStatus decodes the lab's admin status (GET /v1/admin/status, as the lab's admin)
// into out.
func adminStatus(t testing.TB, l *Lab, out any) {
	t.Helper()
	adminGet(t, l, "/v1/admin/status", out)
}

// verdict returns gateway gw's health verdict (up, draining, down) as the lab's admin API
// reports it.
func verdict(t testing.TB, l *Lab, gw string) string {
	t.Helper()
	var st struct {
		Gateways map[string]string `json:"gateways"`
	}
	adminStatus(t, l, &st)
	v, _, _ := strings.Cut(st.Gateways[gw], " ")
	return v
}

// nodeOf returns the name of the node that hosts gateway gw.
func nodeOf(t *testing.T, l *Lab, gw string) string {
	t.Helper()
	for _, g := range l.Config.Gateways {
		if g.Name == gw && g.Node != "" {
			return g.Node
		}
	}
	t.Fatalf("no node hosts gateway %q", gw)
	return ""
}

// descriptor is the launch API's answer.
type descriptor = wire.Descriptor

// launch launches resource as user from the address from at the launch API url, from the
// endpoint test-laptop.
func launch(t *testing.T, l *Lab, from, url, user, resource string) (descriptor, int) {
	t.Helper()
	return launchFrom(t, l, from, url, user, resource, "test-laptop")
}

// TestLabEndToEnd walks the user's path through the lab: DNS, launch, a channel through a
// gateway with a ticket, echo with a checksum, the broker seeing the session connected.
func TestLabEndToEnd(t *testing.T) {
	l, _ := startLab(t)

	// DNS: a client of the east zone (by EDNS Client Subnet) gets east's gateways first.
	m := new(dns.Msg)
	m.SetQuestion("desktop.vdi.lab.test.", dns.TypeA)
	m.SetEdns0(1232, false)
	m.IsEdns0().Option = append(m.IsEdns0().Option, &dns.EDNS0_SUBNET{Code: dns.EDNS0SUBNET, Family: 1, SourceNetmask: 24, Address: net.ParseIP("127.42.5.0").To4()})
	r, _, err := (&dns.Client{Timeout: 2 * time.Second}).Exchange(m, "127.41.0.1:5353")
	if err != nil {
		t.Fatal(err)
	}
	if len(r.Answer) == 0 || !strings.HasPrefix(r.Answer[0].(*dns.A).A.String(), "127.42.0.") {
		t.Fatalf("answer for an east client = %v, want east's gateways first", r.Answer)
	}
	// The lab's domain is signed: a validating resolver (unbound) that trusts the DS the
	// admin API gives and passes its clients' subnets on validates the east client's answer.
	var signed []wire.DNSSECDomain
	adminGet(t, l, "/v1/admin/dnssec", &signed)
	if len(signed) != 1 || signed[0].Domain != "vdi.lab.test." || len(signed[0].Keys) != 1 {
		t.Fatalf("the lab's signed domains: %+v", signed)
	}
	resolver := testunbound.Start(t, testunbound.Options{Zone: "vdi.lab.test.", Anchor: signed[0].Keys[0].DS,
		Server: netip.MustParseAddrPort("127.41.0.1:5353"), ClientSubnet: true})
	m = new(dns.Msg)
	m.SetQuestion("desktop.vdi.lab.test.", dns.TypeA)
	m.SetEdns0(1232, true)
	east := &net.Dialer{LocalAddr: &net.UDPAddr{IP: net.ParseIP("127.42.5.9")}}
	if r, _, err = (&dns.Client{Timeout: 5 * time.Second, Dialer: east}).Exchange(m, resolver); err != nil {
		t.Fatal(err)
	}
	if len(r.Answer) == 0 || !r.AuthenticatedData || !strings.HasPrefix(r.Answer[0].(*dns.A).A.String(), "127.42.0.") {
		t.Fatalf("unbound's answer for an east client: %s, AD %v, %v; want east's gateways, validated", dns.RcodeToString[r.Rcode], r.AuthenticatedData, r.Answer)
	}

	// Launch from an address of the west zone: alice's home zone east wins (UserHome).
	desc, code := launch(t, l, "127.43.0.9", "https://127.42.0.11:9443", "alice", "desktop")
	if code != http.StatusOK {
		t.Fatalf("launch status %d: %+v", code, desc)
	}
	if desc.Mode != "gateway" || desc.Zone != "east" || desc.PreferredZone != "east" || desc.Step != 3 || desc.LaunchTicket == "" || len(desc.Gateways) == 0 {
		t.Fatalf("descriptor %+v, want a gateway-mode session in east from step 3", desc)
	}
	// The broker's trace names machines, load and zones: an admin's, not alice's.
	if len(desc.Trace) != 0 {
		t.Fatalf("alice's descriptor carries the broker's trace: %q", desc.Trace)
	}
	if ad, _ := launch(t, l, "127.43.0.9", "https://127.42.0.11:9443", "admin", "desktop"); len(ad.Trace) == 0 {
		t.Fatalf("an admin's launch carries no trace: %+v", ad)
	}

	// A TLS channel on 8443 through the first gateway.
	gw := desc.Gateways[0].Addresses[0].String()
	c, err := tls.Dial("tcp", net.JoinHostPort(gw, "8443"), &tls.Config{RootCAs: l.CA().Pool(), ServerName: gw})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	ticket.WriteFrame(c, desc.LaunchTicket)
	if ok, next := readStatus(c); !ok || next == "" {
		t.Fatalf("channel admitted %v, next reconnect ticket %q; want admitted with one", ok, next)
	}
	if name := desktopName(t, c); !strings.Contains(name, desc.SessionID) {
		t.Fatalf("the desktop through the gateway is %q, want the session's", name)
	}
	waitState(t, l, desc.SessionID, broker.StateConnected)

	// The same ticket again is a replay: denied.
	c2, err := tls.Dial("tcp", net.JoinHostPort(gw, "8443"), &tls.Config{RootCAs: l.CA().Pool(), ServerName: gw})
	if err != nil {
		t.Fatal(err)
	}
	ticket.WriteFrame(c2, desc.LaunchTicket)
	if ok, _ := readStatus(c2); ok {
		t.Fatal("a replayed launch ticket opened a channel")
	}
	c2.Close()

	c.Close()
	waitState(t, l, desc.SessionID, broker.StateDisconnected)

	// Launching again reconnects to the same session (step 1: an existing session in the
	// preferred zone).
	again, code := launch(t, l, "127.43.0.9", "https://127.43.0.11:9443", "alice", "desktop")
	if code != http.StatusOK || again.SessionID != desc.SessionID || again.Step != 1 {
		t.Fatalf("second launch: %d %+v, want a reconnect to %s at step 1", code, again, desc.SessionID)
	}
}

// TestLabPrivateDesktopIsDirect: alice's assigned desktop is in a group with secure_gateway
// off, so the descriptor names the machine itself and the channel goes straight to it, over
// TLS with the machine's certificate.
func TestLabPrivateDesktopIsDirect(t *testing.T) {
	l, _ := startLab(t)
	desc, code := launch(t, l, "127.42.0.9", "https://127.42.0.11:9443", "alice", "my-desktop")
	if code != http.StatusOK || desc.Mode != "direct" || desc.Machine != "pc-alice" || desc.Address != "127.42.3.1" {
		t.Fatalf("launch: %d %+v", code, desc)
	}
	if desc.LaunchTicket == "" || len(desc.Gateways) != 0 {
		t.Fatalf("direct descriptor %+v: want tickets (the machine's agent checks them) and no gateways", desc)
	}
	// TLS to the machine itself: its certificate from the site CA names it.
	c, err := tls.Dial("tcp", net.JoinHostPort(desc.Address, "8443"), l.TLSClientConfig())
	if err != nil {
		t.Fatal(err)
	}
	if st := c.ConnectionState(); !siteid.Is(st.PeerCertificates[0], siteid.RoleMachine, "pc-alice") {
		t.Fatalf("the machine presented %v, want pc-alice's certificate", st.PeerCertificates[0].URIs)
	}
	defer c.Close()
	ticket.WriteFrame(c, desc.LaunchTicket)
	if ok, _ := readStatus(c); !ok {
		t.Fatal("the machine refused the direct channel")
	}
	if name := desktopName(t, c); !strings.Contains(name, desc.SessionID) || !strings.Contains(name, "pc-alice") {
		t.Fatalf("the desktop is %q, want pc-alice's with the session", name)
	}
	// The agent reports the direct session to its front door.
	waitState(t, l, desc.SessionID, broker.StateConnected)
}

func waitState(t *testing.T, l *Lab, id string, want broker.State) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for {
		s, err := l.Session(context.Background(), id)
		if err == nil && s.State == want || want == broker.StateEnded && errors.Is(err, broker.ErrNoSession) {
			return // (an ended session leaves the site database)
		}
		if time.Now().After(deadline) {
			t.Fatalf("session %s is %v, want %s", id, s.State, want)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// A logoff reaches the machine of a direct-mode session within a second: the agent cuts the
// channel the client holds and refuses the session's reconnect ticket from then on, which a
// client would otherwise hold for hours.
func TestLogoffCutsADirectSessionAtItsMachine(t *testing.T) {
	l, _ := startLab(t)
	desc, code := launch(t, l, "127.42.0.9", "https://127.42.0.11:9443", "alice", "my-desktop")
	if code != http.StatusOK || desc.Mode != "direct" {
		t.Fatalf("launch: %d %+v", code, desc)
	}
	dial := func(tok string) (*tls.Conn, byte) {
		t.Helper()
		c, err := tls.Dial("tcp", net.JoinHostPort(desc.Address, "8443"), l.TLSClientConfig())
		if err != nil {
			t.Fatal(err)
		}
		c.SetDeadline(time.Now().Add(5 * time.Second))
		ticket.WriteFrame(c, tok)
		st := ticket.StatusDenied
		if ok, _ := readStatus(c); ok {
			st = ticket.StatusOK
		}
		c.SetDeadline(time.Time{})
		return c, st
	}
	c, st := dial(desc.LaunchTicket)
	defer c.Close()
	if st != ticket.StatusOK {
		t.Fatalf("launch ticket at the machine: status %d", st)
	}
	waitState(t, l, desc.SessionID, broker.StateConnected)
	// The reconnect ticket works while the session lives.
	c2, st := dial(desc.ReconnectTicket)
	c2.Close()
	if st != ticket.StatusOK {
		t.Fatalf("reconnect ticket before the logoff: status %d", st)
	}

	hc := &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{TLSClientConfig: l.TLSClientConfig()}}
	req, _ := http.NewRequest(http.MethodPost, "https://127.42.0.11:9443/v1/sessions/"+desc.SessionID+"/logoff", nil)
	req.SetBasicAuth("alice", "lab")
	resp, err := hc.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("logoff: %s", resp.Status)
	}
	loggedOff := time.Now()
	c.SetReadDeadline(time.Now().Add(3 * time.Second))
	if _, err := io.Copy(io.Discard, c); isTimeout(err) {
		t.Fatal("the machine did not cut the channel within 3s of the logoff")
	}
	t.Logf("the machine cut the channel %v after the logoff", time.Since(loggedOff).Round(time.Millisecond))
	if c3, st := dial(desc.ReconnectTicket); st == ticket.StatusOK {
		c3.Close()
		t.Fatal("the machine took the reconnect ticket of a session logged off")
	}
}

// launchFrom launches resource as user from the address from at the launch API url, from
// endpoint.
func launchFrom(t *testing.T, l *Lab, from, url, user, resource, endpoint string) (descriptor, int) {
	t.Helper()
	tc := l.TLSClientConfig()
	d := &net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP(from)}}
	hc := &http.Client{Timeout: 60 * time.Second, Transport: &http.Transport{TLSClientConfig: tc, DialContext: d.DialContext}}
	req, _ := http.NewRequest(http.MethodPost, url+"/v1/launch", strings.NewReader(`{"resource":"`+resource+`","endpoint":"`+endpoint+`"}`))
	req.SetBasicAuth(user, "lab")
	resp, err := hc.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var desc descriptor
	json.NewDecoder(resp.Body).Decode(&desc)
	return desc, resp.StatusCode
}

// A connected session taken by another endpoint (a steal) leaves the old endpoint nothing:
// its channels are cut, at the gateway and at the machine, and its reconnect ticket is
// refused, while the new endpoint's tickets work. Both secure-gateway modes.
func TestStealCutsTheOldEndpointAndRevokesItsTickets(t *testing.T) {
	l, _ := startLab(t)
	for _, c := range []struct{ resource, mode string }{{"desktop", "gateway"}, {"my-desktop", "direct"}} {
		t.Run(c.mode, func(t *testing.T) {
			old, code := launchFrom(t, l, "127.42.0.9", "https://127.42.0.11:9443", "alice", c.resource, "alice-laptop")
			if code != http.StatusOK || old.Mode != c.mode {
				t.Fatalf("first launch: %d %+v", code, old)
			}
			addr := old.Address
			if c.mode == "gateway" {
				addr = old.Gateways[0].Addresses[0].String()
			}
			dial := func(tok string) (*tls.Conn, bool, string) {
				t.Helper()
				conn, err := tls.Dial("tcp", net.JoinHostPort(addr, "8443"), l.TLSClientConfig())
				if err != nil {
					t.Fatal(err)
				}
				conn.SetDeadline(time.Now().Add(5 * time.Second))
				ticket.WriteFrame(conn, tok)
				ok, next := readStatus(conn)
				conn.SetDeadline(time.Time{})
				return conn, ok, next
			}
			// A gateway rotates the reconnect ticket at every channel; a machine (direct
			// mode) does not.
			reconnect := func(d descriptor, next string) string {
				if c.mode == "gateway" {
					return next
				}
				return d.ReconnectTicket
			}
			conn, ok, oldNext := dial(old.LaunchTicket)
			defer conn.Close()
			if !ok {
				t.Fatal("the old endpoint's channel was refused")
			}
			waitState(t, l, old.SessionID, broker.StateConnected)

			taken, code := launchFrom(t, l, "127.42.0.9", "https://127.42.0.12:9443", "alice", c.resource, "alice-tablet")
			if code != http.StatusOK || taken.SessionID != old.SessionID {
				t.Fatalf("the launch from another endpoint: %d %+v, want session %s taken", code, taken, old.SessionID)
			}
			stole := time.Now()
			conn.SetReadDeadline(time.Now().Add(5 * time.Second))
			if _, err := io.Copy(io.Discard, conn); isTimeout(err) {
				t.Fatal("the old endpoint's channel was not cut within 5s of the steal")
			}
			t.Logf("the old endpoint's channel was cut %v after the steal", time.Since(stole).Round(time.Millisecond))
			if c2, ok, _ := dial(reconnect(old, oldNext)); ok {
				c2.Close()
				t.Fatal("the old endpoint's reconnect ticket still opens channels")
			}
			c3, ok, takenNext := dial(taken.LaunchTicket)
			defer c3.Close()
			if !ok {
				t.Fatal("the new endpoint's launch ticket was refused")
			}
			if c4, ok, _ := dial(reconnect(taken, takenNext)); !ok {
				t.Fatal("the new endpoint's reconnect ticket was refused")
			} else {
				c4.Close()
			}
		})
	}
}

// readStatus reads a channel's status from a gateway or a machine and, when it admitted the
// channel, opens a desktop stream on it as a client does (a hello, the machine's reply): it
// returns whether both went through, and the next reconnect ticket that a gateway hands out
// with the status.
func readStatus(c io.ReadWriter) (bool, string) {
	st := []byte{ticket.StatusDenied}
	if _, err := io.ReadFull(c, st); err != nil {
		return false, ""
	}
	var next string
	switch st[0] {
	case ticket.StatusOK:
	case ticket.StatusRotated:
		var err error
		if next, err = ticket.ReadFrame(c); err != nil {
			return false, ""
		}
	default:
		return false, ""
	}
	if err := resume.WriteHello(c, resume.Hello{ID: resume.NewID()}); err != nil {
		return false, next
	}
	rep, err := resume.ReadReply(c)
	return err == nil && rep.Status == resume.StatusOK, next
}

// isTimeout reports whether err is a deadline's.
func isTimeout(err error) bool {
	var ne net.Error
	return errors.As(err, &ne) && ne.Timeout()
}

// desktopName reads the greeting and ServerInit of the desktop at the far end of a stream
// that readStatus opened (the stream's frames around the RFB bytes) and returns its name.
func desktopName(t *testing.T, c io.ReadWriteCloser) string {
	t.Helper()
	a, b := net.Pipe()
	st := resume.New(resume.NewID(), b, resume.Options{})
	// The stream stays open until the test ends: aborting it ends the session's only
	// channel, and the caller still looks at the session connected.
	t.Cleanup(func() { st.Abort(nil) })
	if err := st.Attach(c, 0, false); err != nil {
		t.Fatal(err)
	}
	a.SetDeadline(time.Now().Add(10 * time.Second))
	v, err := rfb.NewClient(a)
	if err != nil {
		t.Fatalf("the desktop's handshake: %v", err)
	}
	return v.Name()
}

// oneNodeSite is a site of one front door and one machine, its group in direct mode.
const oneNodeSite = `
site: {name: one, default_zone: hq, secure_gateway: false}
zones: [{name: hq, primary: true, ranges: [127.0.0.0/8]}]
nodes:
  - name: fd-1
    zone: hq
    listeners: [{kind: launch, address: "127.44.0.11:9443"}]
groups: [{name: desktops, kind: shared}]
machines: [{name: vda-1, address: 127.44.1.1, zone: hq, group: desktops}]
resources: [{name: desktop, kind: desktop, groups: [{group: desktops}], entitled: {everyone: true}}]
users: [{name: alice, password_hash: "$2a$10$hmIm37EQl2GI6WzyFg.kUe2OoNhztKxrxmbZEcRHkzoi.ekBqG9n2"}]
`

// A site of one node runs in the lab as frontdoor serve runs it: on bolt in the node's data
// dir, with no etcd; a launch lands on its machine.
func TestLabOfOneNodeRunsOnBolt(t *testing.T) {
	cfg, err := configs.Load("one.yaml", []byte(oneNodeSite))
	if err != nil {
		t.Fatal(err)
	}
	l, _, _ := startLabWith(t, Options{Config: cfg})
	if l.Etcd != nil || l.Site() != nil {
		t.Fatal("a site of one node started an etcd")
	}
	desc, code := launch(t, l, "127.44.0.9", "https://127.44.0.11:9443", "alice", "desktop")
	if code != http.StatusOK || desc.Mode != "direct" || desc.Machine != "vda-1" {
		t.Fatalf("launch: %d %+v", code, desc)
	}
	if _, err := os.Stat(filepath.Join(l.DataDir, "nodes", "fd-1", "frontdoor.db")); err != nil {
		t.Fatalf("the node's bolt store: %v", err)
	}
	if _, err := l.Sessions(context.Background()); !errors.Is(err, ErrNoSiteDatabase) {
		t.Fatalf("Sessions on a site of one node: %v, want ErrNoSiteDatabase", err)
	}
}

// A disconnected session resumed from another endpoint leaves the old endpoint's reconnect
// ticket refused: the laptop that lost its network cannot come back into the desktop the
// kiosk now shows.
func TestResumingElsewhereRevokesTheOldEndpointsTickets(t *testing.T) {
	l, _ := startLab(t)
	old, code := launchFrom(t, l, "127.42.0.9", "https://127.42.0.11:9443", "alice", "desktop", "alice-laptop")
	if code != http.StatusOK {
		t.Fatalf("first launch: %d %+v", code, old)
	}
	addr := net.JoinHostPort(old.Gateways[0].Addresses[0].String(), "8443")
	dial := func(tok string) (bool, string) {
		t.Helper()
		conn, err := tls.Dial("tcp", addr, l.TLSClientConfig())
		if err != nil {
			t.Fatal(err)
		}
		defer conn.Close()
		conn.SetDeadline(time.Now().Add(5 * time.Second))
		ticket.WriteFrame(conn, tok)
		return readStatus(conn)
	}
	ok, next := dial(old.LaunchTicket)
	if !ok || next == "" {
		t.Fatalf("the laptop's channel: admitted %v, next reconnect ticket %q", ok, next)
	}
	waitState(t, l, old.SessionID, broker.StateDisconnected)
	kiosk, code := launchFrom(t, l, "127.42.0.9", "https://127.42.0.12:9443", "alice", "desktop", "kiosk-7")
	if code != http.StatusOK || kiosk.SessionID != old.SessionID {
		t.Fatalf("resuming at the kiosk: %d %+v, want session %s", code, kiosk, old.SessionID)
	}
	// The laptop holds the reconnect ticket its gateway handed out (the launch's one was used
	// up with the launch ticket).
	for deadline := time.Now().Add(5 * time.Second); ; time.Sleep(50 * time.Millisecond) {
		ok, n := dial(next)
		if !ok {
			break
		}
		next = n // taken before the revocation came: the laptop holds the next one
		if time.Now().After(deadline) {
			t.Fatal("the laptop's reconnect ticket still opens channels 5s after the kiosk resumed the session")
		}
	}
	if ok, _ := dial(kiosk.ReconnectTicket); !ok {
		t.Fatal("the kiosk's reconnect ticket was refused")
	}
}
