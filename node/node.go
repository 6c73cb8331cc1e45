// Package node runs one frontdoor node: it builds every component of one configured node from
// the site configuration — GSLB DNS, the health checker, the broker over the site's store, the
// launch, agent and admin APIs, the proxy's listeners and the secure gateways the node hosts —
// and wires them through the small interfaces each package owns. `frontdoor serve` runs one
// node per process; the nodes of a site meet only through the site's store and the network.
package node

import (
	"context"
	"crypto/ed25519"
	"crypto/tls"
	"errors"
	"fmt"
	"log/slog"
	"net/netip"
	"os"
	"runtime"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/frontdoor-vdi/frontdoor/api"
	"github.com/frontdoor-vdi/frontdoor/broker"
	"github.com/frontdoor-vdi/frontdoor/configs"
	"github.com/frontdoor-vdi/frontdoor/gateway"
	"github.com/frontdoor-vdi/frontdoor/gslb"
	"github.com/frontdoor-vdi/frontdoor/health"
	"github.com/frontdoor-vdi/frontdoor/internal/rawio"
	"github.com/frontdoor-vdi/frontdoor/pki"
	"github.com/frontdoor-vdi/frontdoor/proxy"
	"github.com/frontdoor-vdi/frontdoor/store"
	"github.com/frontdoor-vdi/frontdoor/store/settings"
	"github.com/frontdoor-vdi/frontdoor/ticket"
	"github.com/frontdoor-vdi/frontdoor/zonemap"
	"github.com/prometheus/client_golang/prometheus"
)

// Options configure a Node.
type Options struct {
	// Config is the loaded site configuration. Required.
	Config *configs.Config
	// Node names the configured node to run. Default: the config's only node.
	Node string
	// DataDir holds the store, the site key, the CA and certificates. Required.
	DataDir string
	// CAStepWait is the least time between two steps of a rotation of the site CA. Default:
	// pki.CAStepWait.
	CAStepWait time.Duration
	// CertRenewCheck is how often ACME certificates are checked for renewal. Default: 10
	// minutes (tests set it small).
	CertRenewCheck time.Duration
	// Logger receives every component's logs. Default: slog.Default().
	Logger *slog.Logger
	// Registry receives every component's metrics. Default: a new registry.
	Registry *prometheus.Registry
	// Progress, when set, is told what starts, for a progress display.
	Progress func(step string)
	// Rebind, when set, maps every address the node listens on (DNS, HTTPS, gateways) to
	// the address it really binds; the configured address stays what clients, probes and
	// DNS answers use. The drill puts each front door behind a fault-injection wire this way.
	// Default: nil (listen on the configured addresses).
	Rebind func(netip.Addr) netip.Addr
	// Procs is how the node's work may use the process's Ps, as the program reserved them
	// (`frontdoor serve`). Default: the zero Procs.
	Procs Procs
	// Version is the software version the node announces to the site. Default: "".
	Version string
	// Drain makes Serve drain the proxy and the gateways when ctx ends: the proxy takes no
	// new connections or flows, the gateways no new sessions (their health ports answer 503),
	// and what is established may finish for proxy.drain_timeout of the config last applied,
	// while the other components stop. A failure of a component still stops everything at
	// once. Default: false (close at once).
	Drain bool
}

// Node is one running node of a site: the components it serves and the gateways it hosts.
type Node struct {
	o       Options
	cfg     *configs.Config
	log     *slog.Logger
	store   broker.Store
	broker  *broker.Broker
	zones   *zonemap.Map
	health  *health.Checker
	dns     *gslb.Handler
	spec    configs.Node // the configured node this is
	closeMu sync.Mutex   // serializes Close

	site     site         // what the node shares with the site's other nodes (site.go)
	settings siteSettings // the site's settings, in the store (settings.go)
	role     *zoneRole    // this node's part in its zone's election (leader.go)
	// revokedMachines are the machines' revocations (machines.go).
	revokedMachines revokedMachines
	built           atomic.Bool // New has finished: the gateways may be told of ended sessions

	trust     // keys.go
	feeds     // console.go
	reloads   // reload.go
	hosted    // gateways.go
	listeners // listen.go
}

// Pick returns the node of cfg named name; with name "", the config's only node.
func Pick(cfg *configs.Config, name string) (configs.Node, error) {
	var names []string
	for _, n := range cfg.Nodes {
		if n.Name == name || (name == "" && len(cfg.Nodes) == 1) {
			return n, nil
		}
		names = append(names, n.Name)
	}
	switch {
	case len(cfg.Nodes) == 0:
		return configs.Node{}, errors.New("the config has no nodes to serve")
	case name == "":
		return configs.Node{}, fmt.Errorf("the config has %d nodes: choose one (%s)", len(names), strings.Join(names, ", "))
	default:
		return configs.Node{}, fmt.Errorf("no node %q in the config (nodes: %s)", name, strings.Join(names, ", "))
	}
}

// New builds the components; nothing listens until Listen.
func New(ctx context.Context, o Options) (*Node, error) {
	if o.Config == nil || o.DataDir == "" {
		return nil, errors.New("node: Config and DataDir are required")
	}
	if o.Logger == nil {
		o.Logger = slog.Default()
	}
	if o.Registry == nil {
		o.Registry = prometheus.NewRegistry()
	}
	if o.Progress == nil {
		o.Progress = func(string) {}
	}
	cfg := o.Config
	spec, err := Pick(cfg, o.Node)
	if err != nil {
		return nil, err
	}
	if err := store.CheckShared(cfg); err != nil {
		return nil, err
	}
	r := &Node{o: o, cfg: cfg, reloads: reloads{live: cfg}, log: o.Logger, spec: spec, feeds: feeds{events: &api.Notifier{}},
		hosted: hosted{gateways: map[string]*gateway.Gateway{}, quic: map[string]*gateway.QUIC{}, machines: map[string]netip.Addr{}}}
	if err := os.MkdirAll(o.DataDir, 0o700); err != nil {
		return nil, fmt.Errorf("creating data dir: %w", err)
	}
	o.Progress("store and broker")
	sc := *cfg
	if sc.Site.DataDir == "" {
		sc.Site.DataDir = o.DataDir
	}
	if r.store, err = store.Open(ctx, &sc, store.Options{Node: spec.Name, Logger: o.Logger.With("component", "store"), Registry: o.Registry}); err != nil {
		return nil, err
	}
	fail := func(err error) (*Node, error) { r.Close(); return nil, err }
	if r.site, err = openSite(ctx, r.store, cfg, o.DataDir); err != nil {
		return fail(err)
	}
	if r.settings, err = r.site.settings(); err != nil {
		return fail(err)
	}
	if r.broker, err = broker.New(ctx, cfg, r.site.brokerStore(r.events), time.Now, broker.WithOnEnd(r.endedElsewhere), broker.WithZone(spec.Zone)); err != nil {
		return fail(err)
	}
	if r.zones, err = zonemap.FromConfig(cfg); err != nil {
		return fail(err)
	}

	o.Progress("site key and certificates")
	if err := r.loadIdentity(ctx); err != nil {
		return fail(err)
	}
	r.agentKey = api.AgentKey(r.siteKey)
	pub := r.siteKey.Public().(ed25519.PublicKey)
	r.signer = ticket.NewSigner(r.siteKey, nil)
	r.verifier = ticket.NewVerifier(pub, r.site.ledger(r.revoked), nil)

	o.Progress("health checker")
	targets, err := health.TargetsFromConfig(cfg)
	if err != nil {
		return fail(err)
	}
	prober := &health.NetProber{RootCAs: r.ca.Pool}
	acme := cfg.Site.TLS.Issuer == "acme"
	if acme {
		prober.RootCAs = nil // publicly trusted certificates: the system roots
	}
	deps := health.Deps{Logger: o.Logger.With("component", "health"), Registry: o.Registry, Probe: prober.Probe, Start: prober.Start,
		Forward: r.forwardPassive}
	if r.health, err = health.New(targets, deps); err != nil {
		return fail(err)
	}
	r.health.Subscribe(r.onHealth)
	if err := r.followEvents(ctx); err != nil {
		return fail(err)
	}
	r.buildRole()

	keys, err := r.dnssecKeys(ctx)
	if err != nil {
		return fail(err)
	}
	if r.dns, err = gslb.New(cfg, gslb.Options{Zones: r.zones, Health: gslbHealth{c: r.health}, Registry: o.Registry, Logger: o.Logger, Keys: keys}); err != nil {
		return fail(err)
	}
	if r.keySets != nil {
		r.followDNSSEC()
	}
	if acme {
		r.certs, err = r.acmeCerts(ctx)
	} else {
		r.certs, err = pki.NewCerts(ctx, o.DataDir, r.certNames(), r.ca)
	}
	if err != nil {
		return fail(err)
	}
	if r.userCAs, err = pki.LoadClientCAs(r.cfg.Site.Auth, r.ca, r.log.With("component", "client-certificates")); err != nil {
		return fail(err)
	}
	if err := r.buildGateways(); err != nil {
		return fail(err)
	}
	if err := r.buildProxy(); err != nil {
		return fail(err)
	}
	if err := r.buildListeners(); err != nil {
		return fail(err)
	}
	r.loadRevokedMachines()
	r.settings.OnModes(r.applyModes)
	r.applyModes(r.settings.Modes())
	r.settings.On(settings.SectionOverrides, r.applyOverrides)
	r.applyOverrides(r.settings.Get(settings.SectionOverrides))
	ks, err := r.readKeys(ctx)
	if err != nil {
		return fail(err)
	}
	if err := r.applyKeys(ks, time.Now()); err != nil {
		return fail(err)
	}
	r.built.Store(true)
	return r, nil
}

// cpus is Options.Procs.CPUs, or GOMAXPROCS.
func (r *Node) cpus() int {
	if r.o.Procs.CPUs > 0 {
		return r.o.Procs.CPUs
	}
	return runtime.GOMAXPROCS(0) // read, not set
}

func (r *Node) rebind(a netip.Addr) netip.Addr {
	if r.o.Rebind == nil {
		return a
	}
	return r.o.Rebind(a)
}

// rebindAddrPort rebinds the address of ap.
func (r *Node) rebindAddrPort(ap netip.AddrPort) netip.AddrPort {
	return netip.AddrPortFrom(r.rebind(ap.Addr()), ap.Port())
}

// certNames are the names and addresses the node's certificates cover.
func (r *Node) certNames() []string { return pki.CertNames(r.cfg, []configs.Node{r.spec}) }

// serverTLS returns the TLS config of every listener (pki.ServerTLS).
func (r *Node) serverTLS() *tls.Config {
	return pki.ServerTLS(r.certs, r.ca, r.certNames(), r.rebind, r.userCAs)
}

// sessionEnded cuts the channels of a session that ended (logoff, expiry) at the gateways
// hosted here and tells the agents that read this node's agent API, so that the machine cuts
// its own and refuses the session's tickets.
func (r *Node) sessionEnded(s broker.Session) {
	for _, g := range r.gateways {
		g.CloseSession(s.ID)
	}
	for _, q := range r.quics() {
		q.CloseSession(s.ID)
	}
	for _, a := range r.agents {
		a.Ended(s.ID, s.Machine)
	}
}

// Name returns the node's name.
func (r *Node) Name() string { return r.spec.Name }

// expire ends pending and disconnected sessions past their time, every second
// (broker.RunExpiry), and closes their channels.
func (r *Node) expire(ctx context.Context) error {
	t := time.NewTicker(time.Second)
	defer t.Stop()
	return r.broker.RunExpiry(ctx, t.C, func(s broker.Session) {
		r.log.Info("session expired", "session", s.ID, "user", s.User, "machine", s.Machine)
		r.sessionEnded(s)
	}, func(err error) { r.log.Warn("expiring sessions", "err", err) })
}

// Close stops everything and closes the store.
func (r *Node) Close() error {
	r.closeMu.Lock()
	defer r.closeMu.Unlock()
	for _, g := range r.gateways {
		g.Close()
	}
	for _, q := range r.quics() {
		q.Close()
	}
	if r.proxy != nil {
		r.proxy.Close()
	}
	for _, s := range r.dnsServers {
		s.Close()
	}
	for _, h := range r.httpServers {
		if h.ln != nil {
			h.srv.Close()
			h.ln.Close()
		}
	}
	if r.health != nil {
		r.health.Close()
	}
	if r.certs != nil {
		r.certs.Close()
		r.certs = nil
	}
	if r.site != nil {
		r.site.close() // frees the site-wide locks this node holds
	}
	if r.store != nil {
		err := r.store.Close()
		r.store = nil
		return err
	}
	return nil
}

// UDPWorkers returns how many blocking UDP workers the named nodes of cfg run with
// Procs.BlockingUDP: one per DNS listener and proxy.UDPWorkers per udp proxy listener bound
// to a specific IP address, on platforms that have them (package internal/rawio).
func UDPWorkers(cfg *configs.Config, nodes ...string) int {
	if !rawio.Supported {
		return 0
	}
	usable := func(ap netip.AddrPort) bool { return ap.IsValid() && rawio.Usable(ap) }
	n := 0
	for _, nd := range cfg.Nodes {
		if !slices.Contains(nodes, nd.Name) {
			continue
		}
		for _, l := range nd.Listeners {
			if l.Kind == "dns" && slices.Contains(l.Protocols, "udp") && usable(l.Address) {
				n++
			}
		}
	}
	for _, l := range cfg.Proxy.Listeners {
		if l.Protocol == "udp" && slices.Contains(nodes, l.Node) && usable(l.Address) {
			n += proxy.UDPWorkers
		}
	}
	return n
}

// endedElsewhere closes the channels of a session that another node logged off or that the
// store expired.
func (r *Node) endedElsewhere(s broker.Session) {
	if !r.built.Load() {
		return // no gateway carries it yet
	}
	r.log.Info("session ended", "session", s.ID, "user", s.User, "machine", s.Machine)
	r.sessionEnded(s)
}
