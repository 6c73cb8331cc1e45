package proxy

import (
	"errors"

	"github.com/prometheus/client_golang/prometheus"
)

// metrics are the proxy's collectors; per-listener and per-backend children are looked up
// once and kept, so the data path never builds label sets.
type metrics struct {
	conns, bytes, errs, flows, packets *prometheus.CounterVec
	active, flowsActive                *prometheus.GaugeVec
	beConns, beBytes, beFails          *prometheus.CounterVec
	beActive                           *prometheus.GaugeVec
	affinityHits                       prometheus.Counter
}

type listenerMetrics struct {
	conns, bytesIn, bytesOut, flows, pktIn, pktOut prometheus.Counter
	active, flowsActive                            prometheus.Gauge
	errs                                           *prometheus.CounterVec
}

type backendMetrics struct {
	conns, bytesIn, bytesOut, fails prometheus.Counter
	active                          prometheus.Gauge
}

func newMetrics(reg prometheus.Registerer) (*metrics, error) {
	const ns, sub = "frontdoor", "proxy"
	cv := func(name, help string, labels ...string) *prometheus.CounterVec {
		return prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: ns, Subsystem: sub, Name: name, Help: help}, labels)
	}
	gv := func(name, help string, labels ...string) *prometheus.GaugeVec {
		return prometheus.NewGaugeVec(prometheus.GaugeOpts{Namespace: ns, Subsystem: sub, Name: name, Help: help}, labels)
	}
	m := &metrics{
		conns:       cv("connections_total", "TCP and TLS connections accepted.", "listener"),
		active:      gv("connections_active", "TCP and TLS connections open.", "listener"),
		bytes:       cv("bytes_total", "Payload bytes forwarded; direction in is client to backend.", "listener", "direction"),
		errs:        cv("errors_total", "Connections and datagrams refused or failed, by reason.", "listener", "reason"),
		flows:       cv("udp_flows_total", "UDP flows opened.", "listener"),
		flowsActive: gv("udp_flows_active", "UDP flows open.", "listener"),
		packets:     cv("udp_packets_total", "UDP datagrams forwarded; direction in is client to backend.", "listener", "direction"),
		beConns:     cv("backend_connections_total", "Connections and flows sent to a backend.", "pool", "backend"),
		beActive:    gv("backend_connections_active", "Connections and flows open to a backend.", "pool", "backend"),
		beBytes:     cv("backend_bytes_total", "Payload bytes exchanged with a backend; direction in is client to backend.", "pool", "backend", "direction"),
		beFails:     cv("backend_connect_failures_total", "Failed connects to a backend.", "pool", "backend"),
		affinityHits: prometheus.NewCounter(prometheus.CounterOpts{Namespace: ns, Subsystem: sub,
			Name: "affinity_hits_total", Help: "Connections and flows sent to a backend by client affinity."}),
	}
	if reg == nil {
		return m, nil
	}
	for _, c := range []prometheus.Collector{m.conns, m.active, m.bytes, m.errs, m.flows, m.flowsActive,
		m.packets, m.beConns, m.beActive, m.beBytes, m.beFails, m.affinityHits} {
		if err := reg.Register(c); err != nil {
			var are prometheus.AlreadyRegisteredError
			if errors.As(err, &are) {
				continue
			}
			return nil, err
		}
	}
	return m, nil
}

func (m *metrics) listener(name string) *listenerMetrics {
	return &listenerMetrics{
		conns:       m.conns.WithLabelValues(name),
		active:      m.active.WithLabelValues(name),
		bytesIn:     m.bytes.WithLabelValues(name, "in"),
		bytesOut:    m.bytes.WithLabelValues(name, "out"),
		flows:       m.flows.WithLabelValues(name),
		flowsActive: m.flowsActive.WithLabelValues(name),
		pktIn:       m.packets.WithLabelValues(name, "in"),
		pktOut:      m.packets.WithLabelValues(name, "out"),
		errs:        m.errs.MustCurryWith(prometheus.Labels{"listener": name}),
	}
}

func (l *listenerMetrics) err(reason string) { l.errs.WithLabelValues(reason).Inc() }

func (m *metrics) backend(pool, name string) *backendMetrics {
	return &backendMetrics{
		conns:    m.beConns.WithLabelValues(pool, name),
		active:   m.beActive.WithLabelValues(pool, name),
		bytesIn:  m.beBytes.WithLabelValues(pool, name, "in"),
		bytesOut: m.beBytes.WithLabelValues(pool, name, "out"),
		fails:    m.beFails.WithLabelValues(pool, name),
	}
}
