package tracing

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// newTestTracer returns a started tracer exporting to url, shut down at
// the test's end.
func newTestTracer(t *testing.T, url string, sampling float64, queue int) (*Tracer, *Metrics) {
	t.Helper()
	m, err := NewMetrics(prometheus.NewRegistry())
	if err != nil {
		t.Fatal(err)
	}
	tr, err := New(Options{Endpoint: url, Sampling: sampling, ServiceName: "test", Timeout: 5 * time.Second, MaxQueue: queue,
		Metrics: m, BatchDelay: time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	tr.Start()
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		_ = tr.Shutdown(ctx)
	})
	return tr, m
}

const sampledParent = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"

// TestBegin: the sampling decision and what goes upstream.
func TestBegin(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { _, _ = io.Copy(io.Discard, r.Body) }))
	defer srv.Close()
	off, _ := newTestTracer(t, srv.URL, 0, 16)
	on, _ := newTestTracer(t, srv.URL, 1, 16)

	h := http.Header{"Traceparent": {sampledParent}, "Tracestate": {"v=1"}}
	rq := off.Begin(h)
	if rq.Span == nil || rq.TraceID != sampledParent[3:35] || !rq.Span.SpanContext().IsSampled() {
		t.Errorf("a sampled parent with sampling 0: %+v, want a sampled span of its trace", rq)
	}
	if got := rq.Span.SpanContext().TraceState().String(); got != "v=1" {
		t.Errorf("tracestate %q, want the caller's", got)
	}
	rq.Span.End()

	unsampled := "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-00"
	h = http.Header{"Traceparent": {unsampled}}
	if rq := on.Begin(h); rq.Span != nil || rq.TraceID != unsampled[3:35] || h.Get("Traceparent") != unsampled {
		t.Errorf("an unsampled parent with sampling 1: %+v, header %v; want no span, the header unchanged", rq, h)
	}

	for _, tc := range []struct {
		name string
		h    http.Header
	}{
		{"none", http.Header{}},
		{"invalid", http.Header{"Traceparent": {"00-zz"}, "Tracestate": {"v=1"}}},
		{"two", http.Header{"Traceparent": {sampledParent, sampledParent}}},
	} {
		h := tc.h.Clone()
		rq := off.Begin(h)
		tp := h["Traceparent"]
		if rq.Span != nil || len(tp) != 1 || h["Tracestate"] != nil {
			t.Fatalf("%s with sampling 0: span %v, header %v; want no span, one new traceparent, no tracestate", tc.name, rq.Span, h)
		}
		p, ok := ParseTraceparent(tp[0])
		if !ok || p.Sampled || rq.TraceID != tp[0][3:35] || tp[0] == sampledParent {
			t.Errorf("%s: started %q (trace id %q), want a new unsampled traceparent", tc.name, tp[0], rq.TraceID)
		}
		h = tc.h.Clone()
		rq = on.Begin(h)
		if rq.Span == nil || !rq.Span.SpanContext().IsSampled() || h["Tracestate"] != nil || h["Traceparent"] != nil {
			t.Fatalf("%s with sampling 1: %+v, header %v; want a root span and the old headers gone", tc.name, rq, h)
		}
		if rq.TraceID != rq.Span.SpanContext().TraceID().String() || strings.Contains(sampledParent, rq.TraceID) {
			t.Errorf("%s: trace id %q, want the new root's", tc.name, rq.TraceID)
		}
		ah := http.Header{}
		span := on.BeginAttempt(rq.Ctx, ah, "192.0.2.1:80", 1)
		p, ok = ParseTraceparent(ah.Get("Traceparent"))
		if !ok || !p.Sampled || p.SpanID != span.SpanContext().SpanID() || p.TraceID != rq.Span.SpanContext().TraceID() {
			t.Errorf("%s: attempt sends %q, want its own span %s in the trace", tc.name, ah.Get("Traceparent"), span.SpanContext().SpanID())
		}
		EndAttempt(span, AttemptEnd{Status: 200})
		EndServer(rq.Span, ServerEnd{Status: 200})
	}
}

// TestBeginUnsampledAllocs: an unsampled request costs no span; a
// caller's unsampled parent costs nothing, a root its new traceparent.
func TestBeginUnsampledAllocs(t *testing.T) {
	off, _ := newTestTracer(t, "http://127.0.0.1:9", 0, 16)
	unsampled := http.Header{"Traceparent": {"00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-00"}}
	if n := testing.AllocsPerRun(100, func() { _ = off.Begin(unsampled) }); n != 0 {
		t.Errorf("Begin with an unsampled parent allocates %v times, want 0", n)
	}
	h := http.Header{}
	if n := testing.AllocsPerRun(100, func() { delete(h, "Traceparent"); _ = off.Begin(h) }); n > 2 {
		t.Errorf("Begin of an unsampled root allocates %v times, want at most 2 (the traceparent and its slice)", n)
	}
}

// TestQueueBound: while an export is stuck at the collector, spans past
// the queue's bound are dropped and counted, never waited for; Shutdown
// sends the queued ones.
func TestQueueBound(t *testing.T) {
	arrived, release := make(chan struct{}, 16), make(chan struct{})
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		arrived <- struct{}{}
		select {
		case <-release:
		case <-time.After(10 * time.Second):
		}
	}))
	defer srv.Close()
	tr, m := newTestTracer(t, srv.URL, 1, 2)
	end := func() {
		rq := tr.Begin(http.Header{})
		EndServer(rq.Span, ServerEnd{Status: 200})
	}
	end()
	select {
	case <-arrived: // the first export is in flight and stays there
	case <-time.After(10 * time.Second):
		t.Fatal("no export within 10s")
	}
	start := time.Now()
	for range 5 {
		end()
	}
	if d := time.Since(start); d > time.Second {
		t.Errorf("ending 5 spans took %v with the exporter stuck", d)
	}
	if got := testutil.ToFloat64(m.dropped); got != 3 {
		t.Errorf("dropped = %v, want 3 (5 ended while 1 was exporting, queue of 2)", got)
	}
	close(release)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := tr.Shutdown(ctx); err != nil {
		t.Fatal(err)
	}
	if got := testutil.ToFloat64(m.exported); got != 3 {
		t.Errorf("exported = %v, want 3 (the first and the 2 queued)", got)
	}
}

// TestExportFailureCounted: a collector that refuses costs spans, counted.
func TestExportFailureCounted(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		http.Error(w, "no", http.StatusBadRequest)
	}))
	defer srv.Close()
	tr, m := newTestTracer(t, srv.URL, 1, 16)
	rq := tr.Begin(http.Header{})
	EndServer(rq.Span, ServerEnd{Status: 200})
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := tr.Shutdown(ctx); err != nil {
		t.Fatal(err)
	}
	if got, ok := testutil.ToFloat64(m.failed), testutil.ToFloat64(m.exported); got != 1 || ok != 0 {
		t.Errorf("failed = %v, exported = %v; want 1 and 0", got, ok)
	}
}

func TestExportURL(t *testing.T) {
	for in, want := range map[string]string{
		"http://127.0.0.1:4318":            "http://127.0.0.1:4318/v1/traces",
		"http://127.0.0.1:4318/":           "http://127.0.0.1:4318/v1/traces",
		"https://otel.example/custom/path": "https://otel.example/custom/path",
		"ftp://x":                          "",
		"http://":                          "",
		"http://u:p@x/":                    "",
		"http://x/?q=1":                    "",
		"127.0.0.1:4318":                   "",
	} {
		got, err := ExportURL(in)
		if (err == nil) != (want != "") || got != want {
			t.Errorf("ExportURL(%q) = %q, %v; want %q", in, got, err, want)
		}
	}
}
