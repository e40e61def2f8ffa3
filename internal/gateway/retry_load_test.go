//go:build !race

// TestRetryAmplification offers a fixed 200 requests/s and judges what
// reaches the backend and the clients within 5 s timeouts, so it is
// wall-clock judged: built without the race detector and run in the
// Makefile's load step (LOAD_TESTS). Under -race on two busy cores it
// failed at the transport (client timeouts) on the unchanged code too.

package gateway

import (
	"fmt"
	"io"
	"net/http"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/levee-gw/levee/client"
)

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
	began := time.Now()
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
	// min_per_second × (T + window) retries. T is the run as measured:
	// 10 s of offers plus the last answers (more on a busy host).
	ran := time.Since(began).Seconds()
	allowance := 5.0 * (ran + 10)
	limit := 1.2*offered + allowance
	t.Logf("levee retries: %d offered in %.1f s, backend received %d (%.3fx; limit %.0f = 1.2x + %.0f); naive retries would send %d",
		offered, ran, reached, float64(reached)/offered, limit, allowance, 3*offered)
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
