package gslb

import (
	"net"
	"net/netip"
	"testing"

	"github.com/miekg/dns"
)

// FuzzServeDNS feeds arbitrary wire messages to the UDP fast path and to the handler over a
// fake UDP and TCP writer: no panic, every fast answer equals the full path's, and every reply
// packs within the size the transport allows.
func FuzzServeDNS(f *testing.F) {
	seed := func(name string, t uint16, edit func(*dns.Msg)) {
		m := new(dns.Msg)
		m.SetQuestion(name, t)
		if edit != nil {
			edit(m)
		}
		b, err := m.Pack()
		if err != nil {
			f.Fatal(err)
		}
		f.Add(b)
	}
	seed("desktop.example.test.", dns.TypeA, nil)
	seed("DESKTOP.example.test.", dns.TypeAAAA, func(m *dns.Msg) { m.SetEdns0(4096, true) })
	seed("www.example.test.", dns.TypeANY, nil)
	seed("nope.example.test.", dns.TypeMX, nil)
	seed("example.test.", dns.TypeNS, func(m *dns.Msg) { m.SetEdns0(512, false) })
	seed("desktop.example.test.", dns.TypeA, func(m *dns.Msg) {
		m.SetEdns0(1232, false)
		opt := m.IsEdns0()
		opt.Option = append(opt.Option, &dns.EDNS0_SUBNET{Code: dns.EDNS0SUBNET, Family: 1, SourceNetmask: 24, Address: net.IPv4(10, 2, 3, 0).To4()})
	})
	seed("big.example.test.", dns.TypeTXT, nil)
	f.Add([]byte{0, 1, 0, 0, 0, 1, 0, 0, 0, 0, 0, 0})

	e := newEnv(f)
	e.cfg.GSLB.Domains[0].Records = append(e.cfg.GSLB.Domains[0].Records, recordTXT("big", 3000))
	if err := e.h.Reload(e.cfg); err != nil {
		f.Fatal(err)
	}
	f.Fuzz(func(t *testing.T, wire []byte) {
		// The UDP fast path sees the raw bytes first: no panic, and any answer it gives is
		// the full path's answer.
		src := netip.MustParseAddr("10.2.0.9")
		rr := e.h.data.Load().names["rr.example.test."]
		turn := rr.rr.Load()
		fast, ok := e.h.fastUDP(wire, src, nil)
		rr.rr.Store(turn)
		if ok {
			got := new(dns.Msg)
			if err := got.Unpack(fast); err != nil {
				t.Fatalf("fast reply does not unpack: %v", err)
			}
			want := fullReply(t, e, wire, src)
			if want == nil || got.String() != want.String() {
				t.Fatalf("fast path:\n%v\nfull path:\n%v", got, want)
			}
		}
		req := new(dns.Msg)
		if err := req.Unpack(wire); err != nil {
			return
		}
		for _, tcp := range []bool{false, true} {
			w := &fakeWriter{remote: &net.UDPAddr{IP: net.IPv4(10, 2, 0, 9), Port: 5353}}
			limit := e.h.udpSize(req)
			if tcp {
				w.remote = &net.TCPAddr{IP: net.IPv4(10, 2, 0, 9), Port: 5353}
				limit = dns.MaxMsgSize
			}
			e.h.ServeDNS(w, req.Copy())
			if w.msg == nil {
				if !req.Response {
					t.Fatalf("no reply to a query: %v", req)
				}
				continue
			}
			if len(w.wire) > limit {
				t.Fatalf("reply of %d bytes over the %d byte limit (tcp %v)", len(w.wire), limit, tcp)
			}
			if w.msg.Id != req.Id || !w.msg.Response {
				t.Fatalf("reply id %d response %v to query id %d", w.msg.Id, w.msg.Response, req.Id)
			}
		}
	})
}
