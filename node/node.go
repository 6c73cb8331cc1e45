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
	"maps"
	"net"
	"net/http"
	"net/netip"
	"os"
	"path/filepath"
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
	"github.com/frontdoor-vdi/frontdoor/internal/siteid"
	"github.com/frontdoor-vdi/frontdoor/internal/tlspolicy"
	"github.com/frontdoor-vdi/frontdoor/proxy"
	"github.com/frontdoor-vdi/frontdoor/store"
	"github.com/frontdoor-vdi/frontdoor/store/bolt"
	"github.com/frontdoor-vdi/frontdoor/store/etcd"
	"github.com/frontdoor-vdi/frontdoor/ticket"
	"github.com/frontdoor-vdi/frontdoor/zonemap"
	"github.com/prometheus/client_golang/prometheus"
	"golang.org/x/sync/errgroup"
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
	// api.CAStepWait.
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
	// BlockingUDP reads the UDP of each DNS listener and each udp proxy listener with a
	// worker blocked in the kernel (see gslb.ServerOptions.BlockingUDP and
	// proxy.Options.BlockingUDP); the caller adds a P for each (UDPWorkers). Default: false.
	BlockingUDP bool
	// Version is the software version the node announces to the site. Default: "".
	Version string
	// AddProcs, when set, is told how many more Ps (negative: fewer) the blocking UDP workers
	// need after a reload changed their number (BlockingUDP); `frontdoor serve` adds them to
	// GOMAXPROCS, as it does at start. The node never changes GOMAXPROCS itself. Default: nil.
	AddProcs func(delta int)
	// CPUs is how many CPUs the node's own work may use: GOMAXPROCS as it was before the
	// program added Ps for blocking UDP workers and password comparisons. It sizes the
	// comparisons at once (api.Logins.CPUs) and the HTTPS listeners' handshake slots.
	// Default: GOMAXPROCS when New runs.
	CPUs int
	// Drain makes Serve drain the proxy and the gateways when ctx ends: the proxy takes no
	// new connections or flows, the gateways no new sessions (their health ports answer 503),
	// and what is established may finish for proxy.drain_timeout of the config last applied,
	// while the other components stop. A failure of a component still stops everything at
	// once. Default: false (close at once).
	Drain bool
}

// Node is one running node of a site: the components it serves and the gateways it hosts.
type Node struct {
	o   Options
	cfg *configs.Config
	log *slog.Logger
	// siteCerts is the site's sealed storage in etcd (ACME certificates, DNSSEC keys) on a
	// site of several nodes, made at first use; nil else.
	siteCerts *etcd.Certs
	// keySets keeps the DNSSEC keys of the signed GSLB domains; nil when none is signed.
	keySets keySets
	// httpsMax is the most connections an HTTPS listener holds at once; 0: maxHTTPSConns.
	// Tests set it small.
	httpsMax int

	store  broker.Store
	broker *broker.Broker
	zones  *zonemap.Map
	// audit is the site's audit log as this node writes it (auditLog), the admin API's and
	// the portal's.
	audit     api.AuditLog
	auditOnce sync.Once
	health    *health.Checker
	dns       *gslb.Handler
	ca        *api.CA
	certs     *api.Certs
	userCAs   *api.ClientCAs // the operator CAs of users' client certificates; nil: none
	signer    *ticket.Signer
	verifier  *ticket.Verifier
	siteKey   ed25519.PrivateKey
	agentKey  []byte

	// Gateways are the gateways run here, by name.
	gateways map[string]*gateway.Gateway
	// quic are the QUIC ends of the gateways that have a quic_port, by gateway name: opened
	// by Listen while the store's watch may already tell of ends and overrides (quics).
	quicMu sync.Mutex // guards quic
	quic   map[string]*gateway.QUIC
	// Proxy is the L4 load balancer when a node run here has proxy listeners; else nil.
	proxy *proxy.Server
	// DNSServers, HTTPServers are the node listeners.
	dnsServers  []*gslb.Server
	httpServers []*httpsListener

	spec     configs.Node          // the configured node this is
	machines map[string]netip.Addr // machine name -> address, for the gateways
	// machineTLS is each hosted gateway's client TLS config toward machines, by name.
	machineTLS map[string]func() *tls.Config
	tracker    *gateway.Tracker
	admins     []*api.Admin
	agents     []*api.Agents
	closeMu    sync.Mutex // serializes Close

	overrideMu sync.Mutex // serializes admin overrides of gateway health

	shared *etcd.Store   // the site database when the store is etcd; else nil
	events *api.Notifier // tells the console's event streams what changed (console.go)
	role   *zoneRole     // this node's part in its zone's election, when shared (leader.go)
	// revokedMachines are the machines' revocations (machines.go).
	revokedMachines revokedMachines
	built           atomic.Bool // New has finished: the gateways may be told of ended sessions

	genMu    sync.Mutex     // serializes checkGeneration
	keysMu   sync.Mutex     // guards keys
	keys     *ticket.KeySet // the ticket keys last applied (applyKeys)
	rotateMu sync.Mutex     // serializes rotateKey and rotateCA
	caMu     sync.Mutex     // serializes applyCA; guards caApplied
	// caApplied is the site CA state last applied (applyCA), JSON.
	caApplied []byte

	reloadMu sync.Mutex      // serializes Reload; guards live and stopping
	live     *configs.Config // the config last applied: cfg, then what Reload applied
	stopping bool            // the node drains: Reload refuses
}

// httpsListener is one HTTPS listener of a node (launch+agent API or admin API).
type httpsListener struct {
	node, kind, address string
	srv                 *http.Server
	ln                  net.Listener
	trusted             []netip.Prefix // peers whose PROXY headers are read
}

// Addr returns the listening address once Listen has run.
func (h *httpsListener) Addr() string {
	if h.ln == nil {
		return h.address
	}
	return h.ln.Addr().String()
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
	r := &Node{o: o, cfg: cfg, live: cfg, log: o.Logger, spec: spec, gateways: map[string]*gateway.Gateway{}, events: &api.Notifier{},
		quic: map[string]*gateway.QUIC{}, machines: map[string]netip.Addr{}, machineTLS: map[string]func() *tls.Config{}}
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
	r.shared, _ = r.store.(*etcd.Store)
	fail := func(err error) (*Node, error) { r.Close(); return nil, err }
	if r.broker, err = broker.New(ctx, cfg, r.brokerStore(), time.Now, broker.WithOnEnd(r.endedElsewhere), broker.WithZone(spec.Zone)); err != nil {
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
	var ledger ticket.Ledger = notifyingLedger{ticket.NewMemoryLedger(0, nil), r.revoked}
	if b, ok := r.store.(*bolt.Store); ok {
		ledger = notifyingLedger{storeLedger{b.Ledger(nil)}, r.revoked} // a restart forgets nothing
	}
	if r.shared != nil {
		ledger = newSiteLedger(r.shared.Ledger()) // a launch ticket opens each channel once, site-wide
		r.shared.OnRevoked(r.revoked)             // every revocation, this node's too, comes by the watch
	}
	r.verifier = ticket.NewVerifier(pub, ledger, nil)

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
	deps := health.Deps{Logger: o.Logger.With("component", "health"), Registry: o.Registry, Probe: prober.Probe, Start: prober.Start}
	if r.shared != nil {
		deps.Forward = r.forwardPassive
	}
	if r.health, err = health.New(targets, deps); err != nil {
		return fail(err)
	}
	r.health.Subscribe(r.onHealth)
	if err := r.followEvents(ctx); err != nil {
		return fail(err)
	}
	if r.shared != nil {
		r.buildRole()
	}

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
		r.certs, err = api.NewCerts(ctx, o.DataDir, r.certNames(), r.ca)
	}
	if err != nil {
		return fail(err)
	}
	if r.userCAs, err = api.LoadClientCAs(r.cfg.Site.Auth, r.ca, r.log.With("component", "client-certificates")); err != nil {
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
	if err := r.loadRevokedMachines(); err != nil {
		return fail(err)
	}
	if r.shared != nil {
		r.shared.OnModes(r.applyModes)
		r.applyModes(r.shared.Modes())
		r.shared.OnSettings(etcd.SectionOverrides, r.applyOverrides)
		r.applyOverrides(r.shared.Settings(etcd.SectionOverrides))
	}
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

// cpus is Options.CPUs, or GOMAXPROCS.
func (r *Node) cpus() int {
	if r.o.CPUs > 0 {
		return r.o.CPUs
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

// dnsListeners are the addresses of the node's DNS listeners, an unspecified one as
// loopback: where the node finds the ACME challenge records it serves itself.
func (r *Node) dnsListeners() []string {
	var out []string
	for _, l := range r.spec.Listeners {
		if l.Kind != "dns" {
			continue
		}
		ap := r.rebindAddrPort(l.Address)
		if a := ap.Addr(); a.IsUnspecified() {
			loop := netip.IPv6Loopback()
			if a.Is4() {
				loop = netip.AddrFrom4([4]byte{127, 0, 0, 1})
			}
			ap = netip.AddrPortFrom(loop, ap.Port())
		}
		out = append(out, ap.String())
	}
	return out
}

// certNames are the names and addresses the node's certificates cover.
func (r *Node) certNames() []string { return api.CertNames(r.cfg, []configs.Node{r.spec}) }

// serverTLS returns the TLS config of every listener (api.ServerTLS).
func (r *Node) serverTLS() *tls.Config {
	return api.ServerTLS(r.certs, r.ca, r.certNames(), r.rebind, r.userCAs)
}

// onHealth turns machine verdicts into broker availability.
func (r *Node) onHealth(ev health.Event) {
	if !ev.VerdictChanged() {
		return
	}
	st, ok := r.health.Status(ev.Target)
	if !ok || st.Kind != "machine" {
		return
	}
	if err := r.broker.SetDown(context.Background(), ev.Target, ev.To != health.StateUp); err != nil {
		r.log.Warn("marking machine", "machine", ev.Target, "err", err)
	}
}

// gslbHealth answers gslb's Health from the checker: a gateway's verdict once it is definite
// (health.Checker.Definite); until then the GSLB name's configured initial state holds.
type gslbHealth struct{ c *health.Checker }

// GatewayUp implements gslb.Health.
func (h gslbHealth) GatewayUp(name string) (bool, bool) {
	v, known := h.c.Definite(name)
	return v == health.StateUp, known
}

// sessions adapts the broker to gateway.Sessions.
type sessions struct {
	b   *broker.Broker
	log *slog.Logger
}

// Active implements gateway.Sessions.
func (s sessions) Active(id string) bool {
	se, ok := s.b.Session(id)
	return ok && se.State != broker.StateEnded
}

// Connected implements gateway.Sessions.
func (s sessions) Connected(ctx context.Context, id, gw string) {
	if _, err := s.b.Connected(ctx, id, gw); err != nil {
		s.log.Warn("session connected", "session", id, "gateway", gw, "err", err)
	}
}

// Disconnected implements gateway.Sessions.
func (s sessions) Disconnected(ctx context.Context, id, gw string) {
	if _, err := s.b.Disconnected(ctx, id, gw); errors.Is(err, broker.ErrNotCarrier) {
		s.log.Info("a gateway's disconnect comes after the session moved on", "session", id, "gateway", gw, "err", err)
	} else if se, ok := s.b.Session(id); errors.Is(err, broker.ErrBadTransition) && ok && se.State == broker.StateDisconnected {
		s.log.Info("a gateway's disconnect of a session disconnected already (by an admin)", "session", id, "gateway", gw)
	} else if errors.Is(err, broker.ErrNoSession) {
		s.log.Info("a gateway's disconnect of a session that ended (its logoff cut the channels)", "session", id, "gateway", gw)
	} else if err != nil {
		s.log.Warn("session disconnected", "session", id, "gateway", gw, "err", err)
	}
}

// reissue signs the next reconnect ticket of a channel a gateway admitted (gateway.Options.
// Reissue): a reconnect ticket's chain keeps its expiry; a launch ticket starts one that
// expires with the launch's reconnect ticket.
func (r *Node) reissue(c ticket.Claims) (string, error) {
	expires := c.Expires
	if c.Kind == ticket.Launch {
		expires = c.Issued.Add(r.cfg.Site.Tickets.ReconnectTTL.D())
	}
	tok, _, err := r.signer.Reissue(c, expires)
	return tok, err
}

// carried reports whether session is connected in the site (gateway.Options.Carried).
func (r *Node) carried(session string) bool {
	s, ok := r.broker.Session(session)
	return ok && s.State == broker.StateConnected
}

func (r *Node) buildGateways() error {
	for _, m := range r.cfg.Machines {
		r.machines[m.Name] = m.Address
	}
	tr := gateway.NewTracker(sessions{r.broker, r.log})
	r.tracker = tr
	for _, g := range r.cfg.Gateways {
		if g.Node != r.spec.Name {
			continue // hosted by another node, or a foreign server
		}
		o := gateway.Options{Name: g.Name, TLS: gatewayTLS(r.serverTLS()), Verifier: r.verifier, Sessions: sessions{r.broker, r.log}, Reissue: r.reissue, Carried: r.carried,
			Machine: r.machineAddr, WebOrigins: r.cfg.PortalHosts(), Logger: r.log.With("component", "gateway")}
		o.Address = g.Address
		o.MachineTLS = r.ca.Party(siteid.RoleGateway, g.Name, []netip.Addr{o.Address}).ClientTLS(r.refuseRevokedMachines)
		r.machineTLS[g.Name] = o.MachineTLS
		o.Address = r.rebind(o.Address)
		for _, p := range g.Ports {
			switch {
			case p.Protocol == "udp":
				o.UDPPorts = append(o.UDPPorts, uint16(p.Port))
			case p.Port == g.HTTPSPort(): // validation refuses http on a hosted gateway
				o.HealthPort = uint16(p.Port)
			default:
				o.TCPPorts = append(o.TCPPorts, uint16(p.Port))
			}
		}
		if o.PlainUDP = g.PlainUDP; o.PlainUDP && len(o.UDPPorts) > 0 {
			r.log.Warn("plain UDP channels are on: their tickets and datagrams cross the client's leg unencrypted (gateways[].plain_udp)", "gateway", g.Name)
		}
		gw, err := gateway.New(o, tr)
		if err != nil {
			return err
		}
		r.gateways[g.Name] = gw
	}
	return nil
}

// gatewayTLS is the server TLS of a gateway's ports: the node's, but asking for no client
// certificate. Tickets admit channels; and a browser asked for one on a WebSocket (the
// HTTPS port's channels) cannot show its user the choice, and fails the connection.
func gatewayTLS(tc *tls.Config) *tls.Config {
	tc = tc.Clone()
	tc.ClientAuth, tc.ClientCAs, tc.VerifyConnection, tc.GetConfigForClient = tls.NoClientCert, nil, nil, nil
	return tc
}

// machineAddr resolves a machine name for the gateways.
func (r *Node) machineAddr(name string) (netip.Addr, bool) {
	a, ok := r.machines[name]
	return a, ok
}

// revoked cuts, at the gateways hosted here, the channels that tickets of session issued
// before before opened (a steal: the old endpoint's; a logoff: all), and tells the agents of
// the session's machine to do the same.
func (r *Node) revoked(session string, before time.Time) {
	if !r.built.Load() {
		return // nothing is carried yet
	}
	for _, g := range r.gateways {
		g.CloseSessionBefore(session, before)
	}
	for _, q := range r.quics() {
		q.CloseSessionBefore(session, before)
	}
	if s, ok := r.broker.Session(session); ok && s.State != broker.StateEnded {
		for _, a := range r.agents {
			a.Revoked(session, s.Machine, before)
		}
	}
}

// ready reports whether the node takes launches: its health checker has a definite verdict
// for every gateway (health.Checker.Definite), so that the gateways it offers are known.
func (r *Node) ready() bool {
	for _, g := range r.cfg.Gateways {
		if _, known := r.health.Definite(g.Name); !known {
			return false
		}
	}
	return true
}

// gatewaysFor returns the usable gateways for a machine in zone: the zone's eligible
// gateways, then those of the other zones, each group by name.
//
// While the site database is out of reach only the gateways hosted here are offered: in
// outage mode a launch ticket opens a channel only at the node that booked its session (a
// node that hosts none offers the others, which refuse its launch tickets until etcd is back).
func (r *Node) gatewaysFor(zone string) []api.GatewayEndpoint {
	var same, other []api.GatewayEndpoint
	outage := r.shared != nil && r.shared.InOutage() && len(r.gateways) > 0
	for _, g := range r.cfg.Gateways {
		if !r.health.Eligible(g.Name) || (outage && r.gateways[g.Name] == nil) {
			continue
		}
		e := api.GatewayEndpoint{Name: g.Name, Zone: g.Zone, Addresses: g.PublicAddresses, QUICPort: uint16(g.QUICPort), HTTPSPort: uint16(g.HTTPSPort())}
		if g.Zone == zone {
			same = append(same, e)
		} else {
			other = append(other, e)
		}
	}
	return append(same, other...)
}

func (r *Node) buildListeners() error {
	n := r.spec
	log := r.log.With("node", n.Name)
	logins := &api.Logins{CPUs: r.cpus(), Logger: r.log.With("component", "logins"), Registry: r.o.Registry} // the launch and admin APIs take turns on the node's CPUs
	launch := api.NewLaunch(api.LaunchOptions{Config: r.cfg, Logins: logins, Broker: r.broker, Locate: r.zones.Zone, Gateways: r.gatewaysFor,
		Signer: r.signer, Verifier: r.verifier, OnLogoff: r.sessionEnded, Ready: r.ready, ClientCAs: r.userCAs, Logger: log.With("component", "launch"),
		Audit: r.auditLog(), Events: r.events, Node: n.Name})
	agents := api.NewAgents(api.AgentsOptions{Config: r.cfg, Broker: r.broker, Zone: n.Zone, Key: r.agentKey, CA: r.ca, Verifier: r.verifier,
		SitePublicKey: r.siteKey.Public().(ed25519.PublicKey), Revoked: r.revokedMachines.at, Logger: log.With("component", "agents")})
	r.agents = append(r.agents, agents)
	for _, l := range n.Listeners {
		switch l.Kind {
		case "dns":
			r.dnsServers = append(r.dnsServers, gslb.NewServer(r.dns, gslb.ServerOptions{Address: r.rebindAddrPort(l.Address).String(), Protocols: l.Protocols, Logger: log, BlockingUDP: r.o.BlockingUDP, UDPCoalesce: coalesce(l)}))
		case "launch":
			r.httpServers = append(r.httpServers, r.httpServer(n.Name, l, api.Handler(launch, agents), log))
		case "admin":
			ao := api.AdminOptions{Config: r.cfg, Logins: logins, Broker: r.broker, Zone: n.Zone, ClientCAs: r.userCAs,
				ModeFile: filepath.Join(r.o.DataDir, "secure-gateway.json"), Agents: agents, Store: r.storeStatus,
				Health: r.healthSummary, Registry: r.o.Registry, Logger: log.With("component", "admin"), RotateKey: r.rotateKey, RotateCA: r.rotateCA, CA: r.caStatus, Signer: r.signer,
				Override: func(gw, o string) (string, error) { return r.override(gw, o) }, RevokeMachine: r.RevokeMachine}
			r.consoleOptions(&ao)
			if r.keySets != nil {
				ao.DNSSEC = r
			}
			if r.shared != nil {
				ao.ModeFile, ao.Modes = "", r.shared // switched site-wide, in the store
			}
			admin, err := api.NewAdmin(ao)
			if err != nil {
				return err
			}
			r.admins = append(r.admins, admin)
			r.httpServers = append(r.httpServers, r.httpServer(n.Name, l, admin, log))
		}
	}
	return nil
}

func (r *Node) httpServer(node string, l configs.Listener, h http.Handler, log *slog.Logger) *httpsListener {
	return &httpsListener{node: node, kind: l.Kind, address: r.rebindAddrPort(l.Address).String(), trusted: l.ProxyProtocolFrom, srv: &http.Server{Handler: tlspolicy.Handler(h), TLSConfig: r.serverTLS(),
		ReadHeaderTimeout: 5 * time.Second, ReadTimeout: 30 * time.Second, WriteTimeout: 30 * time.Second, IdleTimeout: 2 * time.Minute,
		MaxHeaderBytes: 16 << 10, ErrorLog: slog.NewLogLogger(log.Handler(), slog.LevelDebug)}}
}

// healthSummary describes each gateway's verdict and ports for the admin status.
func (r *Node) healthSummary() map[string]string {
	out := map[string]string{}
	for _, st := range r.health.Snapshot() {
		if st.Kind != "gateway" {
			continue
		}
		var ports []string
		for _, p := range st.Ports {
			ports = append(ports, fmt.Sprintf("%s %s", p.ID, p.State))
		}
		out[st.Name] = fmt.Sprintf("%s (%s)", st.Verdict, strings.Join(ports, ", "))
		if st.Override != health.OverrideNone {
			out[st.Name] += ", admin override " + st.Override.String()
		}
	}
	return out
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

// override sets an admin override on gateway name's health verdict, asked of this node's
// admin API: "up", "down", "drain" or "auto" to follow the probes again. On a shared store
// the override is the site's: stored, and followed by every front door through its watch
// (applyOverrides); on a store of one node it holds here, in memory. The node that hosts the
// gateway also puts it in drain mode (applyOverride).
func (r *Node) override(name, o string) (note string, err error) {
	r.overrideMu.Lock()
	defer r.overrideMu.Unlock()
	r.reloadMu.Lock()
	stopping := r.stopping
	r.reloadMu.Unlock()
	if stopping {
		return "", fmt.Errorf("%w: the front door is stopping", api.ErrRefused)
	}
	i := slices.IndexFunc(r.cfg.Gateways, func(g configs.Gateway) bool { return g.Name == name })
	if i < 0 {
		return "", fmt.Errorf("%w: %q", api.ErrUnknownGateway, name)
	}
	v, err := health.ParseOverride(o)
	if err != nil {
		return "", err
	}
	if r.shared != nil {
		val := o
		if v == health.OverrideNone {
			val = ""
		}
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		if err := r.shared.SetSettings(ctx, etcd.SectionOverrides, map[string]string{name: val}); err != nil {
			return "", fmt.Errorf("%w: the site database did not take the override: %v", api.ErrRefused, err)
		}
	}
	return r.applyOverride(r.cfg.Gateways[i], v)
}

// quics returns a copy of the QUIC ends, by gateway name.
func (r *Node) quics() map[string]*gateway.QUIC {
	r.quicMu.Lock()
	defer r.quicMu.Unlock()
	return maps.Clone(r.quic)
}

// Name returns the node's name.
func (r *Node) Name() string { return r.spec.Name }

// Endpoint is one socket a node serves, for its log.
type Endpoint struct {
	// Kind is dns, launch, admin, gateway or proxy.
	Kind string
	// Name is the gateway's or the proxy listener's name; "" for the others.
	Name string
	// Network is udp or tcp; "" for a gateway, which serves both.
	Network string
	// Address is the bound host:port; a gateway's address without a port.
	Address string
}

// Endpoints lists what the node serves once Listen has run: its DNS sockets, its HTTPS
// listeners, the proxy's listeners and the gateways it hosts.
func (r *Node) Endpoints() []Endpoint {
	var out []Endpoint
	for _, s := range r.dnsServers {
		if a := s.UDPAddr(); a != nil {
			out = append(out, Endpoint{Kind: "dns", Network: "udp", Address: a.String()})
		}
		if a := s.TCPAddr(); a != nil {
			out = append(out, Endpoint{Kind: "dns", Network: "tcp", Address: a.String()})
		}
	}
	for _, h := range r.httpServers {
		out = append(out, Endpoint{Kind: h.kind, Network: "tcp", Address: h.Addr()})
	}
	if r.proxy != nil {
		for _, l := range r.cfg.Proxy.Listeners {
			if a := r.proxy.Addr(l.Name); l.Node == r.spec.Name && a.IsValid() {
				network := "tcp"
				if l.Protocol == "udp" {
					network = "udp"
				}
				out = append(out, Endpoint{Kind: "proxy", Name: l.Name, Network: network, Address: a.String()})
			}
		}
	}
	for _, g := range r.cfg.Gateways {
		if r.gateways[g.Name] != nil {
			out = append(out, Endpoint{Kind: "gateway", Name: g.Name, Address: r.rebind(g.Address).String()})
		}
	}
	return out
}

// Listen opens every socket: DNS, HTTPS, gateways. On error nothing stays open.
func (r *Node) Listen() error {
	for _, s := range r.dnsServers {
		if err := s.Listen(); err != nil {
			r.Close()
			return err
		}
	}
	for _, h := range r.httpServers {
		ln, err := net.Listen("tcp", h.address)
		if err != nil {
			r.Close()
			return fmt.Errorf("%s %s listener: %w", h.node, h.kind, err)
		}
		if len(h.trusted) > 0 {
			ln = newProxyListener(ln, h.trusted, r.log.With("node", h.node, "listener", h.kind))
		}
		// A bounded number of connections at once, and a source: the process keeps
		// descriptors for its other sockets, and stalled connections do not keep others out.
		if err := r.limitHTTPS(h, ln); err != nil {
			ln.Close()
			r.Close()
			return fmt.Errorf("%s %s listener: %w", h.node, h.kind, err)
		}
	}
	for name, g := range r.gateways {
		if err := g.Listen(); err != nil {
			r.Close()
			return fmt.Errorf("gateway %s: %w", name, err)
		}
	}
	if r.proxy != nil {
		if err := r.proxy.Listen(); err != nil {
			r.Close()
			return fmt.Errorf("proxy: %w", err)
		}
	}
	for _, g := range r.cfg.Gateways {
		if r.gateways[g.Name] == nil || g.QUICPort == 0 {
			continue
		}
		q, err := gateway.ListenQUIC(gateway.QUICOptions{Name: g.Name, Address: netip.AddrPortFrom(r.rebind(g.Address), uint16(g.QUICPort)).String(),
			TLS: gatewayTLS(r.serverTLS()), Verifier: r.verifier, Sessions: sessions{r.broker, r.log}, Track: r.tracker, Reissue: r.reissue, Carried: r.carried,
			Machine: r.machineAddr, MachineTLS: r.machineTLS[g.Name], Logger: r.log.With("component", "gateway")})
		if err != nil {
			r.Close()
			return fmt.Errorf("gateway %s quic: %w", g.Name, err)
		}
		r.quicMu.Lock()
		r.quic[g.Name] = q
		r.quicMu.Unlock()
	}
	if r.shared != nil {
		// Present to the site once it can be reached: the lab waits for it.
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		info := etcd.NodeInfo{Name: r.spec.Name, Zone: r.spec.Zone, Version: r.o.Version, Started: time.Now().UTC(), PID: os.Getpid()}
		if err := r.shared.Register(ctx, info); err != nil {
			r.Close()
			return err
		}
	}
	return nil
}

// Serve runs every component until ctx ends; the first failure stops them all.
func (r *Node) Serve(ctx context.Context) error {
	g, gctx := errgroup.WithContext(ctx)
	g.Go(func() error {
		if err := r.health.Run(gctx); err != nil && !errors.Is(err, context.Canceled) && !errors.Is(err, health.ErrClosed) {
			return err
		}
		return nil
	})
	for _, s := range r.dnsServers {
		g.Go(func() error { return s.Serve(gctx) })
	}
	for _, h := range r.httpServers {
		g.Go(func() error {
			err := h.srv.ServeTLS(h.ln, "", "")
			if errors.Is(err, http.ErrServerClosed) {
				return nil
			}
			return err
		})
	}
	// The proxy and the gateways run until stop: at once if a component failed; after
	// draining for the drain timeout of the config last applied if ctx ended and
	// Options.Drain is set.
	dctx, stop := context.WithCancel(context.Background())
	for _, gw := range r.gateways {
		g.Go(func() error {
			err := gw.Serve(dctx)
			if errors.Is(err, gateway.ErrClosed) && ctx.Err() != nil {
				return nil // the drain below closed it before it started
			}
			return err
		})
	}
	for _, q := range r.quics() {
		g.Go(func() error { return q.Serve(dctx) })
	}
	if r.proxy != nil {
		g.Go(func() error {
			err := r.proxy.Serve(dctx)
			if errors.Is(err, proxy.ErrClosed) && ctx.Err() != nil {
				return nil // the drain below closed it before it started
			}
			return err
		})
	}
	g.Go(func() error {
		<-gctx.Done()
		if ctx.Err() != nil && r.o.Drain {
			r.drain()
		}
		stop()
		return nil
	})
	if !r.broker.Shared() {
		g.Go(func() error { return r.expire(gctx) }) // a shared store expires by its leases
	}
	g.Go(func() error { return r.refreshKeys(gctx) })
	g.Go(func() error { return r.trimAudit(gctx) })
	if r.role != nil {
		g.Go(func() error { return r.runRole(gctx) })
	}
	g.Go(func() error {
		<-gctx.Done()
		for _, h := range r.httpServers {
			sctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
			h.srv.Shutdown(sctx)
			cancel()
		}
		return nil
	})
	err := g.Wait()
	r.Close()
	return err
}

// drain makes the proxy take no new connections or flows and the gateways no new sessions,
// and lets what is established finish for up to the drain timeout of the config last
// applied; the gateways' health ports answer 503 meanwhile, so that health verdicts turn
// draining and load balancers and GSLB steer new clients away.
func (r *Node) drain() {
	r.reloadMu.Lock()
	r.stopping = true
	d := configs.DefaultDrainTimeout // a config built in code, without defaults
	if t := r.live.Proxy.DrainTimeout; t != nil {
		d = t.D()
	}
	r.reloadMu.Unlock()
	if d <= 0 || (r.proxy == nil && len(r.gateways) == 0) {
		return // drain_timeout 0: everything is closed at once
	}
	var conns, channels, quic int
	var flows int64
	if r.proxy != nil {
		conns, flows = r.proxy.Active()
	}
	for _, gw := range r.gateways {
		channels += gw.Channels()
	}
	for _, q := range r.quics() {
		quic += len(q.Clients())
	}
	r.log.Info("draining: no new connections, flows or sessions, established ones may finish",
		"connections", conns, "udp_flows", flows, "gateway_channels", channels, "quic_clients", quic, "timeout", d)
	ctx, cancel := context.WithTimeout(context.Background(), d)
	defer cancel()
	start := time.Now()
	var wg sync.WaitGroup
	report := func(what string, err error) {
		switch {
		case err == nil:
			r.log.Info("drained "+what, "after", time.Since(start).Round(time.Millisecond))
		case errors.Is(err, context.DeadlineExceeded):
			r.log.Warn("drain timed out: "+what, "err", err, "after", time.Since(start).Round(time.Millisecond))
		default:
			r.log.Warn("drain ended: "+what+" failed", "err", err, "after", time.Since(start).Round(time.Millisecond))
		}
	}
	if r.proxy != nil {
		wg.Go(func() { report("the proxy", r.proxy.Shutdown(ctx)) })
	}
	for name, gw := range r.gateways {
		wg.Go(func() { report("gateway "+name, gw.Shutdown(ctx)) })
	}
	for name, q := range r.quics() {
		wg.Go(func() { report("gateway "+name+" quic", q.Shutdown(ctx)) })
	}
	wg.Wait()
}

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
	if r.siteCerts != nil {
		r.siteCerts.Close() // frees the site-wide locks this node holds
		r.siteCerts = nil
	}
	if r.store != nil {
		err := r.store.Close()
		r.store = nil
		return err
	}
	return nil
}

// coalesce returns a dns listener's udp_coalesce (set by the config's defaults).
func coalesce(l configs.Listener) time.Duration {
	if l.UDPCoalesce == nil {
		return 0
	}
	return l.UDPCoalesce.D()
}

// UDPWorkers returns how many blocking UDP workers the named nodes of cfg run with
// Options.BlockingUDP: one per DNS listener and proxy.UDPWorkers per udp proxy listener bound
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
