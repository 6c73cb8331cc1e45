package client

import (
	"errors"
	"fmt"
	"net/netip"
	"strings"

	"github.com/frontdoor-vdi/frontdoor/wire"
)

// The launch API's descriptor and its parts, declared once for both ends in package wire.
type (
	// Descriptor is the launch API's answer: where and how the client connects.
	Descriptor = wire.Descriptor
	// DesktopInfo is the descriptor's desktop: its protocol, the TCP channel that carries it
	// and the UDP channel of its UDP transport (ExposeUDP carries a viewer's flow on it).
	DesktopInfo = wire.DesktopInfo
	// Channel is one display channel of a session: a port and "tcp" or "udp".
	Channel = wire.Channel
	// GatewayEndpoint is one gateway the descriptor offers.
	GatewayEndpoint = wire.GatewayEndpoint
)

// The modes of a descriptor.
const (
	ModeGateway = wire.ModeGateway
	ModeDirect  = wire.ModeDirect
)

// DefaultChannels are the channels a session opens when Options.Channels is empty.
var DefaultChannels = []Channel{{Port: 8443, Proto: "tcp"}, {Port: 4172, Proto: "udp"}}

// route is one place to open a session's channels: a gateway address or the machine itself,
// TLS on TCP and QUIC on UDP either way (plain UDP only to a gateway without a QUIC port).
type route struct {
	name     string     // gateway name, or "direct"
	zone     string     // gateway zone
	addr     netip.Addr // where to dial
	machine  string     // direct: the machine its certificate must name; "" for a gateway
	quicPort uint16     // a gateway's QUIC port, or 0
	// httpsPort is a gateway's HTTPS port (channels over WebSockets), or 0
	httpsPort uint16
}

func (r route) String() string {
	if r.name == "" || r.name == ModeDirect {
		return "direct " + r.addr.String()
	}
	return r.name + " " + r.addr.String()
}

// parseHost accepts an IP address or an "IP:port" and returns the IP.
func parseHost(s string) (netip.Addr, error) {
	s = strings.TrimSpace(s)
	if a, err := netip.ParseAddr(strings.Trim(s, "[]")); err == nil {
		return a.Unmap(), nil
	}
	if ap, err := netip.ParseAddrPort(s); err == nil {
		return ap.Addr().Unmap(), nil
	}
	return netip.Addr{}, fmt.Errorf("%q is not an IP address", s)
}

// routes lists where d's channels can be opened, in the descriptor's order.
func routes(d *Descriptor) ([]route, error) {
	switch d.Mode {
	case ModeDirect:
		a, err := parseHost(d.Address)
		if err != nil {
			return nil, fmt.Errorf("direct descriptor: machine address: %w", err)
		}
		if d.Machine == "" {
			return nil, errors.New("direct descriptor: no machine name")
		}
		return []route{{name: ModeDirect, zone: d.Zone, addr: a, machine: d.Machine}}, nil
	case ModeGateway:
		var out []route
		var bad []error
		for _, g := range d.Gateways {
			for _, a := range g.Addresses {
				if !a.IsValid() {
					bad = append(bad, fmt.Errorf("gateway %s: an empty address", g.Name))
					continue
				}
				out = append(out, route{name: g.Name, zone: g.Zone, addr: a.Unmap(), quicPort: g.QUICPort, httpsPort: g.HTTPSPort})
			}
		}
		if len(out) == 0 {
			return nil, fmt.Errorf("gateway descriptor lists no usable gateway address: %w", errors.Join(bad...))
		}
		return out, nil
	}
	return nil, fmt.Errorf("descriptor mode %q is neither %q nor %q", d.Mode, ModeGateway, ModeDirect)
}
