// Package zonemap maps client addresses to user-location zones: each zone owns CIDR ranges
// (IPv4 and IPv6), the longest matching prefix wins across zones, and addresses in no range
// belong to the default zone. Lookups go through github.com/yl2chen/cidranger.
//
// A Map is safe for concurrent use. Reload builds a complete new table before it swaps it in
// atomically, so a lookup sees either the old table or the new one, never a half-built one.
//
// Lookup also returns the EDNS Client Subnet scope of the answer (RFC 7871): the shortest
// prefix of the client address inside which every address maps to the same zone, which is
// what an authoritative server puts in the SCOPE PREFIX-LENGTH of its reply.
package zonemap

import (
	"encoding/binary"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"sort"
	"strings"
	"sync/atomic"

	"github.com/frontdoor-vdi/frontdoor/configs"
	"github.com/yl2chen/cidranger"
)

// Errors returned by the range parser and table builder.
var (
	// ErrHostBits reports a range with bits set after its prefix length.
	ErrHostBits = errors.New("range has host bits set")
	// ErrZoneID reports an IPv6 address with a zone (e.g. "%eth0").
	ErrZoneID = errors.New("range must not have an IPv6 zone")
	// ErrDuplicate reports the same range given to two different zones.
	ErrDuplicate = errors.New("range belongs to two zones")
	// ErrNoZone reports a range without a zone name.
	ErrNoZone = errors.New("range has no zone")
)

// Range is one CIDR range of a zone.
type Range struct {
	// Prefix is the masked range; IPv4 ranges are IPv4 prefixes, never IPv4-mapped IPv6.
	Prefix netip.Prefix
	// Zone is the zone name.
	Zone string
}

// ParseRange parses a range as written in a config file: a CIDR prefix ("10.1.0.0/16",
// "2001:db8::/32") or a single address ("10.1.2.3" is 10.1.2.3/32). IPv4-mapped IPv6 ranges
// of length 96 or more are turned into the IPv4 range they mean. A range with host bits set
// ("10.1.2.3/16") is an error, because it is almost always a typo.
func ParseRange(s string) (netip.Prefix, error) {
	s = strings.TrimSpace(s)
	var p netip.Prefix
	if strings.Contains(s, "/") {
		var err error
		p, err = netip.ParsePrefix(s)
		if err != nil {
			return netip.Prefix{}, fmt.Errorf("parsing range %q: %w", s, err)
		}
	} else {
		a, err := netip.ParseAddr(s)
		if err != nil {
			return netip.Prefix{}, fmt.Errorf("parsing range %q: %w", s, err)
		}
		if a.Zone() != "" {
			return netip.Prefix{}, fmt.Errorf("parsing range %q: %w", s, ErrZoneID)
		}
		p = netip.PrefixFrom(a, a.BitLen())
	}
	p, err := CheckRange(p)
	if err != nil {
		return netip.Prefix{}, fmt.Errorf("parsing range %q: %w", s, err)
	}
	return p, nil
}

// CheckRange returns the range p means, as ParseRange does for a prefix it parsed: an
// error for a zone or host bits, the IPv4 range for an IPv4-mapped one.
func CheckRange(p netip.Prefix) (netip.Prefix, error) {
	if p.Addr().Zone() != "" {
		return netip.Prefix{}, ErrZoneID
	}
	if p.Masked() != p {
		return netip.Prefix{}, fmt.Errorf("%w (did you mean %s?)", ErrHostBits, p.Masked())
	}
	return configs.UnmapRange(p), nil
}

// RangesFromConfig returns the ranges of every zone of cfg, in config order.
func RangesFromConfig(cfg *configs.Config) ([]Range, error) {
	var out []Range
	for _, z := range cfg.Zones {
		for _, r := range z.Ranges {
			p, err := CheckRange(r)
			if err != nil {
				return nil, fmt.Errorf("zone %s: range %s: %w", z.Name, r, err)
			}
			out = append(out, Range{Prefix: p, Zone: z.Name})
		}
	}
	return out, nil
}

// Result is the answer of a lookup.
type Result struct {
	// Zone is the client's zone: the zone of the longest matching range, else the default
	// zone ("" when there is none).
	Zone string
	// Prefix is the matched range; invalid (zero) when the default zone answered.
	Prefix netip.Prefix
	// Scope is the shortest prefix length of the client address inside which every address
	// has the same Zone; the ECS scope of answers that depend only on the zone.
	Scope int
}

// Matched reports whether a range matched (false: the default zone answered).
func (r Result) Matched() bool { return r.Prefix.IsValid() }

// Describe says, for a launch trace, which location zone the lookup of client gave and why.
func (r Result) Describe(client netip.Addr) string {
	switch {
	case r.Matched():
		return fmt.Sprintf("client %s: location zone %s (range %s)", client, r.Zone, r.Prefix)
	case r.Zone != "":
		return fmt.Sprintf("client %s: in no zone's ranges: location zone %s (site.default_zone)", client, r.Zone)
	default:
		return fmt.Sprintf("client %s: in no zone's ranges and no default zone: no location zone", client)
	}
}

// Table is an immutable set of ranges with a default zone.
type Table struct {
	ranger      cidranger.Ranger
	defaultZone string
	n           int
	// sorted4 and sorted6 hold the ranges of each family sorted by address, then by length;
	// they answer "is there a range strictly inside this prefix" for the ECS scope.
	sorted4, sorted6 []Range
	// cache remembers recent lookups, direct-mapped by a hash of the address: resolvers and
	// client subnets repeat, and a walk of the trie allocates. A reload makes a new Table, so
	// entries never outlive the ranges they were computed from.
	cache [cacheSize]atomic.Pointer[cachedResult]
}

// cacheSize is the number of lookups a Table remembers; a power of two.
const cacheSize = 1024

// cachedResult is one remembered lookup.
type cachedResult struct {
	addr netip.Addr
	res  Result
}

// cacheSlot hashes an address (unmapped, without zone) to a slot of the cache.
func cacheSlot(a netip.Addr) int {
	b := a.As16()
	h := (binary.LittleEndian.Uint64(b[:8])*0x9E3779B97F4A7C15 ^ binary.LittleEndian.Uint64(b[8:])) * 0x9E3779B97F4A7C15
	return int(h >> (64 - 10)) // 10 bits: cacheSize
}

type entry struct {
	ipnet  net.IPNet
	prefix netip.Prefix
	zone   string
}

func (e *entry) Network() net.IPNet { return e.ipnet }

// NewTable builds a table from ranges; a range given twice to the same zone is kept once, a
// range given to two zones is an error.
func NewTable(ranges []Range, defaultZone string) (*Table, error) {
	t := &Table{ranger: cidranger.NewPCTrieRanger(), defaultZone: defaultZone}
	seen := make(map[netip.Prefix]string, len(ranges))
	for _, r := range ranges {
		if r.Zone == "" {
			return nil, fmt.Errorf("%s: %w", r.Prefix, ErrNoZone)
		}
		p := r.Prefix.Masked()
		if a := p.Addr(); a.Is4In6() && p.Bits() >= 96 {
			p = netip.PrefixFrom(a.Unmap(), p.Bits()-96)
		}
		if !p.IsValid() {
			return nil, fmt.Errorf("invalid range %v of zone %s", r.Prefix, r.Zone)
		}
		if z, ok := seen[p]; ok {
			if z != r.Zone {
				return nil, fmt.Errorf("%s in zones %s and %s: %w", p, z, r.Zone, ErrDuplicate)
			}
			continue
		}
		seen[p] = r.Zone
		e := &entry{prefix: p, zone: r.Zone, ipnet: net.IPNet{
			IP:   p.Addr().AsSlice(),
			Mask: net.CIDRMask(p.Bits(), p.Addr().BitLen()),
		}}
		if err := t.ranger.Insert(e); err != nil {
			return nil, fmt.Errorf("inserting %s: %w", p, err)
		}
		if p.Addr().Is4() {
			t.sorted4 = append(t.sorted4, Range{Prefix: p, Zone: r.Zone})
		} else {
			t.sorted6 = append(t.sorted6, Range{Prefix: p, Zone: r.Zone})
		}
		t.n++
	}
	for _, s := range [][]Range{t.sorted4, t.sorted6} {
		sort.Slice(s, func(i, j int) bool {
			if c := s[i].Prefix.Addr().Compare(s[j].Prefix.Addr()); c != 0 {
				return c < 0
			}
			return s[i].Prefix.Bits() < s[j].Prefix.Bits()
		})
	}
	return t, nil
}

// Len returns the number of distinct ranges.
func (t *Table) Len() int { return t.n }

// DefaultZone returns the zone of addresses in no range.
func (t *Table) DefaultZone() string { return t.defaultZone }

// Lookup returns the zone of addr. An invalid addr gets the default zone with scope 0.
func (t *Table) Lookup(addr netip.Addr) Result {
	addr = addr.Unmap().WithZone("")
	if !addr.IsValid() {
		return Result{Zone: t.defaultZone}
	}
	slot := &t.cache[cacheSlot(addr)]
	if c := slot.Load(); c != nil && c.addr == addr {
		return c.res
	}
	res := t.lookup(addr)
	slot.Store(&cachedResult{addr, res})
	return res
}

// lookup walks the trie for addr (valid, unmapped, without zone).
func (t *Table) lookup(addr netip.Addr) Result {
	res := Result{Zone: t.defaultZone}
	if t.n > 0 {
		es, err := t.ranger.ContainingNetworks(addr.AsSlice())
		if err == nil && len(es) > 0 {
			// cidranger returns the containing networks from the shortest to the longest.
			e := es[len(es)-1].(*entry)
			res.Zone, res.Prefix = e.zone, e.prefix
		}
	}
	res.Scope = t.scope(addr, res.Prefix.Bits())
	return res
}

// scope returns the shortest prefix length L ≥ start of addr such that no range lies strictly
// inside addr/L: every address in addr/L then has the same longest match as addr.
func (t *Table) scope(addr netip.Addr, start int) int {
	if start < 0 {
		start = 0
	}
	s := t.sorted6
	if addr.Is4() {
		s = t.sorted4
	}
	l := start
	for l < addr.BitLen() {
		p := netip.PrefixFrom(addr, l).Masked()
		inner, ok := firstInside(s, p)
		if !ok {
			return l
		}
		// inner does not contain addr (it would be a longer match), so addr and inner part
		// within inner's prefix: every length up to their common prefix still holds inner.
		l = commonBits(addr, inner.Addr()) + 1
	}
	return addr.BitLen()
}

// firstInside returns a range of s (sorted by address, then length) strictly inside p.
func firstInside(s []Range, p netip.Prefix) (netip.Prefix, bool) {
	first := p.Addr()
	i := sort.Search(len(s), func(i int) bool { return s[i].Prefix.Addr().Compare(first) >= 0 })
	for ; i < len(s); i++ {
		q := s[i].Prefix
		if !p.Contains(q.Addr()) {
			return netip.Prefix{}, false
		}
		if q.Bits() > p.Bits() {
			return q, true
		}
	}
	return netip.Prefix{}, false
}

// commonBits returns the length of the common prefix of two addresses of the same family.
func commonBits(a, b netip.Addr) int {
	x, y := a.As16(), b.As16()
	n := 0
	for i := range x {
		d := x[i] ^ y[i]
		if d == 0 {
			n += 8
			continue
		}
		for d&0x80 == 0 {
			n++
			d <<= 1
		}
		break
	}
	if a.Is4() {
		n -= 96
	}
	return n
}

// Map is a reloadable table; its zero value is not usable, build one with New or FromConfig.
type Map struct {
	t atomic.Pointer[Table]
}

// New returns a Map over ranges with a default zone.
func New(ranges []Range, defaultZone string) (*Map, error) {
	t, err := NewTable(ranges, defaultZone)
	if err != nil {
		return nil, err
	}
	m := &Map{}
	m.t.Store(t)
	return m, nil
}

// FromConfig returns a Map of the zones' ranges and the site's default zone.
func FromConfig(cfg *configs.Config) (*Map, error) {
	rs, err := RangesFromConfig(cfg)
	if err != nil {
		return nil, err
	}
	return New(rs, cfg.Site.DefaultZone)
}

// Lookup returns the zone of addr in the current table.
func (m *Map) Lookup(addr netip.Addr) Result { return m.t.Load().Lookup(addr) }

// Zone returns the zone of addr ("" when it has none).
func (m *Map) Zone(addr netip.Addr) string { return m.t.Load().Lookup(addr).Zone }

// Table returns the current table.
func (m *Map) Table() *Table { return m.t.Load() }

// Reload builds a new table and swaps it in; on error the current table stays.
func (m *Map) Reload(ranges []Range, defaultZone string) error {
	t, err := NewTable(ranges, defaultZone)
	if err != nil {
		return err
	}
	m.t.Store(t)
	return nil
}

// ReloadConfig reloads the ranges and default zone of cfg.
func (m *Map) ReloadConfig(cfg *configs.Config) error {
	rs, err := RangesFromConfig(cfg)
	if err != nil {
		return err
	}
	return m.Reload(rs, cfg.Site.DefaultZone)
}
