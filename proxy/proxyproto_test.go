package proxy

import (
	"bufio"
	"fmt"
	"io"
	"net"
	"net/netip"
	"testing"

	"github.com/frontdoor-vdi/frontdoor/proxy/proxyproto"
)

// headerBackend reads the PROXY header the proxy sends and answers "source zone", then the
// first line of payload it got after the header.
func headerBackend(t *testing.T) netip.AddrPort {
	return startTCP(t, func(c *net.TCPConn) {
		br := bufio.NewReader(c)
		h, err := proxyproto.Read(br)
		if err != nil {
			fmt.Fprintf(c, "error %v\n", err)
			return
		}
		line, _ := br.ReadString('\n')
		fmt.Fprintf(c, "%s %s|%s", h.Source.Addr(), h.Zone, line)
		io.Copy(io.Discard, c)
	}).addr()
}

func TestProxyProtocolIsParsedOnlyFromTrustedPeers(t *testing.T) {
	be := headerBackend(t)
	zones := LocatorFunc(func(a netip.Addr) string {
		switch {
		case a.Is4() && a.As4()[0] == 127:
			return "loopback"
		case a == netip.MustParseAddr("192.0.2.7"):
			return "east"
		}
		return ""
	})
	trusted := Listener{Name: "trusted", Address: loopback, Pool: "p",
		ProxyTrusted: []netip.Prefix{netip.MustParsePrefix("127.0.0.0/8")}}
	untrusted := Listener{Name: "untrusted", Address: loopback, Pool: "p",
		ProxyTrusted: []netip.Prefix{netip.MustParsePrefix("192.0.2.0/24")}}
	s := startServer(t, Config{
		Listeners: []Listener{trusted, untrusted},
		Pools:     []Pool{{Name: "p", SendProxy: "v2", Backends: []Backend{{Address: be}}}},
	}, Options{Locator: zones})
	v1 := "PROXY TCP4 192.0.2.7 127.0.0.1 5555 443\r\n"
	v2 := string(proxyproto.AppendV2(nil, proxyproto.Header{
		Source:      netip.MustParseAddrPort("192.0.2.7:5555"),
		Destination: netip.MustParseAddrPort("127.0.0.1:443"), Zone: "west"}))
	for _, tc := range []struct {
		name, listener, send, want string
		refused                    bool
	}{
		{name: "a trusted v1 header sets the client and its zone", listener: "trusted",
			send: v1 + "hello\n", want: "192.0.2.7 east|hello"},
		{name: "a trusted v2 header's zone TLV is kept", listener: "trusted",
			send: v2 + "hello\n", want: "192.0.2.7 west|hello"},
		{name: "an untrusted peer's header is payload, not an address", listener: "untrusted",
			send: v1 + "hello\n", want: "127.0.0.1 loopback|" + v1[:len(v1)-1]},
		{name: "a trusted peer without a header is dropped", listener: "trusted",
			send: "hello\n", refused: true},
		{name: "a trusted peer with a broken header is dropped", listener: "trusted",
			send: "PROXY TCP4 999.0.0.1 127.0.0.1 1 2\r\nhello\n", refused: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := dial(t, s.Addr(tc.listener))
			c.Write([]byte(tc.send))
			if tc.refused {
				expectClosed(t, c)
				return
			}
			if got := readLine(t, c); got != tc.want {
				t.Fatalf("backend saw %q, want %q", got, tc.want)
			}
		})
	}
}
