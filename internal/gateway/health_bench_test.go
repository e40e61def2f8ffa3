package gateway

import (
	"fmt"
	"io"
	"log/slog"
	"testing"

	"github.com/levee-gw/levee/internal/config"
	"github.com/levee-gw/levee/internal/endpoint"
	"github.com/levee-gw/levee/internal/health"
	"github.com/levee-gw/levee/internal/proxy"
)

// BenchmarkHealthRebuild: what one health transition costs an upstream of
// 1,000 endpoints in three zones: the manager's plan (Apply) and the
// picker rebuild (picker inputs, per-zone pickers, zone shares), with a
// different endpoint out of service at each iteration so the picker is
// really rebuilt. Per balancer.
func BenchmarkHealthRebuild(b *testing.B) {
	const n = 1000
	for _, balancer := range []string{config.BalancerWeightedRoundRobin, config.BalancerLeastRequest, config.BalancerConsistentHash} {
		b.Run(fmt.Sprintf("%s/n=%d", balancer, n), func(b *testing.B) {
			uc := &config.Upstream{Name: "u", Balancer: balancer, PanicThreshold: 50,
				Zones: &config.Zones{Local: "z0", Failover: []string{"z1"}, Overprovisioning: 1.4}}
			if balancer == config.BalancerLeastRequest {
				uc.LeastRequest = &config.LeastRequest{}
			}
			if balancer == config.BalancerConsistentHash {
				uc.ConsistentHash = &config.ConsistentHash{HashOn: "path"}
			}
			eps := make([]*endpoint.Endpoint, n)
			for i := range eps {
				eps[i] = &endpoint.Endpoint{Address: fmt.Sprintf("10.0.%d.%d:80", i/256, i%256), Weight: 100 * uint32(1+i%5),
					Zone: fmt.Sprintf("z%d", i%3), Stats: &endpoint.Stats{}}
			}
			m := health.New(health.Options{Logger: slog.New(slog.NewTextHandler(io.Discard, nil)), OnChange: func([]string) {}})
			p := newPools()
			opts := health.UpstreamOptions{PanicThreshold: 0.5}
			b.ReportAllocs()
			i := 0
			for b.Loop() {
				// One endpoint drained per iteration stands in for a
				// health flip: the plan and picker inputs change.
				in := make([]*endpoint.Endpoint, n)
				copy(in, eps)
				c := *eps[i%n]
				c.Weight = 0
				in[i%n] = &c
				i++
				plan := m.Apply("u", opts, in)
				up := &proxy.Upstream{Name: "u", Endpoints: plan.Endpoints}
				p.setPicker(up, uc, in, plan, nil)
				if up.Picker == nil {
					b.Fatal("no picker")
				}
			}
		})
	}
}
