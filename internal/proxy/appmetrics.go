package proxy

import (
	"sync"

	"github.com/levee-gw/levee/internal/telemetry"
	"github.com/prometheus/client_golang/prometheus"
)

// appRequestsDesc is levee_app_requests_total: answered requests of
// authenticated apps by app and status class. Its app label has bounded
// cardinality: at most topN apps get their own label, the rest are summed
// under app="other".
var appRequestsDesc = prometheus.NewDesc("levee_app_requests_total",
	"Requests of authenticated apps answered, by app and status class (1xx to 5xx, other). The busiest apps (up to the configured number) have their own app label, chosen at scrape time and kept; the rest are summed under app=\"other\".",
	[]string{"app", "class"}, nil)

// appThrottledDesc is levee_app_throttled_total: the same apps' answers
// with status 429 (levee's rate limits, quotas and concurrency caps, or an
// upstream's own 429), labelled like levee_app_requests_total. An app
// answered 429 at a sustained rate is retrying into its limits: the
// LeveeAppThrottled alert (deploy/prometheus/levee.rules.yaml).
var appThrottledDesc = prometheus.NewDesc("levee_app_throttled_total",
	"Requests of authenticated apps answered 429 Too Many Requests (levee's rate limits, quotas and concurrency caps, or the upstream's own 429; also counted in levee_app_requests_total's 4xx), by app, labelled like levee_app_requests_total.",
	[]string{"app"}, nil)

var classLabels = [6]string{"other", "1xx", "2xx", "3xx", "4xx", "5xx"}

// AppCollector reports levee_app_requests_total and
// levee_app_throttled_total from the Handler's per-app counters (kept on
// the request path as atomics; nothing is allocated per request). Which
// apps get a label of their own is decided at scrape time by
// telemetry.TopN's rule: while fewer than topN apps are labelled, the
// busiest unlabelled ones (most requests answered; ties by id) are
// promoted, and a label sticks. A promoted app's series starts at 0; what
// it had counted before stays in "other", so every series is monotonic, as
// a counter must be. An app that is deleted keeps its counts in "other"
// (its own series, if it had one, ends). "other" is always reported. Safe
// for concurrent use.
func (h *Handler) AppCollector(topN int) prometheus.Collector {
	return &appCollector{h: h, top: telemetry.NewTopN(topN, appSlots)}
}

type appCollector struct {
	h  *Handler
	mu sync.Mutex
	// top is the app labelling; bounded by the apps of the last snapshot.
	top *telemetry.TopN
}

func (c *appCollector) Describe(ch chan<- *prometheus.Desc) {
	ch <- appRequestsDesc
	ch <- appThrottledDesc
}

func (c *appCollector) Collect(ch chan<- prometheus.Metric) {
	apps := c.h.consumers.apps.Load()
	var entries []telemetry.TopNEntry
	if apps != nil {
		entries = make([]telemetry.TopNEntry, 0, len(apps.byID))
		for id, a := range apps.byID {
			e := telemetry.TopNEntry{Key: id, Source: a.counters, Counts: make([]uint64, appSlots)}
			for i := range e.Counts {
				e.Counts[i] = a.counters.byClass[i].Load()
			}
			for _, v := range e.Counts[:len(classLabels)] { // answered requests; 429s are in 4xx too
				e.Rank += v
			}
			entries = append(entries, e)
		}
	}
	c.mu.Lock()
	own, other, _ := c.top.Scrape(entries)
	c.mu.Unlock()
	for id, counts := range own {
		sendApp(ch, id, counts)
	}
	sendApp(ch, "other", other)
}

// sendApp sends app's series: a sample per status class and its 429s.
func sendApp(ch chan<- prometheus.Metric, app string, counts []uint64) {
	for i, label := range classLabels {
		ch <- prometheus.MustNewConstMetric(appRequestsDesc, prometheus.CounterValue, float64(counts[i]), app, label)
	}
	ch <- prometheus.MustNewConstMetric(appThrottledDesc, prometheus.CounterValue, float64(counts[throttledSlot]), app)
}
