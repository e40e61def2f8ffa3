//go:build !race

package gateway

import (
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"
	"time"

	"github.com/levee-gw/levee/internal/testkit"
)

// TestMirrorKeepsPrimaryLatency: three routes to the same primary in one
// levee, driven in the same run, interleaved (each client takes them in
// turn, so drift in the machine's load falls on all three alike): plain
// (no mirror), slow (a mirror whose shadow sleeps 2 s per request) and
// down (a mirror whose shadow nobody listens on). Every request on every
// route must succeed, and the p99 with a mirror must stay within 3 x
// plain's p99 + 100 ms (room for a busy 2-core machine): had the primary
// waited for its copy, the slow route's p99 would be 2 s.
func TestMirrorKeepsPrimaryLatency(t *testing.T) {
	primary, _ := backend(t, "primary")
	slow := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		select {
		case <-time.After(2 * time.Second):
		case <-r.Context().Done():
		}
	}))
	t.Cleanup(slow.Close)
	h := start(t, fmt.Sprintf(`
listen: 127.0.0.1:0
admin: {listen: 127.0.0.1:0}
log: {access: false}
upstreams:
  primary: {endpoints: [{address: %s}]}
  slow: {endpoints: [{address: %s}]}
  down: {endpoints: [{address: %s}]}
routes:
  - {name: plain, match: {path_prefix: /plain}, upstream: primary}
  - {name: slow, match: {path_prefix: /slow}, upstream: primary, mirror: {upstream: slow}}
  - {name: down, match: {path_prefix: /down}, upstream: primary, mirror: {upstream: down}}
`, hostPort(primary), hostPort(slow), closedPort(t)))
	const (
		clients = 4
		rounds  = 300 // per client, each round one request per route
	)
	routes := []string{"/plain", "/slow", "/down"}
	var mu sync.Mutex
	lat := map[string][]time.Duration{}
	failures := map[string]int{}
	var wg sync.WaitGroup
	for c := range clients {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range rounds {
				for k := range routes {
					p := routes[(c+i+k)%len(routes)]
					t0 := time.Now()
					resp, err := h.client.Get(h.base + p + "/x")
					ok := err == nil && resp.StatusCode == 200
					if err == nil {
						io.Copy(io.Discard, resp.Body)
						resp.Body.Close()
					}
					d := time.Since(t0)
					mu.Lock()
					lat[p] = append(lat[p], d)
					if !ok {
						failures[p]++
					}
					mu.Unlock()
				}
			}
		}()
	}
	wg.Wait()
	p99 := map[string]time.Duration{}
	for _, p := range routes {
		p99[p] = percentile(lat[p], 99)
		if failures[p] > 0 {
			t.Errorf("%s: %d of %d requests failed", p, failures[p], len(lat[p]))
		}
	}
	t.Logf("p99 over %d requests each: plain %v, slow mirror %v, down mirror %v (p50 %v, %v, %v)", clients*rounds,
		p99["/plain"], p99["/slow"], p99["/down"], percentile(lat["/plain"], 50), percentile(lat["/slow"], 50), percentile(lat["/down"], 50))
	bound := 3*p99["/plain"] + 100*time.Millisecond
	for _, p := range []string{"/slow", "/down"} {
		if p99[p] > bound {
			t.Errorf("%s: p99 %v with a mirror, over 3 x plain's %v + 100ms", p, p99[p], p99["/plain"])
		}
	}
	// Every copy ends (by its answer, its failure or its deadline): none
	// is left running after the test.
	total := float64(clients * rounds)
	waitFor(t, "every slow copy to end", func() bool {
		pg := testkit.Parse(t, h.metricsPage())
		var sum float64
		for _, r := range []string{"sent", "failed", "skipped_cap"} {
			v, _ := pg.Lookup(`levee_mirror_requests_total{result="` + r + `",route="slow"}`)
			sum += v
		}
		return sum == total
	})
	slowSent, slowCapped := h.metric(`levee_mirror_requests_total{result="sent",route="slow"}`), h.metric(`levee_mirror_requests_total{result="skipped_cap",route="slow"}`)
	downFailed, downCapped := h.metric(`levee_mirror_requests_total{result="failed",route="down"}`), h.metric(`levee_mirror_requests_total{result="skipped_cap",route="down"}`)
	t.Logf("slow mirror: %v sent, %v skipped_cap (max_in_flight 16); down mirror: %v failed, %v skipped_cap", slowSent, slowCapped, downFailed, downCapped)
	if slowSent < 16 || slowCapped == 0 {
		t.Errorf("slow mirror: %v sent, %v skipped_cap; want at least 16 sent and some skipped at the cap", slowSent, slowCapped)
	}
	if downFailed+downCapped != total || downFailed < total/2 {
		t.Errorf("down mirror: %v failed and %v skipped_cap, want %v in all, most failed", downFailed, downCapped, total)
	}
}
