package gslb

import (
	"encoding/binary"
	"net"
	"net/netip"
	"strings"
	"unsafe"

	"github.com/miekg/dns"
)

// The wire fast path answers the one query a GSLB front door gets most, an A or AAAA query
// for a GSLB name over UDP, straight from the request bytes into the reply bytes: no dns.Msg
// is unpacked, built or packed. It takes only plain queries (one question of class IN, a
// name of letters, digits, '-' and '_', no EDNS0 or EDNS0 version 0 with at most an ECS
// option, no flags but RD and CD) whose answer needs no truncation and is not a failure;
// everything else returns ok=false and takes the full path in ServeDNS, which the fast path
// matches answer for answer (fast_test.go compares them). The site choice is the same call
// as in the full path, so a verdict change shows in the very next answer here too.

// fastMaxAnswers bounds the answers of a fast reply; larger answers take the full path.
const fastMaxAnswers = 16

// fastECS is the ECS option of a query, as read by the fast path.
type fastECS struct {
	present bool
	family  uint16
	source  uint8
	addr    []byte // the address bytes as sent: exactly ceil(source/8) of them
	client  netip.Addr
	mapped  bool // an IPv4-mapped IPv6 subnet: the scope is echoed 96 bits longer
}

// fastUDP writes into out (which must be empty; its capacity is reused) the reply to the UDP
// query req from src, or returns ok=false when the query needs the full path.
func (h *Handler) fastUDP(req []byte, src netip.Addr, out []byte) (reply []byte, ok bool) {
	if len(req) < 17 || req[2]&^0x01 != 0 || req[3]&^0x10 != 0 ||
		binary.BigEndian.Uint16(req[4:]) != 1 || binary.BigEndian.Uint16(req[6:]) != 0 ||
		binary.BigEndian.Uint16(req[8:]) != 0 || binary.BigEndian.Uint16(req[10:]) > 1 {
		return nil, false
	}
	var nb [256]byte // the name in presentation form, lower case, with the final dot
	n, off := 0, 12
	for {
		if off >= len(req) {
			return nil, false
		}
		l := int(req[off])
		off++
		if l == 0 {
			break
		}
		if l > 63 || off+l > len(req) || n+l+1 > 254 {
			return nil, false
		}
		for _, c := range req[off : off+l] {
			switch {
			case c >= 'a' && c <= 'z', c >= '0' && c <= '9', c == '-', c == '_':
			case c >= 'A' && c <= 'Z':
				c += 'a' - 'A'
			default:
				return nil, false // needs escaping: the full path handles it
			}
			nb[n] = c
			n++
		}
		nb[n] = '.'
		n++
		off += l
	}
	qend := off + 4
	if n == 0 || qend > len(req) || binary.BigEndian.Uint16(req[off+2:]) != dns.ClassINET {
		return nil, false
	}
	qtype := binary.BigEndian.Uint16(req[off:])
	if qtype != dns.TypeA && qtype != dns.TypeAAAA {
		return nil, false
	}
	v6 := qtype == dns.TypeAAAA

	hasOPT, size, do := false, dns.MinMsgSize, false
	var ecs fastECS
	if binary.BigEndian.Uint16(req[10:]) == 1 {
		var ok bool
		if size, do, ok = h.fastOPT(req[qend:], &ecs); !ok {
			return nil, false
		}
		hasOPT = true
	} else if qend != len(req) {
		return nil, false
	}

	name := unsafe.String(&nb[0], n) // lives only as long as nb, within this call
	d := h.data.Load()
	g := d.names[name] // every GSLB name lies in one of our domains (build checks it)
	if g == nil {
		return nil, false
	}
	// Give up before choosing, never after: choose takes a round-robin turn, and the full
	// path would take another. An answer has at most every address of the name's family.
	fam := 0
	rrLen := 16 // a compressed A record
	if v6 {
		fam, rrLen = 1, 28
	}
	optLen := 0
	if hasOPT {
		optLen = 11
		if ecs.present {
			optLen += 8 + len(ecs.addr)
		}
	}
	if n := g.naddrs[fam]; n > fastMaxAnswers || qend+n*rrLen+optLen > size {
		return nil, false // the full path cuts the answer to size
	}
	client := src
	if ecs.present && ecs.source > 0 {
		client = ecs.client
	}
	res := h.zones.Lookup(client)
	var abuf [fastMaxAnswers]net.IP
	p := h.choose(abuf[:0], g, v6, res.Zone)
	if p.servfail || p.noAddress { // no round-robin turn was taken
		return nil, false
	}

	// Header: the query's ID, QR and AA set, RD and CD copied (as dns.Msg.SetReply does).
	out = append(out, req[0], req[1], 0x84|req[2]&0x01, req[3]&0x10, 0, 1, 0, byte(len(p.addrs)), 0, 0, 0, 0)
	if hasOPT {
		out[11] = 1
	}
	out = append(out, req[12:qend]...) // the question, in the client's spelling (0x20)
	for _, ip := range p.addrs {
		// The owner is a pointer to the question's name at offset 12.
		out = append(out, 0xC0, 12, byte(qtype>>8), byte(qtype), 0, 1)
		out = binary.BigEndian.AppendUint32(out, g.ttl)
		if v6 {
			out = append(out, 0, 16)
			out = append(out, ip.To16()...)
		} else {
			out = append(out, 0, 4)
			out = append(out, ip.To4()...)
		}
	}
	if hasOPT {
		flags := byte(0)
		if do {
			flags = 0x80 // the DO bit, copied (RFC 3225)
		}
		out = append(out, 0, byte(dns.TypeOPT>>8), byte(dns.TypeOPT), byte(h.maxUDP>>8), byte(h.maxUDP), 0, 0, flags, 0)
		if !ecs.present {
			out = append(out, 0, 0)
		} else {
			scope := uint8(0)
			if ecs.source > 0 && p.byZone && res.Scope > 0 {
				scope = uint8(res.Scope)
				if ecs.mapped {
					scope += 96
				}
			}
			l := 4 + len(ecs.addr)
			out = append(out, byte((4+l)>>8), byte(4+l), 0, dns.EDNS0SUBNET, byte(l>>8), byte(l),
				byte(ecs.family>>8), byte(ecs.family), ecs.source, scope)
			out = append(out, ecs.addr...)
		}
	}

	h.metrics.query(qtype, dns.RcodeSuccess)
	h.metrics.answer(g.name, p.site, res.Zone)
	if h.sample > 0 && h.queries.Add(1)%h.sample == 0 {
		// A copy of the site: p itself must not escape, or abuf would move to the heap.
		h.log.Info("query", "name", string(nb[:n]), "type", typeLabel(qtype), "resolver", src,
			"client", client, "zone", res.Zone, "site", strings.Clone(p.site), "rcode", rcodeLabel(dns.RcodeSuccess),
			"answers", len(p.addrs), "tcp", false)
	}
	return out, true
}

// fastOPT reads the OPT record that must end the query (b starts at it): version 0, no
// extended rcode, and no option but one valid ECS. It returns the largest reply the client
// takes and whether it asked for DNSSEC (DO).
func (h *Handler) fastOPT(b []byte, ecs *fastECS) (size int, do bool, ok bool) {
	if len(b) < 11 || b[0] != 0 || binary.BigEndian.Uint16(b[1:]) != dns.TypeOPT || b[5] != 0 || b[6] != 0 {
		return 0, false, false
	}
	do = b[7]&0x80 != 0
	if do && h.signing.Load() {
		return 0, false, false // a signed answer, which the full path makes
	}
	rdlen := int(binary.BigEndian.Uint16(b[9:]))
	if 11+rdlen != len(b) {
		return 0, false, false
	}
	size = max(dns.MinMsgSize, min(int(binary.BigEndian.Uint16(b[3:])), h.maxUDP))
	opts := b[11:]
	for len(opts) > 0 {
		if len(opts) < 4 {
			return 0, false, false
		}
		code, l := binary.BigEndian.Uint16(opts), int(binary.BigEndian.Uint16(opts[2:]))
		if code != dns.EDNS0SUBNET || ecs.present || len(opts) < 4+l || !readECS(opts[4:4+l], ecs) {
			return 0, false, false
		}
		opts = opts[4+l:]
	}
	return size, do, true
}

// readECS reads an ECS option's data; ok only for a subnet validSubnet accepts, with the
// address sent in exactly ceil(source/8) bytes.
func readECS(b []byte, ecs *fastECS) bool {
	if len(b) < 4 {
		return false
	}
	ecs.family, ecs.source, ecs.addr = binary.BigEndian.Uint16(b), b[2], b[4:]
	if len(ecs.addr) != (int(ecs.source)+7)/8 {
		return false
	}
	var x [16]byte
	copy(x[:], ecs.addr) // a longer address fails validSubnet's length check below
	a := netip.AddrFrom16(x)
	if ecs.family == 1 {
		a = netip.AddrFrom4([4]byte(x[:4]))
	}
	if !validSubnet(ecs.family, ecs.source, b[3], a) {
		return false
	}
	ecs.present, ecs.client, ecs.mapped = true, a.Unmap(), ecs.family == 2 && a.Is4In6()
	return true
}
