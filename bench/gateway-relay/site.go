package main

// The site every process of the run shares (package rig), its addresses and ports, and
// the tickets the run issues on it.

import (
	"log/slog"
	"net/netip"
	"time"

	"github.com/frontdoor-vdi/frontdoor/bench/internal/rig"
	"github.com/frontdoor-vdi/frontdoor/ticket"
)

// The loopback addresses and ports of frontdoor's side. The gateway relays a channel port to
// the machine's port of the same number.
var (
	gatewayIP = netip.MustParseAddr("127.0.50.1")
	machineIP = netip.MustParseAddr("127.0.60.1")
)

const (
	tcpPort  = 14172 // the gateway's TLS channel port and the machine's TCP display port
	udpPort  = 14173 // the gateway's plain UDP port and the machine's UDP (QUIC) display port
	quicPort = 14433 // the gateway's QUIC port (gateway.QUIC)

	machineName = "vda-1"
	sessionID   = "s-1"
	gatewayName = "gw-1"
)

// writeSite writes a new site to dir: its relays' certificate names the gateway's address
// and 127.0.0.1.
func writeSite(dir string) error {
	return rig.WriteSite(dir, "gateway-relay", gatewayName, []netip.Addr{gatewayIP, netip.MustParseAddr("127.0.0.1")})
}

// site is what a process loads of the site directory.
type site struct{ *rig.Site }

func loadSite(dir string) (*site, error) {
	s, err := rig.LoadSite(dir)
	if err != nil {
		return nil, err
	}
	return &site{s}, nil
}

// issue signs a gateway-mode ticket of session s-1 on vda-1 for one channel (a reconnect
// ticket names every channel).
func (s *site) issue(kind ticket.Kind, ch ticket.Channel) (string, error) {
	c := ticket.Claims{Kind: kind, Session: sessionID, Machine: machineName, Mode: ticket.ModeGateway}
	if kind == ticket.Launch {
		c.Channels = []ticket.Channel{ch}
	}
	tok, _, err := ticket.NewSigner(s.Key, nil).Issue(c, 10*time.Minute)
	return tok, err
}

func discard() *slog.Logger { return rig.Discard() }
