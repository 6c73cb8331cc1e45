package gslb

import (
	"net"
	"net/netip"
	"sort"
	"strings"
	"sync"
	"testing"

	"github.com/frontdoor-vdi/frontdoor/configs"
	"github.com/frontdoor-vdi/frontdoor/zonemap"
	"github.com/miekg/dns"
	"github.com/prometheus/client_golang/prometheus"
)

// fakeHealth is a settable Health: gateways not set have no verdict yet.
type fakeHealth struct {
	mu sync.Mutex // guards up
	up map[string]bool
}

func (f *fakeHealth) GatewayUp(gw string) (bool, bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	up, ok := f.up[gw]
	return up, ok
}

func (f *fakeHealth) set(up bool, gws ...string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.up == nil {
		f.up = map[string]bool{}
	}
	for _, g := range gws {
		f.up[g] = up
	}
}

// fakeLoad is a settable Load.
type fakeLoad map[string]int

func (f fakeLoad) SiteLoad(zone string) (int, bool) { p, ok := f[zone]; return p, ok }

var (
	_ Health = (*fakeHealth)(nil)
	_ Load   = fakeLoad(nil)
)

// fakeWriter is a dns.ResponseWriter without a socket: it packs the reply like the wire would.
type fakeWriter struct {
	remote net.Addr
	wire   []byte
	msg    *dns.Msg
}

func (w *fakeWriter) LocalAddr() net.Addr {
	if _, ok := w.remote.(*net.TCPAddr); ok {
		return &net.TCPAddr{IP: net.IPv4(127, 0, 0, 1), Port: 53}
	}
	return &net.UDPAddr{IP: net.IPv4(127, 0, 0, 1), Port: 53}
}
func (w *fakeWriter) RemoteAddr() net.Addr { return w.remote }
func (w *fakeWriter) WriteMsg(m *dns.Msg) error {
	b, err := m.Pack()
	if err != nil {
		return err
	}
	w.wire = b
	w.msg = new(dns.Msg)
	return w.msg.Unpack(b)
}
func (w *fakeWriter) Write(b []byte) (int, error) { w.wire = b; return len(b), nil }
func (w *fakeWriter) Close() error                { return nil }
func (w *fakeWriter) TsigStatus() error           { return nil }
func (w *fakeWriter) TsigTimersOnly(bool)         {}
func (w *fakeWriter) Hijack()                     {}

type env struct {
	h      *Handler
	health *fakeHealth
	load   fakeLoad
	reg    *prometheus.Registry
	cfg    *configs.Config
	rand   int // the weighted policy's next random number
}

func newEnv(t testing.TB) *env {
	t.Helper()
	cfg, err := configs.LoadFile("testdata/site.yaml")
	if err != nil {
		t.Fatal(err)
	}
	zm, err := zonemap.FromConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	e := &env{health: &fakeHealth{}, load: fakeLoad{}, reg: prometheus.NewRegistry(), cfg: cfg}
	e.h, err = New(cfg, Options{Zones: zm, Health: e.health, Load: e.load, Registry: e.reg,
		Rand: func(n int) int { return e.rand % n }})
	if err != nil {
		t.Fatal(err)
	}
	return e
}

// q is one test query.
type q struct {
	name   string
	qtype  uint16
	from   string // resolver address; default 10.1.0.53 (hq)
	tcp    bool
	edns   int    // EDNS0 buffer size; 0: no EDNS0
	ecs    string // client subnet, e.g. "10.2.3.0/24"
	modify func(*dns.Msg)
}

func (e *env) ask(t testing.TB, qq q) *dns.Msg {
	t.Helper()
	req := new(dns.Msg)
	req.SetQuestion(qq.name, qq.qtype)
	req.RecursionDesired = false
	if qq.edns > 0 || qq.ecs != "" {
		req.SetEdns0(uint16(max(qq.edns, 512)), false)
	}
	if qq.ecs != "" {
		p := netip.MustParsePrefix(qq.ecs)
		fam := uint16(1)
		if p.Addr().Is6() {
			fam = 2
		}
		opt := req.IsEdns0()
		opt.Option = append(opt.Option, &dns.EDNS0_SUBNET{Code: dns.EDNS0SUBNET, Family: fam,
			SourceNetmask: uint8(p.Bits()), Address: p.Addr().AsSlice()})
	}
	if qq.modify != nil {
		qq.modify(req)
	}
	from := qq.from
	if from == "" {
		from = "10.1.0.53"
	}
	ap := netip.AddrPortFrom(netip.MustParseAddr(from), 40000)
	w := &fakeWriter{remote: net.UDPAddrFromAddrPort(ap)}
	if qq.tcp {
		w.remote = net.TCPAddrFromAddrPort(ap)
	}
	e.h.ServeDNS(w, req)
	if w.msg == nil {
		t.Fatalf("%s %s: no reply", qq.name, dns.TypeToString[qq.qtype])
	}
	return w.msg
}

// addrs returns the answer section's A/AAAA addresses in order.
func addrs(m *dns.Msg) []string {
	var out []string
	for _, rr := range m.Answer {
		switch r := rr.(type) {
		case *dns.A:
			out = append(out, r.A.String())
		case *dns.AAAA:
			out = append(out, r.AAAA.String())
		}
	}
	return out
}

func sorted(s []string) []string {
	s = append([]string(nil), s...)
	sort.Strings(s)
	return s
}

func join(s []string) string { return strings.Join(s, " ") }

// ecsOf returns the reply's client subnet option, or nil.
func ecsOf(m *dns.Msg) *dns.EDNS0_SUBNET {
	if opt := m.IsEdns0(); opt != nil {
		for _, o := range opt.Option {
			if e, ok := o.(*dns.EDNS0_SUBNET); ok {
				return e
			}
		}
	}
	return nil
}
