package rollback

import "github.com/prometheus/client_golang/prometheus"

// Metrics are the rollback series.
type Metrics struct {
	rollbacks  *prometheus.CounterVec // kind
	refused    *prometheus.CounterVec // kind
	rolledBack prometheus.Gauge
}

// NewMetrics declares the rollback series in reg, every kind at 0.
func NewMetrics(reg prometheus.Registerer) (*Metrics, error) {
	m := &Metrics{
		rollbacks: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "levee_rollbacks_total",
			Help: "Changes levee reverted by itself because the node's health got worse after them (rollback block), by kind (reload, admin, data_api, registry).",
		}, []string{"kind"}),
		refused: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "levee_rollback_pinned_refusals_total",
			Help: "Changes refused because their content is pinned as bad (a SIGHUP re-reading the same bad file, a publish of a pinned data-API version), by kind.",
		}, []string{"kind"}),
		rolledBack: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "levee_rolled_back",
			Help: "1 while levee serves its last good configuration instead of the file on disk (the file is pinned as bad, or a crash loop was detected at start), else 0.",
		}),
	}
	for _, k := range Kinds {
		m.rollbacks.WithLabelValues(string(k))
		m.refused.WithLabelValues(string(k))
	}
	for _, c := range []prometheus.Collector{m.rollbacks, m.refused, m.rolledBack} {
		if err := reg.Register(c); err != nil {
			return nil, err
		}
	}
	return m, nil
}

// RolledBack counts one reverted change of kind.
func (m *Metrics) RolledBack(kind Kind) { m.rollbacks.WithLabelValues(string(kind)).Inc() }

// Refused counts one change of kind refused as pinned.
func (m *Metrics) Refused(kind Kind) { m.refused.WithLabelValues(string(kind)).Inc() }

// SetServingGood sets levee_rolled_back.
func (m *Metrics) SetServingGood(on bool) {
	v := 0.0
	if on {
		v = 1
	}
	m.rolledBack.Set(v)
}
