package health

import (
	"iter"
	"sync"

	"github.com/levee-gw/levee/internal/endpoint"
	"github.com/levee-gw/levee/internal/telemetry"
	"github.com/prometheus/client_golang/prometheus"
)

// The per-endpoint series. They are read at scrape time from each
// endpoint's live counters (endpoint.Stats, kept across reloads by the
// gateway's pools) and the manager's view: nothing is added to the request
// path but one atomic add per 5xx answer (Stats.Status5xx). There is no
// latency histogram per endpoint: observing one per attempt would cost a
// label lookup or a cached observer per endpoint on the request path;
// latency is per upstream (levee_upstream_request_duration_seconds).
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

// UpstreamEndpoints is one upstream's endpoints as the table serving
// holds them.
type UpstreamEndpoints struct {
	Name      string
	Endpoints []*endpoint.Endpoint
}

// NewEndpointCollector reports the levee_endpoint_* series of each
// upstream that upstreams yields (called once per scrape, so it may walk
// the table serving then; an upstream yielded twice is reported once),
// with m's view of each endpoint's state. Which endpoints get a label of
// their own is decided per upstream at scrape time by telemetry.TopN's
// rule: while fewer than topN of an upstream's endpoints are labelled, the
// busiest unlabelled ones (most attempts; ties by address, so endpoints
// not yet sent anything are labelled in address order) are promoted, and
// a label sticks while the endpoint exists. A promoted endpoint's series
// starts at 0 and what it had counted stays in endpoint="other", so
// counters stay monotonic; an endpoint that leaves keeps in "other" what it
// had contributed there. "other" is reported from the first scrape that
// needs it on. Safe for concurrent use.
func NewEndpointCollector(m *Manager, upstreams iter.Seq[UpstreamEndpoints], topN int) prometheus.Collector {
	return &endpointCollector{m: m, upstreams: upstreams, topN: topN, ups: map[string]*telemetry.TopN{}}
}

type endpointCollector struct {
	m         *Manager
	upstreams iter.Seq[UpstreamEndpoints]
	topN      int

	mu sync.Mutex
	// ups is each upstream's labelling; bounded by the table's upstreams
	// (an upstream gone from the table is dropped).
	ups map[string]*telemetry.TopN
}

// The counters of an endpoint, in TopN's counts.
const (
	epRequests = iota
	epFailures
	ep5xx
	epCounts
)

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
	for up := range c.upstreams {
		if seen[up.Name] {
			continue
		}
		seen[up.Name] = true
		top := c.ups[up.Name]
		if top == nil {
			top = telemetry.NewTopN(c.topN, epCounts)
			c.ups[up.Name] = top
		}
		states := map[string]State{}
		if v, ok := c.m.View(up.Name); ok {
			for _, e := range v.Endpoints {
				states[e.Address] = e.State
			}
		}
		collectUpstream(ch, up, top, states)
	}
	for name := range c.ups {
		if !seen[name] {
			delete(c.ups, name)
		}
	}
}

// collectUpstream updates top from up's endpoints and sends the
// upstream's series.
func collectUpstream(ch chan<- prometheus.Metric, up UpstreamEndpoints, top *telemetry.TopN, states map[string]State) {
	entries := make([]telemetry.TopNEntry, 0, len(up.Endpoints))
	for _, ep := range up.Endpoints {
		s := ep.Stats
		counts := []uint64{epRequests: s.Requests.Load(), epFailures: s.Failures.Load(), ep5xx: s.Status5xx.Load()}
		entries = append(entries, telemetry.TopNEntry{Key: ep.Address, Source: s, Counts: counts, Rank: counts[epRequests]})
	}
	own, other, otherNeeded := top.Scrape(entries)
	var otherInflight int64
	otherStates := map[State]int{}
	for _, ep := range up.Endpoints {
		st, known := states[ep.Address]
		counts, ok := own[ep.Address]
		if !ok {
			otherInflight += ep.Stats.Inflight.Load()
			if known {
				otherStates[st]++
			}
			continue
		}
		sendEndpoint(ch, up.Name, ep.Address, counts, ep.Stats.Inflight.Load())
		if known {
			for _, hs := range States {
				v := 0.0
				if hs == st {
					v = 1
				}
				ch <- prometheus.MustNewConstMetric(endpointStateDesc, prometheus.GaugeValue, v, up.Name, ep.Address, string(hs))
			}
		}
	}
	if otherNeeded {
		sendEndpoint(ch, up.Name, "other", other, otherInflight)
		for _, hs := range States {
			ch <- prometheus.MustNewConstMetric(endpointStateDesc, prometheus.GaugeValue, float64(otherStates[hs]), up.Name, "other", string(hs))
		}
	}
}

// sendEndpoint sends one endpoint's (or "other"'s) counters and in-flight
// gauge.
func sendEndpoint(ch chan<- prometheus.Metric, upstream, ep string, n []uint64, inflight int64) {
	ch <- prometheus.MustNewConstMetric(endpointRequestsDesc, prometheus.CounterValue, float64(n[epRequests]), upstream, ep)
	ch <- prometheus.MustNewConstMetric(endpointErrorsDesc, prometheus.CounterValue, float64(n[epFailures]), upstream, ep, "failure")
	ch <- prometheus.MustNewConstMetric(endpointErrorsDesc, prometheus.CounterValue, float64(n[ep5xx]), upstream, ep, "5xx")
	ch <- prometheus.MustNewConstMetric(endpointInflightDesc, prometheus.GaugeValue, float64(inflight), upstream, ep)
}
