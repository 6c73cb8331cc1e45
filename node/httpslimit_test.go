package node

import (
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/netip"
	"testing"
	"time"

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
		{"one client through the balancer", "127.0.0.5", func(int) string { return "PROXY TCP4 127.43.7.7 127.0.0.1 50000 443\r\n" }, perSourceHTTPSConns},
		{"many clients through the balancer", "127.0.0.5", func(i int) string {
			return fmt.Sprintf("PROXY TCP4 127.43.8.%d 127.0.0.1 50000 443\r\n", i+1)
		}, perSourceHTTPSConns + extra},
		{"the balancer's own connections, without a header", "127.0.0.5", func(int) string { return "x" }, perSourceHTTPSConns + extra},
		{"the balancer's own connections, a header without an address", "127.0.0.5", func(int) string { return "PROXY UNKNOWN\r\n" }, perSourceHTTPSConns + extra},
		{"an untrusted peer's header", "127.0.0.6", func(i int) string {
			return fmt.Sprintf("PROXY TCP4 127.43.8.%d 127.0.0.1 50000 443\r\n", i+1)
		}, perSourceHTTPSConns},
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
			accepted := make(chan net.Conn, 2*perSourceHTTPSConns)
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
			total := perSourceHTTPSConns + extra
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
