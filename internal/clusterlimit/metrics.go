package clusterlimit

import (
	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
)

// levee_cluster_store_up{store} and levee_cluster_nodes, declared here
// once for both shared stores: cluster.redis (this package's Limiter) and
// cluster.etcd (the gateway hands in what clusterstore reports). Declaring
// a name twice, with two help texts or in two collectors, is refused at
// registration: that once kept a node from starting.
var (
	storeUpDesc = prometheus.NewDesc("levee_cluster_store_up",
		"1 while the shared store answers; 0 while it does not: for redis, its breaker is open and cluster.redis.on_failure decides; for etcd, apps and keys serve as last seen and admin writes answer 503.",
		[]string{"store"}, nil)
	nodesDesc = prometheus.NewDesc("levee_cluster_nodes",
		"Live levee nodes last counted (etcd's membership with cluster.etcd, else Redis's heartbeat set; at least 1); the local fallback divides limits by it.",
		nil, nil)
)

// StoreOptions are the shared stores a StoreCollector reports.
type StoreOptions struct {
	// Redis is cluster.redis's limiter; nil without it.
	Redis *Limiter
	// EtcdUp reports whether cluster.etcd's store answers; nil without
	// cluster.etcd. EtcdNodes counts the live nodes by its membership
	// (reported when there is no Redis limiter, which counts them itself
	// from the same function, Options.Nodes).
	EtcdUp    func() bool
	EtcdNodes func() int
}

// NewStoreCollector reports levee_cluster_store_up for each configured
// store and levee_cluster_nodes: the one collector of both families.
func NewStoreCollector(o StoreOptions) prometheus.Collector { return storeCollector(o) }

type storeCollector StoreOptions

func (c storeCollector) Describe(ch chan<- *prometheus.Desc) {
	ch <- storeUpDesc
	ch <- nodesDesc
}

func (c storeCollector) Collect(ch chan<- prometheus.Metric) {
	if c.Redis != nil {
		ch <- prometheus.MustNewConstMetric(storeUpDesc, prometheus.GaugeValue, gaugeValue(c.Redis.m.up), "redis")
		ch <- prometheus.MustNewConstMetric(nodesDesc, prometheus.GaugeValue, gaugeValue(c.Redis.m.nodes))
	}
	if c.EtcdUp != nil {
		up := 0.0
		if c.EtcdUp() {
			up = 1
		}
		ch <- prometheus.MustNewConstMetric(storeUpDesc, prometheus.GaugeValue, up, "etcd")
		if c.Redis == nil && c.EtcdNodes != nil {
			ch <- prometheus.MustNewConstMetric(nodesDesc, prometheus.GaugeValue, float64(c.EtcdNodes()))
		}
	}
}

// gaugeValue reads a gauge the Limiter sets.
func gaugeValue(g prometheus.Gauge) float64 {
	var m dto.Metric
	if g.Write(&m) != nil {
		return 0
	}
	return m.GetGauge().GetValue()
}

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
		// up and nodes are reported by the StoreCollector (not
		// registered here).
		up:    prometheus.NewGauge(prometheus.GaugeOpts{Name: "levee_cluster_store_up"}),
		nodes: prometheus.NewGauge(prometheus.GaugeOpts{Name: "levee_cluster_nodes"}),
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
	for _, c := range []prometheus.Collector{m.fallback, m.latency, m.reconciled, m.reconDropped} {
		if err := r.Register(c); err != nil {
			return err
		}
	}
	return nil
}
