package etcd

import (
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// metrics are the store's Prometheus collectors.
type metrics struct {
	txn       *prometheus.HistogramVec // op, result
	events    prometheus.Counter
	leaders   *prometheus.CounterVec // zone
	outages   prometheus.Counter
	conflicts prometheus.Counter
}

func newMetrics(st *Store, reg prometheus.Registerer) (*metrics, error) {
	m := &metrics{
		txn: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "frontdoor_store_txn_duration_seconds",
			Help:    "Duration of the site database's transactions by operation and result (ok, conflict, full, exists, replay, error).",
			Buckets: []float64{.0005, .001, .0025, .005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5},
		}, []string{"op", "result"}),
		events: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "frontdoor_store_watch_events_total",
			Help: "Changes of the site database applied to this node's view.",
		}),
		leaders: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "frontdoor_zone_leader_changes_total",
			Help: "Zone leaderships this node's view saw begin, by zone.",
		}, []string{"zone"}),
		outages: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "frontdoor_store_outages_total",
			Help: "Outages of the site database this node brokered through from its local host cache.",
		}),
		conflicts: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "frontdoor_store_outage_conflicts_total",
			Help: "Conflicts found when an outage's changes were written back (see the status's outage.conflicts).",
		}),
	}
	if reg == nil {
		return m, nil
	}
	cols := []prometheus.Collector{m.txn, m.events, m.leaders, m.outages, m.conflicts, leaderCollector{st},
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "frontdoor_store_outage", Help: "1 while this node brokers from its local host cache (the site database is out of reach), else 0."},
			func() float64 {
				if st.outage.Load() {
					return 1
				}
				return 0
			}),
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "frontdoor_store_revision", Help: "The site database revision this node's view reflects."},
			func() float64 { return float64(st.revision()) }),
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "frontdoor_store_sessions", Help: "Sessions in this node's view of the site."},
			func() float64 {
				st.mu.Lock()
				defer st.mu.Unlock()
				return float64(len(st.sessions))
			}),
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "frontdoor_store_nodes", Help: "Nodes present in the site."},
			func() float64 {
				st.mu.Lock()
				defer st.mu.Unlock()
				return float64(len(st.nodes))
			}),
	}
	for _, c := range cols {
		if err := reg.Register(c); err != nil {
			return nil, err
		}
	}
	return m, nil
}

// observe records one transaction that started at start.
func (m *metrics) observe(op, result string, start time.Time) {
	m.txn.WithLabelValues(op, result).Observe(time.Since(start).Seconds())
}

var leaderDesc = prometheus.NewDesc("frontdoor_zone_leader_since_seconds",
	"When each zone's leader took over (Unix seconds), by zone and leader, from this node's view.", []string{"zone", "node"}, nil)

// leaderCollector reports the zone leaders of the view.
type leaderCollector struct{ st *Store }

func (c leaderCollector) Describe(ch chan<- *prometheus.Desc) { ch <- leaderDesc }

func (c leaderCollector) Collect(ch chan<- prometheus.Metric) {
	for z, l := range c.st.Election().Leaders() {
		ch <- prometheus.MustNewConstMetric(leaderDesc, prometheus.GaugeValue, float64(l.Since.UnixMilli())/1000, z, l.Node)
	}
}
