package gslb

import (
	"strings"
	"sync"
	"sync/atomic"

	"github.com/miekg/dns"
	"github.com/prometheus/client_golang/prometheus"
)

// metrics are the Handler's Prometheus collectors; nil collectors (no registry) are skipped.
type metrics struct {
	queries *prometheus.CounterVec // by type and rcode
	answers *prometheus.CounterVec // by GSLB name, site and client zone
	dropped prometheus.Counter     // queries answered with nothing (responses, write errors)

	// The caches keep the hot path off WithLabelValues' hashing; their keys are bounded by
	// the known types, the rcodes, and the configured names, sites and zones. They are
	// copied on write, so a read is one map lookup (and the label strings do not escape).
	mu          sync.Mutex // serializes writers of the caches
	queryCache  atomic.Pointer[map[queryKey]prometheus.Counter]
	answerCache atomic.Pointer[map[answerKey]prometheus.Counter]
}

// cached returns the counter of k from the copy-on-write cache c. On a miss, miss returns the
// key to store (with its own copies of k's strings, so that k's do not escape) and the counter.
func cached[K comparable](mu *sync.Mutex, c *atomic.Pointer[map[K]prometheus.Counter], k K, miss func() (K, prometheus.Counter)) prometheus.Counter {
	if m := c.Load(); m != nil {
		if ctr, ok := (*m)[k]; ok {
			return ctr
		}
	}
	mu.Lock()
	defer mu.Unlock()
	old := c.Load()
	if old != nil {
		if ctr, ok := (*old)[k]; ok {
			return ctr
		}
	}
	nk, next := miss()
	m := map[K]prometheus.Counter{nk: next}
	if old != nil {
		for ok, ov := range *old {
			m[ok] = ov
		}
	}
	c.Store(&m)
	return next
}

type queryKey struct {
	qtype uint16
	rcode int
}

type answerKey struct{ name, site, zone string }

func newMetrics(reg *prometheus.Registry) (*metrics, error) {
	if reg == nil {
		return &metrics{}, nil
	}
	m := &metrics{
		queries: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: "frontdoor", Subsystem: "dns", Name: "queries_total",
			Help: "DNS queries answered, by query type and response code.",
		}, []string{"type", "rcode"}),
		answers: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: "frontdoor", Subsystem: "gslb", Name: "answers_total",
			Help: "GSLB answers by name, answering site (fail_open: every address; none: SERVFAIL) and client zone.",
		}, []string{"name", "site", "client_zone"}),
		dropped: prometheus.NewCounter(prometheus.CounterOpts{
			Namespace: "frontdoor", Subsystem: "dns", Name: "dropped_total",
			Help: "DNS messages dropped without an answer (responses, unwritable replies).",
		}),
	}
	for _, c := range []prometheus.Collector{m.queries, m.answers, m.dropped} {
		if err := reg.Register(c); err != nil {
			return nil, err
		}
	}
	return m, nil
}

// typeLabel keeps the type label's cardinality bounded: unknown types are "other".
func typeLabel(t uint16) string {
	if s, ok := dns.TypeToString[t]; ok {
		return s
	}
	return "other"
}

func rcodeLabel(rc int) string {
	if s, ok := dns.RcodeToString[rc]; ok {
		return s
	}
	return "other"
}

func (m *metrics) query(qtype uint16, rcode int) {
	if m.queries == nil {
		return
	}
	if _, known := dns.TypeToString[qtype]; !known {
		qtype = 0 // every unknown type shares the "other" counter
	}
	k := queryKey{qtype, rcode}
	cached(&m.mu, &m.queryCache, k, func() (queryKey, prometheus.Counter) {
		return k, m.queries.WithLabelValues(typeLabel(qtype), rcodeLabel(rcode))
	}).Inc()
}

func (m *metrics) answer(name, site, zone string) {
	if m.answers == nil {
		return
	}
	cached(&m.mu, &m.answerCache, answerKey{name, site, zone}, func() (answerKey, prometheus.Counter) {
		k := answerKey{strings.Clone(name), strings.Clone(site), strings.Clone(zone)}
		return k, m.answers.WithLabelValues(k.name, k.site, k.zone)
	}).Inc()
}

func (m *metrics) drop() {
	if m.dropped != nil {
		m.dropped.Inc()
	}
}
