//go:build !race

// The overload test measures goodput and latency, so it is built without
// the race detector (which slows every memory access several times and
// would measure itself); `make test` runs it in a step of its own, alone
// on the machine's cores.

package gateway

import (
	"fmt"
	"testing"
	"time"
)

// TestOverloadGoodputAt10x: a backend that serves 20 requests at a time,
// 20 ms each (1,000 requests/s, an unbounded queue behind), behind levee
// with `max_concurrency: adaptive` (never told the capacity), offered 10x
// its capacity open loop with a 2 s client timeout. The backend and the
// load generator are child processes. Over the measured window: goodput
// at least 85 % of capacity, admitted requests' p99 at most 3x the
// unloaded p99, no client timeouts, every refusal a 503 or 429 with a
// reason. Meanwhile 200 sequential /healthz calls on the admin listener
// all answer; their p99 is reported.
func TestOverloadGoodputAt10x(t *testing.T) {
	if testing.Short() {
		t.Skip("a 5 s load test")
	}
	const (
		capacity = 20
		service  = 20 * time.Millisecond
		nominal  = int(capacity * time.Second / service) // 1,000 requests/s
		rate     = 10 * nominal
		warmup   = 1500 * time.Millisecond // the adaptive limit converges in about 1 s
		measured = 3 * time.Second
	)
	be := startSlowBackend(t, slowBackendArgs{Capacity: capacity, Service: service})
	h := start(t, fmt.Sprintf(`
listen: 127.0.0.1:0
admin: {listen: 127.0.0.1:0}
log: {access: false}
upstreams:
  data:
    endpoints: [{address: %s}]
    limits: {max_concurrency: adaptive}
routes:
  - {name: data, match: {path_prefix: /}, upstream: data}
`, be))
	addr := h.g.Addr().String()

	unloaded, err := sequentialLatencies(addr, "/", 200, 2*time.Second)
	if err != nil {
		t.Fatalf("unloaded: %v", err)
	}
	unloadedP99 := percentile(unloaded, 99)

	healthz := make(chan []time.Duration, 1)
	healthzErr := make(chan error, 1)
	limits := make(chan []float64, 1)
	shots := runOpenLoopChild(t, []openLoop{{Addr: addr, Path: "/", Rate: rate, Total: rate * int((warmup+measured)/time.Millisecond) / 1000,
		Timeout: 2 * time.Second, Workers: 512}}, func() {
		go func() {
			time.Sleep(warmup)
			lat, err := sequentialLatencies(h.g.AdminAddr().String(), "/healthz", 200, 2*time.Second)
			healthz <- lat
			healthzErr <- err
		}()
		go func() {
			var ls []float64
			for range int((warmup + measured) / (250 * time.Millisecond)) {
				time.Sleep(250 * time.Millisecond)
				ls = append(ls, h.metric(`levee_admission_limit{upstream="data"}`))
			}
			limits <- ls
		}()
	})[0]

	var ok, timeouts, transport int
	var admitted []time.Duration
	refusals := map[string]int{}
	for _, s := range shots {
		switch {
		case s.TimedOut:
			timeouts++
		case s.Err != "":
			transport++
			if transport == 1 {
				t.Errorf("transport error: %s", s.Err)
			}
		case s.Due < warmup:
		case s.Status == 200:
			ok++
			admitted = append(admitted, s.Latency)
		default:
			refusals[fmt.Sprintf("%d %s", s.Status, s.Reason)]++
		}
	}
	goodput := float64(ok) / measured.Seconds()
	loadedP99 := percentile(admitted, 99)
	hz := <-healthz
	if err := <-healthzErr; err != nil {
		t.Errorf("/healthz under overload: %v", err)
	}
	t.Logf("offered %d req/s for %v (measured the last %v): goodput %.0f req/s = %.1f%% of %d; admitted p50 %v p99 %v; unloaded p99 %v (ratio %.2f); timeouts %d; refusals %v",
		rate, warmup+measured, measured, goodput, 100*goodput/float64(nominal), nominal,
		percentile(admitted, 50), loadedP99, unloadedP99, float64(loadedP99)/float64(unloadedP99), timeouts, refusals)
	t.Logf("adaptive limit every 250 ms: %v", <-limits)
	t.Logf("/healthz under overload: %d answered, p50 %v p99 %v max %v", len(hz), percentile(hz, 50), percentile(hz, 99), percentile(hz, 100))

	if timeouts > 0 {
		t.Errorf("%d requests timed out at the client; levee must answer every request within 2 s", timeouts)
	}
	if goodput < 0.85*float64(nominal) {
		t.Errorf("goodput %.0f req/s, want at least 85%% of %d", goodput, nominal)
	}
	if loadedP99 > 3*unloadedP99 {
		t.Errorf("admitted p99 %v, want at most 3x the unloaded p99 %v", loadedP99, unloadedP99)
	}
	for k, n := range refusals {
		switch k {
		case "503 concurrency_limit", "503 queue_full", "503 queue_timeout", "503 shed_priority", "429 consumer_limit":
		default:
			t.Errorf("%d answers %q: every refusal must be a 503 or 429 with a known reason", n, k)
		}
	}
}
