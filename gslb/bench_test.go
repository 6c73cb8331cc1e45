package gslb

import (
	"net"
	"testing"

	"github.com/miekg/dns"
)

// nullWriter is a ResponseWriter that packs the reply into a reused buffer, like the wire.
type nullWriter struct {
	fakeWriter
	buf []byte
}

func (w *nullWriter) WriteMsg(m *dns.Msg) error {
	b, err := m.PackBuffer(w.buf)
	w.buf = b[:cap(b)]
	return err
}

func benchmarkServe(b *testing.B, name string, qtype uint16, ecs bool) {
	e := newEnv(b)
	req := new(dns.Msg)
	req.SetQuestion(name, qtype)
	if ecs {
		req.SetEdns0(1232, false)
		opt := req.IsEdns0()
		opt.Option = append(opt.Option, &dns.EDNS0_SUBNET{Code: dns.EDNS0SUBNET, Family: 1, SourceNetmask: 24, Address: net.IPv4(10, 2, 3, 0).To4()})
	}
	w := &nullWriter{fakeWriter: fakeWriter{remote: &net.UDPAddr{IP: net.IPv4(10, 1, 0, 53), Port: 5353}}, buf: make([]byte, 4096)}
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		e.h.ServeDNS(w, req)
	}
}

func BenchmarkServeGSLB(b *testing.B)    { benchmarkServe(b, "desktop.example.test.", dns.TypeA, false) }
func BenchmarkServeGSLBECS(b *testing.B) { benchmarkServe(b, "desktop.example.test.", dns.TypeA, true) }
func BenchmarkServeStatic(b *testing.B)  { benchmarkServe(b, "mail.example.test.", dns.TypeA, false) }
func BenchmarkServeNXDOMAIN(b *testing.B) {
	benchmarkServe(b, "nope.example.test.", dns.TypeA, false)
}
