package node

import (
	"fmt"
	"net/netip"

	"github.com/frontdoor-vdi/frontdoor/configs"
	"github.com/frontdoor-vdi/frontdoor/health"
	"github.com/frontdoor-vdi/frontdoor/proxy"
)

// proxyConfig turns cfg's proxy section into this node's listeners, and
// every pool. Backends that are gateway ports are named after their gateway, so the gateway's
// composite health verdict steers every pool it is in and affinity spans its ports.
func (r *Node) proxyConfig(cfg *configs.Config) (proxy.Config, error) {
	p := cfg.Proxy
	pc := proxy.Config{AffinityTTL: p.AffinityTTL.D(),
		Limits: proxy.Limits{MaxConns: p.MaxConns, MaxConnsPerClient: p.MaxConnsPerClient, MaxFlows: p.MaxFlows}}
	gws := map[string]configs.Gateway{}
	for _, g := range cfg.Gateways {
		gws[g.Name] = g
	}
	for _, l := range p.Listeners {
		if l.Node != r.spec.Name {
			continue
		}
		pl := proxy.Listener{Name: l.Name, Address: r.rebindAddrPort(l.Address), Protocol: l.Protocol, Pool: l.Pool, IdleTimeout: l.IdleTimeout.D(), MaxConns: l.MaxConns}
		if l.HalfClose != nil {
			pl.NoHalfClose = !*l.HalfClose
		}
		if l.DeferAccept != nil {
			pl.DeferAccept = *l.DeferAccept
		}
		if l.UDPCoalesce != nil {
			pl.UDPCoalesce = l.UDPCoalesce.D()
		}
		for _, rt := range l.Routes {
			pl.Routes = append(pl.Routes, proxy.Route{ServerNames: rt.ServerNames, Pool: rt.Pool})
		}
		pl.ProxyTrusted = l.ProxyProtocolFrom
		pc.Listeners = append(pc.Listeners, pl)
	}
	for _, pool := range p.Pools {
		pp := proxy.Pool{Name: pool.Name, Balance: pool.Balance, Affinity: pool.Affinity, SendProxy: pool.SendProxy, ConnectTimeout: pool.ConnectTimeout.D()}
		for _, b := range pool.Backends {
			be := proxy.Backend{Weight: b.Weight}
			if b.Gateway != "" {
				gw, ok := gws[b.Gateway]
				if !ok || !gw.Address.IsValid() {
					return pc, fmt.Errorf("proxy pool %s: gateway %s has no address", pool.Name, b.Gateway)
				}
				be.Name, be.Address = b.Gateway, netip.AddrPortFrom(gw.Address, uint16(b.Port))
			} else {
				be.Name, be.Address = b.Address.String(), b.Address
			}
			pp.Backends = append(pp.Backends, be)
		}
		pc.Pools = append(pc.Pools, pp)
	}
	return pc, nil
}

// buildProxy builds the load balancer when a node run here has proxy listeners.
func (r *Node) buildProxy() error {
	pc, err := r.proxyConfig(r.cfg)
	if err != nil || len(pc.Listeners) == 0 {
		return err
	}
	srv, err := proxy.New(pc, proxy.Options{
		Logger:      r.log, // the proxy names itself (component=proxy)
		Registry:    r.o.Registry,
		Locator:     r.zones,
		BlockingUDP: r.o.Procs.BlockingUDP,
		// A gateway backend follows its health verdict; other backends are taken as up.
		Health: proxy.HealthFunc(func(b string) bool {
			v, known := r.health.Verdict(b)
			return !known || v == health.StateUp
		}),
		// Connect failures seen by the proxy mark a gateway's port down before the next probe.
		Passive: func(b string, a netip.AddrPort, err error) {
			if _, known := r.health.Verdict(b); known {
				r.health.ReportFailure(b, health.TCP(a.Port()), err)
			}
		},
	})
	if err != nil {
		return fmt.Errorf("proxy: %w", err)
	}
	r.proxy = srv
	// A draining gateway gets no new connections or flows (HealthFunc) and keeps the ones it
	// has, UDP flows too: only one gone down loses them.
	r.health.Subscribe(func(ev health.Event) {
		if ev.VerdictChanged() {
			srv.Verdict(ev.Target, ev.To != health.StateDown)
		}
	})
	return nil
}
