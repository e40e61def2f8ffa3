package memguard

import "github.com/prometheus/client_golang/prometheus"

var (
	levelDesc = prometheus.NewDesc("levee_memory_pressure_level",
		"Memory pressure: 0 ok, 1 above the soft watermark (sheddable refused), 2 above the hard (all but critical refused).", nil, nil)
	heapDesc = prometheus.NewDesc("levee_memory_heap_bytes",
		"The live heap (marked by the last garbage collection) at the memory guard's last sample; its watermarks compare this plus levee_memory_reserved_bytes.", nil, nil)
	reservedDesc = prometheus.NewDesc("levee_memory_reserved_bytes",
		"Bytes admitted requests have reserved from the memory budget (replay copies of bodies), released when each request ends.", nil, nil)
	refusedDesc = prometheus.NewDesc("levee_memory_reservations_refused_total",
		"Reservations the memory budget had no room for: the request streamed its body unreplayed, or (sheddable) was refused 503 memory_pressure.", nil, nil)
	limitDesc = prometheus.NewDesc("levee_memory_limit_bytes",
		"The memory guard's limit (the Go runtime's soft memory limit it set): the memory block's, or the automatic one (GOMEMLIMIT, or the cgroup's limit less 10%, or the machine's memory less 10%).", nil, nil)
	collectionsDesc = prometheus.NewDesc("levee_memory_forced_collections_total",
		"Garbage collections the memory guard ran because the live heap reading was stale under pressure.", nil, nil)
)

// NewCollector reports g's pressure and budget at scrape time (its state
// lives in atomics; nothing is copied on the request path).
func NewCollector(g *Guard) prometheus.Collector { return collector{g} }

type collector struct{ g *Guard }

func (c collector) Describe(ch chan<- *prometheus.Desc) {
	ch <- levelDesc
	ch <- heapDesc
	ch <- reservedDesc
	ch <- refusedDesc
	ch <- collectionsDesc
	ch <- limitDesc
}

func (c collector) Collect(ch chan<- prometheus.Metric) {
	g := c.g
	ch <- prometheus.MustNewConstMetric(levelDesc, prometheus.GaugeValue, float64(g.Level()))
	ch <- prometheus.MustNewConstMetric(heapDesc, prometheus.GaugeValue, float64(g.HeapBytes()))
	ch <- prometheus.MustNewConstMetric(reservedDesc, prometheus.GaugeValue, float64(g.Reserved()))
	ch <- prometheus.MustNewConstMetric(refusedDesc, prometheus.CounterValue, float64(g.RefusedReservations()))
	ch <- prometheus.MustNewConstMetric(collectionsDesc, prometheus.CounterValue, float64(g.Collections()))
	ch <- prometheus.MustNewConstMetric(limitDesc, prometheus.GaugeValue, float64(g.Limit()))
}
