package api

import (
	"bytes"
	"context"
	"crypto/hmac"
	"crypto/md5"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log"
	"net"
	"net/http"
	"net/netip"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"go.uber.org/goleak"
	"layeh.com/radius"
	"layeh.com/radius/rfc2865"
	"layeh.com/radius/rfc2869"

	"github.com/frontdoor-vdi/frontdoor/client"
	"github.com/frontdoor-vdi/frontdoor/configs"
	"github.com/frontdoor-vdi/frontdoor/internal/testclock"
	"github.com/frontdoor-vdi/frontdoor/ticket"
)

// radiusSecretText is the shared secret of the tests' RADIUS servers.
const radiusSecretText = "s3cret-shared-with-the-nas"

// radiusServer is a RADIUS server of layeh.com/radius on loopback UDP, as a site's RSA,
// Duo or NPS server would answer: a user's passcode 123456 is accepted once (a second use is
// rejected, as those servers do), 999999 is challenged ("Enter the next tokencode"), the
// password "radius-pw" (role primary) is accepted as often as it comes, and anything else
// is rejected. It checks each request's Message-Authenticator (a request without one is
// dropped, as a server that requires it does) and signs its answers with one, unless
// unsigned.
type radiusServer struct {
	addr     netip.AddrPort
	secret   []byte
	unsigned bool // answers carry no Message-Authenticator

	mu       sync.Mutex // guards requests, used, attrs
	requests int
	used     map[string]bool // users whose 123456 was accepted
	attrs    []string        // the last request's NAS-Identifier, Calling-Station-Id and NAS-Port-Type
}

// startRADIUS starts a radiusServer with secret on 127.0.0.1, stopped when the test ends.
func startRADIUS(t *testing.T, secret string, unsigned bool) *radiusServer {
	t.Helper()
	pc, err := net.ListenPacket("udp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	s := &radiusServer{addr: pc.LocalAddr().(*net.UDPAddr).AddrPort(), secret: []byte(secret), unsigned: unsigned, used: map[string]bool{}}
	srv := &radius.PacketServer{Handler: radius.HandlerFunc(s.serve), SecretSource: radius.StaticSecretSource(s.secret),
		ErrorLog: log.New(io.Discard, "", 0)}
	done := make(chan error, 1)
	go func() { done <- srv.Serve(pc) }()
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		srv.Shutdown(ctx)
		if err := <-done; err != nil && !errors.Is(err, radius.ErrServerShutdown) {
			t.Errorf("the RADIUS server: %v", err)
		}
	})
	return s
}

// count is how many requests the server answered.
func (s *radiusServer) count() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.requests
}

func (s *radiusServer) serve(w radius.ResponseWriter, r *radius.Request) {
	raw, err := r.Packet.MarshalBinary()
	if err != nil || !testMACheck(raw, r.Authenticator, s.secret) {
		return // unsigned or signed with another secret: dropped
	}
	user := rfc2865.UserName_GetString(r.Packet)
	pass := rfc2865.UserPassword_GetString(r.Packet)
	s.mu.Lock()
	s.requests++
	s.attrs = []string{rfc2865.NASIdentifier_GetString(r.Packet), rfc2865.CallingStationID_GetString(r.Packet), rfc2865.NASPortType_Get(r.Packet).String()}
	code := radius.CodeAccessReject
	switch {
	case pass == "123456" && !s.used[user]:
		s.used[user] = true
		code = radius.CodeAccessAccept
	case pass == "radius-pw":
		code = radius.CodeAccessAccept
	case pass == "999999":
		code = radius.CodeAccessChallenge
	}
	s.mu.Unlock()
	resp := r.Response(code)
	if code == radius.CodeAccessChallenge {
		rfc2865.ReplyMessage_SetString(resp, "Enter the next tokencode")
		rfc2865.State_SetString(resp, "round-2")
	}
	if !s.unsigned {
		// The Message-Authenticator of an answer is over the answer with the request's
		// authenticator (RFC 3579 3.2); Encode then computes the Response Authenticator.
		rfc2869.MessageAuthenticator_Set(resp, make([]byte, md5.Size))
		b, _ := resp.MarshalBinary()
		rfc2869.MessageAuthenticator_Set(resp, testMA(b, s.secret))
	}
	w.Write(resp)
}

// testMA is HMAC-MD5 of a packet with its Message-Authenticator zeroed, written here apart
// from the code under test.
func testMA(b, secret []byte) []byte {
	b = bytes.Clone(b)
	for i := 20; i+2 <= len(b); i += int(b[i+1]) {
		if b[i] == 80 {
			clear(b[i+2 : i+int(b[i+1])])
		}
	}
	h := hmac.New(md5.New, secret)
	h.Write(b)
	return h.Sum(nil)
}

// testMACheck checks a request's Message-Authenticator, which must be its first attribute.
func testMACheck(raw []byte, auth [16]byte, secret []byte) bool {
	if len(raw) < 38 || raw[20] != 80 || raw[21] != 18 {
		return false
	}
	return hmac.Equal(testMA(raw, secret), raw[22:38])
}

// silentUDP is a UDP port that takes datagrams and never answers: a server that is down
// behind a firewall that drops, not refuses.
func silentUDP(t *testing.T) netip.AddrPort {
	t.Helper()
	pc, err := net.ListenPacket("udp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { pc.Close() })
	return pc.LocalAddr().(*net.UDPAddr).AddrPort()
}

// closedUDP is a loopback UDP port nobody listens on: the kernel refuses datagrams to it.
func closedUDP(t *testing.T) netip.AddrPort {
	t.Helper()
	pc, err := net.ListenPacket("udp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	a := pc.LocalAddr().(*net.UDPAddr).AddrPort()
	pc.Close()
	return a
}

// radiusSite is the lab site whose site.auth.radius asks servers, on a fake clock, with an
// access rule that asks staff for the radius factor (and, in role factor, a password).
type radiusSite struct {
	*loginSite
	secret string // the secret file
	logs   *syncBuffer
}

// syncBuffer is a bytes.Buffer for a logger that goroutines share.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.b.Write(p)
}

func (b *syncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.b.String()
}

// newRADIUSSite builds the site; radius is the YAML of site.auth.radius beside its servers
// and secret file (e.g. "role: factor, users: [alice]"). In role primary alice has no
// password hash.
func newRADIUSSite(t *testing.T, radiusYAML string, servers ...netip.AddrPort) *radiusSite {
	t.Helper()
	secret := filepath.Join(t.TempDir(), "radius-secret")
	if err := os.WriteFile(secret, []byte(radiusSecretText+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	raw, err := configs.Shipped("lab.yaml")
	if err != nil {
		t.Fatal(err)
	}
	var list []string
	for _, s := range servers {
		list = append(list, strconv.Quote(s.String()))
	}
	rule := "factors: [password, radius]"
	site := string(raw)
	if strings.Contains(radiusYAML, "primary") {
		rule = "factors: [radius]"
		site = strings.Replace(site, `{name: alice, home_zone: east, password_hash: "`+labHash+`"}`, "{name: alice, home_zone: east}", 1)
	}
	site = strings.Replace(site, "\nsite:\n", "\nsite:\n  auth: {min_password_cost: 4, radius: {servers: ["+strings.Join(list, ", ")+"], secret_file: "+strconv.Quote(secret)+", timeout: 300ms, "+radiusYAML+"}}\n", 1)
	site = strings.ReplaceAll(site, labHash, cheapLabHash)
	site += "\naccess_rules:\n  - {name: staff-radius, action: allow, user_groups: [staff], " + rule + "}\n"
	cfg, err := configs.Load("lab.yaml", []byte(site))
	if err != nil {
		t.Fatal(err)
	}
	clk := testclock.New(time.Date(2026, 12, 1, 9, 0, 0, 0, time.UTC))
	s := &radiusSite{loginSite: newLoginSite(t, cfg, clk), secret: secret, logs: &syncBuffer{}}
	s.loginSite.logs = s.logs
	return s
}

// launch posts a launch of the desktop as user with pass and code (OTPHeader; "" for none)
// and returns the status and the answer's error text, and its tickets' claims when it went.
func (s *radiusSite) launch(url string, pool *x509.CertPool, user, pass, code string) (int, string, *ticket.Claims) {
	s.t.Helper()
	req, _ := http.NewRequest(http.MethodPost, url+"/v1/launch", strings.NewReader(`{"resource":"desktop","endpoint":"pc"}`))
	req.Header.Set("Content-Type", "application/json")
	req.SetBasicAuth(user, pass)
	if code != "" {
		req.Header.Set(OTPHeader, code)
	}
	hc := &http.Client{Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool}}, Timeout: 20 * time.Second}
	defer hc.CloseIdleConnections()
	resp, err := hc.Do(req)
	if err != nil {
		s.t.Fatal(err)
	}
	defer resp.Body.Close()
	var answer struct {
		Error           string `json:"error"`
		Reason          string `json:"reason"`
		ReconnectTicket string `json:"reconnect_ticket"`
	}
	json.NewDecoder(resp.Body).Decode(&answer)
	if resp.StatusCode != http.StatusOK {
		return resp.StatusCode, answer.Error + answer.Reason, nil
	}
	c, err := s.verifier.Peek(answer.ReconnectTicket)
	if err != nil {
		s.t.Fatalf("the reconnect ticket: %v", err)
	}
	return resp.StatusCode, "", &c
}

// Role factor end to end: alice's password and a passcode the RADIUS server accepts launch,
// sealing password+radius; the request carried the NAS-Identifier, the client's address and
// a Message-Authenticator; the same password and passcode again within the login cache's
// minutes is that login (the server is not asked again), and past them the server refuses
// the used passcode; the password alone lacks the radius factor the rule requires; a
// challenge is refused with a 401 that says what is not supported; rejected passcodes are
// failed logins, throttled (401, then 429).
func TestARADIUSPasscodeIsASecondFactor(t *testing.T) {
	srv := startRADIUS(t, radiusSecretText, false)
	s := newRADIUSSite(t, "role: factor, users: [alice]", srv.addr)
	url, _, pool := s.frontDoor()

	if code, msg, _ := s.launch(url, pool, "alice", "lab", ""); code != http.StatusForbidden || !strings.Contains(msg, "lacks radius") {
		t.Fatalf("the password alone: %d %q, want 403 naming the lacking radius factor", code, msg)
	}
	login := s.clk.Now()
	code, msg, c := s.launch(url, pool, "alice", "lab", "123 456")
	if code != http.StatusOK {
		t.Fatalf("the password and the passcode: %d %q", code, msg)
	}
	if c.User != "alice" || c.Factors != ticket.FactorPassword|ticket.FactorRADIUS || !c.AuthTime.Equal(login) {
		t.Fatalf("the ticket seals %s with %s at %s; want alice, password+radius, %s", c.User, c.Factors, c.AuthTime, login)
	}
	srv.mu.Lock()
	attrs := strings.Join(srv.attrs, ",")
	srv.mu.Unlock()
	if attrs != "lab,127.0.0.1,Virtual" {
		t.Fatalf("the request's NAS-Identifier, Calling-Station-Id, NAS-Port-Type: %s; want lab,127.0.0.1,Virtual", attrs)
	}
	asked := srv.count()
	s.clk.Advance(time.Minute)
	if code, msg, _ := s.launch(url, pool, "alice", "lab", "123456"); code != http.StatusOK || srv.count() != asked {
		t.Fatalf("the same login a minute later: %d %q, the server asked %d times more; want 200 from the cache", code, msg, srv.count()-asked)
	}
	s.clk.Advance(5 * time.Minute)
	if code, _, _ := s.launch(url, pool, "alice", "lab", "123456"); code != http.StatusUnauthorized || srv.count() != asked+1 {
		t.Fatalf("the used passcode past the cache's minutes: %d after %d more requests; want 401 from the server", code, srv.count()-asked)
	}
	if code, _, _ := s.launch(url, pool, "alice", "wrong", "123456"); code != http.StatusUnauthorized || srv.count() != asked+1 {
		t.Fatalf("a wrong password: %d, the server asked %d more times; want 401 without asking it", code, srv.count()-asked-1)
	}

	code, msg, _ = s.launch(url, pool, "alice", "lab", "999999")
	if code != http.StatusUnauthorized || !strings.Contains(msg, "Access-Challenge") || !strings.Contains(msg, "does not support") || !strings.Contains(msg, "Enter the next tokencode") {
		t.Fatalf("a challenged passcode: %d %q; want 401 saying the challenge is not supported, with the server's words", code, msg)
	}
	if !strings.Contains(s.logs.String(), "challenge") {
		t.Errorf("the challenge was not logged:\n%s", s.logs)
	}

	// Rejected passcodes: 401 while the source has tokens (the wrong password and the
	// challenge above took two of its 10), then 429 without asking the server.
	tooMany := false
	for i := 0; i < 2*failuresPerSource && !tooMany; i++ {
		switch code, msg, _ := s.launch(url, pool, "alice", "lab", fmt.Sprintf("%06d", 200000+i)); {
		case code == http.StatusTooManyRequests && i >= failuresPerSource-3:
			tooMany = true
		case code != http.StatusUnauthorized:
			t.Fatalf("rejected passcode %d: %d %q; want 401 (429 only after %d)", i, code, msg, failuresPerSource)
		}
	}
	if !tooMany {
		t.Fatalf("%d rejected passcodes were all asked, none throttled", 2*failuresPerSource)
	}
	before := srv.count()
	if code, _, _ := s.launch(url, pool, "alice", "lab", "123456"); code != http.StatusTooManyRequests || srv.count() != before {
		t.Fatalf("a login once throttled: %d, the server asked %d more times; want 429 without asking", code, srv.count()-before)
	}
}

// The servers are asked in order: one that is down (its port refuses) or silent (no answer
// within the timeout, retries included) gives way to the next; with none answering — down,
// silent, keyed with another secret (its answers fail the Response Authenticator), or
// unsigned while the site requires a Message-Authenticator — a login is answered 503,
// logged, and counts no failure; a site that takes unsigned answers takes them.
func TestRADIUSServersFailOverAndNoAnswerIs503(t *testing.T) {
	// Registered first, so checked last: after the servers and the front doors closed, no
	// exchange (its socket, its cancel hook) is left behind.
	before := goleak.IgnoreCurrent()
	t.Cleanup(func() { goleak.VerifyNone(t, before) })
	good := startRADIUS(t, radiusSecretText, false)
	for _, tt := range []struct {
		name    string
		extra   string
		servers func() []netip.AddrPort
		want    int
		log     string
	}{
		{"a server that refuses gives way to the next", "retries: 1", func() []netip.AddrPort { return []netip.AddrPort{closedUDP(t), good.addr} }, http.StatusOK, "asking the next"},
		{"a silent server gives way to the next after its timeouts", "retries: 1", func() []netip.AddrPort { return []netip.AddrPort{silentUDP(t), good.addr} }, http.StatusOK, "no answer to 2 sends"},
		{"no server up is 503", "retries: 0", func() []netip.AddrPort { return []netip.AddrPort{closedUDP(t), silentUDP(t)} }, http.StatusServiceUnavailable, "no RADIUS server answered"},
		{"a server of another secret is no answer", "retries: 0", func() []netip.AddrPort { return []netip.AddrPort{startRADIUSNoCheck(t, "another-secret").addr} }, http.StatusServiceUnavailable, "not authentic (is the shared secret the server's?)"},
		{"an unsigned answer is no answer", "retries: 0", func() []netip.AddrPort { return []netip.AddrPort{startRADIUS(t, radiusSecretText, true).addr} }, http.StatusServiceUnavailable, "no Message-Authenticator"},
		{"a site may take unsigned answers", "retries: 0, require_message_authenticator: false", func() []netip.AddrPort { return []netip.AddrPort{startRADIUS(t, radiusSecretText, true).addr} }, http.StatusOK, "RADIUS accepted"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			good.mu.Lock()
			clear(good.used) // each case logs in with 123456 afresh
			good.mu.Unlock()
			s := newRADIUSSite(t, "role: factor, users: [alice], "+tt.extra, tt.servers()...)
			url, _, pool := s.frontDoor()
			code, msg, _ := s.launch(url, pool, "alice", "lab", "123456")
			if code != tt.want {
				t.Fatalf("a login: %d %q, want %d", code, msg, tt.want)
			}
			if !strings.Contains(s.logs.String(), tt.log) {
				t.Fatalf("the log does not say %q:\n%s", tt.log, s.logs)
			}
			if !strings.HasPrefix(tt.name, "no server") {
				return
			}
			// No failure counted: more logins than the source's tokens are all 503, none 429.
			for i := range failuresPerSource + 1 {
				if code, msg, _ := s.launch(url, pool, "alice", "lab", "123456"); code != http.StatusServiceUnavailable {
					t.Fatalf("login %d with the servers down: %d %q; want 503 (no failure counted)", i, code, msg)
				}
			}
		})
	}
}

// startRADIUSNoCheck is a RADIUS server of secret that answers every request (it does not
// check Message-Authenticators, so a request of another secret gets a reject signed with
// its own).
func startRADIUSNoCheck(t *testing.T, secret string) *radiusServer {
	t.Helper()
	pc, err := net.ListenPacket("udp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	s := &radiusServer{addr: pc.LocalAddr().(*net.UDPAddr).AddrPort(), secret: []byte(secret)}
	srv := &radius.PacketServer{SecretSource: radius.StaticSecretSource(s.secret), ErrorLog: log.New(io.Discard, "", 0),
		Handler: radius.HandlerFunc(func(w radius.ResponseWriter, r *radius.Request) {
			resp := r.Response(radius.CodeAccessReject)
			rfc2869.MessageAuthenticator_Set(resp, make([]byte, md5.Size))
			b, _ := resp.MarshalBinary()
			rfc2869.MessageAuthenticator_Set(resp, testMA(b, s.secret))
			w.Write(resp)
		})}
	go srv.Serve(pc)
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		srv.Shutdown(ctx)
	})
	return s
}

// Role primary: alice has no password hash, and her password is the RADIUS server's to
// check: accepted, the login's factor is radius (not password, which names a bcrypt check);
// a wrong one is a failed login; bob, whom the role does not cover, logs in with his bcrypt
// password as before; the same password again within the cache's minutes is not asked
// again. frontdoor connect's launcher logs in so too.
func TestRADIUSAsThePrimaryCheckOfThePassword(t *testing.T) {
	srv := startRADIUS(t, radiusSecretText, false)
	s := newRADIUSSite(t, "role: primary, users: [alice]", srv.addr)
	url, _, pool := s.frontDoor()
	code, msg, c := s.launch(url, pool, "alice", "radius-pw", "")
	if code != http.StatusOK || c.Factors != ticket.FactorRADIUS {
		t.Fatalf("alice's RADIUS password: %d %q, factors %v; want 200 with radius", code, msg, c)
	}
	asked := srv.count()
	if code, _, _ := s.launch(url, pool, "alice", "radius-pw", ""); code != http.StatusOK || srv.count() != asked {
		t.Fatalf("the same login again: %d after %d more requests; want 200 from the cache", code, srv.count()-asked)
	}
	if code, _, _ := s.launch(url, pool, "alice", "lab", ""); code != http.StatusUnauthorized || srv.count() != asked+1 {
		t.Fatalf("a wrong password: %d after %d more requests; want 401 from the server", code, srv.count()-asked)
	}
	// bob is not covered: his bcrypt password, which the staff rule's radius factor then
	// lacks (a 403, after a login that went).
	if code, msg, _ := s.launch(url, pool, "bob", "lab", ""); code != http.StatusForbidden || !strings.Contains(msg, "lacks radius") || srv.count() != asked+1 {
		t.Fatalf("bob's bcrypt password: %d %q; want 403 lacking radius, without asking the server", code, msg)
	}

	host, port, _ := net.SplitHostPort(strings.TrimPrefix(url, "https://"))
	p, _ := strconv.Atoi(port)
	l := &client.Launcher{Name: host, Port: uint16(p), User: "alice", Password: "radius-pw", Resource: "desktop", Endpoint: "laptop", RootCAs: pool}
	s.clk.Advance(10 * time.Minute)
	if _, _, err := l.Launch(context.Background()); err != nil {
		t.Fatalf("the launcher with alice's RADIUS password: %v", err)
	}
}

// The secret file must be its owner's alone, and not empty: a login that needs RADIUS is
// then answered 503 rather than asked with it.
func TestARADIUSSecretFileOthersMayReadIsRefused(t *testing.T) {
	srv := startRADIUS(t, radiusSecretText, false)
	s := newRADIUSSite(t, "role: factor, users: [alice]", srv.addr)
	url, _, pool := s.frontDoor()
	if b, err := ReadRADIUSSecret(s.secret); err != nil || string(b) != radiusSecretText {
		t.Fatalf("ReadRADIUSSecret: %q %v; want the secret without its newline", b, err)
	}
	if err := os.Chmod(s.secret, 0o640); err != nil {
		t.Fatal(err)
	}
	if _, err := ReadRADIUSSecret(s.secret); !errors.Is(err, ErrRADIUSSecretMode) {
		t.Fatalf("ReadRADIUSSecret of a 0640 file: %v, want %v", err, ErrRADIUSSecretMode)
	}
	if code, msg, _ := s.launch(url, pool, "alice", "lab", "123456"); code != http.StatusServiceUnavailable || srv.count() != 0 {
		t.Fatalf("a login against a 0640 secret file: %d %q after %d requests; want 503 without asking", code, msg, srv.count())
	}
	if err := os.Chmod(s.secret, 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(s.secret, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := ReadRADIUSSecret(s.secret); err == nil || !strings.Contains(err.Error(), "empty") {
		t.Fatalf("ReadRADIUSSecret of an empty file: %v, want an error", err)
	}
}
