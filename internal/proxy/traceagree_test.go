package proxy

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/levee-gw/levee/internal/telemetry"
	"github.com/levee-gw/levee/internal/tracing"
	"github.com/prometheus/client_golang/prometheus"
)

// lockedBuffer is an access log's writer read by the test.
type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// TestTraceparentAccessLogAgreesWithTracer: for each traceparent, the
// trace id the access log writes (the Handler's access log line, tracing
// off: it reads the header itself) is the trace the tracer continues
// (Tracer.Begin: the caller's trace id kept, and for a sampled parent the
// server span in that trace), or none when the tracer restarts the trace.
// Flags other than 00/01 ("ff" among them) are the case the two parsers
// once disagreed on.
func TestTraceparentAccessLogAgreesWithTracer(t *testing.T) {
	const tid, sid = "4bf92f3577b34da6a3ce929d0e0e4736", "00f067aa0ba902b7"
	cases := []struct {
		tp        string
		continued bool
	}{
		{"00-" + tid + "-" + sid + "-01", true},
		{"00-" + tid + "-" + sid + "-00", true},
		{"00-" + tid + "-" + sid + "-ff", true}, // any flags; only the sampled bit is read
		{"00-" + tid + "-" + sid + "-fe", true},
		{"00-" + tid + "-" + sid + "-03", true},
		{"00-" + tid + "-" + sid + "-09", true},
		{"01-" + tid + "-" + sid + "-ff-more", true}, // a later version may add fields
		{"cc-" + tid + "-" + sid + "-01", true},
		{"00-" + tid + "-" + sid + "-01-extra", false}, // version 00 has no extra field
		{"00-" + tid + "-" + sid + "-01-", false},
		{"ff-" + tid + "-" + sid + "-01", false}, // version ff is invalid
		{"00-00000000000000000000000000000000-" + sid + "-01", false},
		{"00-" + tid + "-0000000000000000-01", false},
		{"00-" + strings.ToUpper(tid) + "-" + sid + "-01", false},
		{"00-" + tid + "-" + sid + "-0g", false},
		{"00-" + tid + "-" + sid + "-f", false},
		{"01-" + tid + "-" + sid + "-01x", false},
	}

	// The tracer, as the gateway builds it (sampling 0: only a sampled
	// parent makes a span), exporting to a discarding collector.
	sink := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { _, _ = io.Copy(io.Discard, r.Body) }))
	defer sink.Close()
	tm, err := tracing.NewMetrics(prometheus.NewRegistry())
	if err != nil {
		t.Fatal(err)
	}
	tr, err := tracing.New(tracing.Options{Endpoint: sink.URL, Sampling: 0, ServiceName: "agree", Timeout: 5 * time.Second, MaxQueue: 64, Metrics: tm})
	if err != nil {
		t.Fatal(err)
	}
	tr.Start()
	defer func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		_ = tr.Shutdown(ctx)
	}()

	// The access log, on a Handler without tracing: every request is
	// refused no_route and logged (4xx lines are always kept).
	reg := prometheus.NewRegistry()
	m, err := NewMetrics(reg)
	if err != nil {
		t.Fatal(err)
	}
	out := &lockedBuffer{}
	al, err := telemetry.NewAccessLog(telemetry.AccessOptions{Writer: out, Sample2xx: 1}, reg)
	if err != nil {
		t.Fatal(err)
	}
	go al.Run()
	h, err := NewHandler(NewTable(nil, nil, m), Options{Metrics: m, AccessLog: al})
	if err != nil {
		t.Fatal(err)
	}
	for i, c := range cases {
		r := httptest.NewRequest(http.MethodGet, "/agree", nil)
		r.Header.Set("X-Request-Id", "agree-"+string(rune('a'+i)))
		r.Header.Set("Traceparent", c.tp)
		h.ServeHTTP(httptest.NewRecorder(), r)
	}
	al.Close() // writes every line logged so far
	logged := map[string]string{}
	for _, line := range strings.Split(strings.TrimSpace(out.String()), "\n") {
		var e struct {
			RequestID string `json:"request_id"`
			TraceID   string `json:"trace_id"`
		}
		if err := json.Unmarshal([]byte(line), &e); err != nil {
			t.Fatalf("access log line %q: %v", line, err)
		}
		logged[e.RequestID] = e.TraceID
	}

	for i, c := range cases {
		logID, ok := logged["agree-"+string(rune('a'+i))]
		if !ok {
			t.Fatalf("%q: no access log line", c.tp)
		}
		hdr := http.Header{"Traceparent": {c.tp}}
		rq := tr.Begin(hdr)
		continued := rq.TraceID == tid
		if rq.Span != nil {
			got := rq.Span.SpanContext().TraceID().String()
			continued = continued && got == tid
			tracing.EndServer(rq.Span, tracing.ServerEnd{Status: 404})
		}
		if continued != c.continued {
			t.Errorf("%q: the tracer continues the caller's trace: %v, want %v (trace %q)", c.tp, continued, c.continued, rq.TraceID)
		}
		want := ""
		if continued {
			want = tid
		}
		if logID != want {
			t.Errorf("%q: the access log names trace %q, the tracer %q (continued %v)", c.tp, logID, rq.TraceID, continued)
		}
	}
}
