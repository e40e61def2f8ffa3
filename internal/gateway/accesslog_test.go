package gateway

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/levee-gw/levee/internal/testkit"
)

// accessLines returns the access log lines in h's log output, by request
// id (the structured log's lines have no request_id).
func accessLines(t *testing.T, h *harness) map[string]map[string]any {
	t.Helper()
	out := map[string]map[string]any{}
	for _, line := range strings.Split(h.logs.String(), "\n") {
		if !strings.Contains(line, `"request_id"`) {
			continue
		}
		var m map[string]any
		if err := json.Unmarshal([]byte(line), &m); err != nil {
			t.Fatalf("access log line %q: %v", line, err)
		}
		out[m["request_id"].(string)] = m
	}
	return out
}

// waitLines polls (bounded) until h's access log holds a line for every
// id: lines are written by the log's own goroutine, after the answer.
func waitLines(t *testing.T, h *harness, ids ...string) map[string]map[string]any {
	t.Helper()
	var lines map[string]map[string]any
	testkit.Eventually(t, 10*time.Second, func() (bool, string) {
		lines = accessLines(t, h)
		for _, id := range ids {
			if lines[id] == nil {
				return false, fmt.Sprintf("no access log line for %q; log:\n%s", id, h.logs.String())
			}
		}
		return true, ""
	})
	return lines
}

// accessDo sends a request with headers (name, value pairs) and returns the
// status and the body read.
func accessDo(t *testing.T, h *harness, method, path, body string, hdr ...string) (int, string) {
	t.Helper()
	var rd io.Reader
	if body != "" {
		rd = strings.NewReader(body)
	}
	req, err := http.NewRequest(method, h.base+path, rd)
	if err != nil {
		t.Fatal(err)
	}
	for i := 0; i+1 < len(hdr); i += 2 {
		req.Header.Set(hdr[i], hdr[i+1])
	}
	resp, err := h.client.Do(req)
	if err != nil {
		t.Fatalf("%s %s: %v", method, path, err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return resp.StatusCode, string(b)
}

// TestAccessLogFields: over real sockets, each field of the access log
// line: a plain GET with a traceparent, a user agent and redacted query
// keys; the same again on a reused upstream connection; a POST's
// bytes_in and connect time, on both transports' paths; a retried request's attempts and upstream_status; a refusal's
// bytes_out; an invalid traceparent left out; an upstream status levee
// replaced (an unasked protocol switch, answered 502).
func TestAccessLogFields(t *testing.T) {
	var flaky atomic.Int64 // the first /flaky request overall gets 503
	handler := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		if r.URL.Path == "/flaky" && flaky.Add(1) == 1 {
			w.WriteHeader(http.StatusServiceUnavailable)
			return
		}
		fmt.Fprintf(w, "got %d bytes", len(body))
	})
	a, b := httptest.NewServer(handler), httptest.NewServer(handler)
	t.Cleanup(a.Close)
	t.Cleanup(b.Close)
	// sw switches protocols unasked: levee answers 502 in its place.
	sw := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		conn, bw, err := http.NewResponseController(w).Hijack()
		if err != nil {
			return
		}
		defer conn.Close()
		_, _ = bw.WriteString("HTTP/1.1 101 Switching Protocols\r\nConnection: Upgrade\r\nUpgrade: other\r\n\r\n")
		_ = bw.Flush()
	}))
	t.Cleanup(sw.Close)
	h := start(t, fmt.Sprintf(`
listen: 127.0.0.1:0
admin: {listen: 127.0.0.1:0}
log:
  access: {redact_query: [token, api_key]}
upstreams:
  one:
    endpoints: [{address: %[1]s}]
  two:
    endpoints: [{address: %[1]s}, {address: %[2]s}]
    retry: {attempts: 2, on: [503], backoff: {base: 1ms, max: 5ms}}
  sw:
    endpoints: [{address: %[3]s}]
routes:
  - {name: sw, match: {path_prefix: /switch}, upstream: sw}
  - {name: flaky, match: {path_prefix: /flaky}, upstream: two}
  - {name: echo, match: {path_prefix: /echo}, upstream: one}
`, hostPort(a), hostPort(b), hostPort(sw)))

	const traceID = "4bf92f3577b34da6a3ce929d0e0e4736"
	const traceparent = "00-" + traceID + "-00f067aa0ba902b7-01"
	st, getBody := accessDo(t, h, "GET", "/echo/x?a=1&token=s3cret-t&API_KEY=s3cret-k&b=%20", "",
		"X-Request-Id", "get-1", "User-Agent", "levee-test/1.0", "Traceparent", traceparent)
	if st != 200 {
		t.Fatalf("GET: %d", st)
	}
	// get-1's line is written after its upstream connection went back to
	// the pool: then get-2 finds it there.
	waitLines(t, h, "get-1")
	if st, _ := accessDo(t, h, "GET", "/echo/again", "", "X-Request-Id", "get-2", "Traceparent", "00-"+traceID+"-0000000000000000-01"); st != 200 {
		t.Fatalf("second GET: %d", st)
	}
	post := strings.Repeat("p", 1234)
	if st, _ := accessDo(t, h, "POST", "/echo/post", post, "X-Request-Id", "post-1"); st != 200 {
		t.Fatalf("POST: %d", st)
	}
	// The POSTs go through net/http's transport (the fast path takes no
	// body): post-1 dials its own connection, post-2 reuses it.
	waitLines(t, h, "post-1")
	if st, _ := accessDo(t, h, "POST", "/echo/post", "z", "X-Request-Id", "post-2"); st != 200 {
		t.Fatalf("second POST: %d", st)
	}
	if st, _ := accessDo(t, h, "GET", "/flaky", "", "X-Request-Id", "retry-1"); st != 200 {
		t.Fatalf("retried GET: %d", st)
	}
	st, refusalBody := accessDo(t, h, "GET", "/nowhere?token=s3cret-n", "", "X-Request-Id", "refused-1")
	if st != 404 {
		t.Fatalf("GET /nowhere: %d", st)
	}

	if st, _ := accessDo(t, h, "POST", "/switch", "x", "X-Request-Id", "switch-1"); st != 502 {
		t.Fatalf("POST /switch: %d", st)
	}

	lines := waitLines(t, h, "get-1", "get-2", "post-1", "post-2", "retry-1", "refused-1", "switch-1")
	for _, id := range []string{"get-1", "post-1", "retry-1", "refused-1"} {
		t.Logf("%s: %v", id, lines[id])
	}
	for _, secret := range []string{"s3cret-t", "s3cret-k", "s3cret-n"} {
		if strings.Contains(h.logs.String(), secret) {
			t.Errorf("the log holds the redacted value %q", secret)
		}
	}
	check := func(id string, want map[string]any, absent ...string) {
		t.Helper()
		l := lines[id]
		for k, v := range want {
			if l[k] != v {
				t.Errorf("%s: %s = %#v, want %#v (line %v)", id, k, l[k], v, l)
			}
		}
		for _, k := range absent {
			if _, ok := l[k]; ok {
				t.Errorf("%s: %s present (%v), want it left out", id, k, l[k])
			}
		}
	}
	n := func(v int) float64 { return float64(v) }
	check("get-1", map[string]any{
		"trace_id": traceID, "method": "GET", "host": strings.TrimPrefix(h.base, "http://"), "path": "/echo/x",
		"query": "a=1&token=REDACTED&API_KEY=REDACTED&b=%20", "proto": "HTTP/1.1", "status": n(200),
		"upstream_status": n(200), "route": "echo", "upstream": "one", "endpoint": hostPort(a),
		"bytes_in": n(0), "bytes_out": n(len(getBody)), "user_agent": "levee-test/1.0",
	}, "reason", "attempts", "app")
	check("get-2", map[string]any{"path": "/echo/again", "status": n(200), "upstream_connect_ms": n(0)}, "trace_id", "query")
	check("post-1", map[string]any{"method": "POST", "bytes_in": n(len(post)), "bytes_out": n(len("got 1234 bytes")), "status": n(200)})
	check("retry-1", map[string]any{"status": n(200), "upstream_status": n(200), "attempts": n(2), "route": "flaky", "upstream": "two"})
	check("refused-1", map[string]any{
		"status": n(404), "reason": "no_route", "bytes_out": n(len(refusalBody)), "query": "token=REDACTED",
	}, "upstream_status", "attempts", "upstream_connect_ms", "upstream_first_byte_ms")

	check("switch-1", map[string]any{"status": n(502), "reason": "upstream_unavailable", "upstream_status": n(101)})

	// Times: the first request dialled its connection (get-2 reused it,
	// checked above); every answered request has a first byte.
	for _, id := range []string{"get-1", "post-1"} {
		if c, _ := lines[id]["upstream_connect_ms"].(float64); c <= 0 {
			t.Errorf("%s: upstream_connect_ms = %v, want > 0 (a new connection)", id, lines[id]["upstream_connect_ms"])
		}
	}
	check("post-2", map[string]any{"bytes_in": n(1), "upstream_connect_ms": n(0)})
	for _, id := range []string{"get-1", "get-2", "post-1", "post-2", "retry-1"} {
		l := lines[id]
		fb, _ := l["upstream_first_byte_ms"].(float64)
		d, _ := l["duration_ms"].(float64)
		if fb <= 0 || d < fb {
			t.Errorf("%s: upstream_first_byte_ms %v, duration_ms %v: want 0 < first byte <= duration", id, l["upstream_first_byte_ms"], l["duration_ms"])
		}
		if _, err := time.Parse(time.RFC3339Nano, l["time"].(string)); err != nil {
			t.Errorf("%s: time: %v", id, err)
		}
		if c, _ := l["client"].(string); !strings.HasPrefix(c, "127.0.0.1:") {
			t.Errorf("%s: client = %q", id, c)
		}
	}
}

// TestAccessLogSampling: with sample_2xx 0 no 2xx answer is logged and
// every 4xx and 5xx is; with 1 every request is.
func TestAccessLogSampling(t *testing.T) {
	ok, _ := backend(t, "ok")
	for _, rate := range []string{"0", "1"} {
		t.Run("sample_2xx="+rate, func(t *testing.T) {
			h := start(t, fmt.Sprintf(`
listen: 127.0.0.1:0
admin: {listen: 127.0.0.1:0}
log:
  access: {sample_2xx: %s}
upstreams:
  ok: {endpoints: [{address: %s}]}
  dead: {endpoints: [{address: %s}]}
routes:
  - {name: dead, match: {path_prefix: /dead}, upstream: dead}
  - {name: ok, match: {path_prefix: /ok}, upstream: ok}
`, rate, hostPort(ok), closedPort(t)))
			var twoxx, others []string
			for i := range 10 {
				id := fmt.Sprintf("ok-%d", i)
				twoxx = append(twoxx, id)
				if st, _ := accessDo(t, h, "GET", "/ok", "", "X-Request-Id", id); st != 200 {
					t.Fatalf("GET /ok: %d", st)
				}
			}
			for i := range 3 {
				id := fmt.Sprintf("nf-%d", i)
				others = append(others, id)
				if st, _ := accessDo(t, h, "GET", "/missing", "", "X-Request-Id", id); st != 404 {
					t.Fatalf("GET /missing: %d", st)
				}
			}
			others = append(others, "dead-1")
			if st, _ := accessDo(t, h, "GET", "/dead", "", "X-Request-Id", "dead-1"); st != 502 {
				t.Fatalf("GET /dead: %d", st)
			}
			if rate == "1" {
				waitLines(t, h, append(twoxx, others...)...)
				return
			}
			lines := waitLines(t, h, others...)
			for _, id := range twoxx {
				if lines[id] != nil {
					t.Errorf("sample_2xx 0 logged the 200 %s", id)
				}
			}
		})
	}
}
