package gateway

import (
	"fmt"
	"io"
	"log/slog"
	"strings"
	"testing"

	"github.com/levee-gw/levee/internal/config"
	"github.com/levee-gw/levee/internal/endpoint"
	"github.com/levee-gw/levee/internal/health"
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
				if p.balance("u", uc, in, plan, nil).Picker == nil {
					b.Fatal("no picker")
				}
			}
		})
	}
}

// BenchmarkHealthChangeSwap (issue 15): what one upstream's health change
// costs the gateway in a configuration of 100 upstreams of 20 endpoints,
// each with its route. table_rebuild is what a change cost before the
// per-upstream Balance (buildTable and Swap: every upstream, route and
// route metric); one_upstream_swap is Gateway.refresh of the one upstream.
// Picker inputs are unchanged in both, so neither builds a picker: the
// difference is the work around it.
func BenchmarkHealthChangeSwap(b *testing.B) {
	var y strings.Builder
	y.WriteString("listen: 127.0.0.1:0\nadmin: {listen: 127.0.0.1:0}\nlog: {access: false}\nupstreams:\n")
	for u := range 100 {
		fmt.Fprintf(&y, "  u%d:\n    endpoints: [", u)
		for e := range 20 {
			fmt.Fprintf(&y, "{address: 10.1.%d.%d:80}, ", u, e)
		}
		y.WriteString("]\n")
	}
	y.WriteString("routes:\n")
	for u := range 100 {
		fmt.Fprintf(&y, "  - {name: r%d, match: {path_prefix: /r%d/}, upstream: u%d}\n", u, u, u)
	}
	cfg, err := config.Parse([]byte(y.String()))
	if err != nil {
		b.Fatal(err)
	}
	g, err := New(Options{Load: func() (*config.Config, error) { return cfg, nil }, LogOutput: io.Discard})
	if err != nil {
		b.Fatal(err)
	}
	b.Run("table_rebuild", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			g.mu.Lock()
			t, err := g.buildTable(g.cfg)
			if err != nil {
				b.Fatal(err)
			}
			g.handler.Swap(t)
			g.mu.Unlock()
		}
	})
	b.Run("one_upstream_swap", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			g.refresh([]string{"u42"}, "a benchmark")
		}
	})
}
