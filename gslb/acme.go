package gslb

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/libdns/libdns"
	"github.com/miekg/dns"
)

// acmeTTL is the TTL of challenge records added without one.
const acmeTTL = 60 * time.Second

// acmeRec is one run-time challenge TXT record.
type acmeRec struct {
	value string
	ttl   uint32
}

// AddTXT adds a TXT record for an ACME DNS-01 challenge. name is absolute and must start with
// the label _acme-challenge and lie inside one of our domains; ttl 0 means 60s. Adding a
// record that exists already does nothing.
func (h *Handler) AddTXT(name, value string, ttl time.Duration) error {
	owner, err := h.challengeName(name)
	if err != nil {
		return err
	}
	if ttl <= 0 {
		ttl = acmeTTL
	}
	h.acmeMu.Lock()
	defer h.acmeMu.Unlock()
	for _, r := range h.acme[owner] {
		if r.value == value {
			return nil
		}
	}
	h.acme[owner] = append(h.acme[owner], acmeRec{value: value, ttl: uint32(ttl.Seconds())})
	h.nACME.Store(int32(len(h.acme)))
	return nil
}

// RemoveTXT removes a challenge TXT record added with AddTXT and reports whether it existed.
func (h *Handler) RemoveTXT(name, value string) (bool, error) {
	owner, err := h.challengeName(name)
	if err != nil {
		return false, err
	}
	h.acmeMu.Lock()
	defer h.acmeMu.Unlock()
	recs := h.acme[owner]
	for i, r := range recs {
		if r.value == value {
			recs = append(recs[:i:i], recs[i+1:]...)
			if len(recs) == 0 {
				delete(h.acme, owner)
			} else {
				h.acme[owner] = recs
			}
			h.nACME.Store(int32(len(h.acme)))
			return true, nil
		}
	}
	return false, nil
}

func (h *Handler) challengeName(name string) (string, error) {
	owner := fqdn(name)
	if !strings.HasPrefix(owner, "_acme-challenge.") {
		return "", fmt.Errorf("%s: %w", name, ErrNotChallenge)
	}
	if h.data.Load().findDomain(owner) == nil {
		return "", fmt.Errorf("%s: %w", name, ErrNotOurs)
	}
	return owner, nil
}

// acmeTXT returns the challenge records of the lower-case owner name.
func (h *Handler) acmeTXT(name string) []acmeRec {
	if h.nACME.Load() == 0 {
		return nil
	}
	h.acmeMu.RLock()
	defer h.acmeMu.RUnlock()
	recs := h.acme[name]
	if len(recs) == 0 {
		return nil
	}
	return append([]acmeRec(nil), recs...)
}

func acmeRRs(owner string, recs []acmeRec) []dns.RR {
	var out []dns.RR
	for _, r := range recs {
		out = append(out, &dns.TXT{
			Hdr: dns.RR_Header{Name: owner, Rrtype: dns.TypeTXT, Class: dns.ClassINET, Ttl: r.ttl},
			Txt: splitTXT(r.value),
		})
	}
	return out
}

// ACME drives a Handler's challenge records through the libdns interfaces that certmagic's
// DNS-01 solver uses (libdns.RecordAppender and libdns.RecordDeleter). Only TXT records
// named _acme-challenge... are accepted.
type ACME struct {
	h *Handler
}

var (
	_ libdns.RecordAppender = (*ACME)(nil)
	_ libdns.RecordDeleter  = (*ACME)(nil)
)

// ACME returns the libdns provider of h's challenge records.
func (h *Handler) ACME() *ACME { return &ACME{h: h} }

// AppendRecords adds TXT challenge records to zone and returns those added.
func (a *ACME) AppendRecords(_ context.Context, zone string, recs []libdns.Record) ([]libdns.Record, error) {
	var done []libdns.Record
	for _, rec := range recs {
		rr := rec.RR()
		if rr.Type != "TXT" {
			return done, fmt.Errorf("appending %s record %s: %w", rr.Type, rr.Name, ErrNotChallenge)
		}
		if err := a.h.AddTXT(libdns.AbsoluteName(rr.Name, zone), rr.Data, rr.TTL); err != nil {
			return done, err
		}
		done = append(done, rec)
	}
	return done, nil
}

// DeleteRecords removes TXT challenge records from zone and returns those that existed.
func (a *ACME) DeleteRecords(_ context.Context, zone string, recs []libdns.Record) ([]libdns.Record, error) {
	var done []libdns.Record
	for _, rec := range recs {
		rr := rec.RR()
		if rr.Type != "TXT" && rr.Type != "" {
			continue
		}
		ok, err := a.h.RemoveTXT(libdns.AbsoluteName(rr.Name, zone), rr.Data)
		if err != nil {
			return done, err
		}
		if ok {
			done = append(done, rec)
		}
	}
	return done, nil
}
