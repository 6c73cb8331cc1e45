package gslb

import (
	"fmt"
	"net"
	"net/netip"
	"sort"
	"strconv"
	"strings"
	"sync/atomic"

	"github.com/frontdoor-vdi/frontdoor/configs"
	"github.com/miekg/dns"
)

// data is one immutable build of the configuration; Reload swaps it atomically.
type data struct {
	domains []*domain          // longest name first, so the first suffix match is the closest
	nodes   map[string]*node   // lower-case owner name -> static records
	names   map[string]*gname  // lower-case GSLB name
	exists  map[string]*domain // every owner, GSLB name and empty non-terminal
}

// domain is one zone we are authoritative for.
type domain struct {
	name   string
	soa    *dns.SOA
	ns     []dns.RR
	negTTL uint32     // TTL of the SOA in negative answers: min(SOA TTL, SOA minimum)
	dnssec bool       // its answers are signed, with keys
	keys   []*zoneKey // set by Handler.Reload: every one is published and signs
}

// node holds the static RRsets of one owner name.
type node struct {
	rrs map[uint16][]dns.RR
}

// gname is one GSLB name.
type gname struct {
	name      string
	policy    string
	ttl       uint32
	failOpen  bool
	initialUp bool
	sites     []*site
	orders    map[string]*order // client zone -> candidate order; "" is the default order
	rr        atomic.Uint64     // round-robin counter
	naddrs    [2]int            // IPv4 and IPv6 addresses of all sites: the most an answer has
}

// site is one zone's front doors behind a GSLB name.
type site struct {
	zone      string
	gateways  []gateway
	weight    int
	threshold int
}

// gateway is one gateway's public addresses, split by family.
type gateway struct {
	name   string
	v4, v6 []net.IP
}

// order is the candidate order of sites for the clients of one zone.
type order struct {
	own      *site   // the client zone's own site, or nil
	fallback []*site // tried in order, skipping sites over their load threshold
}

// build turns cfg's gslb section into data.
func build(cfg *configs.Config) (*data, error) {
	d := &data{nodes: map[string]*node{}, names: map[string]*gname{}, exists: map[string]*domain{}}
	for _, dc := range cfg.GSLB.Domains {
		dom, err := buildDomain(dc)
		if err != nil {
			return nil, err
		}
		d.domains = append(d.domains, dom)
	}
	sort.SliceStable(d.domains, func(i, j int) bool { return len(d.domains[i].name) > len(d.domains[j].name) })
	for _, dc := range cfg.GSLB.Domains {
		name := fqdn(dc.Name)
		dom := d.findDomain(name)
		d.markExists(name, dom)
		for _, r := range dc.Records {
			owner := fqdn(dc.RecordOwner(r))
			rr, err := buildRR(owner, name, r)
			if err != nil {
				return nil, fmt.Errorf("gslb domain %s record %s %s: %w", dc.Name, r.Name, r.Type, err)
			}
			n := d.nodes[owner]
			if n == nil {
				n = &node{rrs: map[uint16][]dns.RR{}}
				d.nodes[owner] = n
			}
			t := rr.Header().Rrtype
			n.rrs[t] = append(n.rrs[t], rr)
			d.markExists(owner, d.findDomain(owner))
		}
	}
	// The apex NS set comes from the domain's ns list, merged with NS records at the apex.
	for _, dom := range d.domains {
		n := d.nodes[dom.name]
		if n == nil {
			n = &node{rrs: map[uint16][]dns.RR{}}
			d.nodes[dom.name] = n
		}
		n.rrs[dns.TypeSOA] = []dns.RR{dom.soa}
		n.rrs[dns.TypeNS] = append(append([]dns.RR(nil), dom.ns...), n.rrs[dns.TypeNS]...)
	}
	gws := map[string]configs.Gateway{}
	for _, g := range cfg.Gateways {
		gws[g.Name] = g
	}
	for _, nc := range cfg.GSLB.Names {
		g, err := buildName(nc, gws)
		if err != nil {
			return nil, err
		}
		dom := d.findDomain(g.name)
		if dom == nil {
			return nil, fmt.Errorf("gslb name %s: %w", g.name, ErrNotOurs)
		}
		d.names[g.name] = g
		d.markExists(g.name, dom)
	}
	return d, nil
}

func buildDomain(dc configs.Domain) (*domain, error) {
	name := fqdn(dc.Name)
	s := dc.SOA
	soa := &dns.SOA{
		Hdr:     dns.RR_Header{Name: name, Rrtype: dns.TypeSOA, Class: dns.ClassINET, Ttl: secs(s.TTL, 3600)},
		Ns:      fqdn(orDefault(s.MName, "ns1."+name)),
		Mbox:    fqdn(orDefault(s.RName, "hostmaster."+name)),
		Serial:  max(s.Serial, 1),
		Refresh: secs(s.Refresh, 3600),
		Retry:   secs(s.Retry, 600),
		Expire:  secs(s.Expire, 168*3600),
		Minttl:  secs(s.Minimum, 30),
	}
	dom := &domain{name: name, soa: soa, negTTL: min(soa.Hdr.Ttl, soa.Minttl), dnssec: dc.DNSSEC}
	nsNames := dc.NS
	if len(nsNames) == 0 && name != "." {
		nsNames = []string{"ns1." + name}
	}
	for _, ns := range nsNames {
		dom.ns = append(dom.ns, &dns.NS{
			Hdr: dns.RR_Header{Name: name, Rrtype: dns.TypeNS, Class: dns.ClassINET, Ttl: soa.Hdr.Ttl},
			Ns:  relName(ns, name),
		})
	}
	return dom, nil
}

// buildRR builds one static record; names in values without a final dot are relative to the
// domain, as in a zone file.
func buildRR(owner, origin string, r configs.Record) (dns.RR, error) {
	hdr := dns.RR_Header{Name: owner, Class: dns.ClassINET, Ttl: secs(r.TTL, 300)}
	v := strings.TrimSpace(r.Value)
	switch strings.ToUpper(r.Type) {
	case "A", "AAAA":
		a, err := netip.ParseAddr(v)
		if err != nil {
			return nil, err
		}
		if a.Is4() != (strings.ToUpper(r.Type) == "A") {
			return nil, fmt.Errorf("%s is the wrong family for %s", a, r.Type)
		}
		if a.Is4() {
			hdr.Rrtype = dns.TypeA
			return &dns.A{Hdr: hdr, A: net.IP(a.AsSlice())}, nil
		}
		hdr.Rrtype = dns.TypeAAAA
		return &dns.AAAA{Hdr: hdr, AAAA: net.IP(a.AsSlice())}, nil
	case "CNAME":
		hdr.Rrtype = dns.TypeCNAME
		return &dns.CNAME{Hdr: hdr, Target: relName(v, origin)}, nil
	case "NS":
		hdr.Rrtype = dns.TypeNS
		return &dns.NS{Hdr: hdr, Ns: relName(v, origin)}, nil
	case "TXT":
		hdr.Rrtype = dns.TypeTXT
		return &dns.TXT{Hdr: hdr, Txt: splitTXT(v)}, nil
	case "MX":
		pref, host, ok := strings.Cut(v, " ")
		p, err := strconv.ParseUint(pref, 10, 16)
		if !ok || err != nil {
			return nil, fmt.Errorf("MX value %q is not \"preference name\"", v)
		}
		hdr.Rrtype = dns.TypeMX
		return &dns.MX{Hdr: hdr, Preference: uint16(p), Mx: relName(strings.TrimSpace(host), origin)}, nil
	case "CAA":
		flags, tag, value, err := configs.ParseCAA(v)
		if err != nil {
			return nil, err
		}
		hdr.Rrtype = dns.TypeCAA
		return &dns.CAA{Hdr: hdr, Flag: flags, Tag: tag, Value: value}, nil
	default:
		return nil, fmt.Errorf("unsupported record type %q", r.Type)
	}
}

func buildName(nc configs.GSLBName, gws map[string]configs.Gateway) (*gname, error) {
	g := &gname{
		name:      fqdn(nc.Name),
		policy:    orDefault(nc.Policy, "failover"),
		ttl:       secs(nc.TTL, 5),
		failOpen:  nc.WhenNoneHealthy != "fail_closed",
		initialUp: nc.Initial != "down",
		orders:    map[string]*order{},
	}
	byZone := map[string]*site{}
	for _, sc := range nc.Sites {
		s := &site{zone: sc.Zone, weight: sc.Weight, threshold: 98}
		if sc.LoadThreshold != nil {
			s.threshold = *sc.LoadThreshold
		}
		for _, gwName := range sc.Gateways {
			gc, ok := gws[gwName]
			if !ok {
				return nil, fmt.Errorf("gslb name %s site %s: unknown gateway %q", g.name, sc.Zone, gwName)
			}
			gw := gateway{name: gwName}
			addrs := gc.PublicAddresses
			if len(addrs) == 0 && gc.Address.IsValid() {
				addrs = []netip.Addr{gc.Address}
			}
			for _, a := range addrs {
				a = a.Unmap()
				if a.Is4() {
					gw.v4 = append(gw.v4, net.IP(a.AsSlice()))
				} else {
					gw.v6 = append(gw.v6, net.IP(a.AsSlice()))
				}
			}
			s.gateways = append(s.gateways, gw)
			g.naddrs[0] += len(gw.v4)
			g.naddrs[1] += len(gw.v6)
		}
		g.sites = append(g.sites, s)
		byZone[s.zone] = s
	}
	// The default order (clients of no listed zone) is the sites' order.
	g.orders[""] = &order{fallback: g.sites}
	for i, sc := range nc.Sites {
		own := g.sites[i]
		o := &order{own: own}
		seen := map[*site]bool{own: true}
		for _, z := range sc.Fallback {
			if s := byZone[z]; s != nil && !seen[s] {
				o.fallback = append(o.fallback, s)
				seen[s] = true
			}
		}
		for _, s := range g.sites {
			if !seen[s] {
				o.fallback = append(o.fallback, s)
				seen[s] = true
			}
		}
		g.orders[own.zone] = o
	}
	return g, nil
}

// findDomain returns the closest enclosing domain of the lower-case absolute name, or nil.
func (d *data) findDomain(name string) *domain {
	for _, dom := range d.domains {
		if inDomain(name, dom.name) {
			return dom
		}
	}
	return nil
}

// markExists records name and every ancestor up to its domain's apex (the empty
// non-terminals), so that those answer NODATA rather than NXDOMAIN.
func (d *data) markExists(name string, dom *domain) {
	if dom == nil {
		return
	}
	for {
		d.exists[name] = dom
		if name == dom.name {
			return
		}
		i := strings.IndexByte(name, '.')
		if i < 0 || i == len(name)-1 {
			return
		}
		name = name[i+1:]
	}
}

// inDomain reports whether name is at or below domain (both lower case and absolute).
func inDomain(name, domain string) bool {
	if domain == "." {
		return true
	}
	return name == domain || (len(name) > len(domain) && name[len(name)-len(domain)-1] == '.' && strings.HasSuffix(name, domain))
}

func fqdn(s string) string { return dns.Fqdn(strings.ToLower(strings.TrimSpace(s))) }

// relName resolves a name of a record value against the domain: "@" is the apex, a name
// ending in a dot is absolute, any other is relative.
func relName(v, origin string) string {
	v = strings.ToLower(strings.TrimSpace(v))
	switch {
	case v == "@" || v == "":
		return origin
	case strings.HasSuffix(v, "."):
		return v
	case origin == ".":
		return v + "."
	default:
		return v + "." + origin
	}
}

func orDefault(s, def string) string {
	if s == "" {
		return def
	}
	return s
}

func secs(d configs.Duration, def uint32) uint32 {
	if d <= 0 {
		return def
	}
	s := d.D().Seconds()
	if s > 1<<31-1 {
		return 1<<31 - 1
	}
	return uint32(s)
}

// splitTXT cuts a TXT value into character-strings of at most 255 bytes.
func splitTXT(v string) []string {
	if len(v) <= 255 {
		return []string{v}
	}
	var out []string
	for len(v) > 255 {
		out = append(out, v[:255])
		v = v[255:]
	}
	return append(out, v)
}
