// Package gslb is frontdoor's authoritative DNS server. It serves the static data of the
// configured domains (SOA, NS, A, AAAA, CNAME, TXT, MX) and answers GSLB names with the healthy
// front door addresses of the best site for the client: the zone of the EDNS Client Subnet
// address when present (echoed with the right scope), else of the resolver's address, then the
// site's fallback order (skipping sites over their load threshold when load is known), then the
// remaining sites.
//
// Health and load reach the package through the small Health and Load interfaces owned here;
// they are asked on every answer, so a verdict change shows in the very next answer. Before the
// first verdict of a gateway the GSLB name's configured initial state is used.
//
// The Handler is a plain dns.Handler with no global state; Server runs it on UDP and TCP with
// its own dns.ServeMux. Over UDP the common query (A or AAAA of a GSLB name) is answered by a
// wire fast path that gives the same answer without building a dns.Msg (fast.go). With
// ServerOptions.BlockingUDP, on 64-bit Linux a server bound to an IP address reads with a
// worker blocked in recvmmsg on a socket kept out of the Go poller (udp_linux.go); otherwise
// it reads through the Go poller. ACME DNS-01 challenge records are added and removed at run
// time through ACME, which implements the libdns interfaces that certmagic drives.
package gslb

import (
	"crypto"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"net/netip"
	"strings"
	"sync"
	"sync/atomic"

	"github.com/frontdoor-vdi/frontdoor/configs"
	"github.com/frontdoor-vdi/frontdoor/zonemap"
	"github.com/miekg/dns"
	"github.com/prometheus/client_golang/prometheus"
)

// Health reports the verdicts of gateways. GatewayUp returns known=false before the first
// verdict of the gateway; the answer then uses the GSLB name's initial state.
type Health interface {
	GatewayUp(gateway string) (up, known bool)
}

// Load reports the load of a zone's site in percent (0..100); known=false when unknown.
type Load interface {
	SiteLoad(zone string) (percent int, known bool)
}

// Zones maps a client address to its zone; *zonemap.Map implements it.
type Zones interface {
	Lookup(addr netip.Addr) zonemap.Result
}

var _ Zones = (*zonemap.Map)(nil)

// Errors of the package.
var (
	// ErrNotOurs reports a name outside every configured domain.
	ErrNotOurs = errors.New("name is outside our domains")
	// ErrNotChallenge reports an ACME record whose name does not start with _acme-challenge.
	ErrNotChallenge = errors.New("only _acme-challenge TXT records can be changed at run time")
	// ErrNoZones reports a Handler built without a zone map.
	ErrNoZones = errors.New("gslb needs a zone map")
)

// Options are the dependencies and tunables of a Handler.
type Options struct {
	// Zones maps client addresses to zones. Required.
	Zones Zones
	// Health gives gateway verdicts. Default: nil (every gateway is in its GSLB name's initial
	// state).
	Health Health
	// Load gives site load for load thresholds. Default: nil (load unknown, never skipped).
	Load Load
	// Registry receives the metrics. Default: nil (no metrics are registered).
	Registry *prometheus.Registry
	// Logger logs the sampled query log and serve errors. Default: none (discarded).
	Logger *slog.Logger
	// QueryLogSample logs one query in N; 0 turns the query log off. Default: the config's
	// gslb.query_log_sample.
	QueryLogSample int
	// MaxUDPSize is the largest UDP reply and the EDNS0 buffer size advertised. Default: 1232
	// (the DNS flag day 2020 size, which avoids IP fragmentation).
	MaxUDPSize int
	// Rand returns a random number in [0, n) for the weighted policy. Default: math/rand/v2.
	Rand func(n int) int
	// Keys are the DNSSEC keys (ECDSA P-256) of the domains configured with dnssec, by apex
	// in lower case with the final dot: each is published and signs every answer (two while
	// a key is rolled over). A signed domain without a key is an error.
	Keys map[string][]crypto.Signer
}

// Handler answers DNS queries for the configured domains. It is safe for concurrent use.
type Handler struct {
	zones   Zones
	health  Health
	load    Load
	log     *slog.Logger
	sample  uint64
	maxUDP  int
	rand    func(int) int
	metrics *metrics

	data    atomic.Pointer[data]
	queries atomic.Uint64 // counts queries for the sampled query log

	acmeMu sync.RWMutex         // guards acme
	acme   map[string][]acmeRec // lower-case owner name -> challenge records
	nACME  atomic.Int32         // number of owners in acme; 0 skips the lock on the fast path

	reloadMu sync.Mutex            // guards keys and cfg; serialises Reload and SetKeys
	keys     map[string][]*zoneKey // DNSSEC keys by apex
	cfg      *configs.Config       // the configuration loaded last
	sigs     sigCache              // signatures made
	signing  atomic.Bool           // some domain is signed: queries with DO take the full path
}

// New builds a Handler serving cfg's gslb section.
func New(cfg *configs.Config, opts Options) (*Handler, error) {
	if opts.Zones == nil {
		return nil, ErrNoZones
	}
	h := &Handler{
		zones:  opts.Zones,
		health: opts.Health,
		load:   opts.Load,
		log:    opts.Logger,
		maxUDP: opts.MaxUDPSize,
		rand:   opts.Rand,
		acme:   map[string][]acmeRec{},
		keys:   map[string][]*zoneKey{},
		sigs:   sigCache{sigs: map[sigKey]*dns.RRSIG{}},
	}
	for apex, ks := range opts.Keys {
		zks, err := zoneKeys(apex, ks)
		if err != nil {
			return nil, err
		}
		h.keys[fqdn(strings.ToLower(apex))] = zks
	}
	if h.log == nil {
		h.log = slog.New(slog.DiscardHandler)
	}
	h.log = h.log.With("component", "gslb")
	if h.maxUDP <= 0 {
		h.maxUDP = 1232
	}
	if h.maxUDP < 512 {
		h.maxUDP = 512
	}
	if h.rand == nil {
		h.rand = rand.IntN
	}
	sample := opts.QueryLogSample
	if sample == 0 {
		sample = cfg.GSLB.QueryLogSample
	}
	if sample > 0 {
		h.sample = uint64(sample)
	}
	m, err := newMetrics(opts.Registry)
	if err != nil {
		return nil, err
	}
	h.metrics = m
	if err := h.Reload(cfg); err != nil {
		return nil, err
	}
	return h, nil
}

// Reload swaps in the domains and GSLB names of cfg; on error the current data stays. ACME
// records are kept.
func (h *Handler) Reload(cfg *configs.Config) error {
	h.reloadMu.Lock()
	defer h.reloadMu.Unlock()
	return h.reloadLocked(cfg, h.keys)
}

// reloadLocked swaps in cfg's data signed with keys, and keeps both.
func (h *Handler) reloadLocked(cfg *configs.Config, keys map[string][]*zoneKey) error {
	d, err := build(cfg)
	if err != nil {
		return err
	}
	signing := false
	for _, dom := range d.domains {
		if !dom.dnssec {
			continue
		}
		if dom.keys = keys[dom.name]; len(dom.keys) == 0 {
			return fmt.Errorf("gslb domain %s: %w (a domain signed since the node started needs a restart)", dom.name, ErrNoKey)
		}
		signing = true
	}
	h.cfg, h.keys = cfg, keys
	h.signing.Store(signing)
	h.data.Store(d)
	return nil
}

// Check reports whether Reload would accept cfg, without changing anything.
func Check(cfg *configs.Config) error {
	_, err := build(cfg)
	return err
}
