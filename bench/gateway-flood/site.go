//go:build linux

package main

// The site's pieces, each in its own process: the orchestrator writes the site CA and the
// ticket signing key to a directory; the gateway process runs a real gateway.Gateway (New,
// Listen, Serve) with a verifier of that key and a certificate of that CA; the machine process
// runs the agent's display simulator (agent.Display), which echoes every datagram of a flow.

import (
	"context"
	"crypto/ed25519"
	"crypto/rand"
	"crypto/tls"
	"encoding/base64"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/netip"
	"os"
	"path/filepath"
	"runtime"
	"sync/atomic"
	"time"

	"github.com/frontdoor-vdi/frontdoor/agent"
	"github.com/frontdoor-vdi/frontdoor/gateway"
	"github.com/frontdoor-vdi/frontdoor/internal/siteid"
	"github.com/frontdoor-vdi/frontdoor/pki"
	"github.com/frontdoor-vdi/frontdoor/ticket"
)

// The loopback addresses of the run.
var (
	gatewayIP = netip.MustParseAddr("127.0.50.1")
	machineIP = netip.MustParseAddr("127.0.60.1")
	clientIP  = netip.MustParseAddr("127.0.80.1")
	floodIP   = netip.MustParseAddr("127.0.70.1")
)

const (
	machineName = "vda-1"
	sessionID   = "s-1"
)

// writeSite writes a new site CA and ticket signing key to dir.
func writeSite(dir string) error {
	cert, key, err := pki.GenerateCA("gateway-flood")
	if err != nil {
		return err
	}
	_, sk, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		return err
	}
	for name, b := range map[string][]byte{"ca.pem": cert, "ca-key.pem": key, "ticket.key": ticket.EncodeKey(sk)} {
		if err := os.WriteFile(filepath.Join(dir, name), b, 0o600); err != nil {
			return err
		}
	}
	return nil
}

// site is what a process loads of the site directory.
type site struct {
	ca  *pki.CA
	key ed25519.PrivateKey
}

func loadSite(dir string) (*site, error) {
	read := func(name string) []byte {
		b, _ := os.ReadFile(filepath.Join(dir, name))
		return b
	}
	ca, err := pki.NewCA(read("ca.pem"), read("ca-key.pem"), discard())
	if err != nil {
		return nil, err
	}
	key, err := ticket.ParseKey(read("ticket.key"))
	if err != nil {
		return nil, err
	}
	return &site{ca: ca, key: key}, nil
}

func (s *site) pub() ed25519.PublicKey { return s.key.Public().(ed25519.PublicKey) }

// issue signs a ticket of session s-1 on vda-1 for the UDP channel port.
func (s *site) issue(kind ticket.Kind, port uint16) (string, error) {
	tok, _, err := ticket.NewSigner(s.key, nil).Issue(ticket.Claims{Kind: kind, Session: sessionID, Machine: machineName,
		Mode: ticket.ModeGateway, Channels: []ticket.Channel{{Port: port, Proto: "udp"}}}, 10*time.Minute)
	return tok, err
}

// forged is a real reconnect ticket with its signature's last byte flipped: well formed,
// naming the site's key, so the gateway pays a full Ed25519 verify before it refuses it.
func (s *site) forged(port uint16) (string, error) {
	tok, err := s.issue(ticket.Reconnect, port)
	if err != nil {
		return "", err
	}
	b, err := base64.RawURLEncoding.DecodeString(tok)
	if err != nil {
		return "", err
	}
	b[len(b)-1] ^= 1
	return base64.RawURLEncoding.EncodeToString(b), nil
}

func discard() *slog.Logger { return slog.New(slog.NewTextHandler(io.Discard, nil)) }

// countingHandler formats every record as the tests' logger does (text, discarded: no I/O)
// and counts the gateway's "flow denied" records: one per first datagram whose ticket it
// checked and refused (on the QUIC port, "quic channel denied": one per channel stream whose
// ticket it refused).
type countingHandler struct {
	slog.Handler
	denied *atomic.Int64
}

func (h countingHandler) Handle(ctx context.Context, r slog.Record) error {
	if r.Message == "flow denied" || r.Message == "quic channel denied" {
		h.denied.Add(1)
	}
	return h.Handler.Handle(ctx, r)
}
func (h countingHandler) WithAttrs(a []slog.Attr) slog.Handler {
	return countingHandler{h.Handler.WithAttrs(a), h.denied}
}
func (h countingHandler) WithGroup(n string) slog.Handler {
	return countingHandler{h.Handler.WithGroup(n), h.denied}
}

// sessions is a gateway.Sessions for which s-1 is always live.
type sessions struct{}

func (sessions) Active(id string) bool                        { return id == sessionID }
func (sessions) Connected(context.Context, string, string)    {}
func (sessions) Disconnected(context.Context, string, string) {}

// gatewayStats is what the gateway process answers to STATS.
type gatewayStats struct {
	Denied int64 `json:"denied"` // forged tickets checked and refused so far
	Flows  int   `json:"flows"`
}

// runGateway serves one UDP channel port on 127.0.50.1 until stdin closes (with profile, a
// CPU profile between PROF and PROFEND).
func runGateway(dir string, port uint16, profile string) error {
	s, err := loadSite(dir)
	if err != nil {
		return err
	}
	cert, err := s.ca.PartyCertificate(siteid.RoleGateway, "gw-1", []netip.Addr{gatewayIP})
	if err != nil {
		return err
	}
	var denied atomic.Int64
	log := slog.New(countingHandler{slog.NewTextHandler(io.Discard, nil), &denied})
	o := gateway.Options{Name: "gw-1", Address: gatewayIP, UDPPorts: []uint16{port},
		TLS:        &tls.Config{Certificates: []tls.Certificate{*cert}},
		MachineTLS: s.ca.Party(siteid.RoleGateway, "gw-1", []netip.Addr{gatewayIP}).ClientTLS(nil),
		Verifier:   ticket.NewVerifier(s.pub(), ticket.NewMemoryLedger(0, nil), nil),
		Sessions:   sessions{},
		Machine:    func(n string) (netip.Addr, bool) { return machineIP, n == machineName },
		Logger:     log}
	plainUDP(&o)
	g, err := gateway.New(o, nil)
	if err != nil {
		return err
	}
	if err := g.Listen(); err != nil {
		return err
	}
	ctx, cancel := context.WithCancel(context.Background())
	served := make(chan error, 1)
	go func() { served <- g.Serve(ctx) }()
	fmt.Printf("READY %s GOMAXPROCS=%d\n", netip.AddrPortFrom(gatewayIP, port), runtime.GOMAXPROCS(0))
	h := profileCommands(profile)
	h["STATS"] = func() { printLine("STATS", gatewayStats{Denied: denied.Load(), Flows: g.Flows()}) }
	commands(h)
	cancel()
	return <-served
}

// runMachine runs vda-1's display simulator on 127.0.60.1:port until stdin closes.
func runMachine(dir string, port uint16) error {
	s, err := loadSite(dir)
	if err != nil {
		return err
	}
	cert, err := s.ca.PartyCertificate(siteid.RoleMachine, machineName, []netip.Addr{machineIP})
	if err != nil {
		return err
	}
	id, err := agent.NewIdentity(machineName, cert, s.ca.Pool())
	if err != nil {
		return err
	}
	d, err := agent.NewDisplay(agent.DisplayOptions{Machine: machineName, Address: machineIP, UDPPorts: []uint16{port},
		UDPIdle: 5 * time.Minute, Verifier: ticket.NewVerifier(s.pub(), ticket.NewMemoryLedger(0, nil), nil), Identity: id,
		Logger: discard()})
	if err != nil {
		return err
	}
	if err := d.Listen(); err != nil {
		return err
	}
	ctx, cancel := context.WithCancel(context.Background())
	served := make(chan error, 1)
	go func() { served <- d.Serve(ctx) }()
	fmt.Printf("READY %s\n", netip.AddrPortFrom(machineIP, port))
	commands(nil)
	cancel()
	return <-served
}

// freePort is a UDP port free on both the gateway's and the machine's address (the gateway
// relays a channel port to the machine's port of the same number).
func freePort() (uint16, error) {
	for range 50 {
		a, err := net.ListenUDP("udp", net.UDPAddrFromAddrPort(netip.AddrPortFrom(gatewayIP, 0)))
		if err != nil {
			return 0, err
		}
		port := uint16(a.LocalAddr().(*net.UDPAddr).Port)
		b, err := net.ListenUDP("udp", net.UDPAddrFromAddrPort(netip.AddrPortFrom(machineIP, port)))
		a.Close()
		if err == nil {
			b.Close()
			return port, nil
		}
	}
	return 0, errors.New("no UDP port free on both addresses")
}
