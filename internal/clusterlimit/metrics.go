package clusterlimit

import "github.com/prometheus/client_golang/prometheus"

// The help texts of the series cluster.etcd exports as well (the gateway
// registers levee_cluster_store_up{store="etcd"}, and levee_cluster_nodes
// without Redis): Prometheus refuses to register one name twice with two
// help strings, so both stores use these.
const (
	StoreUpHelp = "1 while the shared store answers; 0 while it does not: for redis, its breaker is open and cluster.redis.on_failure decides; for etcd, apps and keys serve as last seen and admin writes answer 503."
	NodesHelp   = "Live levee nodes last counted (etcd's membership with cluster.etcd, else Redis's heartbeat set; at least 1); the local fallback divides limits by it."
)

// metrics are the Limiter's Prometheus series.
type metrics struct {
	up       prometheus.Gauge
	nodes    prometheus.Gauge
	fallback *prometheus.CounterVec
	latency  *prometheus.HistogramVec
	// limitLatency is latency's op="limit" series, looked up once: it is
	// observed on every request.
	limitLatency prometheus.Observer

	reconciled   prometheus.Counter
	reconDropped *prometheus.CounterVec
}

// newMetrics builds the series, the labelled ones with their known values
// at 0 (the failure mode configured, every operation, every drop reason).
func newMetrics(mode FailureMode) metrics {
	m := metrics{
		up: prometheus.NewGauge(prometheus.GaugeOpts{
			Name:        "levee_cluster_store_up",
			Help:        StoreUpHelp,
			ConstLabels: prometheus.Labels{"store": "redis"},
		}),
		nodes: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "levee_cluster_nodes",
			Help: NodesHelp,
		}),
		fallback: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "levee_ratelimit_fallback_total",
			Help: "Rate-limit decisions taken without the shared store, by cluster.redis.on_failure mode.",
		}, []string{"mode"}),
		latency: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:        "levee_cluster_store_operation_seconds",
			Help:        "Time of one shared-store operation (limit: a request's decision; heartbeat; reconcile: one batch of quota counts made locally), failures included.",
			ConstLabels: prometheus.Labels{"store": "redis"},
			Buckets:     []float64{.0001, .00025, .0005, .001, .0025, .005, .01, .025, .05, .1, .25},
		}, []string{"op"}),
		reconciled: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "levee_ratelimit_reconciled_total",
			Help: "Requests admitted by local quotas while the shared store was away, added to its quota counters when it returned.",
		}),
		reconDropped: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "levee_ratelimit_reconcile_dropped_total",
			Help: "Requests admitted by local quotas and not added to the shared store: capacity (too many keys held), stale (their window had ended).",
		}, []string{"reason"}),
	}
	m.fallback.WithLabelValues(mode.String())
	m.limitLatency = m.latency.WithLabelValues("limit")
	for _, op := range []string{"heartbeat", "reconcile"} {
		m.latency.WithLabelValues(op)
	}
	for _, r := range []string{"capacity", "stale"} {
		m.reconDropped.WithLabelValues(r)
	}
	return m
}

func (m metrics) register(r prometheus.Registerer) error {
	for _, c := range []prometheus.Collector{m.up, m.nodes, m.fallback, m.latency, m.reconciled, m.reconDropped} {
		if err := r.Register(c); err != nil {
			return err
		}
	}
	return nil
}
