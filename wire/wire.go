// Package wire declares, once for both ends, the JSON types that cross a process boundary:
// the launch API's answer, the descriptor, which the front door writes and the client reads;
// and the admin API's answers that the CLI reads.
package wire

import (
	"fmt"
	"net/netip"
	"time"
)

// Descriptor is the launch API's answer (POST /v1/launch): where and how the client
// connects.
type Descriptor struct {
	SessionID       string `json:"session_id"`
	Outcome         string `json:"outcome"`
	Mode            string `json:"mode"` // ModeGateway or ModeDirect
	Machine         string `json:"machine"`
	Zone            string `json:"zone"`
	Step            int    `json:"step"`
	StepLabel       string `json:"step_label,omitempty"` // "3b": step 3 in the second group
	PreferredZone   string `json:"preferred_zone"`
	PreferredSource string `json:"preferred_zone_source"`
	LocationZone    string `json:"location_zone"`
	// Why says in a user's words why the launch lands in Zone (the preferred zone and its
	// source, or a reconnect), as the portal shows it.
	Why string `json:"why,omitempty"`
	// Channels are the session's display channels.
	Channels []Channel `json:"channels"`
	// Gateways are the gateways a gateway-mode session may use, best first.
	Gateways        []GatewayEndpoint `json:"gateways,omitempty"`
	LaunchTicket    string            `json:"launch_ticket,omitempty"`
	ReconnectTicket string            `json:"reconnect_ticket,omitempty"`
	// Address is the machine's address in direct mode.
	Address string `json:"address,omitempty"`
	// Desktop says which desktop protocol the machine serves and which channels carry it.
	Desktop *DesktopInfo `json:"desktop,omitempty"`
	// Trace is the broker's trace of the decision, for admin users only (it names other
	// machines, their load and the site's zones); empty for the others.
	Trace []string `json:"trace"`
}

// The modes of a descriptor.
const (
	ModeGateway = "gateway"
	ModeDirect  = "direct"
)

// DesktopInfo is a descriptor's desktop: its protocol ("builtin", which speaks VNC, "vnc" or
// "rdp"), the TCP channel that carries it and the UDP channel of its UDP transport.
type DesktopInfo struct {
	Protocol string  `json:"protocol"`
	Channel  Channel `json:"channel"`
	// ReliabilitySeconds is the site's session_reliability_timeout: how long the machine
	// keeps a desktop stream whose channel broke, for the client to resume it; 0: not said
	// (180 s).
	ReliabilitySeconds int `json:"reliability_timeout_seconds,omitempty"`
	// UDPChannel is the UDP channel of the desktop's UDP transport (RDP's), nil for none.
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

// GatewayEndpoint is one gateway a descriptor offers: its name, zone and addresses, and its
// ports for QUIC and WebSockets.
type GatewayEndpoint struct {
	Name      string       `json:"name"`
	Zone      string       `json:"zone"`
	Addresses []netip.Addr `json:"addresses"`
	// QUICPort is the gateway's QUIC port, where clients carry their UDP channels
	// encrypted; 0 when it has none.
	QUICPort uint16 `json:"quic_port,omitempty"`
	// HTTPSPort is the gateway's HTTPS port, where channels ride WebSockets; 0 when it has
	// none.
	HTTPSPort uint16 `json:"https_port,omitempty"`
}

// DNSSECDomain is a signed GSLB domain's keys, as the admin API answers GET /v1/admin/dnssec
// and POST /v1/admin/dnssec/rollover.
type DNSSECDomain struct {
	Domain string      `json:"domain"`
	Keys   []DNSSECKey `json:"keys"` // oldest first
	// Next says what the operator does next.
	Next string `json:"next"`
}

// DNSSECKey is one of a signed domain's keys.
type DNSSECKey struct {
	Tag uint16 `json:"tag"`
	// State is "active"; or, while a rollover is under way, "retiring" (the old key) and
	// "incoming" (the new one, whose DS goes to the parent).
	State string    `json:"state"`
	Since time.Time `json:"since"` // when the key was first published
	// DS is the key's DS record (SHA-256), to publish at the parent.
	DS string `json:"ds"`
}
