package gateway

import (
	"context"
	"crypto/tls"
	"io"
	"net"
	"net/http"
	"net/netip"
	"testing"
	"time"

	"github.com/coder/websocket"
	"github.com/frontdoor-vdi/frontdoor/ticket"
)

// startWeb runs gateway gw-1 on 127.0.50.1 with a health (HTTPS) port whose WebSockets the
// pages of portal.example may open.
func startWeb(t *testing.T) (*rig, *sessions) {
	t.Helper()
	signer, v, pub := keys(t)
	port, stop := machine(t, pub)
	t.Cleanup(stop)
	s := newSessions("s-1", "s-2")
	l, err := net.Listen("tcp", "127.0.50.1:0")
	if err != nil {
		t.Fatal(err)
	}
	hp := uint16(l.Addr().(*net.TCPAddr).Port)
	l.Close()
	return startWith(t, "127.0.60.1", "gw-1", "127.0.50.1", port, hp, s, signer, v, nil, func(o *Options) {
		o.WebOrigins = []string{"portal.example", "127.0.0.9"}
	}), s
}

// dialWeb opens a WebSocket to the rig's channel path for port with origin ("" for none),
// and returns it as a byte stream, or the HTTP status of the refusal.
func (r *rig) dialWeb(t *testing.T, port uint16, origin string) (net.Conn, int) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	h := http.Header{}
	if origin != "" {
		h.Set("Origin", origin)
	}
	hc := &http.Client{Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: r.pool}}}
	url := "wss://" + net.JoinHostPort(r.addr, itoa(r.health)) + ChannelPath + "?port=" + itoa(port)
	ws, resp, err := websocket.Dial(ctx, url, &websocket.DialOptions{HTTPClient: hc, HTTPHeader: h})
	if err != nil {
		if resp == nil {
			t.Fatalf("dialling %s: %v", url, err)
		}
		return nil, resp.StatusCode
	}
	c := websocket.NetConn(context.Background(), ws, websocket.MessageBinary)
	t.Cleanup(func() { c.Close() })
	return c, http.StatusSwitchingProtocols
}

// A browser's channel: a WebSocket on the HTTPS port carries the same ticket frame, status
// and stream as a TLS channel, and the session is connected through the gateway.
func TestWebSocketChannelCarriesTheStream(t *testing.T) {
	r, s := startWeb(t)
	c, code := r.dialWeb(t, r.port, "https://portal.example:8443")
	if code != http.StatusSwitchingProtocols {
		t.Fatalf("upgrade: %d", code)
	}
	if err := ticket.WriteFrame(c, r.issue(t, ticket.Launch, "s-1", "vda-1")); err != nil {
		t.Fatal(err)
	}
	var st [1]byte
	if _, err := io.ReadFull(c, st[:]); err != nil || st[0] != ticket.StatusOK {
		t.Fatalf("status %d (%v), want OK", st[0], err)
	}
	s.want(t, "connected s-1 gw-1")
	cc, err := openStream(c)
	if err != nil {
		t.Fatal(err)
	}
	echoes(t, cc, 1<<20)
	c.Close()
	s.want(t, "disconnected s-1 gw-1")
}

// A page of another site gets no WebSocket, a port that is not a channel port none either,
// and a WebSocket without a valid ticket gets a denial and nothing from the machine.
func TestWebSocketRefusals(t *testing.T) {
	r, _ := startWeb(t)
	for _, tc := range []struct {
		name   string
		port   uint16
		origin string
		want   int
	}{
		{"another site's page", r.port, "https://evil.example", http.StatusForbidden},
		{"the site's host over http", r.port, "http://portal.example", http.StatusForbidden},
		{"a port the gateway does not carry", r.health, "https://portal.example", http.StatusBadRequest},
		{"the site's page by address", r.port, "https://127.0.0.9:10443", http.StatusSwitchingProtocols},
		{"no Origin: not a browser", r.port, "", http.StatusSwitchingProtocols},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c, code := r.dialWeb(t, tc.port, tc.origin)
			if code != tc.want {
				t.Fatalf("status %d, want %d", code, tc.want)
			}
			if c != nil {
				c.Close()
			}
		})
	}
	c, _ := r.dialWeb(t, r.port, "https://portal.example")
	other, _, _ := keys(t)
	tok, _, _ := other.Issue(ticket.Claims{Kind: ticket.Launch, Session: "s-1", Machine: "vda-1", Mode: ticket.ModeGateway,
		Channels: []ticket.Channel{{Port: r.port, Proto: "tcp"}}}, time.Minute)
	ticket.WriteFrame(c, tok)
	b, err := io.ReadAll(c)
	if len(b) != 1 || b[0] != ticket.StatusDenied {
		t.Fatalf("a forged ticket got %q (%v), want only StatusDenied", b, err)
	}
	c, _ = r.dialWeb(t, r.port, "https://portal.example")
	c.Write([]byte("GET / HTTP/1.1\r\n\r\n"))
	if b, _ := io.ReadAll(c); len(b) != 0 {
		t.Fatalf("a bad frame got %q, want nothing", b)
	}
}

// The HTTPS port keeps the channel ports' pace per source, at accept: a source past it has
// its connections closed before any TLS.
func TestHTTPSPortIsPacedPerSource(t *testing.T) {
	r, _ := startWeb(t)
	refused := 0
	for range 20 {
		for i := 0; r.gw.sources.allow(netip.MustParseAddr("127.0.0.1")); i++ {
			if i > 10*newPerSourceBurst {
				t.Fatal("the source is never held back")
			}
		}
		// (the pace gives a token back every 5 ms: a slow dial may get one)
		c, err := tls.Dial("tcp", net.JoinHostPort(r.addr, itoa(r.health)), &tls.Config{RootCAs: r.pool})
		if err != nil {
			refused++
			continue
		}
		c.Close()
	}
	if refused == 0 {
		t.Fatal("a source past its pace got 20 TLS handshakes of 20 on the HTTPS port")
	}
}
