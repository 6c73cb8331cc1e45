package gslb

import (
	"github.com/miekg/dns"
	"github.com/prometheus/client_golang/prometheus"
)

// metrics are the Handler's Prometheus collectors; nil collectors (no registry) are skipped.
type metrics struct {
	queries *prometheus.CounterVec // by type and rcode
	answers *prometheus.CounterVec // by GSLB name, site and client zone
	dropped prometheus.Counter     // queries answered with nothing (responses, write errors)
}

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
	if m.queries != nil {
		m.queries.WithLabelValues(typeLabel(qtype), rcodeLabel(rcode)).Inc()
	}
}

func (m *metrics) answer(name, site, zone string) {
	if m.answers != nil {
		m.answers.WithLabelValues(name, site, zone).Inc()
	}
}

func (m *metrics) drop() {
	if m.dropped != nil {
		m.dropped.Inc()
	}
}
