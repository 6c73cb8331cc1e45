package gslb

import (
	"math/rand/v2"
	"net"
	"net/netip"
	"strings"
	"testing"

	"github.com/miekg/dns"
	"github.com/prometheus/client_golang/prometheus/testutil"
)

// fullReply answers wire from src through ServeDNS as the UDP loop would (unpack, answer,
// pack), or returns nil when the full path drops it.
func fullReply(t testing.TB, e *env, wire []byte, src netip.Addr) *dns.Msg {
	t.Helper()
	req := new(dns.Msg)
	if err := req.Unpack(wire); err != nil {
		return nil
	}
	w := &fakeWriter{remote: net.UDPAddrFromAddrPort(netip.AddrPortFrom(src, 40000))}
	e.h.ServeDNS(w, req)
	return w.msg
}

// randomQuery builds a query the fast path may or may not take.
func randomQuery(r *rand.Rand) (wire []byte, src netip.Addr) {
	names := []string{"desktop.example.test.", "rr.example.test.", "weighted.example.test.", "all.example.test.",
		"closed.example.test.", "apex.test.", "cold.example.test.", "mail.example.test.", "www.example.test.",
		"nope.example.test.", "example.test.", "elsewhere.example.org.", "desk_top.example.test."}
	name := []byte(names[r.IntN(len(names))])
	for i := range name { // 0x20: random case
		if r.IntN(2) == 0 {
			name[i] = byte(strings.ToUpper(string(name[i]))[0])
		}
	}
	types := []uint16{dns.TypeA, dns.TypeA, dns.TypeAAAA, dns.TypeAAAA, dns.TypeTXT, dns.TypeANY, dns.TypeMX, dns.TypeNS}
	m := new(dns.Msg)
	m.SetQuestion(string(name), types[r.IntN(len(types))])
	m.Id = uint16(r.Uint32())
	m.RecursionDesired = r.IntN(2) == 0
	m.CheckingDisabled = r.IntN(4) == 0
	if r.IntN(8) == 0 {
		m.AuthenticatedData = true
	}
	if r.IntN(8) == 0 {
		m.Question[0].Qclass = dns.ClassCHAOS
	}
	switch r.IntN(4) {
	case 0: // no EDNS0
	case 1:
		m.SetEdns0(uint16(r.IntN(4096)), r.IntN(2) == 0)
	default:
		m.SetEdns0(1232, false)
		opt := m.IsEdns0()
		subnets := []string{"10.2.3.0/24", "10.3.7.0/24", "10.3.0.0/16", "10.9.0.0/16", "10.1.0.0/16", "0.0.0.0/0",
			"2001:db8:2::/48", "2001:db8:1:5::/64", "::/0", "192.0.2.0/24", "::ffff:10.2.0.0/112"}
		p := netip.MustParsePrefix(subnets[r.IntN(len(subnets))])
		fam := uint16(1)
		if p.Addr().Is6() {
			fam = 2
		}
		opt.Option = append(opt.Option, &dns.EDNS0_SUBNET{Code: dns.EDNS0SUBNET, Family: fam,
			SourceNetmask: uint8(p.Bits()), Address: p.Addr().AsSlice()})
		if r.IntN(6) == 0 {
			opt.Option = append(opt.Option, &dns.EDNS0_COOKIE{Code: dns.EDNS0COOKIE, Cookie: "0123456789abcdef"})
		}
		if r.IntN(10) == 0 {
			opt.SetVersion(1)
		}
	}
	wire, err := m.Pack()
	if err != nil {
		panic(err)
	}
	resolvers := []string{"10.1.0.53", "10.2.0.53", "10.3.7.1", "10.9.1.1", "192.0.2.1", "2001:db8:2::53", "::1"}
	return wire, netip.MustParseAddr(resolvers[r.IntN(len(resolvers))])
}

// TestFastPathMatchesFullPath compares the wire fast path with ServeDNS on random queries,
// verdicts and loads: whenever the fast path answers, its reply must say exactly what the
// full path says (compression aside).
func TestFastPathMatchesFullPath(t *testing.T) {
	e := newEnv(t)
	r := rand.New(rand.NewPCG(1, 2))
	gws := []string{"gw-hq-1", "gw-hq-2", "gw-east-1", "gw-east-2", "gw-west-1", "gw-west-2"}
	fast, full := 0, 0
	for i := range 20000 {
		if i%50 == 0 { // new verdicts and loads now and then
			e.health = &fakeHealth{}
			for _, g := range gws {
				if v := r.IntN(3); v < 2 {
					e.health.set(v == 0, g)
				}
			}
			e.h.health = e.health
			for _, z := range []string{"hq", "east", "west"} {
				if r.IntN(2) == 0 {
					e.load[z] = r.IntN(100)
				} else {
					delete(e.load, z)
				}
			}
			e.rand = r.IntN(10)
		}
		wire, src := randomQuery(r)
		rr := e.h.data.Load().names["rr.example.test."]
		turn := rr.rr.Load()
		got, ok := e.h.fastUDP(wire, src, nil)
		rr.rr.Store(turn) // the full path takes the same round-robin turn
		want := fullReply(t, e, wire, src)
		if !ok {
			full++
			continue
		}
		fast++
		if len(got) > 512 && !strings.Contains(want.String(), "udp:") {
			t.Fatalf("fast reply of %d bytes to a query without EDNS0", len(got))
		}
		m := new(dns.Msg)
		if err := m.Unpack(got); err != nil {
			t.Fatalf("fast reply does not unpack: %v\n% x", err, got)
		}
		if want == nil {
			t.Fatalf("fast path answered a query the full path drops:\n%v", m)
		}
		if m.String() != want.String() {
			req := new(dns.Msg)
			req.Unpack(wire)
			t.Fatalf("query from %v:\n%v\nfast path:\n%v\nfull path:\n%v", src, req, m, want)
		}
	}
	t.Logf("%d queries took the fast path, %d the full path", fast, full)
	if fast < 2000 || full < 2000 {
		t.Fatalf("fast %d, full %d: the random queries no longer exercise both paths", fast, full)
	}
}

// TestFastPathScope lists what the fast path takes and what it leaves to the full path.
func TestFastPathScope(t *testing.T) {
	e := newEnv(t)
	src := netip.MustParseAddr("10.2.0.53")
	tests := []struct {
		name string
		edit func(m *dns.Msg)
		fast bool
	}{
		{"a plain A query for a GSLB name is fast", func(m *dns.Msg) {}, true},
		{"an AAAA query with EDNS0 is fast", func(m *dns.Msg) { m.Question[0].Qtype = dns.TypeAAAA; m.SetEdns0(1232, true) }, true},
		{"a query with an ECS option is fast", func(m *dns.Msg) {
			m.SetEdns0(1232, false)
			m.IsEdns0().Option = []dns.EDNS0{&dns.EDNS0_SUBNET{Code: dns.EDNS0SUBNET, Family: 1, SourceNetmask: 24, Address: net.IPv4(10, 3, 7, 0).To4()}}
		}, true},
		{"a name in mixed case is fast", func(m *dns.Msg) { m.Question[0].Name = "DeskTop.Example.TEST." }, true},
		{"a static name takes the full path", func(m *dns.Msg) { m.Question[0].Name = "mail.example.test." }, false},
		{"a TXT query takes the full path", func(m *dns.Msg) { m.Question[0].Qtype = dns.TypeTXT }, false},
		{"a cookie option takes the full path", func(m *dns.Msg) {
			m.SetEdns0(1232, false)
			m.IsEdns0().Option = []dns.EDNS0{&dns.EDNS0_COOKIE{Code: dns.EDNS0COOKIE, Cookie: "0123456789abcdef"}}
		}, false},
		{"EDNS0 version 1 takes the full path", func(m *dns.Msg) { m.SetEdns0(1232, false); m.IsEdns0().SetVersion(1) }, false},
		{"a response takes the full path", func(m *dns.Msg) { m.Response = true }, false},
		{"a name with an escaped dot takes the full path", func(m *dns.Msg) { m.Question[0].Name = `desk\.top.example.test.` }, false},
		{"fail-closed SERVFAIL takes the full path", func(m *dns.Msg) { m.Question[0].Name = "cold.example.test." }, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			m := new(dns.Msg)
			m.SetQuestion("desktop.example.test.", dns.TypeA)
			tt.edit(m)
			wire, err := m.Pack()
			if err != nil {
				t.Fatal(err)
			}
			got, ok := e.h.fastUDP(wire, src, nil)
			if ok != tt.fast {
				t.Fatalf("fast path took it: %v, want %v", ok, tt.fast)
			}
			if ok {
				r := new(dns.Msg)
				if err := r.Unpack(got); err != nil {
					t.Fatal(err)
				}
				if want := fullReply(t, e, wire, src); r.String() != want.String() {
					t.Fatalf("fast path:\n%v\nfull path:\n%v", r, want)
				}
			}
		})
	}
}

// TestFastPathFollowsVerdicts: a verdict change shows in the very next fast answer.
func TestFastPathFollowsVerdicts(t *testing.T) {
	e := newEnv(t)
	wire := desktopQuery(t)
	src := netip.MustParseAddr("10.1.0.53")
	answer := func() string {
		t.Helper()
		b, ok := e.h.fastUDP(wire, src, nil)
		if !ok {
			t.Fatal("not fast")
		}
		r := new(dns.Msg)
		if err := r.Unpack(b); err != nil {
			t.Fatal(err)
		}
		return join(addrs(r))
	}
	if got := answer(); got != "198.51.100.11 198.51.100.12" {
		t.Fatalf("before verdicts: %q", got)
	}
	e.health.set(false, "gw-hq-1", "gw-hq-2")
	if got := answer(); got != "198.51.100.31 198.51.100.32" {
		t.Fatalf("hq down: %q, want west's", got)
	}
	e.health.set(true, "gw-hq-2")
	if got := answer(); got != "198.51.100.12" {
		t.Fatalf("gw-hq-2 back: %q", got)
	}
}

// TestFastPathCountsMetrics: fast answers count like full ones.
func TestFastPathCountsMetrics(t *testing.T) {
	e := newEnv(t)
	wire := desktopQuery(t)
	for range 3 {
		if _, ok := e.h.fastUDP(wire, netip.MustParseAddr("10.2.0.53"), nil); !ok {
			t.Fatal("not fast")
		}
	}
	want := `
# HELP frontdoor_dns_queries_total DNS queries answered, by query type and response code.
# TYPE frontdoor_dns_queries_total counter
frontdoor_dns_queries_total{rcode="NOERROR",type="A"} 3
# HELP frontdoor_gslb_answers_total GSLB answers by name, answering site (fail_open: every address; none: SERVFAIL) and client zone.
# TYPE frontdoor_gslb_answers_total counter
frontdoor_gslb_answers_total{client_zone="east",name="desktop.example.test.",site="east"} 3
`
	if err := testutil.GatherAndCompare(e.reg, strings.NewReader(want), "frontdoor_dns_queries_total", "frontdoor_gslb_answers_total"); err != nil {
		t.Fatal(err)
	}
}

func BenchmarkFastGSLB(b *testing.B) {
	e := newEnv(b)
	wire := desktopQuery(b)
	src := netip.MustParseAddr("10.1.0.53")
	out := make([]byte, 0, 2048)
	b.ReportAllocs()
	for b.Loop() {
		if _, ok := e.h.fastUDP(wire, src, out[:0]); !ok {
			b.Fatal("not fast")
		}
	}
}

// TestRoundRobinTakesOneTurnPerQuery: a query takes one round-robin turn whichever path
// answers it (the fast path gives up before choosing, never after).
func TestRoundRobinTakesOneTurnPerQuery(t *testing.T) {
	e := newEnv(t)
	rr := e.h.data.Load().names["rr.example.test."]
	src := netip.MustParseAddr("10.1.0.53")
	edits := []func(*dns.Msg){
		func(m *dns.Msg) {}, // fast
		func(m *dns.Msg) { // a cookie: the full path
			m.SetEdns0(1232, false)
			m.IsEdns0().Option = []dns.EDNS0{&dns.EDNS0_COOKIE{Code: dns.EDNS0COOKIE, Cookie: "0123456789abcdef"}}
		},
		func(m *dns.Msg) { m.SetEdns0(1232, false) }, // fast
	}
	for i := range 30 {
		m := new(dns.Msg)
		m.SetQuestion("rr.example.test.", dns.TypeA)
		edits[i%len(edits)](m)
		wire, err := m.Pack()
		if err != nil {
			t.Fatal(err)
		}
		before := rr.rr.Load()
		if _, ok := e.h.fastUDP(wire, src, nil); !ok {
			fullReply(t, e, wire, src)
		}
		if got := rr.rr.Load() - before; got != 1 {
			t.Fatalf("query %d took %d round-robin turns, want 1", i, got)
		}
	}
}

// desktopQuery returns the wire form of an A query for the test site's GSLB name.
func desktopQuery(t testing.TB) []byte {
	t.Helper()
	m := new(dns.Msg)
	m.SetQuestion("desktop.example.test.", dns.TypeA)
	wire, err := m.Pack()
	if err != nil {
		t.Fatal(err)
	}
	return wire
}
