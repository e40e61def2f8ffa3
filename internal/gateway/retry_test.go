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

	"github.com/levee-gw/levee/client"
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
    retry: {attempts: 2, backoff: {base: 1ms, max: 5ms}}
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
		for i := 0; h.metric(`levee_retries_total{reason="connect_failure",upstream="deadfirst"}`) == 0; i++ {
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

// offerFixedRate sends n requests at rate per second (open loop: each at
// its own time, whatever happened to earlier ones) through do, and waits for
// all of them.
func offerFixedRate(n int, rate float64, do func()) {
	var wg sync.WaitGroup
	begin := time.Now()
	for i := range n {
		if d := time.Until(begin.Add(time.Duration(float64(i) / rate * float64(time.Second)))); d > 0 {
			time.Sleep(d)
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			do()
		}()
	}
	wg.Wait()
}

// TestRetryAmplification is the retry storm of the outages, replayed: a
// backend that answers 503 to everything while clients offer a fixed
// 200 requests/s through levee with attempts: 3 and a 0.2 budget. The
// backend must receive at most 1.2x the offered requests plus the budget's
// fixed allowance, where naive retries would send 3x. Then clients that
// retry on their own: a naive one (immediately, 3 attempts) against the
// client package; the requests reaching levee per offered request are
// reported, and the client package's must be at most 1.3. Last, the
// backend recovers: success returns to 100 % within 2 s and the client's
// throttle opens.
func TestRetryAmplification(t *testing.T) {
	if testing.Short() {
		t.Skip("20 s load test")
	}
	b := newCountingBackend(t)
	b.status.Store(503)
	h := start(t, fmt.Sprintf(`
listen: 127.0.0.1:0
admin: {listen: 127.0.0.1:0}
log: {access: false}
upstreams:
  data:
    endpoints: [{address: %s}]
    retry:
      attempts: 3
      backoff: {base: 1ms, max: 10ms}
      budget: {ratio: 0.2, min_per_second: 5}
routes:
  - {name: data, match: {path_prefix: /}, upstream: data}
`, hostPort(b.srv)))
	const rate = 200.0
	tr := &http.Transport{MaxIdleConnsPerHost: 256}
	defer tr.CloseIdleConnections()
	plain := &http.Client{Transport: tr, Timeout: 5 * time.Second}

	// Phase 1: levee's own retries, 10 s.
	const offered = 2000
	var failedTransport atomic.Int64
	offerFixedRate(offered, rate, func() {
		resp, err := plain.Get(h.base + "/")
		if err != nil {
			failedTransport.Add(1)
			return
		}
		io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
	})
	reached := b.hits.Load()
	// The fixed allowance is min_per_second × window (5 × 10 s) in any
	// window; the first window's is available at once, and as the window
	// slides over a run of T seconds the allowance funds at most
	// min_per_second × (T + window) retries. T = 10 s here.
	allowance := 5.0 * (10 + 10)
	limit := 1.2*offered + allowance
	t.Logf("levee retries: %d offered, backend received %d (%.3fx; limit %.0f = 1.2x + %.0f); naive retries would send %d",
		offered, reached, float64(reached)/offered, limit, allowance, 3*offered)
	if failedTransport.Load() != 0 {
		t.Errorf("%d requests failed at the transport; every one should get levee's or the backend's answer", failedTransport.Load())
	}
	if float64(reached) > limit {
		t.Fatalf("backend received %d requests for %d offered, more than the budget allows (%.0f)", reached, offered, limit)
	}
	if exhausted := h.metric(`levee_retry_budget_exhausted_total{upstream="data"}`); exhausted == 0 {
		t.Error("levee_retry_budget_exhausted_total did not move")
	}

	// Phase 2: clients that retry themselves, 5 s each. Requests reaching
	// levee are counted by levee's own request counter.
	levee := func() float64 { return h.metric(`levee_requests_total{code="503",route="data",upstream="data"}`) }
	const each = 1000
	before := levee()
	offerFixedRate(each, rate, func() {
		for range 3 { // naive: retry at once on failure, 3 attempts
			resp, err := plain.Get(h.base + "/")
			if err != nil {
				continue
			}
			io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
			if resp.StatusCode < 500 {
				return
			}
		}
	})
	naive := (levee() - before) / each

	ct, err := client.New(client.Options{Base: tr, Backoff: client.Backoff{Base: 5 * time.Millisecond, Max: 50 * time.Millisecond},
		Throttle: client.Throttle{Window: 2 * time.Second}})
	if err != nil {
		t.Fatal(err)
	}
	good := &http.Client{Transport: ct, Timeout: 5 * time.Second}
	before = levee()
	offerFixedRate(each, rate, func() {
		resp, err := good.Get(h.base + "/")
		if err == nil {
			io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
		}
	})
	withClient := (levee() - before) / each
	t.Logf("requests reaching levee per offered request: naive client %.3f, client package %.3f (stats %+v)", naive, withClient, ct.Stats())
	if naive < 2.5 {
		t.Errorf("naive client ratio %.3f: the comparison is broken (expected about 3)", naive)
	}
	if withClient > 1.3 {
		t.Errorf("client package sent %.3f requests per offered request, want at most 1.3", withClient)
	}

	// Phase 3: recovery. Within 2 s of the backend answering 200 again,
	// every request succeeds and the client's throttle is open.
	b.status.Store(200)
	recovered := time.Now()
	var lastFailure atomic.Int64 // ns since recovered
	offerFixedRate(int(rate*3), rate, func() {
		resp, err := good.Get(h.base + "/")
		ok := err == nil && resp.StatusCode == 200
		if err == nil {
			io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
		}
		if !ok {
			if d := int64(time.Since(recovered)); d > lastFailure.Load() {
				lastFailure.Store(d)
			}
		}
	})
	last := time.Duration(lastFailure.Load())
	t.Logf("after recovery: last failure %v after the backend came back; throttle probability now %.3f", last.Round(time.Millisecond), ct.Stats().ThrottleProbability)
	if last > 2*time.Second {
		t.Errorf("requests still failed %v after recovery, want none after 2 s", last)
	}
	if p := ct.Stats().ThrottleProbability; p != 0 {
		t.Errorf("client throttle probability %.3f after 3 s of successes, want 0", p)
	}
}
