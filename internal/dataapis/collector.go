package dataapis

import "github.com/prometheus/client_golang/prometheus"

var apisDesc = prometheus.NewDesc("levee_data_apis",
	"Data APIs in the store, by lifecycle state (draft, published, offline).", []string{"state"}, nil)

// NewCollector reports levee_data_apis{state} from the snapshot of the
// store that current returns at scrape time (nil: nothing, as before the
// gateway's Start).
func NewCollector(current func() Backend) prometheus.Collector { return collector(current) }

type collector func() Backend

func (c collector) Describe(ch chan<- *prometheus.Desc) { ch <- apisDesc }

func (c collector) Collect(ch chan<- prometheus.Metric) {
	store := c()
	if store == nil {
		return
	}
	count := store.Current().Count
	for _, st := range []State{Draft, Published, Offline} {
		ch <- prometheus.MustNewConstMetric(apisDesc, prometheus.GaugeValue, float64(count[st]), string(st))
	}
}

var (
	servedDesc = prometheus.NewDesc("levee_data_api_served_version",
		"The version of each published data API this node serves (cluster.etcd; 0: none, as it cannot compile the published one).", []string{"api"}, nil)
	publishedDesc = prometheus.NewDesc("levee_data_api_published_version",
		"The version of each data API the shared store publishes (cluster.etcd).", []string{"api"}, nil)
	compileDesc = prometheus.NewDesc("levee_data_api_compile_failures_total",
		"Published versions this node could not compile, counted once per data API and version (cluster.etcd).", []string{"api"}, nil)
)

// NewFleetCollector reports levee_data_api_served_version{api},
// levee_data_api_published_version{api} and
// levee_data_api_compile_failures_total{api} from what status returns at
// scrape time (nothing without cluster.etcd).
func NewFleetCollector(status func() ([]NodeStatus, map[string]uint64)) prometheus.Collector {
	return fleetCollector(status)
}

type fleetCollector func() ([]NodeStatus, map[string]uint64)

func (c fleetCollector) Describe(ch chan<- *prometheus.Desc) {
	ch <- servedDesc
	ch <- publishedDesc
	ch <- compileDesc
}

func (c fleetCollector) Collect(ch chan<- prometheus.Metric) {
	sts, failures := c()
	for _, st := range sts {
		ch <- prometheus.MustNewConstMetric(servedDesc, prometheus.GaugeValue, float64(st.Version), st.API)
		ch <- prometheus.MustNewConstMetric(publishedDesc, prometheus.GaugeValue, float64(st.Published), st.API)
	}
	for api, n := range failures {
		ch <- prometheus.MustNewConstMetric(compileDesc, prometheus.CounterValue, float64(n), api)
	}
}
