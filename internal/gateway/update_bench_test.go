package gateway

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/levee-gw/levee/internal/balance"
	"github.com/levee-gw/levee/internal/discovery"
	"github.com/levee-gw/levee/internal/endpoint"
)

// registryPayload is a JSON array of n instances with weights 1..10000,
// some as strings, as registries send them.
func registryPayload(n int, seed uint64) []byte {
	r := rand.New(rand.NewPCG(seed, 1))
	var b strings.Builder
	b.WriteString("[")
	for i := range n {
		if i > 0 {
			b.WriteString(",")
		}
		w := 1 + r.IntN(10000)
		if i%3 == 0 {
			fmt.Fprintf(&b, `{"address":"10.%d.%d.%d:8080","weight":"%d","zone":"z%d"}`, i>>16&255, i>>8&255, i&255, w, i%3)
		} else {
			fmt.Fprintf(&b, `{"address":"10.%d.%d.%d:8080","weight":%d,"zone":"z%d"}`, i>>16&255, i>>8&255, i&255, w, i%3)
		}
	}
	b.WriteString("]")
	return []byte(b.String())
}

func toEndpoints(list []discovery.Instance) []*endpoint.Endpoint {
	eps := make([]*endpoint.Endpoint, len(list))
	for i, in := range list {
		eps[i] = &endpoint.Endpoint{Address: in.Address, Weight: in.Weight, Zone: in.Zone, Stats: &endpoint.Stats{}}
	}
	return eps
}

// BenchmarkApplyUpdate: a 10,000-instance registry update, parsed,
// normalised and turned into each balancer's picker.
func BenchmarkApplyUpdate(b *testing.B) {
	data := registryPayload(10000, 1)
	builders := map[string]func([]*endpoint.Endpoint) balance.Picker{
		"weighted_round_robin": func(eps []*endpoint.Endpoint) balance.Picker { return balance.NewSmoothWeighted(eps) },
		"least_request": func(eps []*endpoint.Endpoint) balance.Picker {
			return balance.NewLeastRequest(eps, balance.LeastRequestOptions{})
		},
		"consistent_hash": func(eps []*endpoint.Endpoint) balance.Picker {
			return balance.NewConsistentHash(eps, balance.HashOptions{})
		},
	}
	for _, name := range []string{"weighted_round_robin", "least_request", "consistent_hash"} {
		b.Run(name+"/n=10000", func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				u, err := discovery.ParseList(data, discovery.Limits{})
				if err != nil || len(u.Instances) != 10000 {
					b.Fatalf("parse: %v (%d instances)", err, len(u.Instances))
				}
				builders[name](toEndpoints(u.Instances))
			}
		})
	}
}

// BenchmarkPickDuringUpdates: goroutines pick from the current picker (one
// atomic load, as the request path does) while another goroutine applies a
// 1,000-instance update every 100 ms. Reports the p99 and max latency of a
// single pick.
func BenchmarkPickDuringUpdates(b *testing.B) {
	payloads := [][]byte{registryPayload(1000, 1), registryPayload(1000, 2)}
	build := func(data []byte) balance.Picker {
		u, err := discovery.ParseList(data, discovery.Limits{})
		if err != nil {
			b.Fatal(err)
		}
		return balance.NewSmoothWeighted(toEndpoints(u.Instances))
	}
	var current atomic.Pointer[balance.Picker]
	p := build(payloads[0])
	current.Store(&p)
	stop := make(chan struct{})
	var wg sync.WaitGroup
	var updates atomic.Int64
	wg.Add(1)
	go func() {
		defer wg.Done()
		tick := time.NewTicker(100 * time.Millisecond)
		defer tick.Stop()
		for i := 1; ; i++ {
			select {
			case <-stop:
				return
			case <-tick.C:
				next := build(payloads[i%2])
				current.Store(&next)
				updates.Add(1)
			}
		}
	}()
	const samples = 1 << 16
	lat := make([]time.Duration, 0, samples)
	b.ResetTimer()
	for i := 0; b.Loop(); i++ {
		t0 := time.Now()
		if _, err := (*current.Load()).Pick(); err != nil {
			b.Fatal(err)
		}
		if len(lat) < samples {
			lat = append(lat, time.Since(t0))
		} else {
			lat[i%samples] = time.Since(t0)
		}
	}
	b.StopTimer()
	close(stop)
	wg.Wait()
	slices.Sort(lat)
	b.ReportMetric(float64(lat[len(lat)*99/100].Nanoseconds()), "p99-ns")
	b.ReportMetric(float64(lat[len(lat)-1].Nanoseconds()), "max-ns")
	b.ReportMetric(float64(updates.Load()), "updates")
}
