package proxy

import (
	"cmp"
	"slices"
	"sync"

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

// AppCollector reports levee_app_requests_total from the Handler's per-app
// counters (kept on the request path as atomics; nothing is allocated per
// request). Which apps get a label of their own is decided at scrape time
// and sticks: at each scrape, while fewer than topN apps are labelled, the
// busiest unlabelled ones are promoted. A promoted app's series starts at
// 0; what it had counted before stays in "other", so every series is
// monotonic, as a counter must be. An app that is deleted keeps its counts
// in "other" (its own series, if it had one, ends). Safe for concurrent
// use.
func (h *Handler) AppCollector(topN int) prometheus.Collector {
	return &appCollector{h: h, topN: topN, promoted: map[string][appSlots]uint64{}, last: map[string]appLast{}}
}

type appCollector struct {
	h    *Handler
	topN int

	mu sync.Mutex
	// promoted maps a labelled app to its counts at promotion.
	promoted map[string][appSlots]uint64
	// last is every app's counts at the previous scrape, with the counters
	// they were read from (an app deleted and made again under the same id
	// has new counters); bounded by the apps of the previous snapshot.
	last map[string]appLast
	// retired sums what deleted apps had contributed to "other".
	retired [appSlots]uint64
}

type appLast struct {
	counters *appCounters
	counts   [appSlots]uint64
}

func (c *appCollector) Describe(ch chan<- *prometheus.Desc) {
	ch <- appRequestsDesc
	ch <- appThrottledDesc
}

func (c *appCollector) Collect(ch chan<- prometheus.Metric) {
	apps := c.h.consumers.apps.Load()
	c.mu.Lock()
	defer c.mu.Unlock()
	now := make(map[string]appLast, len(c.last))
	if apps != nil {
		for id, a := range apps.byID {
			var counts [appSlots]uint64
			for i := range counts {
				counts[i] = a.counters.byClass[i].Load()
			}
			now[id] = appLast{counters: a.counters, counts: counts}
		}
	}
	// Apps gone (or made anew) since the last scrape: their part of
	// "other" moves to retired.
	for id, l := range c.last {
		if cur, ok := now[id]; ok && cur.counters == l.counters {
			continue
		}
		part := l.counts
		if off, ok := c.promoted[id]; ok {
			part = off
			delete(c.promoted, id)
		}
		for i := range part {
			c.retired[i] += part[i]
		}
	}
	c.last = now
	if free := c.topN - len(c.promoted); free > 0 {
		var cands []string
		for id := range now {
			if _, ok := c.promoted[id]; !ok {
				cands = append(cands, id)
			}
		}
		total := func(id string) (n uint64) {
			counts := now[id].counts
			for _, v := range counts[:len(classLabels)] { // answered requests; 429s are in 4xx too
				n += v
			}
			return n
		}
		slices.SortFunc(cands, func(a, b string) int {
			ta, tb := total(a), total(b)
			switch {
			case ta > tb:
				return -1
			case ta < tb:
				return 1
			}
			return cmp.Compare(a, b)
		})
		for _, id := range cands[:min(free, len(cands))] {
			if total(id) == 0 {
				break // promote only apps that have been seen calling
			}
			c.promoted[id] = now[id].counts
		}
	}
	other := c.retired
	for id, l := range now {
		off, ok := c.promoted[id]
		if !ok {
			off = l.counts
		}
		for i := range other {
			other[i] += off[i]
		}
		if ok {
			var d [appSlots]uint64
			for i, v := range l.counts {
				d[i] = v - off[i]
			}
			sendApp(ch, id, d)
		}
	}
	sendApp(ch, "other", other)
}

// sendApp sends app's series: a sample per status class and its 429s.
func sendApp(ch chan<- prometheus.Metric, app string, counts [appSlots]uint64) {
	for i, label := range classLabels {
		ch <- prometheus.MustNewConstMetric(appRequestsDesc, prometheus.CounterValue, float64(counts[i]), app, label)
	}
	ch <- prometheus.MustNewConstMetric(appThrottledDesc, prometheus.CounterValue, float64(counts[throttledSlot]), app)
}
