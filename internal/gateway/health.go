package gateway

import (
	"github.com/levee-gw/levee/internal/config"
	"github.com/levee-gw/levee/internal/endpoint"
	"github.com/levee-gw/levee/internal/health"
	"github.com/prometheus/client_golang/prometheus"
)

// healthOptions turns an upstream's validated health blocks into the
// health manager's options.
func healthOptions(uc *config.Upstream) health.UpstreamOptions {
	o := health.UpstreamOptions{PanicThreshold: uc.PanicThreshold / 100, SlowStart: uc.SlowStart}
	if hc := uc.HealthCheck; hc != nil {
		c := &health.CheckOptions{TCP: hc.TCP, Interval: hc.Interval, Timeout: hc.Timeout, HealthyAfter: hc.HealthyAfter, UnhealthyAfter: hc.UnhealthyAfter}
		if h := hc.HTTP; h != nil {
			c.HTTPPath, c.Expect = h.Path, h.Expect
		}
		o.Check = c
	}
	if od := uc.OutlierDetection; od != nil {
		o.Outlier = &health.OutlierOptions{
			ConsecutiveGatewayFailures: uint32(od.ConsecutiveGatewayFailures),
			Consecutive5xx:             uint32(od.Consecutive5xx),
			BaseEjectionTime:           od.BaseEjectionTime,
			MaxEjectionTime:            od.MaxEjectionTime,
			MaxEjectionPercent:         od.MaxEjectionPercent,
		}
		o.Refused = o.Outlier
	} else {
		// A refused connection ejects at once even without the block
		// (NGINX's max_fails=1 fail_timeout), for the block's default times
		// and within its default cap.
		o.Refused = &health.OutlierOptions{
			BaseEjectionTime:   config.DefaultBaseEjectionTime,
			MaxEjectionTime:    config.DefaultMaxEjectionTime,
			MaxEjectionPercent: config.DefaultMaxEjectionPercent,
		}
	}
	return o
}

// onHealthChange is the health manager's OnChange: it rebuilds the
// routing table (only the named upstreams' pickers change; the others are
// reused by fingerprint).
func (g *Gateway) onHealthChange(upstreams []string) {
	g.rebuild("a health change")
}

var (
	upstreamEndpointsDesc = prometheus.NewDesc("levee_upstream_endpoints",
		"Endpoints of the upstream by health state: healthy, slow_start, unhealthy, ejected, drained.", []string{"upstream", "state"}, nil)
	upstreamPanicDesc = prometheus.NewDesc("levee_upstream_panic",
		"1 while the upstream is in panic mode (too few healthy endpoints: balancing over all non-drained ones), else 0.", []string{"upstream"}, nil)
	upstreamPanicTotalDesc = prometheus.NewDesc("levee_upstream_panic_total",
		"Times the upstream entered panic mode.", []string{"upstream"}, nil)
	upstreamEjectionsDesc = prometheus.NewDesc("levee_upstream_ejections_total",
		"Endpoints ejected by passive outlier detection, by reason (consecutive_gateway_failures, consecutive_5xx, connect_refused: a refused connection, which ejects at once).", []string{"upstream", "reason"}, nil)
)

// ejectionReasons are the reason labels of levee_upstream_ejections_total.
var ejectionReasons = []string{"consecutive_gateway_failures", "consecutive_5xx", "connect_refused"}

// healthCollector reports the health manager's view at scrape time.
type healthCollector struct{ g *Gateway }

func (c healthCollector) Describe(ch chan<- *prometheus.Desc) {
	ch <- upstreamEndpointsDesc
	ch <- upstreamPanicDesc
	ch <- upstreamPanicTotalDesc
	ch <- upstreamEjectionsDesc
}

func (c healthCollector) Collect(ch chan<- prometheus.Metric) {
	for _, up := range c.g.handler.Table().Upstreams() {
		v, ok := c.g.health.View(up.Name)
		if !ok {
			continue
		}
		count := make(map[health.State]int, len(health.States))
		for _, e := range v.Endpoints {
			count[e.State]++
		}
		for _, s := range health.States {
			ch <- prometheus.MustNewConstMetric(upstreamEndpointsDesc, prometheus.GaugeValue, float64(count[s]), up.Name, string(s))
		}
		panicking := 0.0
		if v.Panic {
			panicking = 1
		}
		ch <- prometheus.MustNewConstMetric(upstreamPanicDesc, prometheus.GaugeValue, panicking, up.Name)
		ch <- prometheus.MustNewConstMetric(upstreamPanicTotalDesc, prometheus.CounterValue, float64(v.PanicTotal), up.Name)
		for _, reason := range ejectionReasons {
			ch <- prometheus.MustNewConstMetric(upstreamEjectionsDesc, prometheus.CounterValue, float64(v.EjectionsTotal[reason]), up.Name, reason)
		}
	}
}

// healthByAddress indexes an upstream's health view by endpoint address.
func healthByAddress(v health.UpstreamView) map[string]health.EndpointView {
	out := make(map[string]health.EndpointView, len(v.Endpoints))
	for _, e := range v.Endpoints {
		out[e.Address] = e
	}
	return out
}

// weightUnits turns hundredths into the units the API shows.
func weightUnits(w uint32) float64 { return float64(w) / endpoint.WeightScale }
