package netlimit

import "github.com/prometheus/client_golang/prometheus"

var (
	openDesc = prometheus.NewDesc("levee_connections_open",
		"Client connections open on the data listener now (those handed to net/http included).", nil, nil)
	acceptedDesc = prometheus.NewDesc("levee_connections_accepted_total",
		"Client connections the data listener accepted, those then refused by its connection caps included (counted in levee_refusals_total, reason connection_limit).", nil, nil)
)

// NewCollector reports the counters of the listener that ln returns at
// scrape time; both read 0 while it returns nil (before the listener
// starts).
func NewCollector(ln func() *Listener) prometheus.Collector { return collector{ln} }

type collector struct{ ln func() *Listener }

func (c collector) Describe(ch chan<- *prometheus.Desc) {
	ch <- openDesc
	ch <- acceptedDesc
}

func (c collector) Collect(ch chan<- prometheus.Metric) {
	var open int64
	var accepted uint64
	if l := c.ln(); l != nil {
		open, accepted = l.Open(), l.Accepted()
	}
	ch <- prometheus.MustNewConstMetric(openDesc, prometheus.GaugeValue, float64(open))
	ch <- prometheus.MustNewConstMetric(acceptedDesc, prometheus.CounterValue, float64(accepted))
}
