package configs

import "slices"

// PortalHosts are the host names and addresses the user's portal is served under — the
// certificate names (site.tls.names) and the address of every launch listener and proxy
// listener — whose pages the gateways let open channels over WebSockets.
func (c *Config) PortalHosts() []string {
	var hosts []string
	add := func(h string) {
		if h != "" && !slices.Contains(hosts, h) {
			hosts = append(hosts, h)
		}
	}
	for _, n := range c.Site.TLS.Names {
		add(n)
	}
	for _, n := range c.Nodes {
		for _, l := range n.Listeners {
			if l.Kind == "launch" {
				add(l.Address.Addr().Unmap().String())
			}
		}
	}
	for _, l := range c.Proxy.Listeners {
		add(l.Address.Addr().Unmap().String())
	}
	return hosts
}

// HTTPSPort is the gateway's HTTPS port — its port whose check is https: its health port,
// where browsers open channels over WebSockets —, 0 when it has none.
func (g Gateway) HTTPSPort() int {
	for _, p := range g.Ports {
		if p.Protocol != "udp" && p.Check.Kind == "https" {
			return p.Port
		}
	}
	return 0
}
