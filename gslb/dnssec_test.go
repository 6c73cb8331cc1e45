package gslb

import (
	"crypto"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"errors"
	"net/netip"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/frontdoor-vdi/frontdoor/configs"
	"github.com/frontdoor-vdi/frontdoor/zonemap"
	"github.com/miekg/dns"
	"github.com/prometheus/client_golang/prometheus"
)

const signedSite = `
site: {name: signed}
zones:
  - {name: hq, primary: true, ranges: [10.1.0.0/16]}
  - {name: east, ranges: [10.2.0.0/16]}
gateways:
  - {name: gw-hq, zone: hq, address: 192.0.2.11}
  - {name: gw-east, zone: east, address: 192.0.2.21}
gslb:
  domains:
    - name: signed.test
      dnssec: true
      soa: {minimum: 20s}
      records:
        - {name: ns1, type: A, value: 192.0.2.53}
        - {name: www, type: CNAME, value: desktop.signed.test.}
        - {name: gone, type: CNAME, value: nowhere.signed.test.}
        - {name: host.deep, type: A, value: 192.0.2.99}
        - {name: "@", type: CAA, value: '0 issue "letsencrypt.org"'}
        - {name: "@", type: CAA, value: '0 iodef "mailto:security@signed.test"'}
    - name: plain.test
      records:
        - {name: "@", type: A, value: 192.0.2.77}
  names:
    - name: desktop.signed.test
      sites:
        - {zone: hq, gateways: [gw-hq], fallback: [east]}
        - {zone: east, gateways: [gw-east], fallback: [hq]}
`

// signedEnv is a handler of signedSite whose signed.test is signed with a new key.
func signedEnv(t *testing.T) (*env, *dns.DNSKEY) {
	t.Helper()
	cfg, err := configs.Load("signed.yaml", []byte(signedSite))
	if err != nil {
		t.Fatal(err)
	}
	zm, err := zonemap.FromConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	e := &env{health: &fakeHealth{}, load: fakeLoad{}, reg: prometheus.NewRegistry(), cfg: cfg}
	e.h, err = New(cfg, Options{Zones: zm, Health: e.health, Load: e.load, Registry: e.reg, Keys: map[string][]crypto.Signer{"signed.test.": {key}}})
	if err != nil {
		t.Fatal(err)
	}
	return e, e.h.keys["signed.test."][0].dnskey
}

// withDO asks for DNSSEC.
func withDO(m *dns.Msg) { m.IsEdns0().SetDo() }

// verified checks every RRset of section against its RRSIG by k (the one of k's tag) and
// returns the RRsets' types.
func verified(t *testing.T, k *dns.DNSKEY, section []dns.RR) []uint16 {
	t.Helper()
	sets := map[string][]dns.RR{}
	var sigs []*dns.RRSIG
	for _, rr := range section {
		if s, ok := rr.(*dns.RRSIG); ok {
			sigs = append(sigs, s)
			continue
		}
		h := rr.Header()
		key := strings.ToLower(h.Name) + "/" + dns.TypeToString[h.Rrtype]
		sets[key] = append(sets[key], rr)
	}
	var types []uint16
	for key, set := range sets {
		var sig *dns.RRSIG
		for _, s := range sigs {
			if s.TypeCovered == set[0].Header().Rrtype && strings.EqualFold(s.Hdr.Name, set[0].Header().Name) && s.KeyTag == k.KeyTag() {
				sig = s
			}
		}
		if sig == nil {
			t.Fatalf("%s has no signature by key %d", key, k.KeyTag())
		}
		if err := sig.Verify(k, set); err != nil {
			t.Fatalf("%s: the signature does not verify: %v", key, err)
		}
		if !sig.ValidityPeriod(time.Now()) {
			t.Fatalf("%s: the signature is not valid now", key)
		}
		types = append(types, set[0].Header().Rrtype)
	}
	slices.Sort(types)
	return types
}

func nsecOf(t *testing.T, m *dns.Msg) *dns.NSEC {
	t.Helper()
	for _, rr := range m.Ns {
		if n, ok := rr.(*dns.NSEC); ok {
			return n
		}
	}
	t.Fatalf("no NSEC in %v", m.Ns)
	return nil
}

func TestSignedAnswers(t *testing.T) {
	e, k := signedEnv(t)

	// A positive GSLB answer, per client zone (ECS), each signed over what it says.
	for _, tc := range []struct{ ecs, want string }{{"10.1.2.0/24", "192.0.2.11"}, {"10.2.2.0/24", "192.0.2.21"}} {
		m := e.ask(t, q{name: "Desktop.Signed.Test.", qtype: dns.TypeA, edns: 1232, ecs: tc.ecs, modify: withDO})
		if got := addrs(m); len(got) != 1 || got[0] != tc.want || !m.IsEdns0().Do() {
			t.Fatalf("client %s: %v (DO %v), want %s with DO", tc.ecs, got, m.IsEdns0().Do(), tc.want)
		}
		if types := verified(t, k, m.Answer); !slices.Equal(types, []uint16{dns.TypeA}) {
			t.Fatalf("signed sets %v", types)
		}
	}
	// A failover changes the answer; the new one is signed too.
	e.health.set(false, "gw-hq")
	m := e.ask(t, q{name: "desktop.signed.test.", qtype: dns.TypeA, edns: 1232, ecs: "10.1.2.0/24", modify: withDO})
	if got := addrs(m); len(got) != 1 || got[0] != "192.0.2.21" {
		t.Fatalf("after gw-hq went down: %v", got)
	}
	verified(t, k, m.Answer)
	e.health.set(true, "gw-hq")

	// The DNSKEY set, signed by itself.
	m = e.ask(t, q{name: "signed.test.", qtype: dns.TypeDNSKEY, edns: 1232, modify: withDO})
	if types := verified(t, k, m.Answer); !slices.Equal(types, []uint16{dns.TypeDNSKEY}) {
		t.Fatalf("DNSKEY answer %v", m.Answer)
	}
	// The CAA set (the CAs that may issue for the domain), signed.
	m = e.ask(t, q{name: "signed.test.", qtype: dns.TypeCAA, edns: 1232, modify: withDO})
	if types := verified(t, k, m.Answer); !slices.Equal(types, []uint16{dns.TypeCAA}) || len(m.Answer) != 3 {
		t.Fatalf("CAA answer %v", m.Answer)
	}
	if c, ok := m.Answer[0].(*dns.CAA); !ok || c.Tag != "issue" || c.Value != "letsencrypt.org" || c.Flag != 0 {
		t.Fatalf("the first CAA record is %v", m.Answer[0])
	}
	// A CNAME chain: both sets signed.
	m = e.ask(t, q{name: "www.signed.test.", qtype: dns.TypeA, edns: 1232, modify: withDO})
	if types := verified(t, k, m.Answer); !slices.Equal(types, []uint16{dns.TypeA, dns.TypeCNAME}) {
		t.Fatalf("CNAME chain %v", m.Answer)
	}

	// A name that does not exist: NODATA (the black lie) proven by an NSEC that covers the
	// name alone and lists only RRSIG and NSEC.
	m = e.ask(t, q{name: "nothing.signed.test.", qtype: dns.TypeA, edns: 1232, modify: withDO})
	n := nsecOf(t, m)
	if m.Rcode != dns.RcodeSuccess || len(m.Answer) != 0 || n.NextDomain != `\000.nothing.signed.test.` ||
		!slices.Equal(n.TypeBitMap, []uint16{dns.TypeRRSIG, dns.TypeNSEC}) {
		t.Fatalf("a missing name: %s", m)
	}
	if types := verified(t, k, m.Ns); !slices.Equal(types, []uint16{dns.TypeSOA, dns.TypeNSEC}) {
		t.Fatalf("the authority's sets %v", types)
	}
	// NODATA at a GSLB name: its NSEC lists what it has, not what was asked.
	m = e.ask(t, q{name: "desktop.signed.test.", qtype: dns.TypeMX, edns: 1232, modify: withDO})
	n = nsecOf(t, m)
	if !slices.Equal(n.TypeBitMap, []uint16{dns.TypeA, dns.TypeAAAA, dns.TypeRRSIG, dns.TypeNSEC}) {
		t.Fatalf("NODATA's NSEC lists %v", n.TypeBitMap)
	}
	verified(t, k, m.Ns)
	// AAAA at a GSLB name with no IPv6 gateway: NODATA, whose NSEC does not list AAAA.
	m = e.ask(t, q{name: "desktop.signed.test.", qtype: dns.TypeAAAA, edns: 1232, modify: withDO})
	if n = nsecOf(t, m); slices.Contains(n.TypeBitMap, dns.TypeAAAA) || !slices.Contains(n.TypeBitMap, dns.TypeA) {
		t.Fatalf("AAAA NODATA's NSEC lists %v", n.TypeBitMap)
	}
	// An empty non-terminal, and the apex.
	m = e.ask(t, q{name: "deep.signed.test.", qtype: dns.TypeA, edns: 1232, modify: withDO})
	if n = nsecOf(t, m); m.Rcode != dns.RcodeSuccess || !slices.Equal(n.TypeBitMap, []uint16{dns.TypeRRSIG, dns.TypeNSEC}) {
		t.Fatalf("an empty non-terminal: %s", m)
	}
	m = e.ask(t, q{name: "signed.test.", qtype: dns.TypeA, edns: 1232, modify: withDO})
	if n = nsecOf(t, m); !slices.Equal(n.TypeBitMap, []uint16{dns.TypeNS, dns.TypeSOA, dns.TypeRRSIG, dns.TypeNSEC, dns.TypeDNSKEY, dns.TypeCAA}) {
		t.Fatalf("the apex's NSEC lists %v", n.TypeBitMap)
	}
	// A CNAME to a missing name: the proof is the target's.
	m = e.ask(t, q{name: "gone.signed.test.", qtype: dns.TypeA, edns: 1232, modify: withDO})
	if n = nsecOf(t, m); !strings.EqualFold(n.Hdr.Name, "nowhere.signed.test.") {
		t.Fatalf("a CNAME to nowhere: the NSEC is %s", n.Hdr.Name)
	}
	verified(t, k, m.Answer)
	verified(t, k, m.Ns)

	// Without DO, or in an unsigned domain: nothing added.
	m = e.ask(t, q{name: "desktop.signed.test.", qtype: dns.TypeA, edns: 1232})
	if len(m.Answer) != 1 {
		t.Fatalf("without DO: %v", m.Answer)
	}
	m = e.ask(t, q{name: "nothing.signed.test.", qtype: dns.TypeA})
	if m.Rcode != dns.RcodeNameError {
		t.Fatalf("without DO a missing name is NXDOMAIN: %s", dns.RcodeToString[m.Rcode])
	}
	m = e.ask(t, q{name: "plain.test.", qtype: dns.TypeA, edns: 1232, modify: withDO})
	if len(m.Answer) != 1 {
		t.Fatalf("an unsigned domain got %v", m.Answer)
	}
	if ds := e.h.DS(); len(ds) != 1 || !strings.HasPrefix(ds[0], "signed.test.\t") {
		t.Fatalf("DS %q", ds)
	}
}

// A DO query of a signed site takes the full path, which signs.
func TestTheFastPathLeavesSignedAnswersToTheFullPath(t *testing.T) {
	e, _ := signedEnv(t)
	req := new(dns.Msg)
	req.SetQuestion("desktop.signed.test.", dns.TypeA)
	req.SetEdns0(1232, true)
	b, _ := req.Pack()
	if _, ok := e.h.fastUDP(b, netip.MustParseAddr("10.1.0.53"), nil); ok {
		t.Fatal("the fast path answered a DO query of a signed site")
	}
	req.SetEdns0(1232, false)
	req.Extra = nil
	req.SetEdns0(1232, false)
	b, _ = req.Pack()
	if _, ok := e.h.fastUDP(b, netip.MustParseAddr("10.1.0.53"), nil); !ok {
		t.Fatal("the fast path refused a plain query")
	}
}

// A rollover: while it is under way both keys are in the DNSKEY set and each signs every
// answer, so that a resolver trusting either key's DS validates; once finished, only the new
// key is published and signs.
func TestARolloverSignsWithBothKeysUntilItIsFinished(t *testing.T) {
	e, _ := signedEnv(t)
	set, err := NewKeySet(time.Now())
	if err != nil {
		t.Fatal(err)
	}
	apply := func(s KeySet) []keyInfo { return useKeySet(t, e.h, "Signed.Test", s) }
	dnskeys := func() map[uint16]*dns.DNSKEY {
		t.Helper()
		m := e.ask(t, q{name: "signed.test.", qtype: dns.TypeDNSKEY, edns: 1232, modify: withDO})
		out := map[uint16]*dns.DNSKEY{}
		for _, rr := range m.Answer {
			if k, ok := rr.(*dns.DNSKEY); ok {
				out[k.KeyTag()] = k
			}
		}
		return out
	}
	// checkAll verifies the DNSKEY set and a GSLB answer by each of the keys tags.
	checkAll := func(tags ...uint16) {
		t.Helper()
		keys := dnskeys()
		if len(keys) != len(tags) {
			t.Fatalf("the DNSKEY set holds %d keys, want %v", len(keys), tags)
		}
		dk := e.ask(t, q{name: "signed.test.", qtype: dns.TypeDNSKEY, edns: 1232, modify: withDO})
		a := e.ask(t, q{name: "desktop.signed.test.", qtype: dns.TypeA, edns: 1232, ecs: "10.1.2.0/24", modify: withDO})
		for _, tag := range tags {
			k := keys[tag]
			if k == nil {
				t.Fatalf("key %d is not published: %v", tag, keys)
			}
			verified(t, k, dk.Answer)
			verified(t, k, a.Answer)
		}
		if sigs := len(a.Answer) - 1; sigs != len(tags) {
			t.Fatalf("the answer carries %d signatures, want %d", sigs, len(tags))
		}
	}

	first := apply(set)
	if len(first) != 1 || first[0].State != "active" || e.h.DS()[0] != first[0].DS {
		t.Fatalf("a new set: %+v, DS %q", first, e.h.DS())
	}
	checkAll(first[0].Tag)
	if _, err := set.Finish(); !errors.Is(err, ErrRollover) {
		t.Fatalf("finishing with no rollover under way: %v", err)
	}

	rolling, err := set.Rollover(time.Now())
	if err != nil {
		t.Fatal(err)
	}
	info := apply(rolling)
	if len(info) != 2 || info[0].Tag != first[0].Tag || info[0].State != "retiring" || info[1].State != "incoming" || info[1].DS == first[0].DS {
		t.Fatalf("under way: %+v", info)
	}
	checkAll(info[0].Tag, info[1].Tag)
	if _, err := rolling.Rollover(time.Now()); !errors.Is(err, ErrRollover) {
		t.Fatalf("a second rollover while one is under way: %v", err)
	}

	// The set survives its stored form.
	again, err := ParseKeySet(rolling.Marshal())
	if err != nil {
		t.Fatal(err)
	}
	done, err := again.Finish()
	if err != nil {
		t.Fatal(err)
	}
	last := apply(done)
	if len(last) != 1 || last[0].Tag != info[1].Tag || last[0].State != "active" {
		t.Fatalf("finished: %+v", last)
	}
	checkAll(last[0].Tag)
	if ds := e.h.DS(); len(ds) != 1 || ds[0] != info[1].DS {
		t.Fatalf("DS after the rollover %q, want %q", ds, info[1].DS)
	}
}

func TestABadKeySetIsRefused(t *testing.T) {
	for name, b := range map[string]string{
		"not JSON":    `{`,
		"no key":      `{"keys": []}`,
		"three keys":  `{"keys": [{"private": "AA=="}, {"private": "AA=="}, {"private": "AA=="}]}`,
		"not PKCS#8":  `{"keys": [{"private": "AAAA"}]}`,
		"no key bits": `{"keys": [{}]}`,
	} {
		if _, err := ParseKeySet([]byte(b)); err == nil {
			t.Errorf("%s: parsed", name)
		}
	}
}

// keyInfo is one key of a set, as a test checks it.
type keyInfo struct {
	Tag       uint16
	State, DS string
}

// useKeySet makes h sign apex with s and returns s's keys.
func useKeySet(t *testing.T, h *Handler, apex string, s KeySet) []keyInfo {
	t.Helper()
	signers, err := s.Signers()
	if err != nil {
		t.Fatal(err)
	}
	if err := h.SetKeys(apex, signers); err != nil {
		t.Fatal(err)
	}
	ds, err := s.DS(apex)
	if err != nil {
		t.Fatal(err)
	}
	info := make([]keyInfo, len(ds))
	for i, d := range ds {
		info[i] = keyInfo{Tag: d.KeyTag, State: s.State(i), DS: d.String()}
	}
	return info
}
