package node

import (
	"context"
	"crypto/tls"
	"encoding/base64"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/netip"
	"testing"
	"time"

	"github.com/frontdoor-vdi/frontdoor/configs"
	"github.com/frontdoor-vdi/frontdoor/internal/connlimit"
	"github.com/prometheus/client_golang/prometheus"
)

// Behind a trusted load balancer the per-source bound holds per client of the PROXY header:
// one client's connections past it are closed, many clients' are not, and the balancer's
// own connections (no header, or one without an address) are never bounded. An untrusted
// peer's header is not read: its connections count as its own.
func TestPerSourceBoundBehindATrustedProxy(t *testing.T) {
	const extra = 6
	cases := []struct {
		name, from string
		// header returns what the i-th connection sends first.
		header       func(i int) string
		wantAccepted int
	}{
		{"one client through the balancer", "127.0.0.5", func(int) string { return "PROXY TCP4 127.43.7.7 127.0.0.1 50000 443\r\n" }, perSourceHTTPSConns(maxHTTPSConns)},
		{"many clients through the balancer", "127.0.0.5", func(i int) string {
			return fmt.Sprintf("PROXY TCP4 127.43.%d.%d 127.0.0.1 50000 443\r\n", 8+i/250, 1+i%250)
		}, perSourceHTTPSConns(maxHTTPSConns) + extra},
		{"the balancer's own connections, without a header", "127.0.0.5", func(int) string { return "x" }, perSourceHTTPSConns(maxHTTPSConns) + extra},
		{"the balancer's own connections, a header without an address", "127.0.0.5", func(int) string { return "PROXY UNKNOWN\r\n" }, perSourceHTTPSConns(maxHTTPSConns) + extra},
		{"an untrusted peer's header", "127.0.0.6", func(i int) string {
			return fmt.Sprintf("PROXY TCP4 127.43.%d.%d 127.0.0.1 50000 443\r\n", 8+i/250, 1+i%250)
		}, perSourceHTTPSConns(maxHTTPSConns)},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			raw, err := net.Listen("tcp", "127.0.0.1:0")
			if err != nil {
				t.Fatal(err)
			}
			h := &httpsListener{kind: "launch", address: raw.Addr().String(), srv: &http.Server{},
				trusted: []netip.Prefix{netip.MustParsePrefix("127.0.0.5/32")}}
			r := &Node{o: Options{Registry: prometheus.NewRegistry()}}
			if err := r.limitHTTPS(h, newProxyListener(raw, h.trusted, slog.New(slog.NewTextHandler(io.Discard, nil)))); err != nil {
				t.Fatal(err)
			}
			defer h.ln.Close()
			accepted := make(chan net.Conn, 2*perSourceHTTPSConns(maxHTTPSConns))
			go func() {
				for {
					c, err := h.ln.Accept()
					if err != nil {
						return
					}
					accepted <- c
				}
			}()
			d := &net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP(c.from)}, Timeout: 5 * time.Second}
			total := perSourceHTTPSConns(maxHTTPSConns) + extra
			for i := range total {
				nc, err := d.Dial("tcp", raw.Addr().String())
				if err != nil {
					t.Fatal(err)
				}
				defer nc.Close()
				if _, err := io.WriteString(nc, c.header(i)); err != nil {
					t.Fatal(err)
				}
			}
			lim := h.ln.(*connlimit.Listener)
			deadline := time.Now().Add(10 * time.Second)
			for st := lim.Stats(); st.Accepted+st.Refused < uint64(total); st = lim.Stats() {
				if time.Now().After(deadline) {
					t.Fatalf("after 10 s: %+v, want %d connections accepted or refused", st, total)
				}
				time.Sleep(5 * time.Millisecond)
			}
			if st := lim.Stats(); st.Accepted != uint64(c.wantAccepted) || st.Refused != uint64(total-c.wantAccepted) {
				t.Fatalf("stats %+v, want %d accepted and %d refused", st, c.wantAccepted, total-c.wantAccepted)
			}
			for range c.wantAccepted {
				(<-accepted).Close()
			}
		})
	}
}

// bodylessSite is a site of one node with a launch listener and a user, alice (password
// "lab").
const bodylessSite = `
site: {name: bodyless}
zones: [{name: hq, primary: true, ranges: [127.0.0.0/8]}]
nodes: [{name: fd, zone: hq, listeners: [{kind: launch, address: "127.0.97.1:9443"}]}]
groups: [{name: desktops}]
machines: [{name: vda-1, address: 127.0.97.11, zone: hq, group: desktops}]
resources: [{name: desktop, groups: [{group: desktops}], entitled: {everyone: true}}]
users: [{name: alice, password_hash: "$2a$10$hmIm37EQl2GI6WzyFg.kUe2OoNhztKxrxmbZEcRHkzoi.ekBqG9n2"}]
`

// Finding H1 of the security review, through a node's launch listener: requests whose
// headers came and whose body never does — sent by a user of the site, so they pass the
// login and wait in the handler — from many sources fill every place of the listener. They
// held it for the 30 s ReadTimeout and Accept blocked: the launch, agent and admin APIs were
// gone. Now a connection that waits for its body is closed for a new one when the listener
// is full, and an honest client gets through.
func TestBodylessRequestsDoNotStopTheLaunchAPI(t *testing.T) {
	cfg, err := configs.Load("site.yaml", []byte(bodylessSite))
	if err != nil {
		t.Fatal(err)
	}
	r, err := New(context.Background(), Options{Config: cfg, DataDir: t.TempDir(), Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { r.Close() })
	const places = 64
	r.httpsMax = places
	if err := r.Listen(); err != nil {
		t.Fatal(err)
	}
	serveNode(t, r)
	lim := r.httpServers[0].ln.(*connlimit.Listener)
	tc := &tls.Config{RootCAs: r.ca.Pool()}
	d := &net.Dialer{Timeout: 5 * time.Second, LocalAddr: &net.TCPAddr{IP: net.IPv4(127, 0, 95, 1)}}
	hc := &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{DialContext: d.DialContext, TLSClientConfig: tc, DisableKeepAlives: true}}
	sessions := func() (int, error) {
		req, _ := http.NewRequest(http.MethodGet, "https://127.0.97.1:9443/v1/sessions", nil)
		req.SetBasicAuth("alice", "lab")
		resp, err := hc.Do(req)
		if err != nil {
			return 0, err
		}
		resp.Body.Close()
		return resp.StatusCode, nil
	}
	// alice signs in first: her login is then remembered, and the bodyless requests (in her
	// name) go past it at once to wait for their bodies, whatever bcrypt costs here (-race).
	if code, err := sessions(); err != nil || code != http.StatusOK {
		t.Fatalf("alice's first login: %d, %v", code, err)
	}
	auth := base64.StdEncoding.EncodeToString([]byte("alice:lab"))
	perSource := perSourceHTTPSRequests(places) / 2
	for i := range places {
		d := &net.Dialer{Timeout: 5 * time.Second, LocalAddr: &net.TCPAddr{IP: net.IPv4(127, 0, 96, byte(1+i/perSource))}}
		c, err := tls.DialWithDialer(d, "tcp", "127.0.97.1:9443", tc)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { c.Close() })
		fmt.Fprintf(c, "POST /v1/launch HTTP/1.1\r\nHost: 127.0.97.1\r\nAuthorization: Basic %s\r\nContent-Type: application/json\r\nContent-Length: 64\r\n\r\n", auth)
	}
	deadline := time.Now().Add(10 * time.Second)
	for st := lim.Stats(); st.Open < places || st.Waiting < places; st = lim.Stats() {
		if time.Now().After(deadline) {
			t.Fatalf("after 10 s: %+v, want %d connections open, all waiting for their bodies", st, places)
		}
		time.Sleep(5 * time.Millisecond)
	}
	code, err := sessions()
	if err != nil {
		t.Fatalf("an honest client while the listener is full of bodyless requests: %v", err)
	}
	if code != http.StatusOK {
		t.Fatalf("an honest client's sessions: %d, want 200", code)
	}
	if st := lim.Stats(); st.Shed == 0 {
		t.Fatalf("stats %+v: want a bodyless request's connection closed for the honest one", st)
	}
}
