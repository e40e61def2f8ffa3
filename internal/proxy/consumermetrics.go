package proxy

import "github.com/prometheus/client_golang/prometheus"

// The consumer state is bounded (a capacity per rate-limit table, a size
// per replay cache) and evicts when full; these series make the evictions
// visible, since each one forgives some state: an evicted busy rate-limit
// key starts again with a full burst, and an evicted signature could be
// replayed until its date goes stale.
var (
	rateLimitEvictionsDesc = prometheus.NewDesc("levee_ratelimit_evictions_total",
		"Rate-limit keys removed to make room for new ones, by table (app, anonymous) and state: idle (its bucket was full again, nothing lost) or busy (its next request starts with a full burst).",
		[]string{"table", "state"}, nil)
	noncesDesc = prometheus.NewDesc("levee_hmac_nonces",
		"Signatures held in the HMAC replay cache.", nil, nil)
	noncesEvictedDesc = prometheus.NewDesc("levee_hmac_nonces_evicted_total",
		"Signatures forgotten before their date went stale because the replay cache was full; each could have been replayed until then.", nil, nil)
)

// ConsumerStateCollector reports the evictions of the Handler's rate-limit
// tables and HMAC replay cache, read at scrape time from their counters.
func (h *Handler) ConsumerStateCollector() prometheus.Collector { return consumerStateCollector{h} }

type consumerStateCollector struct{ h *Handler }

func (c consumerStateCollector) Describe(ch chan<- *prometheus.Desc) {
	ch <- rateLimitEvictionsDesc
	ch <- noncesDesc
	ch <- noncesEvictedDesc
	ch <- authRequestsDesc
	ch <- authFailuresDesc
}

func (c consumerStateCollector) Collect(ch chan<- prometheus.Metric) {
	cs := c.h.consumers
	app, anon, subj := cs.appLimits.Stats(), cs.anonLimits.Stats(), cs.subjectLimits.Stats()
	for _, t := range []struct {
		table     string
		all, busy uint64
	}{{"app", app.Evictions, app.EvictedBusy}, {"anonymous", anon.Evictions, anon.EvictedBusy}, {"subject", subj.Evictions, subj.EvictedBusy}} {
		ch <- prometheus.MustNewConstMetric(rateLimitEvictionsDesc, prometheus.CounterValue, float64(t.all-t.busy), t.table, "idle")
		ch <- prometheus.MustNewConstMetric(rateLimitEvictionsDesc, prometheus.CounterValue, float64(t.busy), t.table, "busy")
	}
	v := cs.verifier.Stats()
	ch <- prometheus.MustNewConstMetric(noncesDesc, prometheus.GaugeValue, float64(v.Nonces))
	ch <- prometheus.MustNewConstMetric(noncesEvictedDesc, prometheus.CounterValue, float64(v.NoncesEvicted))
	cs.auth.collect(ch)
}
