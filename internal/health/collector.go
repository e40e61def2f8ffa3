package health

import (
	"iter"

	"github.com/prometheus/client_golang/prometheus"
)

var (
	endpointsDesc = prometheus.NewDesc("levee_upstream_endpoints",
		"Endpoints of the upstream by health state: healthy, slow_start, unhealthy, ejected, drained.", []string{"upstream", "state"}, nil)
	panicDesc = prometheus.NewDesc("levee_upstream_panic",
		"1 while the upstream is in panic mode (too few healthy endpoints: balancing over all non-drained ones), else 0.", []string{"upstream"}, nil)
	panicTotalDesc = prometheus.NewDesc("levee_upstream_panic_total",
		"Times the upstream entered panic mode.", []string{"upstream"}, nil)
	ejectionsDesc = prometheus.NewDesc("levee_upstream_ejections_total",
		"Endpoints ejected by passive outlier detection, by reason (consecutive_gateway_failures, consecutive_5xx, connect_refused: a refused connection, which ejects at once).", []string{"upstream", "reason"}, nil)
)

// EjectionReasons are the reason labels of levee_upstream_ejections_total.
var EjectionReasons = []string{"consecutive_gateway_failures", "consecutive_5xx", "connect_refused"}

// NewCollector reports m's view, at scrape time, of each upstream that
// upstreams yields (called once per scrape, so it may walk the table
// serving then); upstreams m does not know are skipped.
func NewCollector(m *Manager, upstreams iter.Seq[string]) prometheus.Collector {
	return collector{m, upstreams}
}

type collector struct {
	m         *Manager
	upstreams iter.Seq[string]
}

func (c collector) Describe(ch chan<- *prometheus.Desc) {
	ch <- endpointsDesc
	ch <- panicDesc
	ch <- panicTotalDesc
	ch <- ejectionsDesc
}

func (c collector) Collect(ch chan<- prometheus.Metric) {
	for name := range c.upstreams {
		v, ok := c.m.View(name)
		if !ok {
			continue
		}
		count := make(map[State]int, len(States))
		for _, e := range v.Endpoints {
			count[e.State]++
		}
		for _, s := range States {
			ch <- prometheus.MustNewConstMetric(endpointsDesc, prometheus.GaugeValue, float64(count[s]), name, string(s))
		}
		panicking := 0.0
		if v.Panic {
			panicking = 1
		}
		ch <- prometheus.MustNewConstMetric(panicDesc, prometheus.GaugeValue, panicking, name)
		ch <- prometheus.MustNewConstMetric(panicTotalDesc, prometheus.CounterValue, float64(v.PanicTotal), name)
		for _, reason := range EjectionReasons {
			ch <- prometheus.MustNewConstMetric(ejectionsDesc, prometheus.CounterValue, float64(v.EjectionsTotal[reason]), name, reason)
		}
	}
}
