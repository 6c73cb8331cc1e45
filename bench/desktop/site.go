package main

// The site every process of a run shares (package rig), its addresses and ports, and
// the launches the benchmarks make on it.

import (
	"context"
	"crypto/tls"
	"fmt"
	"log/slog"
	"net/netip"
	"time"

	"github.com/frontdoor-vdi/frontdoor/bench/internal/rig"
	"github.com/frontdoor-vdi/frontdoor/client"
	"github.com/frontdoor-vdi/frontdoor/ticket"
)

// The loopback addresses and ports of the site. A gateway relays its channel port to the
// machine's display port of the same number.
var (
	gatewayIPs   = []netip.Addr{netip.MustParseAddr("127.0.81.1"), netip.MustParseAddr("127.0.81.2")}
	gatewayNames = []string{"gw-a", "gw-b"}
)

const (
	displayPort = 14801 // the gateways' channel port and the machines' TCP display port
	httpsPort   = 14802 // the gateways' HTTPS port, where channels ride WebSockets

	straightAddr    = "127.0.0.1:14811" // the builtin desktop served straight, plain TCP
	straightTLSAddr = "127.0.0.1:14812" // the same, TLS 1.3 with a client certificate (HAProxy's re-encrypting backend)
)

// machineIP is the address of machine vda-n (n from 1).
func machineIP(n int) netip.Addr { return netip.AddrFrom4([4]byte{127, 0, 82, byte(n)}) }

func machineName(n int) string { return fmt.Sprintf("vda-%d", n) }

// machineOf resolves a machine name to its address, as the broker would for a gateway.
func machineOf(name string) (netip.Addr, bool) {
	var n int
	if _, err := fmt.Sscanf(name, "vda-%d", &n); err != nil || n < 1 || n > 250 {
		return netip.Addr{}, false
	}
	return machineIP(n), true
}

// writeSite writes a new site to dir: its relays' certificate names every gateway address and
// 127.0.0.1.
func writeSite(dir string) error {
	return rig.WriteSite(dir, "bench-desktop", "relay", append([]netip.Addr{netip.MustParseAddr("127.0.0.1")}, gatewayIPs...))
}

// site is what a process loads of the site directory, with a signer of its tickets.
type site struct {
	*rig.Site
	signer *ticket.Signer
}

func loadSite(dir string) (*site, error) {
	s, err := rig.LoadSite(dir)
	if err != nil {
		return nil, err
	}
	return &site{Site: s, signer: ticket.NewSigner(s.Key, nil)}, nil
}

// reissue rotates a session's reconnect ticket at every channel, as a node's gateways do.
func (s *site) reissue(c ticket.Claims) (string, error) {
	exp := c.Expires
	if c.Kind == ticket.Launch {
		exp = c.Issued.Add(time.Hour)
	}
	tok, _, err := s.signer.Reissue(c, exp)
	return tok, err
}

// descriptor issues a gateway-mode launch of session on machine m through the gateways
// numbered gws (0: gw-a), with the desktop's TCP channel alone.
func (s *site) descriptor(session string, m int, protocol string, gws ...int) (*client.Descriptor, error) {
	chans := []ticket.Channel{{Port: displayPort, Proto: "tcp"}}
	c := ticket.Claims{Session: session, Machine: machineName(m), Mode: ticket.ModeGateway, Channels: chans, User: "bench"}
	lt, rt, _, err := s.signer.IssueLaunch(c, 10*time.Minute, time.Hour)
	if err != nil {
		return nil, err
	}
	d := &client.Descriptor{SessionID: session, Outcome: "new", Mode: ticket.ModeGateway, Machine: machineName(m),
		Zone: "z1", Channels: []client.Channel{{Port: displayPort, Proto: "tcp"}}, LaunchTicket: lt, ReconnectTicket: rt,
		Desktop: &client.DesktopInfo{Protocol: protocol, Channel: client.Channel{Port: displayPort, Proto: "tcp"}},
		Trace:   []string{"bench"}}
	for _, g := range gws {
		d.Gateways = append(d.Gateways, client.GatewayEndpoint{Name: gatewayNames[g], Zone: "z1",
			Addresses: []netip.Addr{gatewayIPs[g]}, HTTPSPort: httpsPort})
	}
	return d, nil
}

// open opens a session of d whose logs are dropped. dialTimeout bounds each channel's
// opening (0: the client's default, 500ms); with webSocket its channels ride WebSockets to
// the gateways' HTTPS port, as a browser's do; from is the source address of its channels
// (invalid: the system's choice).
func (s *site) open(ctx context.Context, d *client.Descriptor, dialTimeout time.Duration, webSocket bool, from netip.Addr) (*client.Session, error) {
	return client.Open(ctx, client.Options{Descriptor: d, RootCAs: s.CA.Pool(), Channels: d.Channels, DialTimeout: dialTimeout,
		WebSocket: webSocket, LocalAddr: from, Logger: discard()})
}

// clientTLS is a viewer's TLS config toward HAProxy.
func (s *site) clientTLS() *tls.Config {
	return &tls.Config{RootCAs: s.CA.Pool(), ServerName: "127.0.0.1", MinVersion: tls.VersionTLS12}
}

func discard() *slog.Logger { return rig.Discard() }
