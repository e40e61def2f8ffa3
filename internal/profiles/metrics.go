package profiles

import "github.com/prometheus/client_golang/prometheus"

// Metrics count captures and skipped captures. Every label value exists
// from the start at 0, so an alert on their increase sees the first one.
type Metrics struct {
	captured *prometheus.CounterVec
	skipped  *prometheus.CounterVec
}

// NewMetrics registers levee_profiles_captured_total{trigger} and
// levee_profiles_skipped_total{reason} into reg.
func NewMetrics(reg prometheus.Registerer) (*Metrics, error) {
	m := &Metrics{
		captured: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "levee_profiles_captured_total",
			Help: "CPU profiles and goroutine dumps levee captured by itself, by trigger (cpu, shedding).",
		}, []string{"trigger"}),
		skipped: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "levee_profiles_skipped_total",
			Help: "Triggered captures not taken, by reason (interval: one was taken less than the interval ago; busy: another CPU profile was running; error).",
		}, []string{"reason"}),
	}
	for _, t := range []string{TriggerCPU, TriggerShedding} {
		m.captured.WithLabelValues(t)
	}
	for _, r := range []string{"interval", "busy", "error"} {
		m.skipped.WithLabelValues(r)
	}
	for _, c := range []prometheus.Collector{m.captured, m.skipped} {
		if err := reg.Register(c); err != nil {
			return nil, err
		}
	}
	return m, nil
}

// Record counts e.
func (m *Metrics) Record(e Event) {
	if e.Skipped != "" {
		m.skipped.WithLabelValues(e.Skipped).Inc()
		return
	}
	m.captured.WithLabelValues(e.Trigger).Inc()
}
