package gslb

import (
	"net"
	"slices"
)

// Policies of a GSLB name.
const (
	policyFailover   = "failover"
	policyRoundRobin = "round_robin"
	policyWeighted   = "weighted"
	policyAllHealthy = "all_healthy"
)

// Site labels of answers that no single site gave.
const (
	siteFailOpen = "fail_open" // nothing healthy: every address
	siteNone     = "none"      // nothing healthy and fail-closed: SERVFAIL
)

// pick is the outcome of choosing addresses for one GSLB query.
type pick struct {
	addrs     []net.IP
	site      string // the answering site's zone, siteFailOpen or siteNone
	servfail  bool   // nothing healthy and the name fails closed
	byZone    bool   // the answer depends on the client's zone (ECS scope applies)
	noAddress bool   // no site has an address of the family: NODATA, not a failure
}

// up reports whether a gateway counts as healthy: its verdict, else the initial state.
func (h *Handler) up(g *gname, gw *gateway) bool {
	if h.health != nil {
		if up, known := h.health.GatewayUp(gw.name); known {
			return up
		}
	}
	return g.initialUp
}

// overloaded reports whether a site's known load is above its threshold.
func (h *Handler) overloaded(s *site) bool {
	if h.load == nil {
		return false
	}
	p, known := h.load.SiteLoad(s.zone)
	return known && p > s.threshold
}

func family(gw *gateway, v6 bool) []net.IP {
	if v6 {
		return gw.v6
	}
	return gw.v4
}

// healthyAddrs appends the addresses of the family of s's healthy gateways to buf.
func (h *Handler) healthyAddrs(buf []net.IP, g *gname, s *site, v6 bool) []net.IP {
	for i := range s.gateways {
		gw := &s.gateways[i]
		if len(family(gw, v6)) > 0 && h.up(g, gw) {
			buf = append(buf, family(gw, v6)...)
		}
	}
	return buf
}

// candidates returns the sites in the order tried for clients of zone: the zone's own site,
// then its fallback order with sites over their load threshold moved to the end.
func (h *Handler) candidates(buf []*site, g *gname, zone string) []*site {
	o := g.orders[zone]
	if o == nil {
		o = g.orders[""]
	}
	if o.own != nil {
		buf = append(buf, o.own)
	}
	var late [8]*site
	over := late[:0]
	for _, s := range o.fallback {
		if h.overloaded(s) {
			over = append(over, s)
			continue
		}
		buf = append(buf, s)
	}
	return append(buf, over...)
}

// choose picks the addresses answering a query of one family for a client of zone; the
// addresses may be appended to abuf's backing array, which the caller owns.
func (h *Handler) choose(abuf []net.IP, g *gname, v6 bool, zone string) pick {
	var sbuf [8]*site
	cands := h.candidates(sbuf[:0], g, zone)
	if g.policy == policyWeighted {
		if p, ok := h.weighted(abuf[:0], g, cands, v6); ok {
			return p
		}
	}
	switch g.policy {
	case policyAllHealthy:
		p := pick{addrs: abuf[:0], byZone: true}
		for _, s := range cands {
			n := len(p.addrs)
			p.addrs = h.healthyAddrs(p.addrs, g, s, v6)
			if p.site == "" && len(p.addrs) > n {
				p.site = s.zone
			}
		}
		if len(p.addrs) > 0 {
			return p
		}
	default: // failover, round_robin, and weighted with no weighted site healthy
		for _, s := range cands {
			addrs := h.healthyAddrs(abuf[:0], g, s, v6)
			if len(addrs) == 0 {
				continue
			}
			if g.policy == policyRoundRobin && len(addrs) > 1 {
				k := int(g.rr.Add(1) % uint64(len(addrs)))
				// Rotate left by k in place (the slice is the caller's buffer): three reversals.
				slices.Reverse(addrs[:k])
				slices.Reverse(addrs[k:])
				slices.Reverse(addrs)
			}
			return pick{addrs: addrs, site: s.zone, byZone: true}
		}
	}
	// Nothing healthy.
	all := abuf[:0]
	for _, s := range cands {
		for i := range s.gateways {
			all = append(all, family(&s.gateways[i], v6)...)
		}
	}
	switch {
	case len(all) == 0:
		return pick{noAddress: true}
	case g.failOpen:
		return pick{addrs: all, site: siteFailOpen, byZone: true}
	default:
		return pick{servfail: true, site: siteNone}
	}
}

// weighted picks one healthy site, not over its load threshold, with probability
// proportional to its weight; ok is false when no site of positive weight qualifies.
func (h *Handler) weighted(buf []net.IP, g *gname, cands []*site, v6 bool) (pick, bool) {
	total := 0
	var wbuf [8]int
	weights := wbuf[:0]
	for _, s := range cands {
		w := 0
		if s.weight > 0 && !h.overloaded(s) && len(h.healthyAddrs(buf[:0], g, s, v6)) > 0 {
			w = s.weight
		}
		weights = append(weights, w)
		total += w
	}
	if total == 0 {
		return pick{}, false
	}
	r := h.rand(total)
	for i, s := range cands {
		if r < weights[i] {
			return pick{addrs: h.healthyAddrs(buf[:0], g, s, v6), site: s.zone}, true
		}
		r -= weights[i]
	}
	return pick{}, false
}
