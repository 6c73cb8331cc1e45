package main

// The site every process of the run shares, kept in a directory: the site CA (api.GenerateCA,
// loaded with api.NewCA), the ticket signing key, and the relays' server certificate, which
// frontdoor's gateway and HAProxy both present (one P-256 key of the site CA, for 127.0.50.1
// and 127.0.0.1), so that the TLS handshakes cost the same.

import (
	"context"
	"crypto/ed25519"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"encoding/pem"
	"io"
	"log/slog"
	"net/netip"
	"os"
	"path/filepath"
	"time"

	"github.com/frontdoor-vdi/frontdoor/api"
	"github.com/frontdoor-vdi/frontdoor/internal/siteid"
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

// The files of the site directory.
const (
	caFile     = "ca.pem"
	caKeyFile  = "ca-key.pem"
	ticketFile = "ticket.key"
	relayFile  = "relay.pem" // the relays' certificate and key, PEM (HAProxy's crt)
)

// writeSite writes a new site to dir.
func writeSite(dir string) error {
	cert, key, err := api.GenerateCA("gateway-relay")
	if err != nil {
		return err
	}
	ca, err := api.NewCA(cert, key, discard())
	if err != nil {
		return err
	}
	_, sk, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		return err
	}
	relay, err := ca.PartyCertificate(siteid.RoleGateway, gatewayName, []netip.Addr{gatewayIP, netip.MustParseAddr("127.0.0.1")})
	if err != nil {
		return err
	}
	kder, err := x509.MarshalPKCS8PrivateKey(relay.PrivateKey)
	if err != nil {
		return err
	}
	relayPEM := append(pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: relay.Certificate[0]}),
		pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: kder})...)
	for name, b := range map[string][]byte{caFile: cert, caKeyFile: key, ticketFile: ticket.EncodeKey(sk), relayFile: relayPEM} {
		if err := os.WriteFile(filepath.Join(dir, name), b, 0o600); err != nil {
			return err
		}
	}
	return nil
}

// site is what a process loads of the site directory.
type site struct {
	dir   string
	ca    *api.CA
	key   ed25519.PrivateKey
	relay tls.Certificate
}

func loadSite(dir string) (*site, error) {
	read := func(name string) []byte {
		b, _ := os.ReadFile(filepath.Join(dir, name))
		return b
	}
	ca, err := api.NewCA(read(caFile), read(caKeyFile), discard())
	if err != nil {
		return nil, err
	}
	key, err := ticket.ParseKey(read(ticketFile))
	if err != nil {
		return nil, err
	}
	relay, err := tls.X509KeyPair(read(relayFile), read(relayFile))
	if err != nil {
		return nil, err
	}
	return &site{dir: dir, ca: ca, key: key, relay: relay}, nil
}

func (s *site) pub() ed25519.PublicKey { return s.key.Public().(ed25519.PublicKey) }

func (s *site) verifier() *ticket.Verifier {
	return ticket.NewVerifier(s.pub(), ticket.NewMemoryLedger(0, nil), nil)
}

// issue signs a gateway-mode ticket of session s-1 on vda-1 for one channel (a reconnect
// ticket names every channel).
func (s *site) issue(kind ticket.Kind, ch ticket.Channel) (string, error) {
	c := ticket.Claims{Kind: kind, Session: sessionID, Machine: machineName, Mode: ticket.ModeGateway}
	if kind == ticket.Launch {
		c.Channels = []ticket.Channel{ch}
	}
	tok, _, err := ticket.NewSigner(s.key, nil).Issue(c, 10*time.Minute)
	return tok, err
}

func discard() *slog.Logger { return slog.New(slog.NewTextHandler(io.Discard, nil)) }

// sessions is a gateway.Sessions for which s-1 is always live.
type sessions struct{}

func (sessions) Active(id string) bool                        { return id == sessionID }
func (sessions) Connected(context.Context, string, string)    {}
func (sessions) Disconnected(context.Context, string, string) {}
