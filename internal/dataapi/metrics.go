package dataapi

import (
	"sync"

	"github.com/levee-gw/levee/internal/datacache"
	"github.com/levee-gw/levee/internal/datasource"
	"github.com/prometheus/client_golang/prometheus"
)

// Metrics are the data routes' series, shared by every route of a
// process; they live beside the routes that count them, so the gateway
// only registers them.
type Metrics struct {
	rows     *prometheus.CounterVec   // route
	duration *prometheus.HistogramVec // route
	cache    *prometheus.CounterVec   // route, result
	pools    *poolCollector
}

// NewMetrics creates the data-API series and registers them on reg.
func NewMetrics(reg prometheus.Registerer) (*Metrics, error) {
	m := &Metrics{
		rows: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "levee_data_rows_total",
			Help: "Rows data routes sent to clients (not counting answers served from the cache), by route.",
		}, []string{"route"}),
		duration: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "levee_data_query_duration_seconds",
			Help:    "Time from sending a data route's statement to its last row read (or its failure), by route.",
			Buckets: []float64{.001, .0025, .005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10, 30},
		}, []string{"route"}),
		cache: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "levee_data_cache_total",
			Help: "Data route answers by cache result: hit (fresh), shared (another request's query, waited for), stale (served because the source failed), miss (this request's query filled the cache), bypass (not cacheable: ran alone).",
		}, []string{"route", "result"}),
		pools: &poolCollector{desc: prometheus.NewDesc("levee_data_pool_connections",
			"Connections of each data source's pool by state: in_use, idle, and max (the source's max_conns).",
			[]string{"source", "state"}, nil)},
	}
	for _, c := range []prometheus.Collector{m.rows, m.duration, m.cache, m.pools} {
		if err := reg.Register(c); err != nil {
			return nil, err
		}
	}
	return m, nil
}

// ForgetRoute deletes route's series, when a table without the route
// replaces one with it (see proxy.Metrics.ForgetRoute).
func (m *Metrics) ForgetRoute(route string) {
	l := prometheus.Labels{"route": route}
	m.rows.DeletePartialMatch(l)
	m.duration.DeletePartialMatch(l)
	m.cache.DeletePartialMatch(l)
}

// SetSources replaces the sources whose pools levee_data_pool_connections
// reports (after a reload).
func (m *Metrics) SetSources(sources map[string]*datasource.Source) {
	m.pools.mu.Lock()
	m.pools.sources = sources
	m.pools.mu.Unlock()
}

// routeMetrics are one route's children of the vectors, resolved once.
type routeMetrics struct {
	rows     prometheus.Counter
	duration prometheus.Observer
	cache    [datacache.Bypass + 1]prometheus.Counter
}

func (m *Metrics) route(name string) *routeMetrics {
	rm := &routeMetrics{rows: m.rows.WithLabelValues(name), duration: m.duration.WithLabelValues(name)}
	for s := datacache.Hit; s <= datacache.Bypass; s++ {
		rm.cache[s] = m.cache.WithLabelValues(name, s.String())
	}
	return rm
}

// cached counts one answer's cache result.
func (rm *routeMetrics) cached(s datacache.Status) {
	if s >= datacache.Hit && s <= datacache.Bypass {
		rm.cache[s].Inc()
	}
}

// poolCollector reads each source's pool counts at scrape time.
type poolCollector struct {
	desc *prometheus.Desc
	mu   sync.Mutex
	// sources is replaced whole, never modified.
	sources map[string]*datasource.Source
}

func (c *poolCollector) Describe(ch chan<- *prometheus.Desc) { ch <- c.desc }

func (c *poolCollector) Collect(ch chan<- prometheus.Metric) {
	c.mu.Lock()
	sources := c.sources
	c.mu.Unlock()
	for name, s := range sources {
		st := s.Stats()
		ch <- prometheus.MustNewConstMetric(c.desc, prometheus.GaugeValue, float64(st.InUse), name, "in_use")
		ch <- prometheus.MustNewConstMetric(c.desc, prometheus.GaugeValue, float64(st.Idle), name, "idle")
		ch <- prometheus.MustNewConstMetric(c.desc, prometheus.GaugeValue, float64(st.Max), name, "max")
	}
}
