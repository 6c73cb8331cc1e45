package gateway

import (
	"context"
	"errors"
	"net"
	"net/http"
	"net/netip"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/coder/websocket"
	"github.com/frontdoor-vdi/frontdoor/internal/connlimit"
	"github.com/frontdoor-vdi/frontdoor/ticket"
)

// ChannelPath is where a browser opens a TCP channel over a WebSocket on the gateway's HTTPS
// port: GET ChannelPath?port=N upgrades, and the WebSocket then carries exactly what a TLS
// channel to port N carries — the ticket frame first (never in the URL), the gateway's
// status, then the channel's bytes, in binary messages whose boundaries mean nothing. The
// same ticket rules admit it. The gateway relays bytes; it never reads the display protocol.
const ChannelPath = "/v1/channel"

// connKey holds, in a request's context, the HTTPS port's connection it came on.
type connKey struct{}

// serveHTTPS answers the HTTPS port: WebSocket channels at ChannelPath, health elsewhere.
func (g *Gateway) serveHTTPS(lim *connlimit.Listener) http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("GET "+ChannelPath, func(w http.ResponseWriter, r *http.Request) { g.serveWebSocket(w, r, lim) })
	mux.HandleFunc("/", g.serveHealth)
	return lim.Handler(mux)
}

// httpsConnContext remembers the request's connection for serveWebSocket, beside what lim
// remembers.
func httpsConnContext(lim *connlimit.Listener) func(context.Context, net.Conn) context.Context {
	return func(ctx context.Context, c net.Conn) context.Context {
		return context.WithValue(lim.ConnContext(ctx, c), connKey{}, c)
	}
}

// serveWebSocket opens a TCP channel over a WebSocket. A browser's page may open one only
// from the site's own pages: an Origin header, when there is one (every browser sends it),
// must name one of Options.WebOrigins over https, so that no other site's page can use the
// tickets a browser holds (it never holds them in a cookie either).
func (g *Gateway) serveWebSocket(w http.ResponseWriter, r *http.Request, lim *connlimit.Listener) {
	client, _ := netip.ParseAddrPort(r.RemoteAddr)
	port64, err := strconv.ParseUint(r.URL.Query().Get("port"), 10, 16)
	if err != nil || !slices.Contains(g.o.TCPPorts, uint16(port64)) {
		http.Error(w, "port must be one of the gateway's TCP channel ports", http.StatusBadRequest)
		return
	}
	port := uint16(port64)
	if o := r.Header.Get("Origin"); o != "" && !g.webOrigin(o) {
		g.log.Debug("channel refused", "client", client, "port", port, "reason", "a WebSocket from another site's page", "origin", clip(o, 100))
		http.Error(w, "this page's origin may not open channels", http.StatusForbidden)
		return
	}
	ws, err := websocket.Accept(w, r, &websocket.AcceptOptions{
		InsecureSkipVerify: true, // the Origin was checked above, against the site's pages
		CompressionMode:    websocket.CompressionDisabled,
	})
	if err != nil {
		g.log.Debug("websocket upgrade failed", "client", client, "err", err)
		return
	}
	raw, _ := r.Context().Value(connKey{}).(net.Conn)
	if raw != nil {
		// Hijacked: until its ticket is admitted, it may give its place to a new connection
		// as any that waits, and it has the handshake's time to show the ticket.
		lim.ConnState(raw, http.StateIdle)
		raw.SetDeadline(time.Now().Add(g.o.HandshakeTimeout))
	}
	conn := websocket.NetConn(context.Background(), ws, websocket.MessageBinary)
	kept := false // an open channel's goroutines close conn
	defer func() {
		if !kept {
			conn.Close()
		}
	}()
	tok, err := ticket.ReadFrame(conn)
	if err != nil {
		// As on the TLS ports: only a frame that is not ours is worth a log line.
		if errors.Is(err, ticket.ErrFrame) {
			g.log.Info("channel refused", "client", client, "port", port, "reason", "bad frame")
		} else {
			g.log.Debug("channel closed before its ticket", "client", client, "port", port, "err", err)
		}
		return
	}
	kept = g.serveChannel(conn, nil, tok, port, client, func() {
		if raw != nil {
			lim.Hold(raw)
			raw.SetDeadline(time.Time{})
		}
	})
}

// pacedListener closes, as it accepts them, the connections of a source that opens them
// faster than its pace (Gateway.sources), before any TLS: the HTTPS port's part of the pace
// the TCP channel ports keep (acceptLoop).
type pacedListener struct {
	net.Listener
	g *Gateway
}

// Accept implements net.Listener.
func (l pacedListener) Accept() (net.Conn, error) {
	for {
		c, err := l.Listener.Accept()
		if err != nil {
			return nil, err
		}
		if !l.g.paced(c) {
			c.Close()
			continue
		}
		return c, nil
	}
}

// clip returns s, at most n bytes of it.
func clip(s string, n int) string {
	if len(s) > n {
		return s[:n]
	}
	return s
}

// webOrigin reports whether a page of origin o may open channels: https and a host of
// Options.WebOrigins (any port).
func (g *Gateway) webOrigin(o string) bool {
	u, err := url.Parse(o)
	if err != nil || u.Scheme != "https" {
		return false
	}
	host := strings.ToLower(strings.TrimSuffix(u.Hostname(), "."))
	for _, h := range g.o.WebOrigins {
		if strings.EqualFold(strings.TrimSuffix(h, "."), host) {
			return true
		}
	}
	return false
}
