package gateway

import (
	"slices"
	"sync"

	"github.com/levee-gw/levee/internal/endpoint"
	"github.com/levee-gw/levee/internal/health"
	"github.com/prometheus/client_golang/prometheus"
)

// The per-endpoint series. They are read at scrape time from each
// endpoint's live counters (endpoint.Stats, kept across reloads by pools)
// and the health manager's view: nothing is added to the request path but
// one atomic add per 5xx answer (Stats.Status5xx). There is no latency
// histogram per endpoint: observing one per attempt would cost a label
// lookup or a cached observer per endpoint on the request path; latency is
// per upstream (levee_upstream_request_duration_seconds).
var (
	endpointRequestsDesc = prometheus.NewDesc("levee_endpoint_requests_total",
		"Attempts sent to the endpoint (each retry counts), by upstream and endpoint (host:port; endpoint=\"other\" sums the endpoints beyond metrics.endpoint_labels).",
		[]string{"upstream", "endpoint"}, nil)
	endpointErrorsDesc = prometheus.NewDesc("levee_endpoint_errors_total",
		"Attempts at the endpoint that failed, by kind: failure (connect error, reset or timeout: no answer) or 5xx (the endpoint answered 500 to 599).",
		[]string{"upstream", "endpoint", "kind"}, nil)
	endpointInflightDesc = prometheus.NewDesc("levee_endpoint_inflight",
		"Attempts in flight to the endpoint now.",
		[]string{"upstream", "endpoint"}, nil)
	endpointStateDesc = prometheus.NewDesc("levee_endpoint_state",
		"1 for the endpoint's health state (healthy, slow_start, unhealthy, ejected, drained), 0 for the others; under endpoint=\"other\", the number of those endpoints in each state.",
		[]string{"upstream", "endpoint", "state"}, nil)
)

// endpointCounts are an endpoint's counters: attempts, failures, 5xx.
type endpointCounts [3]uint64

func (a *endpointCounts) add(b endpointCounts) {
	for i := range a {
		a[i] += b[i]
	}
}

func readCounts(s *endpoint.Stats) endpointCounts {
	return endpointCounts{s.Requests.Load(), s.Failures.Load(), s.Status5xx.Load()}
}

// endpointCollector reports the levee_endpoint_* series of every upstream
// of the table serving at scrape time. Which endpoints get a label of
// their own is decided per upstream at scrape time and sticks: while fewer
// than topN of an upstream's endpoints are labelled, the unlabelled ones
// are labelled in address order (so the first topN by address, when first
// seen; one that leaves frees its place for the next). The rest are summed
// under endpoint="other". Counters stay monotonic as a counter must: an
// endpoint first seen at this scrape is labelled with all its counts; one
// that was already counted in "other" is labelled from 0 and what it had
// stays in "other"; an endpoint that leaves keeps in "other" what it had
// contributed there (its own series, if it had one, ends). Safe for
// concurrent use.
type endpointCollector struct {
	g    *Gateway
	topN int

	mu sync.Mutex
	// ups is each upstream's labelling; bounded by the table's upstreams
	// (an upstream gone from the table is dropped).
	ups map[string]*endpointSeries
}

type endpointSeries struct {
	// labelled maps a labelled endpoint's address to its counts at
	// labelling (kept in "other"); at most topN entries.
	labelled map[string]endpointCounts
	// last is each endpoint's counts at the previous scrape with the
	// counters they were read from; bounded by the upstream's endpoints.
	last map[string]endpointLast
	// retired sums what endpoints gone since had contributed to "other".
	retired endpointCounts
	// other is set once "other" was reported: it then stays.
	other bool
}

type endpointLast struct {
	stats  *endpoint.Stats
	counts endpointCounts
}

func newEndpointCollector(g *Gateway, topN int) *endpointCollector {
	return &endpointCollector{g: g, topN: topN, ups: map[string]*endpointSeries{}}
}

func (c *endpointCollector) Describe(ch chan<- *prometheus.Desc) {
	ch <- endpointRequestsDesc
	ch <- endpointErrorsDesc
	ch <- endpointInflightDesc
	ch <- endpointStateDesc
}

func (c *endpointCollector) Collect(ch chan<- prometheus.Metric) {
	c.mu.Lock()
	defer c.mu.Unlock()
	seen := map[string]bool{}
	for _, up := range c.g.handler.Table().Upstreams() {
		b := up.Balance()
		if b == nil || seen[up.Name] {
			continue
		}
		seen[up.Name] = true
		s := c.ups[up.Name]
		if s == nil {
			s = &endpointSeries{labelled: map[string]endpointCounts{}, last: map[string]endpointLast{}}
			c.ups[up.Name] = s
		}
		states := map[string]health.State{}
		if v, ok := c.g.health.View(up.Name); ok {
			for _, e := range v.Endpoints {
				states[e.Address] = e.State
			}
		}
		c.collectUpstream(ch, up.Name, s, b.Endpoints, states)
	}
	for name := range c.ups {
		if !seen[name] {
			delete(c.ups, name)
		}
	}
}

// collectUpstream updates s from eps and sends the upstream's series.
func (c *endpointCollector) collectUpstream(ch chan<- prometheus.Metric, name string, s *endpointSeries, eps []*endpoint.Endpoint, states map[string]health.State) {
	now := make(map[string]endpointLast, len(eps))
	byAddr := make(map[string]*endpoint.Endpoint, len(eps))
	for _, ep := range eps {
		now[ep.Address] = endpointLast{stats: ep.Stats, counts: readCounts(ep.Stats)}
		byAddr[ep.Address] = ep
	}
	// Endpoints gone (or made anew) since the last scrape: their part
	// of "other" moves to retired.
	fresh := func(addr string) bool {
		l, ok := s.last[addr]
		return !ok || l.stats != now[addr].stats
	}
	for addr, l := range s.last {
		if cur, ok := now[addr]; ok && cur.stats == l.stats {
			continue
		}
		part := l.counts
		if off, ok := s.labelled[addr]; ok {
			part = off
			delete(s.labelled, addr)
		}
		s.retired.add(part)
	}
	if free := c.topN - len(s.labelled); free > 0 {
		var cands []string
		for addr := range now {
			if _, ok := s.labelled[addr]; !ok {
				cands = append(cands, addr)
			}
		}
		slices.Sort(cands)
		for _, addr := range cands[:min(free, len(cands))] {
			var off endpointCounts // first seen now: all its counts are its own
			if !fresh(addr) {
				off = now[addr].counts // already in "other": stays there
			}
			s.labelled[addr] = off
		}
	}
	s.last = now

	other := s.retired
	var otherInflight int64
	otherStates := map[health.State]int{}
	unlabelled := 0
	for addr, l := range now {
		st, known := states[addr]
		off, ok := s.labelled[addr]
		if !ok {
			unlabelled++
			other.add(l.counts)
			otherInflight += byAddr[addr].Stats.Inflight.Load()
			if known {
				otherStates[st]++
			}
			continue
		}
		other.add(off)
		var own endpointCounts
		for i := range own {
			own[i] = l.counts[i] - off[i]
		}
		sendEndpoint(ch, name, addr, own, byAddr[addr].Stats.Inflight.Load())
		if known {
			for _, hs := range health.States {
				v := 0.0
				if hs == st {
					v = 1
				}
				ch <- prometheus.MustNewConstMetric(endpointStateDesc, prometheus.GaugeValue, v, name, addr, string(hs))
			}
		}
	}
	if unlabelled > 0 || s.other || other != (endpointCounts{}) {
		s.other = true
		sendEndpoint(ch, name, "other", other, otherInflight)
		for _, hs := range health.States {
			ch <- prometheus.MustNewConstMetric(endpointStateDesc, prometheus.GaugeValue, float64(otherStates[hs]), name, "other", string(hs))
		}
	}
}

// sendEndpoint sends one endpoint's (or "other"'s) counters and in-flight
// gauge.
func sendEndpoint(ch chan<- prometheus.Metric, upstream, ep string, n endpointCounts, inflight int64) {
	ch <- prometheus.MustNewConstMetric(endpointRequestsDesc, prometheus.CounterValue, float64(n[0]), upstream, ep)
	ch <- prometheus.MustNewConstMetric(endpointErrorsDesc, prometheus.CounterValue, float64(n[1]), upstream, ep, "failure")
	ch <- prometheus.MustNewConstMetric(endpointErrorsDesc, prometheus.CounterValue, float64(n[2]), upstream, ep, "5xx")
	ch <- prometheus.MustNewConstMetric(endpointInflightDesc, prometheus.GaugeValue, float64(inflight), upstream, ep)
}
