package gslb

import (
	"sync"

	"github.com/miekg/dns"
	"github.com/prometheus/client_golang/prometheus"
)

// metrics are the Handler's Prometheus collectors; nil collectors (no registry) are skipped.
type metrics struct {
	queries *prometheus.CounterVec // by type and rcode
	answers *prometheus.CounterVec // by GSLB name, site and client zone
	dropped prometheus.Counter     // queries answered with nothing (responses, write errors)

	// The caches keep the hot path off WithLabelValues' hashing; their keys are bounded by
	// the known types, the rcodes, and the configured names, sites and zones.
	queryCache  sync.Map // queryKey -> prometheus.Counter
	answerCache sync.Map // answerKey -> prometheus.Counter
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
	c, ok := m.queryCache.Load(k)
	if !ok {
		c, _ = m.queryCache.LoadOrStore(k, m.queries.WithLabelValues(typeLabel(qtype), rcodeLabel(rcode)))
	}
	c.(prometheus.Counter).Inc()
}

func (m *metrics) answer(name, site, zone string) {
	if m.answers == nil {
		return
	}
	k := answerKey{name, site, zone}
	c, ok := m.answerCache.Load(k)
	if !ok {
		c, _ = m.answerCache.LoadOrStore(k, m.answers.WithLabelValues(name, site, zone))
	}
	c.(prometheus.Counter).Inc()
}

func (m *metrics) drop() {
	if m.dropped != nil {
		m.dropped.Inc()
	}
}
