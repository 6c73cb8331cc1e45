package gslb

import (
	"context"
	"errors"
	"log/slog"
	"strings"
	"testing"

	"github.com/frontdoor-vdi/frontdoor/zonemap"
	"github.com/libdns/libdns"
	"github.com/miekg/dns"
	"github.com/prometheus/client_golang/prometheus/testutil"
)

const (
	hqResolver   = "10.1.0.53"
	eastResolver = "10.2.0.53"
	westResolver = "10.3.0.53"
	labResolver  = "10.9.0.53" // a zone without a site
	farResolver  = "192.0.2.200"
)

func TestSiteOrder(t *testing.T) {
	tests := []struct {
		name  string
		down  []string
		load  map[string]int
		q     q
		want  string
		rcode int
	}{
		{name: "a client gets its own zone's front doors", q: q{from: hqResolver}, want: "198.51.100.11 198.51.100.12"},
		{name: "an east client gets east", q: q{from: eastResolver}, want: "198.51.100.21 198.51.100.22"},
		{name: "one gateway down leaves the other", down: []string{"gw-hq-1"}, q: q{from: hqResolver}, want: "198.51.100.12"},
		{name: "the zone down falls back to its configured order", down: []string{"gw-hq-1", "gw-hq-2"}, q: q{from: hqResolver}, want: "198.51.100.31 198.51.100.32"},
		{name: "a fallback site over its load threshold is skipped", down: []string{"gw-hq-1", "gw-hq-2"}, load: map[string]int{"west": 81}, q: q{from: hqResolver}, want: "198.51.100.21 198.51.100.22"},
		{name: "a fallback site at its load threshold is kept", down: []string{"gw-hq-1", "gw-hq-2"}, load: map[string]int{"west": 80}, q: q{from: hqResolver}, want: "198.51.100.31 198.51.100.32"},
		{name: "an overloaded site is still used when nothing else is healthy", down: []string{"gw-hq-1", "gw-hq-2", "gw-east-1", "gw-east-2"}, load: map[string]int{"west": 100}, q: q{from: hqResolver}, want: "198.51.100.31 198.51.100.32"},
		{name: "the own zone is used whatever its load", load: map[string]int{"hq": 100}, q: q{from: hqResolver}, want: "198.51.100.11 198.51.100.12"},
		{name: "a fallback list goes on with the remaining sites", down: []string{"gw-east-1", "gw-east-2", "gw-hq-1", "gw-hq-2"}, q: q{from: eastResolver}, want: "198.51.100.31 198.51.100.32"},
		{name: "a zone without a site gets the sites' order", down: []string{"gw-hq-1", "gw-hq-2"}, q: q{from: labResolver}, want: "198.51.100.21 198.51.100.22"},
		{name: "an address in no zone gets the sites' order", q: q{from: farResolver}, want: "198.51.100.11 198.51.100.12"},
		{name: "nothing healthy fails open with every address", down: []string{"gw-hq-1", "gw-hq-2", "gw-east-1", "gw-east-2", "gw-west-1", "gw-west-2"}, q: q{from: eastResolver},
			want: "198.51.100.21 198.51.100.22 198.51.100.11 198.51.100.12 198.51.100.31 198.51.100.32"},
		{name: "AAAA answers the best site with IPv6 addresses", q: q{from: eastResolver, qtype: dns.TypeAAAA}, want: "2001:db8:ff::21"},
		{name: "AAAA skips a healthy site without IPv6", down: []string{"gw-hq-1"}, q: q{from: hqResolver, qtype: dns.TypeAAAA}, want: "2001:db8:ff::21"},
		{name: "the ECS address picks the zone, not the resolver", q: q{from: hqResolver, ecs: "10.2.3.0/24"}, want: "198.51.100.21 198.51.100.22"},
		{name: "an IPv6 ECS address picks the zone", q: q{from: hqResolver, ecs: "2001:db8:2::/56"}, want: "198.51.100.21 198.51.100.22"},
		{name: "an ECS source of /0 means the resolver's zone", q: q{from: eastResolver, ecs: "0.0.0.0/0"}, want: "198.51.100.21 198.51.100.22"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			e := newEnv(t)
			e.health.set(false, tt.down...)
			for z, p := range tt.load {
				e.load[z] = p
			}
			tt.q.name = "desktop.example.test."
			if tt.q.qtype == 0 {
				tt.q.qtype = dns.TypeA
			}
			m := e.ask(t, tt.q)
			if m.Rcode != tt.rcode || join(addrs(m)) != tt.want {
				t.Fatalf("got %s %q, want %s %q", dns.RcodeToString[m.Rcode], join(addrs(m)), dns.RcodeToString[tt.rcode], tt.want)
			}
			for _, rr := range m.Answer {
				if rr.Header().Ttl != 5 {
					t.Fatalf("TTL %d, want the default 5", rr.Header().Ttl)
				}
			}
		})
	}
}

func TestECSScope(t *testing.T) {
	e := newEnv(t)
	tests := []struct {
		name       string
		qname      string
		ecs        string
		wantScope  uint8
		wantSource uint8
	}{
		{name: "a /24 inside a /16 zone range gets scope 16", qname: "desktop.example.test.", ecs: "10.2.3.0/24", wantScope: 16, wantSource: 24},
		{name: "a /8 source in no range gets the scope that avoids every range", qname: "desktop.example.test.", ecs: "10.0.0.0/8", wantScope: 16, wantSource: 8},
		{name: "a nested same-zone range narrows the scope", qname: "desktop.example.test.", ecs: "10.3.7.0/24", wantScope: 24, wantSource: 24},
		{name: "IPv6 sources get IPv6 scopes", qname: "desktop.example.test.", ecs: "2001:db8:2::/56", wantScope: 48, wantSource: 56},
		{name: "a /0 source gets scope 0", qname: "desktop.example.test.", ecs: "0.0.0.0/0", wantScope: 0, wantSource: 0},
		{name: "an IPv4-mapped IPv6 source gets its IPv4 scope in IPv6 bits", qname: "desktop.example.test.", ecs: "::ffff:10.2.3.0/120", wantScope: 112, wantSource: 120},
		{name: "static records get scope 0", qname: "mail.example.test.", ecs: "10.2.3.0/24", wantScope: 0, wantSource: 24},
		{name: "the weighted policy does not depend on the client: scope 0", qname: "weighted.example.test.", ecs: "10.2.3.0/24", wantScope: 0, wantSource: 24},
		{name: "NXDOMAIN gets scope 0", qname: "nope.example.test.", ecs: "10.2.3.0/24", wantScope: 0, wantSource: 24},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			m := e.ask(t, q{name: tt.qname, qtype: dns.TypeA, ecs: tt.ecs})
			got := ecsOf(m)
			if got == nil {
				t.Fatalf("the reply has no ECS option: %v", m)
			}
			if got.SourceScope != tt.wantScope || got.SourceNetmask != tt.wantSource {
				t.Fatalf("ECS source/scope %d/%d, want %d/%d", got.SourceNetmask, got.SourceScope, tt.wantSource, tt.wantScope)
			}
		})
	}
	m := e.ask(t, q{name: "desktop.example.test.", qtype: dns.TypeA, edns: 1232})
	if ecsOf(m) != nil {
		t.Fatal("a query without ECS got an ECS option back")
	}
}

func TestPolicies(t *testing.T) {
	t.Run("round robin rotates the best site's addresses", func(t *testing.T) {
		e := newEnv(t)
		seen := map[string]bool{}
		for i := 0; i < 4; i++ {
			m := e.ask(t, q{name: "rr.example.test.", qtype: dns.TypeA})
			if got := join(sorted(addrs(m))); got != "198.51.100.11 198.51.100.12" {
				t.Fatalf("answer %q, want hq's two addresses", got)
			}
			seen[addrs(m)[0]] = true
			if m.Answer[0].Header().Ttl != 30 {
				t.Fatalf("TTL %d, want the configured 30", m.Answer[0].Header().Ttl)
			}
		}
		if len(seen) != 2 {
			t.Fatalf("the first address was always %v: no rotation", seen)
		}
	})
	t.Run("weighted picks sites in proportion to their weights", func(t *testing.T) {
		e := newEnv(t)
		want := []string{"198.51.100.11", "198.51.100.21", "198.51.100.21", "198.51.100.21"}
		for r := 0; r < 4; r++ {
			e.rand = r
			if got := join(addrs(e.ask(t, q{name: "weighted.example.test.", qtype: dns.TypeA}))); got != want[r] {
				t.Fatalf("random %d: answer %q, want %q", r, got, want[r])
			}
		}
		e.health.set(false, "gw-east-1")
		e.rand = 3
		if got := join(addrs(e.ask(t, q{name: "weighted.example.test.", qtype: dns.TypeA}))); got != "198.51.100.11" {
			t.Fatalf("east down: answer %q, want hq", got)
		}
	})
	t.Run("all healthy answers every healthy address, best site first", func(t *testing.T) {
		e := newEnv(t)
		e.health.set(false, "gw-hq-2", "gw-west-1")
		got := join(addrs(e.ask(t, q{name: "all.example.test.", qtype: dns.TypeA, from: hqResolver})))
		if want := "198.51.100.11 198.51.100.21 198.51.100.22"; got != want {
			t.Fatalf("answer %q, want %q", got, want)
		}
	})
	t.Run("fail closed answers SERVFAIL, never an empty NOERROR", func(t *testing.T) {
		e := newEnv(t)
		e.health.set(false, "gw-hq-1", "gw-east-1")
		m := e.ask(t, q{name: "closed.example.test.", qtype: dns.TypeA})
		if m.Rcode != dns.RcodeServerFailure || len(m.Answer) != 0 {
			t.Fatalf("got %s %v, want SERVFAIL", dns.RcodeToString[m.Rcode], m.Answer)
		}
		m = e.ask(t, q{name: "closed.example.test.", qtype: dns.TypeAAAA})
		if m.Rcode != dns.RcodeServerFailure {
			t.Fatalf("AAAA: got %s, want SERVFAIL (the sites have IPv6 addresses, all down)", dns.RcodeToString[m.Rcode])
		}
	})
	t.Run("a name without IPv6 addresses answers AAAA with NODATA", func(t *testing.T) {
		e := newEnv(t)
		m := e.ask(t, q{name: "cold.example.test.", qtype: dns.TypeAAAA})
		if m.Rcode != dns.RcodeSuccess || len(m.Answer) != 0 || len(m.Ns) != 1 {
			t.Fatalf("got %v, want NODATA with the SOA", m)
		}
	})
	t.Run("before the first verdicts the initial state answers", func(t *testing.T) {
		e := newEnv(t)
		if m := e.ask(t, q{name: "cold.example.test.", qtype: dns.TypeA}); m.Rcode != dns.RcodeServerFailure {
			t.Fatalf("initial down: got %s, want SERVFAIL", dns.RcodeToString[m.Rcode])
		}
		if got := join(addrs(e.ask(t, q{name: "desktop.example.test.", qtype: dns.TypeA}))); got != "198.51.100.11 198.51.100.12" {
			t.Fatalf("initial up: got %q, want hq", got)
		}
		e.health.set(true, "gw-west-1")
		if got := join(addrs(e.ask(t, q{name: "cold.example.test.", qtype: dns.TypeA}))); got != "198.51.100.31" {
			t.Fatalf("after west's first verdict: got %q, want west", got)
		}
	})
	t.Run("a verdict change shows in the very next answer", func(t *testing.T) {
		e := newEnv(t)
		for i, step := range []struct {
			up   bool
			want string
		}{{true, "198.51.100.11 198.51.100.12"}, {false, "198.51.100.31 198.51.100.32"}, {true, "198.51.100.11 198.51.100.12"}} {
			e.health.set(step.up, "gw-hq-1", "gw-hq-2")
			if got := join(addrs(e.ask(t, q{name: "desktop.example.test.", qtype: dns.TypeA}))); got != step.want {
				t.Fatalf("step %d (hq up %v): got %q, want %q", i, step.up, got, step.want)
			}
		}
	})
	t.Run("ANY on a GSLB name answers the A set", func(t *testing.T) {
		e := newEnv(t)
		if got := join(addrs(e.ask(t, q{name: "desktop.example.test.", qtype: dns.TypeANY}))); got != "198.51.100.11 198.51.100.12" {
			t.Fatalf("got %q", got)
		}
	})
}

func TestACME(t *testing.T) {
	e := newEnv(t)
	name := "_acme-challenge.desktop.example.test."
	if m := e.ask(t, q{name: name, qtype: dns.TypeTXT}); m.Rcode != dns.RcodeNameError {
		t.Fatalf("before: %s, want NXDOMAIN", dns.RcodeToString[m.Rcode])
	}
	p := e.h.ACME()
	recs := []libdns.Record{libdns.TXT{Name: "_acme-challenge.desktop", Text: "token-1"}, libdns.TXT{Name: "_acme-challenge.desktop", Text: "token-2"}}
	added, err := p.AppendRecords(context.Background(), "example.test.", recs)
	if err != nil || len(added) != 2 {
		t.Fatalf("AppendRecords = %v, %v", added, err)
	}
	m := e.ask(t, q{name: strings.ToUpper(name), qtype: dns.TypeTXT})
	if m.Rcode != dns.RcodeSuccess || len(m.Answer) != 2 || m.Answer[0].(*dns.TXT).Txt[0] != "token-1" || m.Answer[0].Header().Ttl != 60 {
		t.Fatalf("after append: %v", m)
	}
	if m := e.ask(t, q{name: name, qtype: dns.TypeA}); m.Rcode != dns.RcodeSuccess || len(m.Answer) != 0 {
		t.Fatalf("A of a challenge name: %v, want NODATA", m)
	}
	deleted, err := p.DeleteRecords(context.Background(), "example.test.", recs[:1])
	if err != nil || len(deleted) != 1 {
		t.Fatalf("DeleteRecords = %v, %v", deleted, err)
	}
	if m := e.ask(t, q{name: name, qtype: dns.TypeTXT}); len(m.Answer) != 1 || m.Answer[0].(*dns.TXT).Txt[0] != "token-2" {
		t.Fatalf("after one delete: %v", m)
	}
	if _, err := p.DeleteRecords(context.Background(), "example.test.", recs); err != nil {
		t.Fatal(err)
	}
	if m := e.ask(t, q{name: name, qtype: dns.TypeTXT}); m.Rcode != dns.RcodeNameError {
		t.Fatalf("after removing all: %s, want NXDOMAIN", dns.RcodeToString[m.Rcode])
	}
	if err := e.h.AddTXT("www.example.test.", "x", 0); !errors.Is(err, ErrNotChallenge) {
		t.Fatalf("AddTXT of a non-challenge name: %v, want %v", err, ErrNotChallenge)
	}
	if err := e.h.AddTXT("_acme-challenge.example.org.", "x", 0); !errors.Is(err, ErrNotOurs) {
		t.Fatalf("AddTXT outside our domains: %v, want %v", err, ErrNotOurs)
	}
}

func TestMetrics(t *testing.T) {
	e := newEnv(t)
	e.ask(t, q{name: "desktop.example.test.", qtype: dns.TypeA, from: eastResolver})
	e.ask(t, q{name: "desktop.example.test.", qtype: dns.TypeA, from: eastResolver})
	e.ask(t, q{name: "nope.example.test.", qtype: dns.TypeA})
	e.ask(t, q{name: "example.org.", qtype: dns.TypeMX})
	want := `
# HELP frontdoor_dns_queries_total DNS queries answered, by query type and response code.
# TYPE frontdoor_dns_queries_total counter
frontdoor_dns_queries_total{rcode="NOERROR",type="A"} 2
frontdoor_dns_queries_total{rcode="NXDOMAIN",type="A"} 1
frontdoor_dns_queries_total{rcode="REFUSED",type="MX"} 1
# HELP frontdoor_gslb_answers_total GSLB answers by name, answering site (fail_open: every address; none: SERVFAIL) and client zone.
# TYPE frontdoor_gslb_answers_total counter
frontdoor_gslb_answers_total{client_zone="east",name="desktop.example.test.",site="east"} 2
`
	if err := testutil.GatherAndCompare(e.reg, strings.NewReader(want), "frontdoor_dns_queries_total", "frontdoor_gslb_answers_total"); err != nil {
		t.Fatal(err)
	}
}

func TestNewNeedsZones(t *testing.T) {
	e := newEnv(t)
	if _, err := New(e.cfg, Options{}); !errors.Is(err, ErrNoZones) {
		t.Fatalf("New without zones: %v, want %v", err, ErrNoZones)
	}
	zm, _ := zonemap.FromConfig(e.cfg)
	if _, err := New(e.cfg, Options{Zones: zm, Registry: e.reg}); err == nil {
		t.Fatal("registering the metrics twice on one registry did not fail")
	}
}

func TestQueryLogIsSampled(t *testing.T) {
	e := newEnv(t)
	var buf strings.Builder
	zm, _ := zonemap.FromConfig(e.cfg)
	h, err := New(e.cfg, Options{Zones: zm, Health: e.health, QueryLogSample: 2,
		Logger: slog.New(slog.NewTextHandler(&buf, nil))})
	if err != nil {
		t.Fatal(err)
	}
	e.h = h
	for i := 0; i < 4; i++ {
		e.ask(t, q{name: "desktop.example.test.", qtype: dns.TypeA, from: eastResolver})
	}
	lines := strings.Split(strings.TrimSpace(buf.String()), "\n")
	if len(lines) != 2 || !strings.Contains(lines[0], "zone=east") || !strings.Contains(lines[0], "site=east") || !strings.Contains(lines[0], "component=gslb") {
		t.Fatalf("query log of 4 queries sampled 1 in 2:\n%s", buf.String())
	}
}
