// Package node runs frontdoor nodes: it builds every component of a node from the site
// configuration — GSLB DNS, the health checker, the broker over its store, the launch, agent and
// admin APIs, and the secure gateways the node hosts — and wires them through the small
// interfaces each package owns. `frontdoor serve` runs one node; `frontdoor lab` runs every node
// of a site in one process.
package node

import (
	"context"
	"crypto/ed25519"
	"crypto/tls"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"net/netip"
	"os"
	"path/filepath"
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
	"github.com/frontdoor-vdi/frontdoor/internal/rawudp"
	"github.com/frontdoor-vdi/frontdoor/proxy"
	"github.com/frontdoor-vdi/frontdoor/store"
	"github.com/frontdoor-vdi/frontdoor/store/etcd"
	"github.com/frontdoor-vdi/frontdoor/ticket"
	"github.com/frontdoor-vdi/frontdoor/zonemap"
	"github.com/prometheus/client_golang/prometheus"
	"golang.org/x/sync/errgroup"
)

// Options configure a Runtime.
type Options struct {
	// Config is the loaded site configuration. Required.
	Config *configs.Config
	// Nodes are the nodes to run; empty runs every node of the config.
	Nodes []string
	// AllGateways runs every gateway of the config in this process (the lab); otherwise only
	// the gateways whose node is run here.
	AllGateways bool
	// DataDir holds the store, the site key, the CA and certificates. Required.
	DataDir string
	// Logger receives every component's logs. Default: slog.Default().
	Logger *slog.Logger
	// Registry receives every component's metrics. Default: a new registry.
	Registry *prometheus.Registry
	// Progress, when set, is told what starts, for a progress display.
	Progress func(step string)
	// Rebind, when set, maps every address the runtime listens on (DNS, HTTPS, gateways) to
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
	// Drain makes Serve drain the proxy and the gateways when ctx ends: the proxy takes no
	// new connections or flows, the gateways no new sessions (their health ports answer 503),
	// and what is established may finish for proxy.drain_timeout of the config last applied,
	// while the other components stop. A failure of a component still stops everything at
	// once. Default: false (close at once).
	Drain bool
}

// Runtime is the running components of one or more nodes.
type Runtime struct {
	o   Options
	cfg *configs.Config
	log *slog.Logger

	Store    broker.Store
	Broker   *broker.Broker
	Zones    *zonemap.Map
	Health   *health.Checker
	DNS      *gslb.Handler
	CA       *api.CA
	Certs    *api.Certs
	Signer   *ticket.Signer
	Verifier *ticket.Verifier
	SiteKey  ed25519.PrivateKey
	AgentKey []byte

	// Gateways are the gateways run here, by name.
	Gateways map[string]*gateway.Gateway
	// QUIC are the QUIC ends of the gateways that have a quic_port, by gateway name.
	QUIC map[string]*gateway.QUIC
	// Proxy is the L4 load balancer when a node run here has proxy listeners; else nil.
	Proxy *proxy.Server
	// DNSServers, HTTPServers are the node listeners.
	DNSServers  []*gslb.Server
	HTTPServers []*HTTPServer

	nodes    []configs.Node
	machines map[string]netip.Addr // machine name -> address, for the gateways
	tracker  *gateway.Tracker
	admins   []*api.Admin
	agents   []*api.Agents
	closeMu  sync.Mutex // serializes Close

	overrideMu sync.Mutex // serializes admin overrides of gateway health

	shared *etcd.Store // the site database when the store is etcd; else nil
	built  atomic.Bool // New has finished: the gateways may be told of ended sessions

	reloadMu sync.Mutex      // serializes Reload; guards live and stopping
	live     *configs.Config // the config last applied: cfg, then what Reload applied
	stopping bool            // the node drains: Reload refuses
}

// HTTPServer is one HTTPS listener of a node (launch+agent API or admin API).
type HTTPServer struct {
	Node, Kind, Address string
	srv                 *http.Server
	ln                  net.Listener
	trusted             []netip.Prefix // peers whose PROXY headers are read
}

// Addr returns the listening address once Listen has run.
func (h *HTTPServer) Addr() string {
	if h.ln == nil {
		return h.Address
	}
	return h.ln.Addr().String()
}

// New builds the components; nothing listens until Listen.
func New(ctx context.Context, o Options) (*Runtime, error) {
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
	r := &Runtime{o: o, cfg: cfg, live: cfg, log: o.Logger, Gateways: map[string]*gateway.Gateway{}, QUIC: map[string]*gateway.QUIC{},
		machines: map[string]netip.Addr{}}
	for _, n := range cfg.Nodes {
		if len(o.Nodes) == 0 || slices.Contains(o.Nodes, n.Name) {
			r.nodes = append(r.nodes, n)
		}
	}
	if len(r.nodes) == 0 {
		return nil, fmt.Errorf("none of the nodes %v is in the config", o.Nodes)
	}
	if err := os.MkdirAll(o.DataDir, 0o700); err != nil {
		return nil, fmt.Errorf("creating data dir: %w", err)
	}
	var err error
	o.Progress("store and broker")
	sc := *cfg
	if sc.Site.DataDir == "" {
		sc.Site.DataDir = o.DataDir
	}
	if r.Store, err = store.Open(ctx, &sc, store.Options{Node: r.nodes[0].Name, Logger: o.Logger.With("component", "store"), Registry: o.Registry}); err != nil {
		return nil, err
	}
	r.shared, _ = r.Store.(*etcd.Store)
	fail := func(err error) (*Runtime, error) { r.Close(); return nil, err }
	if r.Broker, err = broker.New(ctx, cfg, r.Store, time.Now, broker.WithOnEnd(r.endedElsewhere)); err != nil {
		return fail(err)
	}
	if r.Zones, err = zonemap.FromConfig(cfg); err != nil {
		return fail(err)
	}

	o.Progress("site key and certificates")
	if err := r.loadIdentity(ctx); err != nil {
		return fail(err)
	}
	r.AgentKey = api.AgentKey(r.SiteKey)
	pub := r.SiteKey.Public().(ed25519.PublicKey)
	r.Signer = ticket.NewSigner(r.SiteKey, nil)
	var ledger ticket.Ledger = ticket.NewMemoryLedger(0, nil)
	if r.shared != nil {
		ledger = siteLedger{r.shared.Ledger()} // a launch ticket opens each channel once, site-wide
	}
	r.Verifier = ticket.NewVerifier(pub, ledger, nil)

	o.Progress("health checker")
	targets, err := health.TargetsFromConfig(cfg)
	if err != nil {
		return fail(err)
	}
	prober := &health.NetProber{RootCAs: r.CA.Pool()}
	acme := cfg.Site.TLS.Issuer == "acme"
	if acme {
		prober.RootCAs = nil // publicly trusted certificates: the system roots
	}
	if r.Health, err = health.New(targets, health.Deps{Logger: o.Logger.With("component", "health"), Registry: o.Registry, Probe: prober.Probe, Start: prober.Start}); err != nil {
		return fail(err)
	}
	r.Health.Subscribe(r.onHealth)

	if r.DNS, err = gslb.New(cfg, gslb.Options{Zones: r.Zones, Health: gslbHealth{c: r.Health}, Registry: o.Registry, Logger: o.Logger}); err != nil {
		return fail(err)
	}
	if acme {
		// DNS-01 challenges are answered by this node's own GSLB server.
		t := cfg.Site.TLS
		names := t.Names
		if len(names) == 0 {
			for _, n := range cfg.GSLB.Names {
				names = append(names, strings.TrimSuffix(n.Name, "."))
			}
		}
		if len(names) == 0 {
			return fail(errors.New("site.tls.issuer is acme but there are no names: set site.tls.names or a GSLB name"))
		}
		r.Certs, err = api.NewACMECerts(ctx, o.DataDir, names, api.ACMEIssuer(t.ACME.CA, t.ACME.Email, t.ACME.Challenge, r.DNS.ACME()))
	} else {
		r.Certs, err = api.NewCerts(ctx, o.DataDir, r.certNames(), r.CA)
	}
	if err != nil {
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
	if r.shared != nil {
		r.shared.OnModes(r.applyModes)
		r.applyModes(r.shared.Modes())
		r.shared.OnSettings(etcd.SectionOverrides, r.applyOverrides)
		r.applyOverrides(r.shared.Settings(etcd.SectionOverrides))
	}
	r.built.Store(true)
	return r, nil
}

func (r *Runtime) rebind(a netip.Addr) netip.Addr {
	if r.o.Rebind == nil {
		return a
	}
	return r.o.Rebind(a)
}

// rebindAddrPort rebinds the address of "host:port".
func (r *Runtime) rebindAddrPort(s string) string {
	ap, err := netip.ParseAddrPort(s)
	if err != nil || r.o.Rebind == nil {
		return s
	}
	return netip.AddrPortFrom(r.o.Rebind(ap.Addr()), ap.Port()).String()
}

// certNames are the names and addresses the node's certificates cover.
func (r *Runtime) certNames() []string { return api.CertNames(r.cfg, r.nodes) }

// serverTLS returns the TLS config of every listener (api.ServerTLS).
func (r *Runtime) serverTLS() *tls.Config {
	return api.ServerTLS(r.Certs, r.CA, r.certNames(), r.rebind)
}

// onHealth turns machine verdicts into broker availability.
func (r *Runtime) onHealth(ev health.Event) {
	if !ev.VerdictChanged() {
		return
	}
	st, ok := r.Health.Status(ev.Target)
	if !ok || st.Kind != "machine" {
		return
	}
	if err := r.Broker.SetDown(context.Background(), ev.Target, ev.To != health.StateUp); err != nil {
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
	if _, err := s.b.Connected(ctx, id); err != nil {
		s.log.Warn("session connected", "session", id, "gateway", gw, "err", err)
	}
}

// Disconnected implements gateway.Sessions.
func (s sessions) Disconnected(ctx context.Context, id, gw string) {
	if _, err := s.b.Disconnected(ctx, id); err != nil {
		s.log.Warn("session disconnected", "session", id, "gateway", gw, "err", err)
	}
}

func (r *Runtime) buildGateways() error {
	run := map[string]bool{}
	for _, n := range r.nodes {
		run[n.Name] = true
	}
	for _, m := range r.cfg.Machines {
		r.machines[m.Name], _ = netip.ParseAddr(m.Address)
	}
	tr := gateway.NewTracker(sessions{r.Broker, r.log})
	r.tracker = tr
	for _, g := range r.cfg.Gateways {
		if !r.o.AllGateways && (g.Node == "" || !run[g.Node]) {
			continue
		}
		o := gateway.Options{Name: g.Name, TLS: r.serverTLS(), Verifier: r.Verifier, Sessions: sessions{r.Broker, r.log},
			Machine: r.machineAddr,
			Logger:  r.log.With("component", "gateway")}
		o.Address, _ = netip.ParseAddr(g.Address)
		o.Address = r.rebind(o.Address)
		for _, p := range g.Ports {
			switch {
			case p.Protocol == "udp":
				o.UDPPorts = append(o.UDPPorts, uint16(p.Port))
			case p.Check.Kind == "https": // validation refuses http on a hosted gateway
				o.HealthPort = uint16(p.Port)
			default:
				o.TCPPorts = append(o.TCPPorts, uint16(p.Port))
			}
		}
		gw, err := gateway.New(o, tr)
		if err != nil {
			return err
		}
		r.Gateways[g.Name] = gw
	}
	return nil
}

// machineAddr resolves a machine name for the gateways.
func (r *Runtime) machineAddr(name string) (netip.Addr, bool) {
	a, ok := r.machines[name]
	return a, ok
}

// GatewaysFor returns the usable gateways for a machine in zone: the zone's eligible
// gateways, then those of the other zones, each group by name.
func (r *Runtime) GatewaysFor(zone string) []api.GatewayEndpoint {
	var same, other []api.GatewayEndpoint
	for _, g := range r.cfg.Gateways {
		if !r.Health.Eligible(g.Name) {
			continue
		}
		e := api.GatewayEndpoint{Name: g.Name, Zone: g.Zone, Addresses: g.PublicAddresses}
		if g.Zone == zone {
			same = append(same, e)
		} else {
			other = append(other, e)
		}
	}
	return append(same, other...)
}

func (r *Runtime) buildListeners() error {
	for _, n := range r.nodes {
		log := r.log.With("node", n.Name)
		launch := api.NewLaunch(api.LaunchOptions{Config: r.cfg, Broker: r.Broker, Locate: r.Zones.Zone, Gateways: r.GatewaysFor,
			Signer: r.Signer, Verifier: r.Verifier, OnLogoff: r.closeSession, Logger: log.With("component", "launch")})
		agents := api.NewAgents(api.AgentsOptions{Config: r.cfg, Broker: r.Broker, Zone: n.Zone, Key: r.AgentKey,
			SitePublicKey: r.SiteKey.Public().(ed25519.PublicKey), Logger: log.With("component", "agents")})
		r.agents = append(r.agents, agents)
		for _, l := range n.Listeners {
			switch l.Kind {
			case "dns":
				r.DNSServers = append(r.DNSServers, gslb.NewServer(r.DNS, gslb.ServerOptions{Address: r.rebindAddrPort(l.Address), Protocols: l.Protocols, Logger: log, BlockingUDP: r.o.BlockingUDP, UDPCoalesce: coalesce(l)}))
			case "launch":
				r.HTTPServers = append(r.HTTPServers, r.httpServer(n.Name, l, api.Handler(launch, agents), log))
			case "admin":
				ao := api.AdminOptions{Config: r.cfg, Broker: r.Broker, Zone: n.Zone,
					ModeFile: filepath.Join(r.o.DataDir, "secure-gateway.json"), Agents: agents, Store: r.storeStatus,
					Health: r.healthSummary, Registry: r.o.Registry, Logger: log.With("component", "admin"),
					Override: func(gw, o string) (string, error) { return r.override(n.Name, gw, o) }}
				if r.shared != nil {
					ao.ModeFile, ao.Modes = "", r.shared // switched site-wide, in the store
				}
				admin, err := api.NewAdmin(ao)
				if err != nil {
					return err
				}
				r.admins = append(r.admins, admin)
				r.HTTPServers = append(r.HTTPServers, r.httpServer(n.Name, l, admin, log))
			}
		}
	}
	return nil
}

func (r *Runtime) httpServer(node string, l configs.Listener, h http.Handler, log *slog.Logger) *HTTPServer {
	var trusted []netip.Prefix
	for _, s := range l.ProxyProtocolFrom {
		if p, err := netip.ParsePrefix(s); err == nil {
			trusted = append(trusted, p)
		}
	}
	return &HTTPServer{Node: node, Kind: l.Kind, Address: r.rebindAddrPort(l.Address), trusted: trusted, srv: &http.Server{Handler: h, TLSConfig: r.serverTLS(),
		ReadHeaderTimeout: 5 * time.Second, ReadTimeout: 30 * time.Second, WriteTimeout: 30 * time.Second, IdleTimeout: 2 * time.Minute,
		MaxHeaderBytes: 16 << 10, ErrorLog: slog.NewLogLogger(log.Handler(), slog.LevelDebug)}}
}

// healthSummary describes each gateway's verdict and ports for the admin status.
func (r *Runtime) healthSummary() map[string]string {
	out := map[string]string{}
	for _, st := range r.Health.Snapshot() {
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

func (r *Runtime) closeSession(id string) {
	for _, g := range r.Gateways {
		g.CloseSession(id)
	}
}

// override sets an admin override on gateway name's health verdict in this runtime (its
// GSLB answers, launches and proxy), asked of node's admin API: "up", "down", "drain" or
// "auto" to follow the probes again. A gateway node hosts (any, in a runtime that runs every
// gateway, the lab) is also put in drain mode by
// "drain" and "down" (its health port answers 503 and it takes no new session), so that
// every other front door's probes see it too, and taken out of it by "up" and "auto". One
// without an https health port could not say so and would refuse the sessions others
// still send it: only the verdict here changes, and the note says so.
func (r *Runtime) override(node, name, o string) (note string, err error) {
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
	g := r.cfg.Gateways[i]
	v, err := health.ParseOverride(o)
	if err != nil {
		return "", err
	}
	if r.shared != nil {
		// Site-wide: stored, applied here at once and at every other front door through
		// its watch; the gateway's own node puts it in drain mode.
		val := o
		if v == health.OverrideNone {
			val = ""
		}
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		if err := r.shared.SetSettings(ctx, etcd.SectionOverrides, map[string]string{name: val}); err != nil {
			return "", fmt.Errorf("%w: the site database did not take the override: %v", api.ErrRefused, err)
		}
		return r.applyOverride(g, v)
	}
	if err := r.Health.SetOverride(name, v); err != nil {
		return "", err
	}
	gw := r.Gateways[name]
	if gw == nil || (g.Node != node && !r.o.AllGateways) {
		if g.Node == "" {
			return "", nil // a foreign server: the verdict here is all there is
		}
		return fmt.Sprintf("gateway %s is hosted by node %s: only this front door's verdict changed; its drain mode is set at %s's admin API", name, g.Node, g.Node), nil
	}
	drain := v == health.OverrideDrain || v == health.OverrideDown
	if !gw.CanDrain() {
		if drain {
			note = "the gateway has no https health port to say it drains: only this front door's verdict changed; set the override at each front door"
		}
		return note, nil
	}
	gw.Drain(drain)
	if q := r.QUIC[name]; q != nil {
		q.Drain(drain)
	}
	return "", nil
}

// StopNode shuts a node down gracefully while the rest of the runtime runs on: its HTTPS
// listeners stop and the gateways it hosts close (their channels end with a FIN).
func (r *Runtime) StopNode(name string) error {
	found := false
	for _, h := range r.HTTPServers {
		if h.Node == name {
			found = true
			ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
			h.srv.Shutdown(ctx)
			cancel()
		}
	}
	for _, g := range r.cfg.Gateways {
		if g.Node == name && r.Gateways[g.Name] != nil {
			found = true
			r.Gateways[g.Name].Close()
			if q := r.QUIC[g.Name]; q != nil {
				q.Close()
			}
		}
	}
	if !found {
		return fmt.Errorf("node %q runs nothing here", name)
	}
	return nil
}

// Listen opens every socket: DNS, HTTPS, gateways. On error nothing stays open.
func (r *Runtime) Listen() error {
	for _, s := range r.DNSServers {
		if err := s.Listen(); err != nil {
			r.Close()
			return err
		}
	}
	for _, h := range r.HTTPServers {
		ln, err := net.Listen("tcp", h.Address)
		if err != nil {
			r.Close()
			return fmt.Errorf("%s %s listener: %w", h.Node, h.Kind, err)
		}
		if len(h.trusted) > 0 {
			ln = newProxyListener(ln, h.trusted, r.log.With("node", h.Node, "listener", h.Kind))
		}
		h.ln = ln
	}
	for name, g := range r.Gateways {
		if err := g.Listen(); err != nil {
			r.Close()
			return fmt.Errorf("gateway %s: %w", name, err)
		}
	}
	if r.Proxy != nil {
		if err := r.Proxy.Listen(); err != nil {
			r.Close()
			return fmt.Errorf("proxy: %w", err)
		}
	}
	for _, g := range r.cfg.Gateways {
		if r.Gateways[g.Name] == nil || g.QUICPort == 0 {
			continue
		}
		a, _ := netip.ParseAddr(g.Address)
		q, err := gateway.ListenQUIC(gateway.QUICOptions{Name: g.Name, Address: netip.AddrPortFrom(r.rebind(a), uint16(g.QUICPort)).String(),
			TLS: r.serverTLS(), Verifier: r.Verifier, Sessions: sessions{r.Broker, r.log}, Track: r.tracker,
			Machine: r.machineAddr, Logger: r.log.With("component", "gateway")})
		if err != nil {
			r.Close()
			return fmt.Errorf("gateway %s quic: %w", g.Name, err)
		}
		r.QUIC[g.Name] = q
	}
	if r.shared != nil {
		// Present to the site once it can be reached: the lab waits for it.
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		for _, n := range r.nodes {
			info := etcd.NodeInfo{Name: n.Name, Zone: n.Zone, Version: r.o.Version, Started: time.Now().UTC(), PID: os.Getpid()}
			if err := r.shared.Register(ctx, info); err != nil {
				r.Close()
				return err
			}
		}
	}
	return nil
}

// Serve runs every component until ctx ends; the first failure stops them all.
func (r *Runtime) Serve(ctx context.Context) error {
	g, gctx := errgroup.WithContext(ctx)
	g.Go(func() error {
		if err := r.Health.Run(gctx); err != nil && !errors.Is(err, context.Canceled) && !errors.Is(err, health.ErrClosed) {
			return err
		}
		return nil
	})
	for _, s := range r.DNSServers {
		g.Go(func() error { return s.Serve(gctx) })
	}
	for _, h := range r.HTTPServers {
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
	for _, gw := range r.Gateways {
		g.Go(func() error {
			err := gw.Serve(dctx)
			if errors.Is(err, gateway.ErrClosed) && ctx.Err() != nil {
				return nil // the drain below closed it before it started
			}
			return err
		})
	}
	for _, q := range r.QUIC {
		g.Go(func() error { return q.Serve(dctx) })
	}
	if r.Proxy != nil {
		g.Go(func() error {
			err := r.Proxy.Serve(dctx)
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
	if !r.Broker.Shared() {
		g.Go(func() error { return r.expire(gctx) }) // a shared store expires by its leases
	}
	g.Go(func() error {
		<-gctx.Done()
		for _, h := range r.HTTPServers {
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
func (r *Runtime) drain() {
	r.reloadMu.Lock()
	r.stopping = true
	d := configs.DefaultDrainTimeout // a config built in code, without defaults
	if t := r.live.Proxy.DrainTimeout; t != nil {
		d = t.D()
	}
	r.reloadMu.Unlock()
	if d <= 0 || (r.Proxy == nil && len(r.Gateways) == 0) {
		return // drain_timeout 0: everything is closed at once
	}
	var conns, channels, quic int
	var flows int64
	if r.Proxy != nil {
		conns, flows = r.Proxy.Active()
	}
	for _, gw := range r.Gateways {
		channels += gw.Channels()
	}
	for _, q := range r.QUIC {
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
	if r.Proxy != nil {
		wg.Go(func() { report("the proxy", r.Proxy.Shutdown(ctx)) })
	}
	for name, gw := range r.Gateways {
		wg.Go(func() { report("gateway "+name, gw.Shutdown(ctx)) })
	}
	for name, q := range r.QUIC {
		wg.Go(func() { report("gateway "+name+" quic", q.Shutdown(ctx)) })
	}
	wg.Wait()
}

// expire ends pending and disconnected sessions past their time, every second
// (broker.RunExpiry), and closes their channels.
func (r *Runtime) expire(ctx context.Context) error {
	t := time.NewTicker(time.Second)
	defer t.Stop()
	return r.Broker.RunExpiry(ctx, t.C, func(s broker.Session) {
		r.log.Info("session expired", "session", s.ID, "user", s.User, "machine", s.Machine)
		r.closeSession(s.ID)
	}, func(err error) { r.log.Warn("expiring sessions", "err", err) })
}

// Close stops everything and closes the store.
func (r *Runtime) Close() error {
	r.closeMu.Lock()
	defer r.closeMu.Unlock()
	for _, g := range r.Gateways {
		g.Close()
	}
	for _, q := range r.QUIC {
		q.Close()
	}
	if r.Proxy != nil {
		r.Proxy.Close()
	}
	for _, s := range r.DNSServers {
		s.Close()
	}
	for _, h := range r.HTTPServers {
		if h.ln != nil {
			h.srv.Close()
			h.ln.Close()
		}
	}
	if r.Health != nil {
		r.Health.Close()
	}
	if r.Certs != nil {
		r.Certs.Close()
		r.Certs = nil
	}
	if r.Store != nil {
		err := r.Store.Close()
		r.Store = nil
		return err
	}
	return nil
}

// TLSClientConfig returns a client config that trusts the site's internal CA.
func (r *Runtime) TLSClientConfig() *tls.Config { return &tls.Config{RootCAs: r.CA.Pool()} }

// coalesce returns a dns listener's udp_coalesce (set by the config's defaults).
func coalesce(l configs.Listener) time.Duration {
	if l.UDPCoalesce == nil {
		return 0
	}
	return l.UDPCoalesce.D()
}

// UDPWorkers returns how many blocking UDP workers the named nodes of cfg run with
// Options.BlockingUDP: one per DNS listener and proxy.UDPWorkers per udp proxy listener bound
// to a specific IP address, on platforms that have them (package internal/rawudp).
func UDPWorkers(cfg *configs.Config, nodes ...string) int {
	if !rawudp.Supported {
		return 0
	}
	usable := func(addr string) bool {
		ap, err := netip.ParseAddrPort(addr)
		return err == nil && rawudp.Usable(ap)
	}
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
