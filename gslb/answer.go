package gslb

import (
	"net"
	"net/netip"
	"strings"

	"github.com/miekg/dns"
)

// maxChase bounds the CNAME chain followed inside our domains.
const maxChase = 8

// anyOrder is the order in which an ANY query picks the one RRset it answers (RFC 8482).
var anyOrder = [...]uint16{dns.TypeSOA, dns.TypeA, dns.TypeAAAA, dns.TypeCNAME, dns.TypeMX, dns.TypeTXT, dns.TypeNS, dns.TypeCAA}

// outcome describes an answer for metrics and the query log.
type outcome struct {
	qtype  uint16
	name   string // the GSLB name answered, if any
	site   string // the answering site's zone
	zone   string // the client's zone, when it was looked up
	client netip.Addr
}

var _ dns.Handler = (*Handler)(nil)

// ServeDNS answers one query. Replies over UDP are cut to the client's EDNS0 buffer size (512
// without EDNS0, never more than Options.MaxUDPSize) with TC set, so the client retries over TCP.
func (h *Handler) ServeDNS(w dns.ResponseWriter, req *dns.Msg) {
	src, tcp := remoteAddr(w)
	resp, out := h.reply(req, src)
	if resp == nil {
		h.metrics.drop()
		return
	}
	size := dns.MaxMsgSize
	if !tcp {
		size = h.udpSize(req)
	}
	resp.Truncate(size)
	if err := w.WriteMsg(resp); err != nil {
		h.metrics.drop()
		return
	}
	h.metrics.query(out.qtype, resp.Rcode)
	if out.name != "" {
		h.metrics.answer(out.name, out.site, out.zone)
	}
	if h.sample > 0 && h.queries.Add(1)%h.sample == 0 {
		h.log.Info("query", "name", qname(req), "type", typeLabel(out.qtype), "resolver", src,
			"client", out.client, "zone", out.zone, "site", out.site, "rcode", rcodeLabel(resp.Rcode),
			"answers", len(resp.Answer), "tcp", tcp)
	}
}

// udpSize is the largest UDP reply to req.
func (h *Handler) udpSize(req *dns.Msg) int {
	size := dns.MinMsgSize
	if opt := req.IsEdns0(); opt != nil {
		size = max(size, min(int(opt.UDPSize()), h.maxUDP))
	}
	return size
}

func qname(req *dns.Msg) string {
	if len(req.Question) == 0 {
		return ""
	}
	return req.Question[0].Name
}

// addrPortWriter is a ResponseWriter that gives its peer without allocating.
type addrPortWriter interface {
	RemoteAddrPort() (peer netip.AddrPort, tcp bool)
}

// remoteAddr returns the peer's address and whether the connection is TCP.
func remoteAddr(w dns.ResponseWriter) (netip.Addr, bool) {
	if a, ok := w.(addrPortWriter); ok {
		ap, tcp := a.RemoteAddrPort()
		return ap.Addr().Unmap(), tcp
	}
	switch a := w.RemoteAddr().(type) {
	case *net.UDPAddr:
		return a.AddrPort().Addr().Unmap(), false
	case *net.TCPAddr:
		return a.AddrPort().Addr().Unmap(), true
	case nil:
		return netip.Addr{}, false
	default:
		ap, err := netip.ParseAddrPort(a.String())
		return ap.Addr().Unmap(), err == nil && a.Network() == "tcp"
	}
}

// reply builds the answer to req from a resolver at src; nil means the message is dropped.
func (h *Handler) reply(req *dns.Msg, src netip.Addr) (*dns.Msg, outcome) {
	out := outcome{client: src}
	if req.Response {
		return nil, out
	}
	resp := new(dns.Msg)
	resp.SetReply(req)
	if len(req.Question) > 0 {
		out.qtype = req.Question[0].Qtype
	}
	if req.Opcode != dns.OpcodeQuery {
		resp.Rcode = dns.RcodeNotImplemented
		return resp, out
	}
	opts := 0
	for _, rr := range req.Extra {
		if rr.Header().Rrtype == dns.TypeOPT {
			opts++
		}
	}
	if len(req.Question) != 1 || opts > 1 {
		resp.Rcode = dns.RcodeFormatError
		return resp, out
	}
	var ecs *dns.EDNS0_SUBNET
	do := false // the resolver asks for DNSSEC
	if opt := req.IsEdns0(); opt != nil {
		do = opt.Do()
		resp.SetEdns0(uint16(h.maxUDP), do)
		if opt.Version() != 0 {
			resp.Rcode = dns.RcodeBadVers
			return resp, out
		}
		for _, o := range opt.Option {
			if e, ok := o.(*dns.EDNS0_SUBNET); ok {
				if ecs != nil || !validECS(e) {
					resp.Rcode = dns.RcodeFormatError
					return resp, out
				}
				ecs = e
			}
		}
	}
	q := req.Question[0]
	switch {
	case q.Qclass != dns.ClassINET:
		resp.Rcode = dns.RcodeRefused
		return resp, out
	case q.Qtype == dns.TypeAXFR || q.Qtype == dns.TypeIXFR:
		resp.Rcode = dns.RcodeRefused
		return resp, out
	case q.Qtype == dns.TypeOPT || q.Qtype == dns.TypeTSIG || q.Qtype == dns.TypeTKEY:
		resp.Rcode = dns.RcodeFormatError
		return resp, out
	}
	d := h.data.Load()
	name := strings.ToLower(q.Name)
	if d.findDomain(name) == nil {
		resp.Rcode = dns.RcodeRefused
		return resp, out
	}
	resp.Authoritative = true

	// The client is the ECS address when the resolver sent one (a /0 source means "do not
	// tailor": the resolver's address is used and the scope stays 0).
	client, useECS, scopeBase := src, false, 0
	if ecs != nil && ecs.SourceNetmask > 0 {
		a, _ := netip.AddrFromSlice(ecs.Address)
		client, useECS = a.Unmap(), true
		if ecs.Family == 2 && a.Is4In6() {
			scopeBase = 96 // the zone map speaks IPv4; the scope is echoed in the query's family
		}
	}
	out.client = client
	scope := -1 // -1: the answer does not depend on the client
	h.resolve(resp, d, q, name, client, &out, &scope)
	if do && h.signing.Load() {
		h.signed(resp, d, q, name)
	}
	if ecs != nil {
		e := &dns.EDNS0_SUBNET{Code: dns.EDNS0SUBNET, Family: ecs.Family, SourceNetmask: ecs.SourceNetmask, Address: ecs.Address}
		if useECS && scope > 0 {
			e.SourceScope = uint8(scopeBase + scope)
		}
		opt := resp.IsEdns0()
		opt.Option = append(opt.Option, e)
	}
	return resp, out
}

// validECS checks an ECS option of a query (see validSubnet).
func validECS(e *dns.EDNS0_SUBNET) bool {
	a, ok := netip.AddrFromSlice(e.Address)
	if !ok {
		return false
	}
	if e.Family == 1 {
		a = a.Unmap()
	}
	return validSubnet(e.Family, e.SourceNetmask, e.SourceScope, a)
}

// validSubnet checks the subnet of an ECS option (RFC 7871 section 6): a known family whose
// address a is of that family (IPv4 for 1, 16 bytes for 2), a source prefix no longer than
// the address, no address bits past it, and a zero scope.
func validSubnet(family uint16, source, scope uint8, a netip.Addr) bool {
	switch {
	case scope != 0:
		return false
	case family == 1 && a.Is4() && source <= 32, family == 2 && a.Is6() && source <= 128:
		return netip.PrefixFrom(a, int(source)).Masked().Addr() == a
	}
	return false
}

// resolve fills resp for the question, following CNAMEs inside our domains.
func (h *Handler) resolve(resp *dns.Msg, d *data, q dns.Question, name string, client netip.Addr, out *outcome, scope *int) {
	owner := q.Name
	visited := 0
	for {
		dom := d.findDomain(name)
		if dom == nil { // a CNAME led out of our domains: the client follows it
			return
		}
		n := d.nodes[name]
		// A GSLB name owns its A and AAAA answers; other types (the SOA and NS of a GSLB
		// name at a domain's apex) come from the static data.
		if g := d.names[name]; g != nil && (n == nil || q.Qtype == dns.TypeA || q.Qtype == dns.TypeAAAA || q.Qtype == dns.TypeANY) {
			h.answerGSLB(resp, dom, g, q.Qtype, owner, client, out, scope)
			return
		}
		acme := h.acmeTXT(name)
		if n == nil && len(acme) == 0 {
			if _, ok := d.exists[name]; !ok {
				resp.Rcode = dns.RcodeNameError
			}
			negative(resp, dom)
			return
		}
		if n != nil {
			if cn := n.rrs[dns.TypeCNAME]; len(cn) > 0 && q.Qtype != dns.TypeCNAME {
				resp.Answer = append(resp.Answer, withOwner(cn[0], owner))
				target := cn[0].(*dns.CNAME).Target
				visited++
				if visited >= maxChase {
					return
				}
				name, owner = strings.ToLower(target), target
				continue
			}
		}
		var rrs []dns.RR
		if n != nil {
			if q.Qtype == dns.TypeANY {
				for _, t := range anyOrder {
					if rrs = n.rrs[t]; len(rrs) > 0 {
						break
					}
				}
			} else {
				rrs = n.rrs[q.Qtype]
			}
		}
		for _, rr := range rrs {
			resp.Answer = append(resp.Answer, withOwner(rr, owner))
		}
		answered := len(rrs)
		if q.Qtype == dns.TypeTXT || (q.Qtype == dns.TypeANY && len(rrs) == 0) {
			resp.Answer = append(resp.Answer, acmeRRs(owner, acme)...)
			answered += len(acme)
		}
		if answered == 0 {
			negative(resp, dom)
			return
		}
		if len(rrs) > 0 && rrs[0].Header().Rrtype == dns.TypeNS {
			addGlue(resp, d, rrs)
		}
		return
	}
}

// answerGSLB answers a query for a GSLB name.
func (h *Handler) answerGSLB(resp *dns.Msg, dom *domain, g *gname, qtype uint16, owner string, client netip.Addr, out *outcome, scope *int) {
	out.name = g.name
	v6 := false
	switch qtype {
	case dns.TypeA, dns.TypeANY:
	case dns.TypeAAAA:
		v6 = true
	default:
		negative(resp, dom)
		return
	}
	res := h.zones.Lookup(client)
	out.zone = res.Zone
	var abuf [8]net.IP
	p := h.choose(abuf[:0], g, v6, res.Zone)
	if qtype == dns.TypeANY && p.noAddress {
		v6 = true
		p = h.choose(abuf[:0], g, v6, res.Zone)
	}
	out.site = p.site
	if p.byZone {
		*scope = res.Scope
	}
	switch {
	case p.servfail:
		resp.Rcode = dns.RcodeServerFailure
		resp.Answer = nil
		return
	case p.noAddress:
		negative(resp, dom)
		return
	}
	hdr := dns.RR_Header{Name: owner, Class: dns.ClassINET, Ttl: g.ttl}
	for _, ip := range p.addrs {
		if v6 {
			hdr.Rrtype = dns.TypeAAAA
			resp.Answer = append(resp.Answer, &dns.AAAA{Hdr: hdr, AAAA: ip})
		} else {
			hdr.Rrtype = dns.TypeA
			resp.Answer = append(resp.Answer, &dns.A{Hdr: hdr, A: ip})
		}
	}
}

// negative adds the domain's SOA to the authority section of a NODATA or NXDOMAIN answer,
// with the negative-caching TTL (RFC 2308).
func negative(resp *dns.Msg, dom *domain) {
	soa := *dom.soa
	soa.Hdr.Ttl = dom.negTTL
	resp.Ns = append(resp.Ns, &soa)
}

// withOwner returns a copy of rr owned by name (the query's spelling, for 0x20 resolvers).
func withOwner(rr dns.RR, name string) dns.RR {
	c := dns.Copy(rr)
	c.Header().Name = name
	return c
}

// addGlue adds the addresses of in-domain name servers to the additional section.
func addGlue(resp *dns.Msg, d *data, nss []dns.RR) {
	for _, rr := range nss {
		ns, ok := rr.(*dns.NS)
		if !ok {
			continue
		}
		if n := d.nodes[strings.ToLower(ns.Ns)]; n != nil {
			for _, t := range [...]uint16{dns.TypeA, dns.TypeAAAA} {
				for _, a := range n.rrs[t] {
					resp.Extra = append(resp.Extra, dns.Copy(a))
				}
			}
		}
	}
}
