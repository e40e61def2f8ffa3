package clusterlimit

import (
	"context"
	"slices"
	"sync/atomic"
	"testing"
	"time"

	"github.com/levee-gw/levee/internal/ratelimit"
	"github.com/levee-gw/levee/internal/testsvc"
)

// BenchmarkDecideRedis is one request's decision through Redis on
// loopback (an app × route limit and the app's, both admitting), one
// caller at a time: it reports the p50 and p99 of a decision and the
// round trips per decision the client made (a go-redis hook; 1).
func BenchmarkDecideRedis(b *testing.B) {
	r := testsvc.StartRedis(b)
	l := newLimiter(b, r.Address, nil)
	checks := []ratelimit.Check{
		{Key: "route", Policy: ratelimit.Policy{Rate: mustRate(b, 1e9, 1e9)}},
		{Key: "app", Policy: ratelimit.Policy{Rate: mustRate(b, 1e9, 1e9)}},
	}
	ctx := context.Background()
	l.Decide(ctx, checks, nil, time.Now()) // loads the script
	var sent atomic.Int64
	l.client.AddHook(countHook{&sent})
	lat := make([]time.Duration, 0, b.N)
	b.ResetTimer()
	for range b.N {
		start := time.Now()
		if d, _ := l.Decide(ctx, checks, nil, start); !d.Allowed {
			b.Fatalf("refused: %+v", d)
		}
		lat = append(lat, time.Since(start))
	}
	b.StopTimer()
	if !l.Up() {
		b.Fatal("decisions fell back")
	}
	slices.Sort(lat)
	b.ReportMetric(float64(lat[len(lat)/2].Microseconds()), "p50-µs")
	b.ReportMetric(float64(lat[len(lat)*99/100].Microseconds()), "p99-µs")
	b.ReportMetric(float64(sent.Load())/float64(b.N), "roundtrips/op")
}

// BenchmarkDecideRedisParallel is the same decision from many callers at
// once (RunParallel with 32 goroutines per core, distinct keys), as a node
// under load makes them: their decisions share script calls (batch.go), so
// round trips per decision fall below 1.
func BenchmarkDecideRedisParallel(b *testing.B) {
	r := testsvc.StartRedis(b)
	l := newLimiter(b, r.Address, nil)
	var id atomic.Int64
	ctx := context.Background()
	l.Decide(ctx, []ratelimit.Check{{Key: "warm", Policy: ratelimit.Policy{Rate: mustRate(b, 1e9, 1e9)}}}, nil, time.Now())
	var sent atomic.Int64
	l.client.AddHook(countHook{&sent})
	b.ResetTimer()
	b.SetParallelism(32)
	b.RunParallel(func(pb *testing.PB) {
		key := "app" + string(rune('a'+id.Add(1)))
		checks := []ratelimit.Check{{Key: key, Policy: ratelimit.Policy{Rate: mustRate(b, 1e9, 1e9)}}}
		for pb.Next() {
			l.Decide(ctx, checks, nil, time.Now())
		}
	})
	b.StopTimer()
	if !l.Up() {
		b.Fatal("decisions fell back")
	}
	b.ReportMetric(float64(sent.Load())/float64(b.N), "roundtrips/op")
}
