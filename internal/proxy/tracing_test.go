package proxy

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/levee-gw/levee/internal/tracing"
	"github.com/prometheus/client_golang/prometheus"
)

// withTracing returns a handlerServe extra that turns tracing on with
// sampling, exporting to a discarding receiver; with parent set, each
// request carries it as its traceparent, else it is a root (the
// traceparent levee wrote the time before is removed).
func withTracing(tb testing.TB, sampling float64, parent string) func(*Options) func(*http.Request) {
	return func(o *Options) func(*http.Request) {
		sink := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { _, _ = io.Copy(io.Discard, r.Body) }))
		tb.Cleanup(sink.Close)
		m, err := tracing.NewMetrics(prometheus.NewRegistry())
		if err != nil {
			tb.Fatal(err)
		}
		tr, err := tracing.New(tracing.Options{Endpoint: sink.URL, Sampling: sampling, ServiceName: "bench", Timeout: 5 * time.Second,
			MaxQueue: 1 << 16, Metrics: m})
		if err != nil {
			tb.Fatal(err)
		}
		tr.Start()
		tb.Cleanup(func() {
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			_ = tr.Shutdown(ctx)
		})
		o.Tracer = tr
		tp := []string{parent}
		return func(r *http.Request) {
			if parent == "" {
				delete(r.Header, "Traceparent")
			} else {
				r.Header["Traceparent"] = tp
			}
		}
	}
}

var tracingCases = []struct {
	name     string
	sampling float64
	parent   string
	allocs   int // budget with the fast path; 0: not held
}{
	{"root-unsampled", 0, "", 17}, // + the new traceparent and its slice
	{"parent-unsampled", 1, "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-00", 15},
	{"root-1pct", 0.01, "", 0},
	{"root-sampled", 1, "", 0},
}

// BenchmarkHandlerTracing is BenchmarkHandler's fast path with tracing
// on: unsampled roots and callers, 1 % sampled, every request sampled.
func BenchmarkHandlerTracing(b *testing.B) {
	addr := cannedUpstream(b)
	for _, c := range tracingCases {
		b.Run(c.name, func(b *testing.B) {
			serve := handlerServe(b, addr, handlerCases[0], withTracing(b, c.sampling, c.parent))
			b.ReportAllocs()
			for b.Loop() {
				serve()
			}
		})
	}
}

// TestHandlerTracingAllocations: an unsampled request costs no span.
func TestHandlerTracingAllocations(t *testing.T) {
	addr := cannedUpstream(t)
	for _, c := range tracingCases {
		if c.allocs == 0 {
			continue
		}
		serve := handlerServe(t, addr, handlerCases[0], withTracing(t, c.sampling, c.parent))
		serve()
		if got := testing.AllocsPerRun(200, serve); got > float64(c.allocs) {
			t.Errorf("%s: %.1f allocations per request, budget %d", c.name, got, c.allocs)
		}
	}
}
