package discovery

import "github.com/prometheus/client_golang/prometheus"

// Metrics are the discovery firewall's series, shared by every feed of a
// process. They live beside the feeds that count them, so the gateway
// only registers them.
type Metrics struct {
	updates  *prometheus.CounterVec // upstream, result
	rejected *prometheus.CounterVec // upstream, reason
}

// NewMetrics creates the discovery series and registers them on reg.
func NewMetrics(reg prometheus.Registerer) (*Metrics, error) {
	m := &Metrics{
		updates: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "levee_discovery_updates_total",
			Help: "Registry updates by result: applied, held (by the delta guard), or refused (whole: unreadable, malformed, too large, or every instance rejected; the last good set keeps serving).",
		}, []string{"upstream", "result"}),
		rejected: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "levee_discovery_rejected_total",
			Help: "Registry instances quarantined, by stable reason.",
		}, []string{"upstream", "reason"}),
	}
	for _, c := range []prometheus.Collector{m.updates, m.rejected} {
		if err := reg.Register(c); err != nil {
			return nil, err
		}
	}
	return m, nil
}

// updateResults are the result labels of levee_discovery_updates_total.
var updateResults = []string{"applied", "held", "refused"}

// declare creates upstream's series at 0 (every update result and every
// rejection reason), so that a rule's increase() sees the first quarantined
// instance or refused update (a series born at 1 shows no increase).
// Bounded: upstreams with discovery × (len(updateResults) + len(Reasons)).
func (m *Metrics) declare(upstream string) {
	for _, r := range updateResults {
		m.updates.WithLabelValues(upstream, r)
	}
	for _, r := range Reasons {
		m.rejected.WithLabelValues(upstream, string(r))
	}
}
