package upstream

import "github.com/prometheus/client_golang/prometheus"

// H2Metrics are the HTTP/2 pool's series, shared by every upstream of a
// process. They live beside the pool that counts them, so the gateway
// only registers them.
type H2Metrics struct {
	errors *prometheus.CounterVec // upstream, reason
}

// NewH2Metrics creates the series and registers them on reg.
func NewH2Metrics(reg prometheus.Registerer) (*H2Metrics, error) {
	m := &H2Metrics{errors: prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "levee_upstream_h2_errors_total",
		Help: "HTTP/2 upstream connections closed by levee's frame guard (ping_flood, settings_flood, reset_flood, continuation_flood) or sent a GOAWAY (goaway), by upstream and reason.",
	}, []string{"upstream", "reason"})}
	if err := reg.Register(m.errors); err != nil {
		return nil, err
	}
	return m, nil
}

// Hook declares upstream's series at 0 (every reason of H2Reasons) and
// returns the function a Transport's OnH2Error takes: it counts an error
// of any endpoint of upstream (the endpoint is not a label: the logs and
// the outlier detector name it). Bounded: upstreams × len(H2Reasons).
func (m *H2Metrics) Hook(upstream string) func(addr, reason string) {
	if m == nil {
		return nil
	}
	counters := make(map[string]prometheus.Counter, len(H2Reasons))
	for _, r := range H2Reasons {
		counters[r] = m.errors.WithLabelValues(upstream, r)
	}
	return func(_, reason string) { // counters is read-only from here
		if c, ok := counters[reason]; ok {
			c.Inc()
		}
	}
}
