package gslb

import (
	"strings"
	"testing"

	"github.com/frontdoor-vdi/frontdoor/internal/testkit"
	"github.com/miekg/dns"
)

func TestMain(m *testing.M) { testkit.Main(m) }

func TestStaticRecords(t *testing.T) {
	e := newEnv(t)
	tests := []struct {
		name   string
		q      q
		rcode  int
		aa     bool
		answer []string // RR strings of the answer section, in order
		soa    bool     // the SOA is in the authority section
		extra  int
	}{
		{name: "the apex SOA is answered", q: q{name: "example.test.", qtype: dns.TypeSOA}, aa: true,
			answer: []string{"example.test.\t3600\tIN\tSOA\tns1.example.test. hostmaster.example.test. 7 3600 600 604800 20"}},
		{name: "the apex NS set comes with glue for in-domain servers", q: q{name: "example.test.", qtype: dns.TypeNS}, aa: true,
			answer: []string{"example.test.\t3600\tIN\tNS\tns1.example.test.", "example.test.\t3600\tIN\tNS\tns2.example.net."}, extra: 2},
		{name: "an A record is answered", q: q{name: "mail.example.test.", qtype: dns.TypeA}, aa: true,
			answer: []string{"mail.example.test.\t60\tIN\tA\t192.0.2.25"}},
		{name: "names are case-insensitive and the answer keeps the query's spelling", q: q{name: "MaIl.ExAmPlE.TeSt.", qtype: dns.TypeA}, aa: true,
			answer: []string{"MaIl.ExAmPlE.TeSt.\t60\tIN\tA\t192.0.2.25"}},
		{name: "MX is answered", q: q{name: "example.test.", qtype: dns.TypeMX}, aa: true,
			answer: []string{"example.test.\t300\tIN\tMX\t10 mail.example.test."}},
		{name: "TXT is answered", q: q{name: "example.test.", qtype: dns.TypeTXT}, aa: true,
			answer: []string{"example.test.\t300\tIN\tTXT\t\"frontdoor test\""}},
		{name: "a CNAME into a GSLB name is followed", q: q{name: "www.example.test.", qtype: dns.TypeA}, aa: true,
			answer: []string{"www.example.test.\t300\tIN\tCNAME\tdesktop.example.test.", "desktop.example.test.\t5\tIN\tA\t198.51.100.11", "desktop.example.test.\t5\tIN\tA\t198.51.100.12"}},
		{name: "a CNAME query gets the CNAME alone", q: q{name: "www.example.test.", qtype: dns.TypeCNAME}, aa: true,
			answer: []string{"www.example.test.\t300\tIN\tCNAME\tdesktop.example.test."}},
		{name: "a CNAME out of our domains is left to the client", q: q{name: "away.example.test.", qtype: dns.TypeA}, aa: true,
			answer: []string{"away.example.test.\t300\tIN\tCNAME\telsewhere.example.org."}},
		{name: "a CNAME loop stops after a bounded chase", q: q{name: "loop1.example.test.", qtype: dns.TypeA}, aa: true,
			answer: []string{"loop1.example.test.\t300\tIN\tCNAME\tloop2.example.test.", "loop2.example.test.\t300\tIN\tCNAME\tloop1.example.test.",
				"loop1.example.test.\t300\tIN\tCNAME\tloop2.example.test.", "loop2.example.test.\t300\tIN\tCNAME\tloop1.example.test.",
				"loop1.example.test.\t300\tIN\tCNAME\tloop2.example.test.", "loop2.example.test.\t300\tIN\tCNAME\tloop1.example.test.",
				"loop1.example.test.\t300\tIN\tCNAME\tloop2.example.test.", "loop2.example.test.\t300\tIN\tCNAME\tloop1.example.test."}},
		{name: "a missing name is NXDOMAIN with the SOA", q: q{name: "nope.example.test.", qtype: dns.TypeA}, rcode: dns.RcodeNameError, aa: true, soa: true},
		{name: "a missing type is NODATA with the SOA", q: q{name: "mail.example.test.", qtype: dns.TypeAAAA}, aa: true, soa: true},
		{name: "an empty non-terminal is NODATA, not NXDOMAIN", q: q{name: "deep.example.test.", qtype: dns.TypeA}, aa: true, soa: true},
		{name: "below an existing name is NXDOMAIN", q: q{name: "x.mail.example.test.", qtype: dns.TypeA}, rcode: dns.RcodeNameError, aa: true, soa: true},
		{name: "a GSLB name has no TXT: NODATA", q: q{name: "desktop.example.test.", qtype: dns.TypeTXT}, aa: true, soa: true},
		{name: "the closest domain answers for a nested one", q: q{name: "sub.example.test.", qtype: dns.TypeA}, aa: true,
			answer: []string{"sub.example.test.\t300\tIN\tA\t192.0.2.77"}},
		{name: "a GSLB name at an apex still has its SOA", q: q{name: "apex.test.", qtype: dns.TypeSOA}, aa: true,
			answer: []string{"apex.test.\t3600\tIN\tSOA\tns1.apex.test. hostmaster.apex.test. 1 3600 600 604800 30"}},
		{name: "a GSLB name at an apex answers A from its sites", q: q{name: "apex.test.", qtype: dns.TypeA}, aa: true,
			answer: []string{"apex.test.\t5\tIN\tA\t198.51.100.22"}},
		{name: "ANY gets one RRset", q: q{name: "ns1.example.test.", qtype: dns.TypeANY}, aa: true,
			answer: []string{"ns1.example.test.\t300\tIN\tA\t192.0.2.53"}},
		{name: "ANY at the apex gets the SOA only", q: q{name: "example.test.", qtype: dns.TypeANY}, aa: true,
			answer: []string{"example.test.\t3600\tIN\tSOA\tns1.example.test. hostmaster.example.test. 7 3600 600 604800 20"}},
		{name: "a name outside our domains is REFUSED", q: q{name: "example.org.", qtype: dns.TypeA}, rcode: dns.RcodeRefused},
		{name: "a look-alike suffix is not ours", q: q{name: "badexample.test.", qtype: dns.TypeA}, rcode: dns.RcodeRefused},
		{name: "zone transfers are REFUSED", q: q{name: "example.test.", qtype: dns.TypeAXFR, tcp: true}, rcode: dns.RcodeRefused},
		{name: "the CHAOS class is REFUSED", q: q{name: "version.bind.", qtype: dns.TypeTXT, modify: func(m *dns.Msg) { m.Question[0].Qclass = dns.ClassCHAOS }}, rcode: dns.RcodeRefused},
		{name: "an UPDATE gets NOTIMP", q: q{name: "example.test.", qtype: dns.TypeSOA, modify: func(m *dns.Msg) { m.Opcode = dns.OpcodeUpdate }}, rcode: dns.RcodeNotImplemented},
		{name: "two questions are a format error", q: q{name: "example.test.", qtype: dns.TypeSOA, modify: func(m *dns.Msg) { m.Question = append(m.Question, m.Question[0]) }}, rcode: dns.RcodeFormatError},
		{name: "EDNS version 1 gets BADVERS", q: q{name: "example.test.", qtype: dns.TypeSOA, edns: 1232, modify: func(m *dns.Msg) { m.IsEdns0().SetVersion(1) }}, rcode: dns.RcodeBadVers},
		{name: "an ECS address with bits past its prefix is a format error", q: q{name: "desktop.example.test.", qtype: dns.TypeA, ecs: "10.2.0.0/16",
			modify: func(m *dns.Msg) { m.IsEdns0().Option[0].(*dns.EDNS0_SUBNET).Address[3] = 1 }}, rcode: dns.RcodeFormatError},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			m := e.ask(t, tt.q)
			if m.Rcode != tt.rcode || m.Authoritative != tt.aa {
				t.Fatalf("rcode %s aa %v, want %s aa %v\n%v", dns.RcodeToString[m.Rcode], m.Authoritative, dns.RcodeToString[tt.rcode], tt.aa, m)
			}
			var got []string
			for _, rr := range m.Answer {
				got = append(got, rr.String())
			}
			if strings.Join(got, "\n") != strings.Join(tt.answer, "\n") {
				t.Fatalf("answer\n%s\nwant\n%s", strings.Join(got, "\n"), strings.Join(tt.answer, "\n"))
			}
			hasSOA := len(m.Ns) == 1 && m.Ns[0].Header().Rrtype == dns.TypeSOA
			if hasSOA != tt.soa || (tt.soa && m.Ns[0].Header().Ttl != 20) {
				t.Fatalf("authority %v, want the SOA with TTL 20: %v", m.Ns, tt.soa)
			}
			extra := 0
			for _, rr := range m.Extra {
				if rr.Header().Rrtype != dns.TypeOPT {
					extra++
				}
			}
			if extra != tt.extra {
				t.Fatalf("additional %v, want %d records", m.Extra, tt.extra)
			}
			if m.RecursionAvailable {
				t.Fatal("RA is set on an authoritative-only server")
			}
		})
	}
}

func TestTruncation(t *testing.T) {
	e := newEnv(t)
	e.cfg.GSLB.Domains[0].Records = append(e.cfg.GSLB.Domains[0].Records,
		recordTXT("mid", 700), recordTXT("big", 3000))
	if err := e.h.Reload(e.cfg); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name string
		q    q
		tc   bool
	}{
		{name: "700 bytes over UDP without EDNS0 is truncated at 512", q: q{name: "mid.example.test.", qtype: dns.TypeTXT}, tc: true},
		{name: "700 bytes over UDP with a 1232 byte buffer fits", q: q{name: "mid.example.test.", qtype: dns.TypeTXT, edns: 1232}},
		{name: "3000 bytes over UDP with a 4096 byte buffer is cut at our 1232", q: q{name: "big.example.test.", qtype: dns.TypeTXT, edns: 4096}, tc: true},
		{name: "3000 bytes over TCP fit", q: q{name: "big.example.test.", qtype: dns.TypeTXT, tcp: true}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			m := e.ask(t, tt.q)
			if m.Truncated != tt.tc {
				t.Fatalf("TC = %v, want %v", m.Truncated, tt.tc)
			}
			if !tt.tc && len(m.Answer) != 1 {
				t.Fatalf("answer %v, want the whole TXT", m.Answer)
			}
			if tt.q.edns > 0 && m.IsEdns0() == nil {
				t.Fatal("a reply to an EDNS0 query has no OPT record")
			}
		})
	}
}
