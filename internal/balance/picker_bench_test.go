package balance

import (
	"fmt"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/levee-gw/levee/internal/endpoint"
)

var pickerBenchSizes = []int{10, 1000, 10000}

// hundredthsEndpoints returns n endpoints with weights 1..1,000,000 drawn by
// a fixed seed, with distinct addresses.
func hundredthsEndpoints(n int) []*endpoint.Endpoint {
	r := rand.New(rand.NewPCG(uint64(n), 43))
	return addrEndpoints(randomWeights(r, n, maxWeight)...)
}

func BenchmarkLeastRequestPick(b *testing.B) {
	for _, ewma := range []bool{false, true} {
		for _, n := range pickerBenchSizes {
			name := fmt.Sprintf("n=%d", n)
			if ewma {
				name = "ewma/" + name
			}
			b.Run(name, func(b *testing.B) {
				eps := hundredthsEndpoints(n)
				for i, e := range eps {
					e.Stats.Inflight.Store(int64(i % 7))
				}
				p := NewLeastRequest(eps, LeastRequestOptions{EWMA: ewma})
				b.ReportAllocs()
				var e *endpoint.Endpoint
				for b.Loop() {
					e, _ = p.Pick()
				}
				sinkEndpoint = e
			})
		}
	}
}

func BenchmarkLeastRequestPickParallel(b *testing.B) {
	for _, n := range pickerBenchSizes {
		b.Run(fmt.Sprintf("n=%d", n), func(b *testing.B) {
			p := NewLeastRequest(hundredthsEndpoints(n), LeastRequestOptions{})
			b.ReportAllocs()
			b.RunParallel(func(pb *testing.PB) {
				for pb.Next() {
					e, _ := p.Pick()
					e.Begin()
					e.End(endpoint.Success)
				}
			})
		})
	}
}

func BenchmarkLeastRequestObserve(b *testing.B) {
	eps := hundredthsEndpoints(1000)
	p := NewLeastRequest(eps, LeastRequestOptions{EWMA: true})
	now := time.Unix(1e9, 0)
	b.ReportAllocs()
	for b.Loop() {
		now = now.Add(time.Millisecond)
		p.Observe(eps[7], 3*time.Millisecond, now)
	}
}

func BenchmarkConsistentHashPick(b *testing.B) {
	for _, n := range pickerBenchSizes {
		b.Run(fmt.Sprintf("n=%d", n), func(b *testing.B) {
			p := NewConsistentHash(hundredthsEndpoints(n), HashOptions{})
			b.ReportAllocs()
			var e *endpoint.Endpoint
			key := uint64(0)
			for b.Loop() {
				key++
				e, _ = p.PickKey(key)
			}
			sinkEndpoint = e
		})
	}
}

func BenchmarkHashKey(b *testing.B) {
	b.ReportAllocs()
	var h uint64
	for b.Loop() {
		h += HashKey("session=8f14e45fceea167a5a36dedd4bea2543")
	}
	sinkKey = h
}

var sinkKey uint64

func BenchmarkLeastRequestBuild(b *testing.B) {
	eps := hundredthsEndpoints(10000)
	b.ReportAllocs()
	for b.Loop() {
		_ = NewLeastRequest(eps, LeastRequestOptions{})
	}
}

func BenchmarkConsistentHashBuild(b *testing.B) {
	for _, n := range pickerBenchSizes {
		b.Run(fmt.Sprintf("n=%d", n), func(b *testing.B) {
			eps := hundredthsEndpoints(n)
			b.ReportAllocs()
			var p *ConsistentHash
			for b.Loop() {
				p = NewConsistentHash(eps, HashOptions{})
			}
			b.ReportMetric(float64(p.TableSize()), "slots")
			b.ReportMetric(float64(p.probes)/float64(p.TableSize()), "probes/slot")
		})
	}
}

func BenchmarkGuardedPick(b *testing.B) {
	eps := hundredthsEndpoints(1000)
	g := Guarded(NewLeastRequest(eps, LeastRequestOptions{}), eps, nil)
	b.ReportAllocs()
	for b.Loop() {
		_, _ = g.Pick()
	}
}
