package gslb

import (
	"net"
	"net/netip"
	"sync/atomic"
	"testing"
	"time"

	"github.com/frontdoor-vdi/frontdoor/internal/testunbound"
	"github.com/miekg/dns"
)

// tamperer relays DNS datagrams from a resolver to the server at upstream; while on, it
// changes the address of every A record of its answers, leaving the signatures as they were.
type tamperer struct {
	pc       net.PacketConn
	upstream string
	on       atomic.Bool
}

func startTamperer(t *testing.T, upstream string) *tamperer {
	t.Helper()
	pc, err := net.ListenPacket("udp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	tp := &tamperer{pc: pc, upstream: upstream}
	t.Cleanup(func() { pc.Close() })
	go func() {
		buf := make([]byte, 65535)
		for {
			n, from, err := pc.ReadFrom(buf)
			if err != nil {
				return
			}
			req := append([]byte(nil), buf[:n]...)
			go func() {
				c, err := net.Dial("udp", tp.upstream)
				if err != nil {
					return
				}
				defer c.Close()
				c.SetDeadline(time.Now().Add(2 * time.Second))
				c.Write(req)
				rb := make([]byte, 65535)
				rn, err := c.Read(rb)
				if err != nil {
					return
				}
				reply := rb[:rn]
				if tp.on.Load() {
					var m dns.Msg
					if m.Unpack(reply) == nil {
						for _, rr := range m.Answer {
							if a, ok := rr.(*dns.A); ok {
								a.A = net.IPv4(203, 0, 113, 66)
							}
						}
						if b, err := m.Pack(); err == nil {
							reply = b
						}
					}
				}
				pc.WriteTo(reply, from)
			}()
		}
	}()
	return tp
}

// startUnbound runs unbound validating signed.test, served at stub, from the trust anchor ds.
func startUnbound(t *testing.T, ds, stub string) string {
	t.Helper()
	return testunbound.Start(t, testunbound.Options{Zone: "signed.test.", Anchor: ds, Server: netip.MustParseAddrPort(stub)})
}

// A real validating resolver (unbound, with the domain's DS as its trust anchor) validates
// the signed answers — a GSLB answer, a missing name, NODATA, an answer changed by a
// failover — and refuses an answer changed on the way.
func TestUnboundValidatesTheSignedAnswers(t *testing.T) {
	e, _ := signedEnv(t)
	srv := startServer(t, e)
	tp := startTamperer(t, srv.UDPAddr().String())
	ds := e.h.DS()
	if len(ds) != 1 {
		t.Fatalf("DS %v", ds)
	}
	resolver := startUnbound(t, ds[0], tp.pc.LocalAddr().String())
	ask := func(name string, qtype uint16) *dns.Msg {
		t.Helper()
		m := new(dns.Msg)
		m.SetQuestion(name, qtype)
		m.SetEdns0(1232, true)
		r := exchange(t, &dns.Client{Timeout: 5 * time.Second}, m, resolver)
		return r
	}
	for _, tc := range []struct {
		what  string
		name  string
		qtype uint16
		rcode int
		n     int // answers
	}{
		{"a GSLB answer", "desktop.signed.test.", dns.TypeA, dns.RcodeSuccess, 1},
		{"a CNAME to it", "www.signed.test.", dns.TypeA, dns.RcodeSuccess, 2},
		{"a static record", "ns1.signed.test.", dns.TypeA, dns.RcodeSuccess, 1},
		{"a missing name (NODATA: the black lie)", "nothing.signed.test.", dns.TypeA, dns.RcodeSuccess, 0},
		{"NODATA at a GSLB name", "desktop.signed.test.", dns.TypeMX, dns.RcodeSuccess, 0},
		{"NODATA at an empty non-terminal", "deep.signed.test.", dns.TypeA, dns.RcodeSuccess, 0},
		{"the DNSKEY set", "signed.test.", dns.TypeDNSKEY, dns.RcodeSuccess, 1},
		{"the CAA set", "signed.test.", dns.TypeCAA, dns.RcodeSuccess, 2},
	} {
		r := ask(tc.name, tc.qtype)
		answers := 0
		for _, rr := range r.Answer {
			if rr.Header().Rrtype != dns.TypeRRSIG {
				answers++
			}
		}
		if r.Rcode != tc.rcode || !r.AuthenticatedData || answers != tc.n {
			t.Fatalf("%s: %s, AD %v, %d answers; want %s, AD, %d answers\n%s", tc.what, dns.RcodeToString[r.Rcode], r.AuthenticatedData, answers,
				dns.RcodeToString[tc.rcode], tc.n, r)
		}
	}
	// A failover changes the answer; it validates too.
	e.health.set(false, "gw-hq")
	if r := ask("desktop.signed.test.", dns.TypeA); !r.AuthenticatedData || len(addrs(r)) != 1 || addrs(r)[0] != "192.0.2.21" {
		t.Fatalf("after a failover: %s", r)
	}
	// An answer changed on its way to the resolver: bogus, SERVFAIL.
	tp.on.Store(true)
	if r := ask("desktop.signed.test.", dns.TypeA); r.Rcode != dns.RcodeServerFailure {
		t.Fatalf("a tampered answer: %s, want SERVFAIL\n%s", dns.RcodeToString[r.Rcode], r)
	}
}

// A rollover as a validating resolver sees it: while it is under way, a resolver trusting the
// old key's DS and one trusting the new key's both validate; once finished, the new key's
// validates and the old key's finds its key gone (SERVFAIL), so the old key signs no more.
func TestUnboundFollowsARollover(t *testing.T) {
	e, _ := signedEnv(t)
	srv := startServer(t, e)
	set, err := NewKeySet(time.Now())
	if err != nil {
		t.Fatal(err)
	}
	apply := func(s KeySet) []keyInfo { return useKeySet(t, e.h, "signed.test.", s) }
	ask := func(resolver string) *dns.Msg {
		t.Helper()
		m := new(dns.Msg)
		m.SetQuestion("desktop.signed.test.", dns.TypeA)
		m.SetEdns0(1232, true)
		return exchange(t, &dns.Client{Timeout: 5 * time.Second}, m, resolver)
	}
	old := apply(set)[0].DS
	if set, err = set.Rollover(time.Now()); err != nil {
		t.Fatal(err)
	}
	incoming := apply(set)[1].DS
	for what, ds := range map[string]string{"the old DS": old, "the new DS": incoming} {
		if r := ask(startUnbound(t, ds, srv.UDPAddr().String())); r.Rcode != dns.RcodeSuccess || !r.AuthenticatedData {
			t.Fatalf("under way, a resolver trusting %s: %s, AD %v\n%s", what, dns.RcodeToString[r.Rcode], r.AuthenticatedData, r)
		}
	}
	if set, err = set.Finish(); err != nil {
		t.Fatal(err)
	}
	apply(set)
	if r := ask(startUnbound(t, incoming, srv.UDPAddr().String())); r.Rcode != dns.RcodeSuccess || !r.AuthenticatedData {
		t.Fatalf("finished, a resolver trusting the new DS: %s, AD %v\n%s", dns.RcodeToString[r.Rcode], r.AuthenticatedData, r)
	}
	if r := ask(startUnbound(t, old, srv.UDPAddr().String())); r.Rcode != dns.RcodeServerFailure {
		t.Fatalf("finished, a resolver trusting the old DS: %s, want SERVFAIL\n%s", dns.RcodeToString[r.Rcode], r)
	}
}

// A validating resolver that passes its clients' subnets on (unbound's subnetcache, EDNS
// Client Subnet) validates the answer chosen for each client's zone: two clients, two
// answers, both signed and both validated.
func TestUnboundValidatesECSScopedAnswers(t *testing.T) {
	e, _ := signedEnv(t)
	srv := startServer(t, e)
	resolver := testunbound.Start(t, testunbound.Options{Zone: "signed.test.", Anchor: e.h.DS()[0], Server: netip.MustParseAddrPort(srv.UDPAddr().String()), ClientSubnet: true})
	for _, tc := range []struct{ ecs, want string }{{"10.1.2.0/24", "192.0.2.11"}, {"10.2.2.0/24", "192.0.2.21"}} {
		m := new(dns.Msg)
		m.SetQuestion("desktop.signed.test.", dns.TypeA)
		m.SetEdns0(1232, true)
		_, n, _ := net.ParseCIDR(tc.ecs)
		m.IsEdns0().Option = append(m.IsEdns0().Option, &dns.EDNS0_SUBNET{Code: dns.EDNS0SUBNET, Family: 1, SourceNetmask: 24, Address: n.IP.To4()})
		r := exchange(t, &dns.Client{Timeout: 5 * time.Second}, m, resolver)
		if got := addrs(r); r.Rcode != dns.RcodeSuccess || !r.AuthenticatedData || len(got) != 1 || got[0] != tc.want {
			t.Fatalf("client %s: %s, AD %v, %v; want %s, AD\n%s", tc.ecs, dns.RcodeToString[r.Rcode], r.AuthenticatedData, got, tc.want, r)
		}
	}
}
