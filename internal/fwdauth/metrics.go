package fwdauth

import "github.com/prometheus/client_golang/prometheus"

var (
	callsDesc = prometheus.NewDesc("levee_forward_auth_calls_total",
		"Calls to a route's authorization service (auth: forward) by result: allowed (2xx), denied (3xx/4xx passed to the client), timeout, unreachable, bad_answer (5xx, body too large), busy (max_in_flight full, not called). A series appears with its first count.",
		[]string{"route", "result"}, nil)
	hitsDesc = prometheus.NewDesc("levee_forward_auth_cache_hits_total",
		"Requests on auth: forward routes answered from the cache of the service's answers, by result (allowed or denied). A series appears with its first count.",
		[]string{"route", "result"}, nil)
	passedDesc = prometheus.NewDesc("levee_forward_auth_passed_on_error_total",
		"Requests let through without a decision because the authorization service failed and the route has on_error: allow.",
		[]string{"route"}, nil)
)

// Collector reports the counts of the Checkers each yields, by route.
func Collector(each func(yield func(route string, c *Checker))) prometheus.Collector {
	return collector{each}
}

type collector struct {
	each func(yield func(route string, c *Checker))
}

func (c collector) Describe(ch chan<- *prometheus.Desc) {
	ch <- callsDesc
	ch <- hitsDesc
	ch <- passedDesc
}

func (c collector) Collect(ch chan<- prometheus.Metric) {
	c.each(func(route string, k *Checker) {
		s := k.Stats()
		for i, n := range s.Calls {
			if n > 0 {
				ch <- prometheus.MustNewConstMetric(callsDesc, prometheus.CounterValue, float64(n), route, Results[i])
			}
		}
		for i, n := range s.CacheHits {
			if n > 0 {
				ch <- prometheus.MustNewConstMetric(hitsDesc, prometheus.CounterValue, float64(n), route, Results[i])
			}
		}
		ch <- prometheus.MustNewConstMetric(passedDesc, prometheus.CounterValue, float64(s.PassedOnError), route)
	})
}
