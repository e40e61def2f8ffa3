package gateway

import (
	"context"
	"encoding/hex"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	coltracepb "go.opentelemetry.io/proto/otlp/collector/trace/v1"
	commonpb "go.opentelemetry.io/proto/otlp/common/v1"
	tracepb "go.opentelemetry.io/proto/otlp/trace/v1"
	"google.golang.org/protobuf/proto"

	"github.com/levee-gw/levee/internal/testkit"
)

// otlpReceiver is a real OTLP/HTTP endpoint (protobuf) on loopback that
// keeps every span it is sent.
type otlpReceiver struct {
	srv   *httptest.Server
	mu    sync.Mutex
	spans []*tracepb.Span
	posts atomic.Int64
}

func newOTLPReceiver(t *testing.T) *otlpReceiver {
	t.Helper()
	rc := &otlpReceiver{}
	rc.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method != http.MethodPost || r.URL.Path != "/v1/traces" || r.Header.Get("Content-Type") != "application/x-protobuf" {
			t.Errorf("OTLP receiver: %s %s (%s), want POST /v1/traces of application/x-protobuf", r.Method, r.URL.Path, r.Header.Get("Content-Type"))
			http.Error(w, "bad request", http.StatusBadRequest)
			return
		}
		body, err := io.ReadAll(io.LimitReader(r.Body, 16<<20))
		var req coltracepb.ExportTraceServiceRequest
		if err == nil {
			err = proto.Unmarshal(body, &req)
		}
		if err != nil {
			t.Errorf("OTLP receiver: %v", err)
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		rc.mu.Lock()
		for _, rs := range req.ResourceSpans {
			if got := attr(rs.GetResource().GetAttributes(), "service.name"); got != "levee-test" {
				t.Errorf("resource service.name = %q, want levee-test", got)
			}
			for _, ss := range rs.ScopeSpans {
				rc.spans = append(rc.spans, ss.Spans...)
			}
		}
		rc.mu.Unlock()
		rc.posts.Add(1)
		out, _ := proto.Marshal(&coltracepb.ExportTraceServiceResponse{})
		w.Header().Set("Content-Type", "application/x-protobuf")
		_, _ = w.Write(out)
	}))
	t.Cleanup(rc.srv.Close)
	return rc
}

// trace returns the spans received of trace id (hex).
func (rc *otlpReceiver) trace(id string) []*tracepb.Span {
	rc.mu.Lock()
	defer rc.mu.Unlock()
	var out []*tracepb.Span
	for _, s := range rc.spans {
		if hex.EncodeToString(s.TraceId) == id {
			out = append(out, s)
		}
	}
	return out
}

// traceIDs returns every trace id received.
func (rc *otlpReceiver) traceIDs() map[string]bool {
	rc.mu.Lock()
	defer rc.mu.Unlock()
	out := map[string]bool{}
	for _, s := range rc.spans {
		out[hex.EncodeToString(s.TraceId)] = true
	}
	return out
}

// attr returns the attribute key's value as text ("" when absent).
func attr(kvs []*commonpb.KeyValue, key string) string {
	for _, kv := range kvs {
		if kv.Key != key {
			continue
		}
		switch v := kv.Value.Value.(type) {
		case *commonpb.AnyValue_StringValue:
			return v.StringValue
		case *commonpb.AnyValue_IntValue:
			return fmt.Sprint(v.IntValue)
		case *commonpb.AnyValue_BoolValue:
			return fmt.Sprint(v.BoolValue)
		}
	}
	return ""
}

// parentRecorder is a real backend that records the traceparent of every
// request it receives, by path, and answers 503 to the first request of
// a path under /flaky/.
type parentRecorder struct {
	srv  *httptest.Server
	mu   sync.Mutex
	seen map[string][]string
}

func newParentRecorder(t *testing.T) *parentRecorder {
	t.Helper()
	pr := &parentRecorder{seen: map[string][]string{}}
	pr.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		pr.mu.Lock()
		pr.seen[r.URL.Path] = append(pr.seen[r.URL.Path], strings.Join(r.Header.Values("Traceparent"), ","))
		first := len(pr.seen[r.URL.Path]) == 1
		pr.mu.Unlock()
		if first && strings.HasPrefix(r.URL.Path, "/flaky/") {
			w.WriteHeader(http.StatusServiceUnavailable)
			return
		}
		_, _ = io.WriteString(w, "ok")
	}))
	t.Cleanup(pr.srv.Close)
	return pr
}

func (pr *parentRecorder) parents(path string) []string {
	pr.mu.Lock()
	defer pr.mu.Unlock()
	return append([]string(nil), pr.seen[path]...)
}

// waitSpans polls (bounded) until the receiver holds n spans of trace id.
func waitSpans(t *testing.T, rc *otlpReceiver, id string, n int) []*tracepb.Span {
	t.Helper()
	var spans []*tracepb.Span
	testkit.Eventually(t, 10*time.Second, func() (bool, string) {
		spans = rc.trace(id)
		return len(spans) >= n, fmt.Sprintf("trace %s: %d spans received, want %d", id, len(spans), n)
	})
	return spans
}

// split returns the server span and the attempt spans (in attempt order).
func split(t *testing.T, spans []*tracepb.Span) (*tracepb.Span, []*tracepb.Span) {
	t.Helper()
	var server *tracepb.Span
	var attempts []*tracepb.Span
	for _, s := range spans {
		switch s.Kind {
		case tracepb.Span_SPAN_KIND_SERVER:
			if server != nil {
				t.Fatalf("two server spans in one trace")
			}
			server = s
		case tracepb.Span_SPAN_KIND_CLIENT:
			attempts = append(attempts, s)
		default:
			t.Fatalf("span %q of kind %v", s.Name, s.Kind)
		}
	}
	if server == nil {
		t.Fatal("no server span")
	}
	for i := 1; i < len(attempts); i++ {
		if attr(attempts[i].Attributes, "levee.attempt") < attr(attempts[i-1].Attributes, "levee.attempt") {
			attempts[i], attempts[i-1] = attempts[i-1], attempts[i]
		}
	}
	return server, attempts
}

// TestTracing: with tracing on over a real OTLP/HTTP receiver, a request
// with a sampled traceparent gets a server span continuing the caller's
// trace, parent of one client span per attempt, whose id the backend
// receives as its parent; a retried request has two attempt spans; a
// refusal has its reason; the access log's trace id is the span's; and
// with sampling 0, requests without a sampled parent send nothing (the
// backend still receives a traceparent: the caller's unsampled one
// unchanged, or one levee started, flag 00).
func TestTracing(t *testing.T) {
	rc := newOTLPReceiver(t)
	be := newParentRecorder(t)
	h := start(t, fmt.Sprintf(`
listen: 127.0.0.1:0
admin: {listen: 127.0.0.1:0}
log: {access: true}
tracing: {endpoint: %s, sampling: 0, service_name: levee-test, timeout: 5s}
upstreams:
  web:
    endpoints: [{address: %s}]
    retry: {attempts: 2, on: [503], backoff: {base: 1ms, max: 5ms}}
routes:
  - {name: web, match: {path_prefix: /web/}, upstream: web}
  - {name: flaky, match: {path_prefix: /flaky/}, upstream: web}
`, rc.srv.URL, hostPort(be.srv)))

	const (
		tidA, sidA = "4bf92f3577b34da6a3ce929d0e0e4736", "00f067aa0ba902b7"
		tidB       = "5bf92f3577b34da6a3ce929d0e0e4737"
		tidC       = "6bf92f3577b34da6a3ce929d0e0e4738"
		tidU       = "7bf92f3577b34da6a3ce929d0e0e4739"
	)
	do := func(path, id, traceparent string) int {
		t.Helper()
		hdr := []string{"X-Request-Id", id}
		if traceparent != "" {
			hdr = append(hdr, "Traceparent", traceparent, "Tracestate", "vendor=x")
		}
		resp := h.get(path, hdr...)
		_, _ = io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		return resp.StatusCode
	}
	if got := do("/web/a", "req-a", "00-"+tidA+"-"+sidA+"-01"); got != 200 {
		t.Fatalf("GET /web/a = %d", got)
	}
	if got := do("/flaky/b", "req-b", "00-"+tidB+"-"+sidA+"-01"); got != 200 {
		t.Fatalf("GET /flaky/b = %d (the retry should have answered)", got)
	}
	if got := do("/nowhere", "req-c", "00-"+tidC+"-"+sidA+"-01"); got != 404 {
		t.Fatalf("GET /nowhere = %d, want 404", got)
	}
	unsampled := "00-" + tidU + "-" + sidA + "-00"
	do("/web/u", "req-u", unsampled)
	do("/web/root", "req-root", "")
	do("/web/bad", "req-bad", "00-"+strings.ToUpper(tidU)+"-"+sidA+"-01") // invalid: restarted, unsampled

	// A: the caller's trace continued, server span parent of the attempt.
	server, attempts := split(t, waitSpans(t, rc, tidA, 2))
	if got := hex.EncodeToString(server.ParentSpanId); got != sidA {
		t.Errorf("server span's parent = %s, want the caller's span %s", got, sidA)
	}
	if server.Name != "web" || attr(server.Attributes, "levee.route") != "web" || attr(server.Attributes, "http.response.status_code") != "200" ||
		attr(server.Attributes, "http.request.method") != "GET" || attr(server.Attributes, "url.path") != "/web/a" ||
		attr(server.Attributes, "levee.upstream") != "web" || attr(server.Attributes, "levee.attempts") != "1" {
		t.Errorf("server span %q attributes %v", server.Name, server.Attributes)
	}
	if len(attempts) != 1 {
		t.Fatalf("%d attempt spans for one attempt", len(attempts))
	}
	a := attempts[0]
	if string(a.ParentSpanId) != string(server.SpanId) {
		t.Errorf("attempt's parent = %x, want the server span %x", a.ParentSpanId, server.SpanId)
	}
	if attr(a.Attributes, "levee.endpoint") != hostPort(be.srv) || attr(a.Attributes, "levee.attempt") != "1" ||
		attr(a.Attributes, "http.response.status_code") != "200" || attr(a.Attributes, "levee.retried") != "false" {
		t.Errorf("attempt span attributes %v", a.Attributes)
	}
	if got, want := be.parents("/web/a"), []string{"00-" + tidA + "-" + hex.EncodeToString(a.SpanId) + "-01"}; fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("backend received traceparent %v, want the attempt span's %v", got, want)
	}

	// B: retried, two attempt spans, each the parent the backend saw.
	server, attempts = split(t, waitSpans(t, rc, tidB, 3))
	if len(attempts) != 2 || attr(server.Attributes, "levee.attempts") != "2" {
		t.Fatalf("%d attempt spans (levee.attempts %s), want 2", len(attempts), attr(server.Attributes, "levee.attempts"))
	}
	if attr(attempts[0].Attributes, "http.response.status_code") != "503" || attr(attempts[0].Attributes, "levee.retried") != "true" ||
		attr(attempts[1].Attributes, "http.response.status_code") != "200" || attr(attempts[1].Attributes, "levee.retried") != "false" {
		t.Errorf("attempt spans: %v then %v", attempts[0].Attributes, attempts[1].Attributes)
	}
	seen := be.parents("/flaky/b")
	for i, s := range attempts {
		if string(s.ParentSpanId) != string(server.SpanId) {
			t.Errorf("attempt %d's parent is not the server span", i+1)
		}
		if want := "00-" + tidB + "-" + hex.EncodeToString(s.SpanId) + "-01"; len(seen) != 2 || seen[i] != want {
			t.Errorf("backend received %v, want attempt %d's %s", seen, i+1, want)
		}
	}

	// C: a refusal, no attempt.
	server, attempts = split(t, waitSpans(t, rc, tidC, 1))
	if len(attempts) != 0 || server.Name != "unrouted" || attr(server.Attributes, "levee.reason") != "no_route" ||
		attr(server.Attributes, "http.response.status_code") != "404" {
		t.Errorf("refusal's span %q attributes %v, %d attempts", server.Name, server.Attributes, len(attempts))
	}

	// Unsampled: the caller's traceparent passed on unchanged; roots get
	// one levee started, unsampled; none of them sent.
	if got := be.parents("/web/u"); len(got) != 1 || got[0] != unsampled {
		t.Errorf("backend received %v for an unsampled parent, want it unchanged (%s)", got, unsampled)
	}
	rootIDs := map[string]string{}
	for _, p := range []string{"/web/root", "/web/bad"} {
		got := be.parents(p)
		if len(got) != 1 || len(got[0]) != 55 || !strings.HasSuffix(got[0], "-00") || strings.Contains(got[0], strings.ToUpper(tidU)) {
			t.Fatalf("backend received %v for %s, want one new unsampled traceparent", got, p)
		}
		rootIDs[p] = got[0][3:35]
	}

	// The access log's trace id is the span's (or the started one's).
	lines := waitLines(t, h, "req-a", "req-b", "req-u", "req-root")
	for id, want := range map[string]string{"req-a": tidA, "req-b": tidB, "req-u": tidU, "req-root": rootIDs["/web/root"]} {
		if got := lines[id]["trace_id"]; got != want {
			t.Errorf("access log %s: trace_id %v, want %s", id, got, want)
		}
	}

	// Shutdown flushes what is queued: then exactly the sampled traces
	// were received.
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := h.g.Shutdown(ctx); err != nil {
		t.Fatal(err)
	}
	got := rc.traceIDs()
	if len(got) != 3 || !got[tidA] || !got[tidB] || !got[tidC] {
		t.Errorf("traces received %v, want exactly %s, %s and %s", got, tidA, tidB, tidC)
	}
	if n := len(rc.trace(tidA)) + len(rc.trace(tidB)) + len(rc.trace(tidC)); n != 6 {
		t.Errorf("%d spans received, want 6", n)
	}
	t.Logf("%d export requests for 6 spans", rc.posts.Load())
}
