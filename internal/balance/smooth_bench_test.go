package balance

import (
	"fmt"
	"math/rand/v2"
	"testing"

	"github.com/levee-gw/levee/internal/endpoint"
)

var benchSizes = []int{2, 10, 100, 1000, 10000}

// benchEndpoints returns n endpoints with weights drawn from 1..MaxWeight
// by a fixed seed, so runs compare.
func benchEndpoints(n int) []*endpoint.Endpoint {
	r := rand.New(rand.NewPCG(uint64(n), 42))
	return endpoints(randomWeights(r, n, endpoint.MaxWeight)...)
}

var sinkEndpoint *endpoint.Endpoint

func BenchmarkSmoothWeightedPick(b *testing.B) {
	for _, n := range benchSizes {
		b.Run(fmt.Sprintf("n=%d", n), func(b *testing.B) {
			p := NewSmoothWeighted(benchEndpoints(n))
			b.ReportAllocs()
			var e *endpoint.Endpoint
			for b.Loop() {
				e, _ = p.Pick()
			}
			sinkEndpoint = e
		})
	}
}

func BenchmarkSmoothWeightedPickParallel(b *testing.B) {
	for _, n := range benchSizes {
		b.Run(fmt.Sprintf("n=%d", n), func(b *testing.B) {
			p := NewSmoothWeighted(benchEndpoints(n))
			b.ReportAllocs()
			b.RunParallel(func(pb *testing.PB) {
				for pb.Next() {
					if _, err := p.Pick(); err != nil {
						b.Error(err)
						return
					}
				}
			})
		})
	}
}

func BenchmarkSmoothWeightedBuild(b *testing.B) {
	for _, n := range benchSizes {
		b.Run(fmt.Sprintf("n=%d", n), func(b *testing.B) {
			eps := benchEndpoints(n)
			b.ReportAllocs()
			var p *SmoothWeighted
			for b.Loop() {
				p = NewSmoothWeighted(eps)
			}
			b.ReportMetric(float64(len(p.sched)), "slots")
		})
	}
	// The most expensive exact build: 64 endpoints, L = 2^16, L·k = 2^22.
	b.Run("exact-max", func(b *testing.B) {
		w := make([]uint32, 64)
		for i := range w {
			w[i] = 1024
		}
		w[0], w[1] = 1023, 1025
		eps := endpoints(w...)
		b.ReportAllocs()
		var p *SmoothWeighted
		for b.Loop() {
			p = NewSmoothWeighted(eps)
		}
		if !p.exact || len(p.sched)*len(eps) != exactBudget {
			b.Fatalf("exact = %v, L·k = %d; want the exact regime at its budget", p.exact, len(p.sched)*len(eps))
		}
	})
}
