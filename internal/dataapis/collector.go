package dataapis

import "github.com/prometheus/client_golang/prometheus"

var apisDesc = prometheus.NewDesc("levee_data_apis",
	"Data APIs in the store, by lifecycle state (draft, published, offline).", []string{"state"}, nil)

// NewCollector reports levee_data_apis{state} from the snapshot of the
// store that current returns at scrape time (nil: nothing, as before the
// gateway's Start).
func NewCollector(current func() *Store) prometheus.Collector { return collector(current) }

type collector func() *Store

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
