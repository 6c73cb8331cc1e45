package configs

import "fmt"

func (k *checker) validateProxy(nodes, gws map[string]int) {
	p := k.c.Proxy
	names := make([]string, len(p.Pools))
	for i, pl := range p.Pools {
		names[i] = pl.Name
	}
	pools := k.names("pool", "proxy.pools", names)
	names = make([]string, len(p.Listeners))
	for i, l := range p.Listeners {
		names[i] = l.Name
	}
	k.names("listener", "proxy.listeners", names)
	if p.DrainTimeout != nil && *p.DrainTimeout < 0 {
		k.errf("proxy.drain_timeout", "drain_timeout must not be negative")
	}
	for i, l := range p.Listeners {
		lp := fmt.Sprintf("proxy.listeners[%d]", i)
		k.ref(lp+".node", "node", l.Node, nodes)
		k.hostPort(lp+".address", l.Address)
		k.oneOf(lp+".protocol", l.Protocol, "tcp", "tls", "udp")
		if l.Pool != "" {
			k.ref(lp+".pool", "pool", l.Pool, pools)
		} else if len(l.Routes) == 0 {
			k.errf(lp+".pool", "listener %q has no pool and no routes", l.Name)
		}
		if len(l.Routes) > 0 && l.Protocol != "tls" {
			k.errf(lp+".routes", "routes by server name need protocol tls")
		}
		for j, r := range l.Routes {
			k.ref(fmt.Sprintf("%s.routes[%d].pool", lp, j), "pool", r.Pool, pools)
			if len(r.ServerNames) == 0 {
				k.errf(fmt.Sprintf("%s.routes[%d].server_names", lp, j), "route has no server names")
			}
		}
		for j, r := range l.ProxyProtocolFrom {
			k.cidr(fmt.Sprintf("%s.proxy_protocol_from[%d]", lp, j), r)
		}
		if l.HalfClose != nil && l.Protocol == "udp" {
			k.errf(lp+".half_close", "udp listeners have no connections to half-close")
		}
		if l.DeferAccept != nil && l.Protocol == "udp" {
			k.errf(lp+".defer_accept", "udp listeners accept no connections")
		}
		if l.UDPCoalesce != nil {
			if l.Protocol != "udp" {
				k.errf(lp+".udp_coalesce", "only udp listeners coalesce datagrams")
			} else if l.UDPCoalesce.D() > MaxUDPCoalesce {
				k.errf(lp+".udp_coalesce", "%s is more than %s", l.UDPCoalesce, MaxUDPCoalesce)
			}
		}
	}
	for i, pl := range p.Pools {
		pp := fmt.Sprintf("proxy.pools[%d]", i)
		k.oneOf(pp+".balance", pl.Balance, "least_conn", "round_robin", "weighted", "source_hash")
		k.oneOf(pp+".send_proxy", pl.SendProxy, "", "v1", "v2")
		if len(pl.Backends) == 0 {
			k.errf(pp+".backends", "pool %q has no backends", pl.Name)
		}
		for j, b := range pl.Backends {
			bp := fmt.Sprintf("%s.backends[%d]", pp, j)
			switch {
			case b.Gateway != "" && b.Address.IsValid():
				k.errf(bp, "a backend is a gateway or an address, not both")
			case b.Gateway != "":
				k.ref(bp+".gateway", "gateway", b.Gateway, gws)
				k.port(bp+".port", b.Port)
			case b.Address.IsValid():
				k.hostPort(bp+".address", b.Address)
			default:
				k.errf(bp, "a backend needs a gateway and port, or an address")
			}
			if b.Weight < 1 || b.Weight > 1000 {
				k.errf(bp+".weight", "weight %d is outside 1..1000", b.Weight)
			}
		}
	}
}
