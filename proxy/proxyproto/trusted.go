package proxyproto

import (
	"bufio"
	"errors"
	"net/netip"
)

// Trusted names the peers whose PROXY headers are read: the load balancers in front. Every
// listener that takes headers (the proxy's, the launch and admin APIs') follows one rule,
// Client's.
type Trusted []netip.Prefix

// Has reports whether a is a trusted peer.
func (t Trusted) Has(a netip.Addr) bool {
	a = a.Unmap()
	for _, p := range t {
		if p.Contains(a) {
			return true
		}
	}
	return false
}

// Client reads the PROXY header a trusted peer's connection starts with and returns the
// client it names: the header's source; the peer itself for a LOCAL header (the load
// balancer's own connection, such as its health check). A header that starts and does not
// parse is an error, and so is none at all when need is set (the L4 proxy: a balancer that
// sends headers sends them always, as HAProxy's accept-proxy wants); without need a
// connection without one is the peer's own (the APIs, whose balancer may check them with
// plain TLS). Call it for trusted peers only: an untrusted peer's bytes are never read as a
// header, whatever they say.
func Client(br *bufio.Reader, peer netip.AddrPort, need bool) (netip.AddrPort, Header, error) {
	h, err := Read(br)
	switch {
	case errors.Is(err, ErrNoHeader) && !need:
		return peer, Header{}, nil
	case err != nil:
		return netip.AddrPort{}, Header{}, err
	case h.Local || !h.Source.IsValid():
		return peer, h, nil
	}
	return netip.AddrPortFrom(h.Source.Addr().Unmap(), h.Source.Port()), h, nil
}
