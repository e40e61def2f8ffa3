package gateway

import (
	"github.com/levee-gw/levee/internal/config"
	"github.com/levee-gw/levee/internal/endpoint"
	"github.com/levee-gw/levee/internal/health"
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
		if gc := hc.GRPC; gc != nil {
			c.GRPC, c.GRPCService = true, gc.Service
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

// onHealthChange is the health manager's OnChange: it swaps the named
// upstreams' Balances, leaving the table and every other upstream alone.
func (g *Gateway) onHealthChange(upstreams []string) {
	g.refresh(upstreams, "a health change")
}

// weightUnits turns hundredths into the units the API shows.
func weightUnits(w uint32) float64 { return float64(w) / endpoint.WeightScale }
