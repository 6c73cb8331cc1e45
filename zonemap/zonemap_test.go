package zonemap

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"net/netip"
	"sync"
	"testing"

	"github.com/frontdoor-vdi/frontdoor/configs"
	"github.com/frontdoor-vdi/frontdoor/internal/testkit"
)

func TestMain(m *testing.M) { testkit.Main(m) }

func mustPrefix(t testing.TB, s string) netip.Prefix {
	t.Helper()
	p, err := ParseRange(s)
	if err != nil {
		t.Fatalf("ParseRange(%q): %v", s, err)
	}
	return p
}

func TestParseRange(t *testing.T) {
	tests := []struct {
		name, in, want string
		err            error
	}{
		{name: "an IPv4 prefix parses", in: "10.1.0.0/16", want: "10.1.0.0/16"},
		{name: "an IPv6 prefix parses", in: "2001:db8::/32", want: "2001:db8::/32"},
		{name: "a bare IPv4 address is a /32", in: "10.1.2.3", want: "10.1.2.3/32"},
		{name: "a bare IPv6 address is a /128", in: "::1", want: "::1/128"},
		{name: "spaces around are trimmed", in: " 10.0.0.0/8 ", want: "10.0.0.0/8"},
		{name: "an IPv4-mapped range becomes IPv4", in: "::ffff:10.0.0.0/104", want: "10.0.0.0/8"},
		{name: "host bits are an error", in: "10.1.2.3/16", err: ErrHostBits},
		{name: "an IPv6 zone is an error", in: "fe80::1%eth0", err: ErrZoneID},
		{name: "garbage is an error", in: "ten.0.0.0/8"},
		{name: "a too long prefix is an error", in: "10.0.0.0/33"},
		{name: "empty is an error", in: ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := ParseRange(tt.in)
			if tt.want == "" {
				if err == nil {
					t.Fatalf("ParseRange(%q) = %v, want an error", tt.in, got)
				}
				if tt.err != nil && !errors.Is(err, tt.err) {
					t.Fatalf("ParseRange(%q) error %v, want %v", tt.in, err, tt.err)
				}
				return
			}
			if err != nil || got.String() != tt.want {
				t.Fatalf("ParseRange(%q) = %v, %v; want %s", tt.in, got, err, tt.want)
			}
		})
	}
}

func FuzzParseRange(f *testing.F) {
	for _, s := range []string{"10.0.0.0/8", "::1", "2001:db8::/32", "::ffff:1.2.3.0/120", "1.2.3.4/40", "fe80::%x/64", ""} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		p, err := ParseRange(s)
		if err != nil {
			return
		}
		if !p.IsValid() || p.Masked() != p || p.Addr().Is4In6() && p.Bits() >= 96 {
			t.Fatalf("ParseRange(%q) = %v: not a valid canonical prefix", s, p)
		}
		q, err := ParseRange(p.String())
		if err != nil || q != p {
			t.Fatalf("ParseRange(%q) = %v, but it re-parses as %v, %v", s, p, q, err)
		}
	})
}

func TestLookup(t *testing.T) {
	var rs []Range
	for _, r := range []struct{ p, z string }{
		{"127.0.0.0/8", "hq"}, {"::1/128", "hq"}, {"127.2.0.0/16", "east"}, {"127.3.0.0/16", "west"},
		{"127.3.7.0/24", "east"}, {"2001:db8::/32", "west"}, {"2001:db8:1::/48", "east"},
	} {
		rs = append(rs, Range{Prefix: mustPrefix(t, r.p), Zone: r.z})
	}
	m, err := New(rs, "hq")
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name, addr, zone string
		matched          bool
		scope            int
	}{
		{name: "a loopback address outside the zones' blocks is hq", addr: "127.0.0.1", zone: "hq", matched: true, scope: 15},
		{name: "the longest prefix wins", addr: "127.2.9.9", zone: "east", matched: true, scope: 16},
		{name: "a nested range wins over its parent", addr: "127.3.7.1", zone: "east", matched: true, scope: 24},
		{name: "the parent keeps the rest", addr: "127.3.8.1", zone: "west", matched: true, scope: 21},
		{name: "IPv6 ranges match", addr: "2001:db8:1::5", zone: "east", matched: true, scope: 48},
		{name: "an IPv6 parent scope stops above the nested range", addr: "2001:db8:8000::1", zone: "west", matched: true, scope: 33},
		{name: "IPv4-mapped IPv6 addresses are IPv4", addr: "::ffff:127.2.0.1", zone: "east", matched: true, scope: 16},
		{name: "an address in no range gets the default zone", addr: "192.0.2.1", zone: "hq", scope: 1},
		{name: "an IPv6 address in no range gets the default zone", addr: "3fff::1", zone: "hq", scope: 4},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := m.Lookup(netip.MustParseAddr(tt.addr))
			if got.Zone != tt.zone || got.Matched() != tt.matched || got.Scope != tt.scope {
				t.Fatalf("Lookup(%s) = %+v, want zone %q matched %v scope %d", tt.addr, got, tt.zone, tt.matched, tt.scope)
			}
		})
	}
}

func TestNewTableErrors(t *testing.T) {
	p := netip.MustParsePrefix("10.0.0.0/8")
	if _, err := NewTable([]Range{{p, "a"}, {p, "b"}}, ""); !errors.Is(err, ErrDuplicate) {
		t.Errorf("same range in two zones: got %v, want %v", err, ErrDuplicate)
	}
	if tb, err := NewTable([]Range{{p, "a"}, {p, "a"}}, ""); err != nil || tb.Len() != 1 {
		t.Errorf("same range twice in one zone: got %v, %v; want one range", tb, err)
	}
	if _, err := NewTable([]Range{{p, ""}}, ""); !errors.Is(err, ErrNoZone) {
		t.Errorf("range without zone: got %v, want %v", err, ErrNoZone)
	}
}

func TestFromConfig(t *testing.T) {
	cfg, err := configs.LoadFile("../configs/lab.yaml")
	if err != nil {
		t.Fatal(err)
	}
	m, err := FromConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	for addr, zone := range map[string]string{"127.0.0.1": "hq", "127.2.0.1": "east", "127.3.0.11": "west", "::1": "hq", "10.0.0.1": "hq"} {
		if got := m.Zone(netip.MustParseAddr(addr)); got != zone {
			t.Errorf("Zone(%s) = %q, want %q", addr, got, zone)
		}
	}
	cfg.Zones[0].Ranges = append(cfg.Zones[0].Ranges, netip.MustParsePrefix("10.1.2.3/8"))
	if err := m.ReloadConfig(cfg); !errors.Is(err, ErrHostBits) {
		t.Fatalf("ReloadConfig of a bad range: got %v, want %v", err, ErrHostBits)
	}
	if got := m.Zone(netip.MustParseAddr("127.2.0.1")); got != "east" {
		t.Fatalf("after a failed reload Zone(127.2.0.1) = %q, want the old table's east", got)
	}
}

// randomRanges returns n random prefixes, concentrated in a few blocks so that they nest.
func randomRanges(r *rand.Rand, n int) []Range {
	out := make([]Range, 0, n)
	seen := map[netip.Prefix]bool{}
	for len(out) < n {
		var a netip.Addr
		var bits int
		if r.IntN(4) == 0 {
			var b [16]byte
			b[0], b[1] = 0x20, 0x01
			b[2] = byte(r.IntN(4))
			for i := 3; i < 16; i++ {
				b[i] = byte(r.Uint32())
			}
			a, bits = netip.AddrFrom16(b), 16+r.IntN(113)
		} else {
			v := r.Uint32()
			a, bits = netip.AddrFrom4([4]byte{10, byte(r.IntN(4)), byte(v >> 8), byte(v)}), 8+r.IntN(25)
		}
		p := netip.PrefixFrom(a, bits).Masked()
		if seen[p] {
			continue
		}
		seen[p] = true
		out = append(out, Range{Prefix: p, Zone: fmt.Sprintf("z%d", r.IntN(5))})
	}
	return out
}

func randomAddr(r *rand.Rand, rs []Range) netip.Addr {
	switch r.IntN(3) {
	case 0: // inside a range, at a random offset
		p := rs[r.IntN(len(rs))].Prefix
		b := p.Addr().As16()
		host := p.Addr().BitLen() - p.Bits()
		off := 16 - p.Addr().BitLen()/8
		for i := 0; i < host; i++ {
			if r.IntN(2) == 1 {
				bit := p.Addr().BitLen() - 1 - i
				b[off+bit/8] |= 0x80 >> (bit % 8)
			}
		}
		if p.Addr().Is4() {
			return netip.AddrFrom4([4]byte(b[12:]))
		}
		return netip.AddrFrom16(b)
	case 1:
		return netip.AddrFrom4([4]byte{10, byte(r.IntN(5)), byte(r.Uint32()), byte(r.Uint32())})
	default:
		var b [16]byte
		b[0], b[1], b[2] = 0x20, 0x01, byte(r.IntN(5))
		for i := 3; i < 16; i++ {
			b[i] = byte(r.Uint32())
		}
		return netip.AddrFrom16(b)
	}
}

// naive is the reference: a linear scan for the longest containing range.
func naive(rs []Range, def string, a netip.Addr) Result {
	res := Result{Zone: def}
	for _, r := range rs {
		if r.Prefix.Contains(a) && r.Prefix.Bits() > res.Prefix.Bits() {
			res.Zone, res.Prefix = r.Zone, r.Prefix
		}
	}
	return res
}

// strictlyInside reports whether some range lies strictly inside p.
func strictlyInside(rs []Range, p netip.Prefix) bool {
	for _, r := range rs {
		if r.Prefix.Bits() > p.Bits() && p.Contains(r.Prefix.Addr()) {
			return true
		}
	}
	return false
}

func TestLookupMatchesLinearScan(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	for round := 0; round < 20; round++ {
		rs := randomRanges(r, 1+r.IntN(300))
		tb, err := NewTable(rs, "default")
		if err != nil {
			t.Fatal(err)
		}
		for i := 0; i < 500; i++ {
			a := randomAddr(r, rs)
			got, want := tb.Lookup(a), naive(rs, "default", a)
			if again := tb.Lookup(a); again != got { // from the cache, or computed again after a collision
				t.Fatalf("Lookup(%s) = %v, then %v", a, got, again)
			}
			if got.Zone != want.Zone || got.Prefix != want.Prefix {
				t.Fatalf("round %d: Lookup(%s) = %v %v, linear scan says %v %v", round, a, got.Zone, got.Prefix, want.Zone, want.Prefix)
			}
			// The scope is the shortest prefix of a holding no range strictly inside it.
			if got.Scope < want.Prefix.Bits() || got.Scope > a.BitLen() {
				t.Fatalf("Lookup(%s) scope %d outside [%d, %d]", a, got.Scope, want.Prefix.Bits(), a.BitLen())
			}
			if strictlyInside(rs, netip.PrefixFrom(a, got.Scope).Masked()) {
				t.Fatalf("Lookup(%s) scope %d is too short: a range lies inside", a, got.Scope)
			}
			if got.Scope > max(want.Prefix.Bits(), 0) && !strictlyInside(rs, netip.PrefixFrom(a, got.Scope-1).Masked()) {
				t.Fatalf("Lookup(%s) scope %d is longer than needed", a, got.Scope)
			}
		}
	}
}

func TestReloadIsAtomic(t *testing.T) {
	table := func(gen int) []Range {
		var rs []Range
		for i := 0; i < 256; i++ {
			rs = append(rs, Range{Prefix: netip.PrefixFrom(netip.AddrFrom4([4]byte{10, byte(i), 0, 0}), 16), Zone: fmt.Sprintf("gen%d", gen)})
		}
		return rs
	}
	m, err := New(table(0), "")
	if err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	stop := make(chan struct{})
	for g := 0; g < 4; g++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; ; i++ {
				select {
				case <-stop:
					return
				default:
				}
				a := netip.AddrFrom4([4]byte{10, byte(i), 1, 1})
				if z := m.Zone(a); z == "" {
					t.Errorf("Zone(%s) = \"\" during a reload: a half-built table was visible", a)
					return
				}
			}
		}()
	}
	for gen := 1; gen <= 50; gen++ {
		if err := m.Reload(table(gen), ""); err != nil {
			t.Fatal(err)
		}
	}
	close(stop)
	wg.Wait()
	if z := m.Zone(netip.MustParseAddr("10.9.1.1")); z != "gen50" {
		t.Fatalf("after the reloads Zone = %q, want gen50", z)
	}
}

// tableRanges returns n random ranges spread like a real address plan: mostly disjoint IPv4
// /12../24 and IPv6 /24../48 blocks over the whole address space, few of them nested.
func tableRanges(r *rand.Rand, n int) []Range {
	out := make([]Range, 0, n)
	seen := map[netip.Prefix]bool{}
	for len(out) < n {
		var p netip.Prefix
		if r.IntN(4) == 0 {
			var b [16]byte
			b[0] = 0x20
			for i := 1; i < 8; i++ {
				b[i] = byte(r.Uint32())
			}
			p = netip.PrefixFrom(netip.AddrFrom16(b), 24+r.IntN(25)).Masked()
		} else {
			v := r.Uint32()
			p = netip.PrefixFrom(netip.AddrFrom4([4]byte{byte(v >> 24), byte(v >> 16), byte(v >> 8), byte(v)}), 12+r.IntN(13)).Masked()
		}
		if !seen[p] {
			seen[p] = true
			out = append(out, Range{Prefix: p, Zone: fmt.Sprintf("z%d", r.IntN(20))})
		}
	}
	return out
}

// benchmarkLookup looks up nAddrs random addresses of a table of n ranges in turn with
// lookup: Table.lookup for the trie alone, Table.Lookup for the cache in front of it.
func benchmarkLookup(b *testing.B, n int, gen func(*rand.Rand, int) []Range, nAddrs int, lookup func(*Table, netip.Addr) Result) {
	r := rand.New(rand.NewPCG(3, 4))
	rs := gen(r, n)
	tb, err := NewTable(rs, "default")
	if err != nil {
		b.Fatal(err)
	}
	addrs := make([]netip.Addr, nAddrs)
	for i := range addrs {
		addrs[i] = randomAddr(r, rs)
	}
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		lookup(tb, addrs[i%nAddrs])
	}
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "lookups/s")
}

// benchmarkTrie measures the trie, without the cache of recent lookups.
func benchmarkTrie(b *testing.B, n int, gen func(*rand.Rand, int) []Range) {
	benchmarkLookup(b, n, gen, 1024, (*Table).lookup)
}

// BenchmarkLookupCached asks for the same 64 addresses (resolvers, say) again and again.
func BenchmarkLookupCached(b *testing.B) {
	benchmarkLookup(b, 10_000, tableRanges, 64, (*Table).Lookup)
}

// The Plan benchmarks use address-plan-like tables; the Nested ones pack every range into a
// few small blocks, the worst case for the trie's depth.
func BenchmarkLookupPlan10k(b *testing.B)    { benchmarkTrie(b, 10_000, tableRanges) }
func BenchmarkLookupPlan100k(b *testing.B)   { benchmarkTrie(b, 100_000, tableRanges) }
func BenchmarkLookupNested10k(b *testing.B)  { benchmarkTrie(b, 10_000, randomRanges) }
func BenchmarkLookupNested100k(b *testing.B) { benchmarkTrie(b, 100_000, randomRanges) }
