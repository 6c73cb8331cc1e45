package health

import (
	"errors"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// metrics are the Checker's Prometheus collectors.
type metrics struct {
	latency     *prometheus.HistogramVec // kind, result
	portState   *prometheus.GaugeVec     // target, port
	targetState *prometheus.GaugeVec     // target
	transitions *prometheus.CounterVec   // target, to
	passives    *prometheus.CounterVec   // target
	helds       *prometheus.CounterVec   // target
}

func newMetrics(reg prometheus.Registerer) (*metrics, error) {
	m := &metrics{
		latency: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "frontdoor_health_probe_duration_seconds",
			Help:    "Duration of health probes by kind and result (up, draining, down, timeout).",
			Buckets: []float64{.0005, .001, .0025, .005, .01, .025, .05, .1, .25, .5, 1, 2.5},
		}, []string{"kind", "result"}),
		portState: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "frontdoor_health_port_state",
			Help: "State of a target's port: 0 down, 1 draining, 2 up.",
		}, []string{"target", "port"}),
		targetState: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "frontdoor_health_target_state",
			Help: "Verdict on a target after overrides: 0 down, 1 draining, 2 up.",
		}, []string{"target"}),
		transitions: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "frontdoor_health_transitions_total",
			Help: "Changes of a target's verdict, by the new verdict.",
		}, []string{"target", "to"}),
		passives: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "frontdoor_health_passive_failures_total",
			Help: "Failures reported by consumers (ReportFailure), by target.",
		}, []string{"target"}),
		helds: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "frontdoor_health_probes_held_total",
			Help: "Probes that timed out while this process was starved for CPU, and were not counted, by target.",
		}, []string{"target"}),
	}
	if reg == nil {
		return m, nil
	}
	for _, col := range []prometheus.Collector{m.latency, m.portState, m.targetState, m.transitions, m.passives, m.helds} {
		if err := reg.Register(col); err != nil {
			return nil, err
		}
	}
	return m, nil
}

func (m *metrics) observeProbe(k Kind, err error, lat time.Duration) {
	res := "up"
	switch {
	case err == nil:
	case errors.Is(err, ErrDraining):
		res = "draining"
	case errors.Is(err, ErrTimeout):
		res = "timeout"
	default:
		res = "down"
	}
	m.latency.WithLabelValues(string(k), res).Observe(lat.Seconds())
}

func (m *metrics) setPort(target string, ps *portState) {
	m.portState.WithLabelValues(target, ps.port.ID.String()).Set(float64(ps.state))
}

func (m *metrics) setTarget(target string, s State) {
	m.targetState.WithLabelValues(target).Set(float64(s))
}

func (m *metrics) transition(target string, to State) {
	m.setTarget(target, to)
	m.transitions.WithLabelValues(target, to.String()).Inc()
}

func (m *metrics) passive(target string) { m.passives.WithLabelValues(target).Inc() }

func (m *metrics) held(target string) { m.helds.WithLabelValues(target).Inc() }
