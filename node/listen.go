package node

import (
	"context"
	"crypto/ed25519"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"net/netip"
	"os"
	"sync"
	"time"

	"github.com/frontdoor-vdi/frontdoor/api"
	"github.com/frontdoor-vdi/frontdoor/configs"
	"github.com/frontdoor-vdi/frontdoor/gateway"
	"github.com/frontdoor-vdi/frontdoor/gslb"
	"github.com/frontdoor-vdi/frontdoor/health"
	"github.com/frontdoor-vdi/frontdoor/internal/tlspolicy"
	"github.com/frontdoor-vdi/frontdoor/logins"
	"github.com/frontdoor-vdi/frontdoor/proxy"
	"github.com/frontdoor-vdi/frontdoor/store/etcd"
	"golang.org/x/sync/errgroup"
)

// listeners are a node's own listeners and the servers behind them.
type listeners struct {
	// httpsMax is the most connections an HTTPS listener holds at once; 0: maxHTTPSConns.
	// Tests set it small.
	httpsMax int
	// Proxy is the L4 load balancer when a node run here has proxy listeners; else nil.
	proxy *proxy.Server
	// DNSServers, HTTPServers are the node listeners.
	dnsServers  []*gslb.Server
	httpServers []*httpsListener
	admins      []*api.Admin
	agents      []*api.Agents
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

func (r *Node) buildListeners() error {
	n := r.spec
	log := r.log.With("node", n.Name)
	throttle := &logins.Throttle{CPUs: r.cpus(), Logger: r.log.With("component", "logins"), Registry: r.o.Registry} // the launch and admin APIs take turns on the node's CPUs
	launch := api.NewLaunch(api.LaunchOptions{Config: r.cfg, Logins: throttle, Broker: r.broker, Locate: r.zones.Zone, Gateways: r.gatewaysFor,
		Signer: r.signer, Verifier: r.verifier, OnLogoff: r.sessionEnded, Ready: r.ready, ClientCAs: r.userCAs, Logger: log.With("component", "launch"),
		Audit: r.auditLog(), Events: r.events, Node: n.Name})
	agents := api.NewAgents(api.AgentsOptions{Config: r.cfg, Broker: r.broker, Zone: n.Zone, Key: r.agentKey, CA: r.ca, Verifier: r.verifier,
		SitePublicKey: r.siteKey.Public().(ed25519.PublicKey), Revoked: r.revokedMachines.at, Logger: log.With("component", "agents")})
	r.agents = append(r.agents, agents)
	for _, l := range n.Listeners {
		switch l.Kind {
		case "dns":
			r.dnsServers = append(r.dnsServers, gslb.NewServer(r.dns, gslb.ServerOptions{Address: r.rebindAddrPort(l.Address).String(), Protocols: l.Protocols, Logger: log, BlockingUDP: r.o.Procs.BlockingUDP, UDPCoalesce: coalesce(l)}))
		case "launch":
			r.httpServers = append(r.httpServers, r.httpServer(n.Name, l, api.Handler(launch, agents), log))
		case "admin":
			ao := api.AdminOptions{Config: r.cfg, Logins: throttle, Broker: r.broker, Zone: n.Zone, ClientCAs: r.userCAs,
				Modes: r.settings, Registry: r.o.Registry, Logger: log.With("component", "admin"),
				Override:   func(gw, o string) (string, error) { return r.override(gw, o) },
				AdminKeys:  api.AdminKeys{RotateKey: r.rotateKey, RotateCA: r.rotateCA, CA: r.caStatus, Signer: r.signer, RevokeMachine: r.RevokeMachine},
				AdminViews: api.AdminViews{Agents: agents, Store: r.site.status, Health: r.healthSummary}}
			r.consoleOptions(&ao)
			if r.keySets != nil {
				ao.DNSSEC = r
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
		q, err := r.gateways[g.Name].ListenQUIC(uint16(g.QUICPort))
		if err != nil {
			r.Close()
			return fmt.Errorf("gateway %s quic: %w", g.Name, err)
		}
		r.quicMu.Lock()
		r.quic[g.Name] = q
		r.quicMu.Unlock()
	}
	// Present to the site once it can be reached: the lab waits for it.
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	info := etcd.NodeInfo{Name: r.spec.Name, Zone: r.spec.Zone, Version: r.o.Version, Started: time.Now().UTC(), PID: os.Getpid()}
	if err := r.site.present(ctx, info); err != nil {
		r.Close()
		return err
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
	g.Go(func() error { return r.runRole(gctx) })
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

// coalesce returns a dns listener's udp_coalesce (set by the config's defaults).
func coalesce(l configs.Listener) time.Duration {
	if l.UDPCoalesce == nil {
		return 0
	}
	return l.UDPCoalesce.D()
}
