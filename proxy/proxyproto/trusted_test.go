package proxyproto

import (
	"bufio"
	"net/netip"
	"strings"
	"testing"
)

// TestClientOfATrustedPeer: the header's source; the peer for LOCAL or no header; an error for
// a header that does not parse; the bytes after the header left to read.
func TestClientOfATrustedPeer(t *testing.T) {
	peer := netip.MustParseAddrPort("10.0.0.1:40000")
	for _, c := range []struct {
		name, in, want, rest string
		err                  bool
	}{
		{"a v1 header", "PROXY TCP4 192.0.2.7 10.0.0.9 5555 443\r\nGET", "192.0.2.7:5555", "GET", false},
		{"no header", "GET / HTTP/1.1", "10.0.0.1:40000", "GET / HTTP/1.1", false},
		{"an UNKNOWN header (the balancer's own)", "PROXY UNKNOWN\r\nX", "10.0.0.1:40000", "X", false},
		{"a broken header", "PROXY TCP4 nonsense\r\n", "", "", true},
	} {
		t.Run(c.name, func(t *testing.T) {
			br := bufio.NewReader(strings.NewReader(c.in))
			got, _, err := Client(br, peer, false)
			if (err != nil) != c.err {
				t.Fatalf("err %v, want error %v", err, c.err)
			}
			if c.err {
				return
			}
			rest := make([]byte, 64)
			n, _ := br.Read(rest)
			if got.String() != c.want || string(rest[:n]) != c.rest {
				t.Fatalf("client %s, rest %q; want %s, %q", got, rest[:n], c.want, c.rest)
			}
		})
	}
	if _, _, err := Client(bufio.NewReader(strings.NewReader("GET /")), peer, true); err == nil {
		t.Error("no header where one is needed: no error")
	}
	if !(Trusted{netip.MustParsePrefix("10.0.0.0/8")}).Has(netip.MustParseAddr("::ffff:10.1.2.3")) {
		t.Error("Trusted.Has misses an IPv4-mapped address")
	}
}
