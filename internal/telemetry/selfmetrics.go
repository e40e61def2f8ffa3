package telemetry

import (
	"runtime"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// SelfMetrics are the series about levee itself rather than its traffic:
// which build runs, and how the last configuration load went (the
// LeveeConfigReloadFailed alert reads them). The gateway reports its
// loads here.
type SelfMetrics struct {
	version      string                 // levee's version ("dev" when not set at build time)
	reloads      *prometheus.CounterVec // result: success, error
	reloadTime   prometheus.Gauge
	reloadResult prometheus.Gauge
}

// reloadResults are the result labels of levee_config_reloads_total, each
// declared at 0 at start so that increase() sees the first reload.
var reloadResults = []string{"success", "error"}

// NewSelfMetrics registers levee's own series in reg: build info with
// version (empty: "dev") and the Go version, the reload counter, and the
// last reload's time and result, which start as the load that New did
// (a successful one, now).
func NewSelfMetrics(reg prometheus.Registerer, version string, now time.Time) (*SelfMetrics, error) {
	if version == "" {
		version = "dev"
	}
	m := &SelfMetrics{
		version: version,
		reloads: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "levee_config_reloads_total",
			Help: "Configuration reloads, by result (success or error). On error the previous configuration keeps serving.",
		}, []string{"result"}),
		reloadTime: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "levee_config_last_reload_timestamp_seconds",
			Help: "When the configuration was last loaded or a reload last attempted (Unix seconds); levee's start counts as a load.",
		}),
		reloadResult: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "levee_config_last_reload_success",
			Help: "1 if the last configuration load or reload succeeded (levee's start counts as one), 0 if the last reload was refused: the previous configuration keeps serving until a reload succeeds.",
		}),
	}
	info := prometheus.NewGauge(prometheus.GaugeOpts{
		Name:        "levee_build_info",
		Help:        "Always 1; its labels say which levee runs: version (set at build time) and go (the Go version it was built with).",
		ConstLabels: prometheus.Labels{"version": version, "go": runtime.Version()},
	})
	info.Set(1)
	for _, r := range reloadResults {
		m.reloads.WithLabelValues(r)
	}
	m.last(true, now) // the start's load: not counted as a reload
	for _, c := range []prometheus.Collector{m.reloads, m.reloadTime, m.reloadResult, info} {
		if err := reg.Register(c); err != nil {
			return nil, err
		}
	}
	return m, nil
}

// Version is levee's version as build info reports it ("dev" when not
// set at build time).
func (m *SelfMetrics) Version() string { return m.version }

// Reloaded counts a reload and records its result at now: refused with
// err, successful when err is nil. It returns the result's label,
// "success" or "error".
func (m *SelfMetrics) Reloaded(err error, now time.Time) string {
	ok, result := err == nil, "error"
	if ok {
		result = "success"
	}
	m.reloads.WithLabelValues(result).Inc()
	m.last(ok, now)
	return result
}

// last sets the last load's time and result.
func (m *SelfMetrics) last(ok bool, now time.Time) {
	v := 0.0
	if ok {
		v = 1
	}
	m.reloadTime.Set(float64(now.UnixNano()) / 1e9)
	m.reloadResult.Set(v)
}
