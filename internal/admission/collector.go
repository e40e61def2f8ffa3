package admission

import (
	"iter"

	"github.com/prometheus/client_golang/prometheus"
)

var (
	inflightDesc = prometheus.NewDesc("levee_admission_inflight",
		"Requests in flight to the upstream, as its admission limiter counts them.", []string{"upstream"}, nil)
	queuedDesc = prometheus.NewDesc("levee_admission_queue_length",
		"Requests waiting in the upstream's admission queue.", []string{"upstream"}, nil)
	limitDesc = prometheus.NewDesc("levee_admission_limit",
		"The upstream's current concurrency limit (static, or found by the adaptive limiter).", []string{"upstream"}, nil)
)

// NewCollector reports, at scrape time, each limiter that limiters yields
// (upstream name, limiter; called once per scrape, so it may walk the table
// serving then). Nothing is copied on the request path: the state lives in
// the limiters.
func NewCollector(limiters iter.Seq2[string, *Limiter]) prometheus.Collector {
	return collector{limiters}
}

type collector struct{ limiters iter.Seq2[string, *Limiter] }

func (c collector) Describe(ch chan<- *prometheus.Desc) {
	ch <- inflightDesc
	ch <- queuedDesc
	ch <- limitDesc
}

func (c collector) Collect(ch chan<- prometheus.Metric) {
	for name, l := range c.limiters {
		st := l.Stats()
		ch <- prometheus.MustNewConstMetric(inflightDesc, prometheus.GaugeValue, float64(st.InFlight), name)
		ch <- prometheus.MustNewConstMetric(queuedDesc, prometheus.GaugeValue, float64(st.Queued), name)
		ch <- prometheus.MustNewConstMetric(limitDesc, prometheus.GaugeValue, float64(l.Limit()), name)
	}
}
