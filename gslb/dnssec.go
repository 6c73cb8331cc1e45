package gslb

import (
	"crypto"
	"crypto/ecdsa"
	"crypto/elliptic"
	"encoding/base64"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/miekg/dns"
)

// Online DNSSEC signing of the domains configured with dnssec: every answer to a query that
// asks for DNSSEC (the DO bit) carries signatures over its RRsets, made as the answer is
// chosen (per client zone, per health) and kept per RRset while they are fresh. An ECDSA
// P-256 key signs both a domain's DNSKEY set and its data (a combined signing key, flags
// 257); while a key is rolled over (KeySet) the old and the new key both sign every RRset,
// so that a resolver that trusts either one's DS validates every answer. Denial of existence is by NSEC "black lies" (as Cloudflare's, in the spirit of RFC
// 4470's minimally covering records): the NSEC of a negative answer is owned by the name
// asked and covers it alone (next name "\000.name"), listing the types the name has; a name
// that does not exist answers NODATA with an NSEC listing only RRSIG and NSEC. Nothing is
// precomputed, no zone is walked, and no other name is revealed.

// ErrNoKey is returned when a domain is configured with dnssec but Options.Keys has no key.
var ErrNoKey = errors.New("no DNSSEC key")

// Signature validity: signatures are made valid from an hour ago (clock skew) for a week,
// and made again once less than half of that is left.
const (
	sigBefore   = time.Hour
	sigValidity = 7 * 24 * time.Hour
	sigRenew    = sigValidity / 2
	// sigCacheMax bounds the kept signatures; the cache starts afresh when it is full.
	sigCacheMax = 1 << 15
	// dnskeyTTL is the TTL of the DNSKEY set.
	dnskeyTTL = 3600
)

// zoneKey is a signed domain's key.
type zoneKey struct {
	signer crypto.Signer
	dnskey *dns.DNSKEY
	tag    uint16
}

// newZoneKey returns apex's key for k, an ECDSA P-256 key.
func newZoneKey(apex string, k crypto.Signer) (*zoneKey, error) {
	pub, ok := k.Public().(*ecdsa.PublicKey)
	if !ok || pub.Curve != elliptic.P256() {
		return nil, fmt.Errorf("%s: the DNSSEC key must be ECDSA P-256", apex)
	}
	point, err := pub.Bytes() // 0x04 || X || Y
	if err != nil {
		return nil, err
	}
	dk := &dns.DNSKEY{Hdr: dns.RR_Header{Name: apex, Rrtype: dns.TypeDNSKEY, Class: dns.ClassINET, Ttl: dnskeyTTL},
		Flags: dns.ZONE | dns.SEP, Protocol: 3, Algorithm: dns.ECDSAP256SHA256, PublicKey: base64.StdEncoding.EncodeToString(point[1:])}
	return &zoneKey{signer: k, dnskey: dk, tag: dk.KeyTag()}, nil
}

// zoneKeys returns apex's zone keys for ks.
func zoneKeys(apex string, ks []crypto.Signer) ([]*zoneKey, error) {
	var out []*zoneKey
	for _, k := range ks {
		zk, err := newZoneKey(fqdn(strings.ToLower(apex)), k)
		if err != nil {
			return nil, err
		}
		out = append(out, zk)
	}
	return out, nil
}

// SetKeys makes keys apex's DNSSEC keys from now on (apex in any case, with or without the
// final dot): every one is published in the DNSKEY set and signs every answer. A domain of
// the configuration that is signed keeps its keys when keys is empty (an error).
func (h *Handler) SetKeys(apex string, keys []crypto.Signer) error {
	zks, err := zoneKeys(apex, keys)
	if err != nil {
		return err
	}
	if len(zks) == 0 {
		return fmt.Errorf("%s: %w", apex, ErrNoKey)
	}
	h.reloadMu.Lock()
	defer h.reloadMu.Unlock()
	next := maps.Clone(h.keys)
	next[fqdn(strings.ToLower(apex))] = zks
	return h.reloadLocked(h.cfg, next)
}

// DS returns the DS record (SHA-256) of each key of each signed domain, to publish at its
// parent.
func (h *Handler) DS() []string {
	h.reloadMu.Lock()
	defer h.reloadMu.Unlock()
	var out []string
	for _, ks := range h.keys {
		for _, k := range ks {
			out = append(out, k.dnskey.ToDS(dns.SHA256).String())
		}
	}
	slices.Sort(out)
	return out
}

// sigCache keeps the signatures made, per RRset.
type sigCache struct {
	mu   sync.Mutex // guards sigs
	sigs map[sigKey]*dns.RRSIG
}

// sigKey names a signature: the key that made it (a rolled key signs afresh) and the RRset
// it covers, in presentation form, lower case.
type sigKey struct {
	key *zoneKey
	set string
}

// signed adds DNSSEC to resp, the answer to q (name in lower case): the DNSKEY set at a signed
// apex, an NSEC that proves a negative answer, and the signatures of every RRset of a signed
// domain in the answer and authority sections.
func (h *Handler) signed(resp *dns.Msg, d *data, q dns.Question, name string) {
	dom := d.findDomain(name)
	if dom == nil || len(dom.keys) == 0 {
		return
	}
	if q.Qtype == dns.TypeDNSKEY && name == dom.name {
		resp.Rcode, resp.Answer, resp.Ns = dns.RcodeSuccess, nil, nil
		for _, zk := range dom.keys {
			k := *zk.dnskey
			k.Hdr.Name = q.Name
			resp.Answer = append(resp.Answer, &k)
		}
	}
	if negativeAnswer(resp) {
		owner := q.Name
		if n := len(resp.Answer); n > 0 {
			if cn, ok := resp.Answer[n-1].(*dns.CNAME); ok {
				owner = cn.Target // the chain ends at a name without the data
			}
		}
		if pd := d.findDomain(strings.ToLower(owner)); pd != nil && len(pd.keys) > 0 {
			types := []uint16{dns.TypeRRSIG, dns.TypeNSEC}
			if resp.Rcode == dns.RcodeNameError {
				resp.Rcode = dns.RcodeSuccess // the black lie: the name exists, with nothing asked
			} else {
				types = h.typesAt(d, strings.ToLower(owner), pd, q.Qtype, types)
			}
			slices.Sort(types)
			resp.Ns = append(resp.Ns, &dns.NSEC{Hdr: dns.RR_Header{Name: owner, Rrtype: dns.TypeNSEC, Class: dns.ClassINET, Ttl: pd.negTTL},
				NextDomain: `\000.` + owner, TypeBitMap: types})
		}
	}
	resp.Answer = h.signSection(d, resp.Answer)
	resp.Ns = h.signSection(d, resp.Ns)
}

// negativeAnswer reports whether resp is a NODATA or NXDOMAIN answer (negative puts the SOA
// last in its authority section).
func negativeAnswer(resp *dns.Msg) bool {
	n := len(resp.Ns)
	return (resp.Rcode == dns.RcodeSuccess || resp.Rcode == dns.RcodeNameError) && n > 0 && resp.Ns[n-1].Header().Rrtype == dns.TypeSOA
}

// typesAt adds to types those that name (lower case) has in dom, but not qtype, whose
// absence the NSEC proves.
func (h *Handler) typesAt(d *data, name string, dom *domain, qtype uint16, types []uint16) []uint16 {
	add := func(t uint16) {
		if t != qtype && !slices.Contains(types, t) {
			types = append(types, t)
		}
	}
	if n := d.nodes[name]; n != nil {
		for t, rrs := range n.rrs {
			if len(rrs) > 0 {
				add(t)
			}
		}
	}
	if d.names[name] != nil {
		add(dns.TypeA)
		add(dns.TypeAAAA)
	}
	if len(h.acmeTXT(name)) > 0 {
		add(dns.TypeTXT)
	}
	if name == dom.name {
		add(dns.TypeDNSKEY)
	}
	return types
}

// signSection returns rrs with the signatures of its domain's keys after every RRset of a
// signed domain.
func (h *Handler) signSection(d *data, rrs []dns.RR) []dns.RR {
	if len(rrs) == 0 {
		return rrs
	}
	out := rrs
	for i := 0; i < len(rrs); {
		j := i + 1
		for j < len(rrs) && sameSet(rrs[i], rrs[j]) {
			j++
		}
		hdr := rrs[i].Header()
		if dom := d.findDomain(strings.ToLower(hdr.Name)); dom != nil && len(dom.keys) > 0 && hdr.Rrtype != dns.TypeRRSIG {
			set := setString(rrs[i:j])
			for _, k := range dom.keys {
				if sig, err := h.signature(dom.name, k, rrs[i:j], set); err == nil {
					out = append(out, sig)
				} else {
					h.log.Warn("signing an answer", "name", hdr.Name, "type", dns.TypeToString[hdr.Rrtype], "key", k.tag, "err", err)
				}
			}
		}
		i = j
	}
	return out
}

// sameSet reports whether a and b belong to one RRset.
func sameSet(a, b dns.RR) bool {
	ha, hb := a.Header(), b.Header()
	return ha.Rrtype == hb.Rrtype && ha.Class == hb.Class && strings.EqualFold(ha.Name, hb.Name)
}

// setString is rrset in presentation form, lower case: what its signatures are kept by.
func setString(rrset []dns.RR) string {
	var b strings.Builder
	for _, rr := range rrset {
		b.WriteString(strings.ToLower(rr.String()))
		b.WriteByte('\n')
	}
	return b.String()
}

// signature returns the RRSIG of rrset (set: setString's) by k, a key of the domain signer: a
// kept one while it is fresh.
func (h *Handler) signature(signer string, k *zoneKey, rrset []dns.RR, set string) (*dns.RRSIG, error) {
	key := sigKey{k, set}
	now := time.Now()
	h.sigs.mu.Lock()
	sig := h.sigs.sigs[key]
	h.sigs.mu.Unlock()
	if sig == nil || time.Unix(int64(sig.Expiration), 0).Sub(now) < sigRenew {
		hdr := rrset[0].Header()
		sig = &dns.RRSIG{Hdr: dns.RR_Header{Ttl: hdr.Ttl}, Algorithm: dns.ECDSAP256SHA256, KeyTag: k.tag, SignerName: signer,
			Inception: uint32(now.Add(-sigBefore).Unix()), Expiration: uint32(now.Add(sigValidity).Unix())}
		if err := sig.Sign(k.signer, rrset); err != nil {
			return nil, err
		}
		h.sigs.mu.Lock()
		if len(h.sigs.sigs) >= sigCacheMax {
			h.sigs.sigs = map[sigKey]*dns.RRSIG{}
		}
		h.sigs.sigs[key] = sig
		h.sigs.mu.Unlock()
	}
	c := *sig
	c.Hdr.Name = rrset[0].Header().Name // the query's spelling
	return &c, nil
}
