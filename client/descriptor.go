package client

import (
	"errors"
	"fmt"
	"net/netip"
	"strings"
)

// Descriptor is the launch API's answer: where and how the client connects. It mirrors the
// JSON of POST /v1/launch.
type Descriptor struct {
	SessionID       string            `json:"session_id"`
	Outcome         string            `json:"outcome,omitempty"`
	Mode            string            `json:"mode"`
	Machine         string            `json:"machine"`
	Zone            string            `json:"zone"`
	Step            int               `json:"step,omitempty"`
	StepLabel       string            `json:"step_label,omitempty"`
	PreferredZone   string            `json:"preferred_zone,omitempty"`
	PreferredSource string            `json:"preferred_zone_source,omitempty"`
	LocationZone    string            `json:"location_zone,omitempty"`
	Channels        []Channel         `json:"channels"`
	Gateways        []GatewayEndpoint `json:"gateways,omitempty"`
	LaunchTicket    string            `json:"launch_ticket,omitempty"`
	ReconnectTicket string            `json:"reconnect_ticket,omitempty"`
	Address         string            `json:"address,omitempty"`
	Desktop         *DesktopInfo      `json:"desktop,omitempty"`
	Trace           []string          `json:"trace"`
}

// DesktopInfo is the descriptor's desktop: its protocol ("builtin", which speaks VNC, "vnc"
// or "rdp"), the TCP channel that carries it and the UDP channel of its UDP transport.
type DesktopInfo struct {
	Protocol string  `json:"protocol"`
	Channel  Channel `json:"channel"`
	// ReliabilitySeconds is how long the machine keeps a desktop stream whose channel broke
	// (the site's session_reliability_timeout); 0: not said (180 s).
	ReliabilitySeconds int `json:"reliability_timeout_seconds,omitempty"`
	// UDPChannel is the UDP channel of the desktop's UDP transport (RDP's), nil for none:
	// ExposeUDP carries a viewer's UDP flow on it.
	UDPChannel *Channel `json:"udp_channel,omitempty"`
}

// Speaks returns the protocol a viewer speaks to the desktop: "vnc" or "rdp".
func (d DesktopInfo) Speaks() string {
	if d.Protocol == "rdp" {
		return "rdp"
	}
	return "vnc"
}

// Channel is one display channel of a session: a port and "tcp" or "udp".
type Channel struct {
	Port  uint16 `json:"port"`
	Proto string `json:"proto"`
}

// String formats the channel as "8443/tcp".
func (c Channel) String() string { return fmt.Sprintf("%d/%s", c.Port, c.Proto) }

// GatewayEndpoint is one gateway the descriptor offers: its name, zone and addresses, and
// the QUIC port that carries UDP channels (0: none).
type GatewayEndpoint struct {
	Name      string   `json:"name"`
	Zone      string   `json:"zone"`
	Addresses []string `json:"addresses"`
	QUICPort  uint16   `json:"quic_port,omitempty"`
	// HTTPSPort is the gateway's HTTPS port, where channels ride WebSockets; 0 for none.
	HTTPSPort uint16 `json:"https_port,omitempty"`
}

// The modes of a descriptor.
const (
	ModeGateway = "gateway"
	ModeDirect  = "direct"
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

// routes lists where d's channels can be opened, in the descriptor's order; gateway addresses
// that are not IP addresses are skipped.
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
			for _, s := range g.Addresses {
				a, err := parseHost(s)
				if err != nil {
					bad = append(bad, fmt.Errorf("gateway %s: %w", g.Name, err))
					continue
				}
				out = append(out, route{name: g.Name, zone: g.Zone, addr: a, quicPort: g.QUICPort, httpsPort: g.HTTPSPort})
			}
		}
		if len(out) == 0 {
			return nil, fmt.Errorf("gateway descriptor lists no usable gateway address: %w", errors.Join(bad...))
		}
		return out, nil
	}
	return nil, fmt.Errorf("descriptor mode %q is neither %q nor %q", d.Mode, ModeGateway, ModeDirect)
}
