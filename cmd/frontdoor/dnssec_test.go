package main

import (
	"encoding/json"
	"net"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/frontdoor-vdi/frontdoor/wire"
	"github.com/miekg/dns"
)

const dnssecSite = `
site: {name: dnssec-test}
zones: [{name: hq, primary: true, ranges: [127.0.0.0/8]}]
nodes:
  - name: fd-1
    zone: hq
    listeners: [{kind: admin, address: "127.0.86.1:ADMIN"}, {kind: dns, address: "127.0.86.1:DNS"}]
gateways: [{name: gw, zone: hq, address: 127.0.86.3}]
gslb:
  domains: [{name: vdi.example.test., dnssec: true}]
  names: [{name: desktop.vdi.example.test., sites: [{zone: hq, gateways: [gw]}]}]
users: [{name: admin, admin: true, password_hash: "$2a$10$hmIm37EQl2GI6WzyFg.kUe2OoNhztKxrxmbZEcRHkzoi.ekBqG9n2"}]
`

// parentDNS is the DNS server of a signed domain's parent on loopback: it answers the DS
// records it is given.
type parentDNS struct {
	addr string
	mu   sync.Mutex // guards ds
	ds   []string
}

func startParentDNS(t *testing.T) *parentDNS {
	t.Helper()
	pc, err := net.ListenPacket("udp", "127.0.86.1:0")
	if err != nil {
		t.Fatal(err)
	}
	p := &parentDNS{addr: pc.LocalAddr().String()}
	srv := &dns.Server{PacketConn: pc, Handler: dns.HandlerFunc(func(w dns.ResponseWriter, req *dns.Msg) {
		m := new(dns.Msg)
		m.SetReply(req)
		p.mu.Lock()
		for _, s := range p.ds {
			if rr, err := dns.NewRR(s); err == nil {
				m.Answer = append(m.Answer, rr)
			}
		}
		p.mu.Unlock()
		w.WriteMsg(m)
	})}
	go srv.ActivateAndServe()
	t.Cleanup(func() { srv.Shutdown() })
	return p
}

func (p *parentDNS) publish(ds ...string) {
	p.mu.Lock()
	p.ds = ds
	p.mu.Unlock()
}

// An operator rolls a signed domain's key over from the CLI: the new key is published and
// signs beside the old one; --finish is refused while the parent does not publish the new DS
// and taken once it does; the old key is then gone from the DNSKEY set, and the new one stays
// after a restart.
func TestADNSSECRolloverFromTheCLI(t *testing.T) {
	admin, dnsPort := freePort(t), freePort(t)
	file := writeConfig(t, strings.NewReplacer("ADMIN", admin, "DNS", dnsPort).Replace(dnssecSite))
	sv := startServe(t, file)
	parent := startParentDNS(t)

	show := func(sv *served) wire.DNSSECDomain {
		t.Helper()
		out, err := adminCLI(t, sv, admin, "dnssec")
		var ds []wire.DNSSECDomain
		if err != nil || json.Unmarshal(out, &ds) != nil || len(ds) != 1 || ds[0].Domain != "vdi.example.test." {
			t.Fatalf("admin dnssec: %v %s", err, out)
		}
		return ds[0]
	}
	published := func() []uint16 {
		t.Helper()
		m := new(dns.Msg)
		m.SetQuestion("vdi.example.test.", dns.TypeDNSKEY)
		m.SetEdns0(1232, true)
		r, _, err := (&dns.Client{Timeout: 5 * time.Second}).Exchange(m, "127.0.86.1:"+dnsPort)
		if err != nil {
			t.Fatal(err)
		}
		var tags []uint16
		for _, rr := range r.Answer {
			if k, ok := rr.(*dns.DNSKEY); ok {
				tags = append(tags, k.KeyTag())
			}
		}
		return tags
	}

	first := show(sv)
	if len(first.Keys) != 1 || first.Keys[0].State != "active" || !strings.Contains(first.Next, first.Keys[0].DS) {
		t.Fatalf("a new signed domain: %+v", first)
	}
	old := first.Keys[0]
	if out, err := adminCLI(t, sv, admin, "dnssec", "rollover", "vdi.example.test", "--finish", "--resolver", parent.addr); err == nil ||
		!strings.Contains(err.Error(), "no rollover") {
		t.Fatalf("--finish with no rollover under way: %v %s", err, out)
	}

	out, err := adminCLI(t, sv, admin, "dnssec", "rollover", "VDI.example.test.")
	var rolling wire.DNSSECDomain
	if err != nil || json.Unmarshal(out, &rolling) != nil || len(rolling.Keys) != 2 || rolling.Keys[0].Tag != old.Tag {
		t.Fatalf("rollover: %v %s", err, out)
	}
	in := rolling.Keys[1]
	if in.State != "incoming" || !strings.Contains(rolling.Next, in.DS) {
		t.Fatalf("under way: %+v", rolling)
	}
	if tags := published(); len(tags) != 2 {
		t.Fatalf("under way the DNSKEY set holds keys %v, want %d and %d", tags, old.Tag, in.Tag)
	}
	if out, err := adminCLI(t, sv, admin, "dnssec", "rollover", "vdi.example.test"); err == nil || !strings.Contains(string(out), "under way") {
		t.Fatalf("a second rollover while one is under way: %v %s", err, out)
	}

	// The parent still publishes the old DS: --finish refuses, and changes nothing.
	parent.publish(old.DS)
	out, err = adminCLI(t, sv, admin, "dnssec", "rollover", "vdi.example.test", "--finish", "--resolver", parent.addr)
	if err == nil || !strings.Contains(err.Error(), "does not publish") {
		t.Fatalf("--finish before the parent has the new DS: %v %s", err, out)
	}
	if d := show(sv); len(d.Keys) != 2 {
		t.Fatalf("after a refused --finish: %+v", d)
	}

	// The parent publishes the new DS: --finish retires the old key.
	parent.publish(in.DS)
	out, err = adminCLI(t, sv, admin, "dnssec", "rollover", "vdi.example.test", "--finish", "--resolver", parent.addr)
	var done wire.DNSSECDomain
	if err != nil || json.Unmarshal(out, &done) != nil || len(done.Keys) != 1 || done.Keys[0].Tag != in.Tag || done.Keys[0].State != "active" {
		t.Fatalf("--finish once the parent has the new DS: %v %s", err, out)
	}
	if tags := published(); len(tags) != 1 || tags[0] != in.Tag {
		t.Fatalf("finished, the DNSKEY set holds keys %v, want %d", tags, in.Tag)
	}
	if out, err := adminCLI(t, sv, admin, "dnssec", "rollover", "example.test"); err == nil || !strings.Contains(string(out), "not a GSLB domain signed") {
		t.Fatalf("a rollover of a domain that is not signed: %v %s", err, out)
	}

	// The audit log names both steps.
	out, err = adminCLI(t, sv, admin, "audit")
	if err != nil || !strings.Contains(string(out), "dnssec.rollover.finish") || !strings.Contains(string(out), "dnssec.rollover ") {
		t.Fatalf("the audit log: %v\n%s", err, out)
	}

	// A restart keeps the new key.
	sv.stop()
	<-sv.done
	sv2 := startServeIn(t, file, sv.data)
	if d := show(sv2); len(d.Keys) != 1 || d.Keys[0].Tag != in.Tag {
		t.Fatalf("after a restart: %+v", d)
	}
}
