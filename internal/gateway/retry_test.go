package gateway

import (
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// countingBackend answers with the status the test sets (200 until told
// otherwise) and counts what reaches it.
type countingBackend struct {
	srv        *httptest.Server
	status     atomic.Int64
	retryAfter atomic.Value // string; "" for none
	hits       atomic.Int64
	mu         sync.Mutex
	bodies     []string
}

func newCountingBackend(t *testing.T) *countingBackend {
	b := &countingBackend{}
	b.status.Store(200)
	b.retryAfter.Store("")
	b.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b.hits.Add(1)
		body, _ := io.ReadAll(r.Body)
		b.mu.Lock()
		b.bodies = append(b.bodies, string(body))
		b.mu.Unlock()
		if ra := b.retryAfter.Load().(string); ra != "" {
			w.Header().Set("Retry-After", ra)
		}
		w.WriteHeader(int(b.status.Load()))
	}))
	t.Cleanup(b.srv.Close)
	return b
}

// TestRetryRules: what is retried, where, and what is not.
func TestRetryRules(t *testing.T) {
	b := newCountingBackend(t)
	hang := hangingBackend(t)
	h := start(t, fmt.Sprintf(`
listen: 127.0.0.1:0
admin: {listen: 127.0.0.1:0}
log: {access: false}
upstreams:
  deadfirst:
    endpoints: [{address: %[1]s}, {address: %[2]s}]
    # No budget at all: a retry that spent it would be refused, so the
    # connect-failure retries below passing proves they are free.
    retry: {attempts: 2, backoff: {base: 1ms, max: 5ms}, budget: {ratio: 0, min_per_second: 0}}
  one:
    endpoints: [{address: %[2]s}]
    retry: {attempts: 3, backoff: {base: 1ms, max: 5ms}}
  hangfirst:
    endpoints: [{address: %[3]s}, {address: %[2]s}]
    retry: {attempts: 2, per_try_timeout: 100ms, backoff: {base: 1ms, max: 5ms}}
  hangonly:
    endpoints: [{address: %[3]s}]
routes:
  - {name: deadfirst, match: {path_prefix: /deadfirst/}, upstream: deadfirst}
  - {name: one, match: {path_prefix: /one/}, upstream: one}
  - {name: hangfirst, match: {path_prefix: /hangfirst/}, upstream: hangfirst}
  - {name: deadline, match: {path_prefix: /deadline/}, upstream: hangonly, timeout: 200ms}
`, closedPort(t), hostPort(b.srv), hostPort(hang)))

	send := func(method, path, body string, hdr ...string) *http.Response {
		t.Helper()
		req, _ := http.NewRequest(method, h.base+path, strings.NewReader(body))
		if body == "" {
			req.Body = nil
		}
		for i := 0; i+1 < len(hdr); i += 2 {
			req.Header.Set(hdr[i], hdr[i+1])
		}
		resp, err := h.client.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		return resp
	}

	t.Run("connect failure goes to the other endpoint, any method", func(t *testing.T) {
		// The first POST goes to the dead endpoint or, if the live one
		// takes it, the next; until the refusal ejects the dead one every
		// other first pick is it. Nothing was sent, so even POST is retried.
		retried := func() bool {
			v, _ := h.lookupMetric(`levee_retries_total{reason="connect_failure",upstream="deadfirst"}`) // absent until the first retry
			return v > 0
		}
		for i := 0; !retried(); i++ {
			if i == 10 {
				t.Fatal("10 requests and no connect_failure retry: the dead endpoint was never picked")
			}
			if resp := send(http.MethodPost, "/deadfirst/", "payload"); resp.StatusCode != 200 {
				t.Fatalf("request %d (POST): status %d", i, resp.StatusCode)
			}
		}
		// The refusal ejected it at once (max_fails=1), without an
		// outlier_detection block: no more retries needed.
		waitFor(t, "the refusing endpoint ejected", func() bool {
			st, _ := endpointStates(t, h, "deadfirst")
			return countState(st, "ejected") == 1
		})
		before := h.metric(`levee_retries_total{reason="connect_failure",upstream="deadfirst"}`)
		for i := range 10 {
			if resp := send(http.MethodGet, "/deadfirst/", ""); resp.StatusCode != 200 {
				t.Fatalf("request %d after the ejection: status %d", i, resp.StatusCode)
			}
		}
		if got := h.metric(`levee_retries_total{reason="connect_failure",upstream="deadfirst"}`); got != before {
			t.Errorf("connect_failure retries went from %v to %v after the ejection, want no change", before, got)
		}
		if got := h.metric(`levee_upstream_ejections_total{reason="connect_refused",upstream="deadfirst"}`); got != 1 {
			t.Errorf("connect_refused ejections = %v, want 1", got)
		}
		// Connect failures must not spend the budget.
		h.noCount(`levee_retry_budget_exhausted_total{upstream="deadfirst"}`)
	})

	b.status.Store(503)
	t.Run("POST without idempotency key is not retried after it was sent", func(t *testing.T) {
		b.hits.Store(0)
		if resp := send(http.MethodPost, "/one/", "once"); resp.StatusCode != 503 {
			t.Fatalf("status %d", resp.StatusCode)
		}
		if n := b.hits.Load(); n != 1 {
			t.Fatalf("backend saw %d requests, want exactly 1", n)
		}
	})
	t.Run("idempotent GET is retried up to attempts", func(t *testing.T) {
		b.hits.Store(0)
		if resp := send(http.MethodGet, "/one/", ""); resp.StatusCode != 503 {
			t.Fatalf("status %d", resp.StatusCode)
		}
		if n := b.hits.Load(); n != 3 {
			t.Fatalf("backend saw %d requests, want 3 (attempts)", n)
		}
	})
	t.Run("POST with Idempotency-Key is retried with its body", func(t *testing.T) {
		b.hits.Store(0)
		b.mu.Lock()
		b.bodies = nil
		b.mu.Unlock()
		send(http.MethodPost, "/one/", "same-body", "Idempotency-Key", "k1")
		b.mu.Lock()
		defer b.mu.Unlock()
		if len(b.bodies) != 3 || b.bodies[0] != "same-body" || b.bodies[2] != "same-body" {
			t.Fatalf("backend saw bodies %q, want 3 x same-body", b.bodies)
		}
	})
	t.Run("Retry-After longer than the backoff is passed through, not retried", func(t *testing.T) {
		b.hits.Store(0)
		b.retryAfter.Store("2")
		defer b.retryAfter.Store("")
		resp := send(http.MethodGet, "/one/", "")
		if resp.StatusCode != 503 || resp.Header.Get("Retry-After") != "2" {
			t.Fatalf("status %d, Retry-After %q", resp.StatusCode, resp.Header.Get("Retry-After"))
		}
		if n := b.hits.Load(); n != 1 {
			t.Fatalf("backend saw %d requests, want 1", n)
		}
	})
	b.status.Store(200)
	t.Run("per-try timeout moves on to the other endpoint", func(t *testing.T) {
		for i := range 4 {
			if resp := send(http.MethodGet, "/hangfirst/", ""); resp.StatusCode != 200 {
				t.Fatalf("request %d: status %d", i, resp.StatusCode)
			}
		}
		if got := h.metric(`levee_retries_total{reason="timeout",upstream="hangfirst"}`); got < 2 {
			t.Errorf("timeout retries = %v, want >= 2", got)
		}
	})
	t.Run("route timeout answers 504 upstream_timeout", func(t *testing.T) {
		begin := time.Now()
		expectRefusal(t, h.get("/deadline/"), 504, "upstream_timeout")
		if d := time.Since(begin); d > 3*time.Second {
			t.Errorf("answered after %v; the route timeout is 200ms", d)
		}
	})
}
