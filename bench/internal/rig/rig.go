// Package rig is what the benchmark programs share. The site the processes of one run share
// is kept in a directory: the site CA (pki.GenerateCA, loaded with pki.NewCA), the ticket signing key, and
// the relays' server certificate, which frontdoor's gateways and HAProxy both present (one
// P-256 key of the site CA for every gateway address), so that their TLS handshakes cost the
// same.
package rig

import (
	"context"
	"crypto/ed25519"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"encoding/pem"
	"fmt"
	"log/slog"
	"net/netip"
	"os"
	"os/signal"
	"path/filepath"
	"syscall"
	"time"

	"github.com/frontdoor-vdi/frontdoor/internal/siteid"
	"github.com/frontdoor-vdi/frontdoor/pki"
	"github.com/frontdoor-vdi/frontdoor/ticket"
)

// The files of the site directory.
const (
	CAFile     = "ca.pem"
	CAKeyFile  = "ca-key.pem"
	TicketFile = "ticket.key"
	RelayFile  = "relay.pem" // the relays' certificate and key, PEM (HAProxy's crt)
)

// WriteSite writes a new site to dir: a CA named ca, a ticket key, and the relays' certificate,
// a gateway's of the site named relay, for ips.
func WriteSite(dir, ca, relay string, ips []netip.Addr) error {
	cert, key, err := pki.GenerateCA(ca)
	if err != nil {
		return err
	}
	c, err := pki.NewCA(cert, key, Discard())
	if err != nil {
		return err
	}
	_, sk, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		return err
	}
	r, err := c.PartyCertificate(siteid.RoleGateway, relay, ips)
	if err != nil {
		return err
	}
	kder, err := x509.MarshalPKCS8PrivateKey(r.PrivateKey)
	if err != nil {
		return err
	}
	relayPEM := append(pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: r.Certificate[0]}),
		pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: kder})...)
	for name, b := range map[string][]byte{CAFile: cert, CAKeyFile: key, TicketFile: ticket.EncodeKey(sk), RelayFile: relayPEM} {
		if err := os.WriteFile(filepath.Join(dir, name), b, 0o600); err != nil {
			return err
		}
	}
	return nil
}

// Site is what a process loads of the site directory.
type Site struct {
	Dir   string
	CA    *pki.CA
	Key   ed25519.PrivateKey
	Relay tls.Certificate
}

// LoadSite reads the site WriteSite wrote to dir.
func LoadSite(dir string) (*Site, error) {
	read := func(name string) []byte {
		b, _ := os.ReadFile(filepath.Join(dir, name))
		return b
	}
	ca, err := pki.NewCA(read(CAFile), read(CAKeyFile), Discard())
	if err != nil {
		return nil, fmt.Errorf("site %s: %w", dir, err)
	}
	key, err := ticket.ParseKey(read(TicketFile))
	if err != nil {
		return nil, fmt.Errorf("site %s: %w", dir, err)
	}
	relay, err := tls.X509KeyPair(read(RelayFile), read(RelayFile))
	if err != nil {
		return nil, fmt.Errorf("site %s: %w", dir, err)
	}
	return &Site{Dir: dir, CA: ca, Key: key, Relay: relay}, nil
}

// Verifier checks the site's tickets, with a ledger of its own.
func (s *Site) Verifier() *ticket.Verifier {
	return ticket.NewVerifier(s.Key.Public().(ed25519.PublicKey), ticket.NewMemoryLedger(0, nil), nil)
}

// Discard is a logger that drops everything.
func Discard() *slog.Logger { return slog.New(slog.DiscardHandler) }

// Sessions is a gateway.Sessions for which every session is live.
type Sessions struct{}

// Active reports every session live.
func (Sessions) Active(string) bool { return true }

// Connected does nothing.
func (Sessions) Connected(context.Context, string, string) {}

// Disconnected does nothing.
func (Sessions) Disconnected(context.Context, string, string) {}

// Lifetime bounds every server process of a run.
const Lifetime = 30 * time.Minute

// UntilStopped returns a context that ends at SIGTERM or SIGINT, or after Lifetime: a server
// process of a run stops when its script stops it, and at the latest then.
func UntilStopped() (context.Context, context.CancelFunc) {
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, syscall.SIGINT)
	ctx, cancel := context.WithTimeout(ctx, Lifetime)
	return ctx, func() { cancel(); stop() }
}
