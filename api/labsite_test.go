package api

import (
	"context"
	"crypto/ed25519"
	"crypto/rand"
	"crypto/x509"
	"io"
	"log/slog"
	"net"
	"net/http/httptest"
	"net/netip"
	"strconv"
	"testing"
	"time"

	"github.com/frontdoor-vdi/frontdoor/broker"
	"github.com/frontdoor-vdi/frontdoor/configs"
	"github.com/frontdoor-vdi/frontdoor/internal/testclock"
	"github.com/frontdoor-vdi/frontdoor/logins"
	"github.com/frontdoor-vdi/frontdoor/store/memory"
	"github.com/frontdoor-vdi/frontdoor/ticket"
)

// labSite loads the shipped lab config with extra YAML appended (users admin, operator
// and alice, all with password "lab") and a broker over a memory store.
func labSite(tb testing.TB, extra string) (*configs.Config, *broker.Broker) {
	tb.Helper()
	raw, err := configs.Shipped("lab.yaml")
	if err != nil {
		tb.Fatal(err)
	}
	cfg, err := configs.Load("lab.yaml", append(raw, extra...))
	if err != nil {
		tb.Fatal(err)
	}
	br, err := broker.New(context.Background(), cfg, memory.New(), time.Now)
	if err != nil {
		tb.Fatal(err)
	}
	return cfg, br
}

// labLaunch is a launch API of cfg over br with a new ticket key (its signer returned), one
// gateway per zone at 127.0.0.1, logging nowhere.
func labLaunch(cfg *configs.Config, br *broker.Broker) (*Launch, *ticket.Signer) {
	pub, key, _ := ed25519.GenerateKey(rand.Reader)
	signer := ticket.NewSigner(key, nil)
	return NewLaunch(LaunchOptions{Config: cfg, Broker: br, Signer: signer, Verifier: ticket.NewVerifier(pub, ticket.NewMemoryLedger(0, nil), nil),
		Logger: slog.New(slog.DiscardHandler),
		Gateways: func(zone string) []GatewayEndpoint {
			return []GatewayEndpoint{{Name: "gw", Zone: zone, Addresses: []netip.Addr{netip.MustParseAddr("127.0.0.1")}}}
		}}), signer
}

// loginSite is a site for tests of logins: its configuration, a broker over a memory store,
// a fake clock for codes, logins and tickets, the site's ticket signer and verifier (one
// ledger) and one process's login throttle. Its front doors are real launch APIs over TLS
// on loopback, logging to logs (nil: nowhere).
type loginSite struct {
	t        *testing.T
	cfg      *configs.Config
	br       *broker.Broker
	clk      *testclock.Clock
	signer   *ticket.Signer
	verifier *ticket.Verifier
	throttle *logins.Throttle
	logs     io.Writer
}

// newLoginSite builds a loginSite of cfg on clk.
func newLoginSite(t *testing.T, cfg *configs.Config, clk *testclock.Clock) *loginSite {
	t.Helper()
	br, err := broker.New(context.Background(), cfg, memory.New(), clk.Now)
	if err != nil {
		t.Fatal(err)
	}
	pub, key, _ := ed25519.GenerateKey(rand.Reader)
	return &loginSite{t: t, cfg: cfg, br: br, clk: clk, throttle: &logins.Throttle{},
		signer:   ticket.NewSigner(key, clk.Now),
		verifier: ticket.NewVerifier(pub, ticket.NewMemoryLedger(0, clk.Now), clk.Now)}
}

// frontDoor serves a launch API of the site over TLS on 127.0.0.1 and returns its URL, its
// port and the pool that trusts it.
func (s *loginSite) frontDoor() (string, uint16, *x509.CertPool) {
	s.t.Helper()
	w := s.logs
	if w == nil {
		w = io.Discard
	}
	logger := slog.New(slog.NewTextHandler(w, nil))
	l := NewLaunch(LaunchOptions{Config: s.cfg, Broker: s.br, Signer: s.signer, Verifier: s.verifier, Logins: s.throttle, Logger: logger, Now: s.clk.Now,
		Gateways: func(zone string) []GatewayEndpoint {
			return []GatewayEndpoint{{Name: "gw", Zone: zone, Addresses: []netip.Addr{netip.MustParseAddr("127.0.0.1")}}}
		}})
	srv := httptest.NewUnstartedServer(l)
	srv.Config.ErrorLog = slog.NewLogLogger(logger.Handler(), slog.LevelDebug)
	srv.StartTLS()
	s.t.Cleanup(srv.Close)
	_, port, _ := net.SplitHostPort(srv.Listener.Addr().String())
	p, _ := strconv.Atoi(port)
	pool := x509.NewCertPool()
	pool.AddCert(srv.Certificate())
	return srv.URL, uint16(p), pool
}
