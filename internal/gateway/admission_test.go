package gateway

import (
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"runtime"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/levee-gw/levee/internal/testkit"
)

// TestConcurrencyLimitSheds: with max_concurrency 2 and no queue, a third
// concurrent request is refused at once with 503 concurrency_limit and a
// jittered Retry-After of 1 or 2 s, counted in levee_shed_total; a client's
// retry (Levee-Attempt: 2) on a queued upstream is shed first.
func TestConcurrencyLimitSheds(t *testing.T) {
	hold := make(chan struct{})
	inService := make(chan struct{}, 16)
	slow := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		inService <- struct{}{}
		<-hold
	}))
	t.Cleanup(slow.Close)
	h := start(t, fmt.Sprintf(`
listen: 127.0.0.1:0
admin: {listen: 127.0.0.1:0}
log: {access: false}
upstreams:
  slow:
    endpoints: [{address: %[1]s}]
    limits: {max_concurrency: 2, max_queue: 0}
  queued:
    endpoints: [{address: %[1]s}]
    limits: {max_concurrency: 1, max_queue: 1, queue_timeout: 5s, max_per_consumer: 10}
routes:
  - {name: slow, match: {path_prefix: /slow/}, upstream: slow}
  - {name: queued, match: {path_prefix: /queued/}, upstream: queued}
`, hostPort(slow)))
	// Registered after start, so it runs before the harness drains levee.
	var releaseOnce sync.Once
	release := func() { releaseOnce.Do(func() { close(hold) }) }
	t.Cleanup(release)
	var wg sync.WaitGroup
	for range 2 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			resp, err := http.Get(h.base + "/slow/")
			if err == nil {
				io.Copy(io.Discard, resp.Body)
				resp.Body.Close()
			}
		}()
	}
	<-inService
	<-inService
	begin := time.Now()
	resp := h.get("/slow/")
	refusedIn := time.Since(begin)
	ra, _ := strconv.Atoi(resp.Header.Get("Retry-After"))
	expectRefusal(t, resp, 503, "concurrency_limit")
	if ra < 1 || ra > 2 {
		t.Errorf("Retry-After %d, want 1 or 2 (jittered)", ra)
	}
	t.Logf("refused in %v", refusedIn)
	if got := h.metric(`levee_shed_total{reason="concurrency_limit",route="slow"}`); got != 1 {
		t.Errorf("levee_shed_total = %v, want 1", got)
	}
	if got := h.metric(`levee_admission_inflight{upstream="slow"}`); got != 2 {
		t.Errorf("levee_admission_inflight = %v, want 2", got)
	}

	// The queued upstream: one in service, one waiting (the queue is full);
	// a client's retry is sheddable and is refused rather than queued.
	for range 2 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			resp, err := http.Get(h.base + "/queued/")
			if err == nil {
				io.Copy(io.Discard, resp.Body)
				resp.Body.Close()
			}
		}()
	}
	<-inService
	waitFor(t, "one request queued", func() bool { return h.metricIs(`levee_admission_queue_length{upstream="queued"}`, 1) })
	expectRefusal(t, h.get("/queued/", "Levee-Attempt", "2"), 503, "shed_priority")
	release()
	wg.Wait()
}

// TestMemoryPressureSheds grows this process's heap (levee runs in it)
// past each watermark with a ballast and back: above the soft watermark
// sheddable requests are refused with memory_pressure while normal and
// critical ones are served; above the hard watermark only critical ones
// are served; once the ballast is freed everything is served again.
func TestMemoryPressureSheds(t *testing.T) {
	a, _ := backend(t, "a")
	const (
		mib   = 1 << 20
		limit = 1024 * mib // soft watermark 307 MiB, hard 614 MiB
		soft  = 0.3 * limit
		hard  = 0.6 * limit
	)
	h := start(t, fmt.Sprintf(`
listen: 127.0.0.1:0
admin: {listen: 127.0.0.1:0}
log: {access: false}
memory: {limit: 1GiB, soft_watermark: 0.3, hard_watermark: 0.6}
upstreams:
  a: {endpoints: [{address: %s}]}
routes:
  - {name: critical, match: {path_prefix: /critical/}, upstream: a, priority: critical}
  - {name: sheddable, match: {path_prefix: /sheddable/}, upstream: a, priority: sheddable}
  - {name: normal, match: {path_prefix: /}, upstream: a}
`, hostPort(a)))
	runtime.GC()
	heap := func() float64 { return h.metric(`levee_memory_heap_bytes`) }
	waitFor(t, "the memory guard to sample the heap", func() bool { return heap() > 0 })
	base := heap()
	if base > soft-64*mib {
		t.Fatalf("heap %.0f MiB before the ballast leaves no room to stay between the watermarks", base/mib)
	}
	waitFor(t, "no memory pressure", func() bool { return h.metricIs(`levee_memory_pressure_level`, 0) })
	served := func(path string) {
		t.Helper()
		resp := h.get(path)
		io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		if resp.StatusCode != 200 {
			t.Errorf("%s at heap %.0f MiB: status %d, want 200", path, heap()/mib, resp.StatusCode)
		}
	}
	var ballast [][]byte
	grow := func(to float64) {
		for heap() < to {
			b := make([]byte, 16*mib)
			for i := 0; i < len(b); i += 4096 {
				b[i] = 1 // touch it: resident, not just reserved
			}
			ballast = append(ballast, b)
			runtime.GC()                     // the guard reads the live heap, known after a collection
			time.Sleep(2 * time.Millisecond) // let the guard sample (every 100 ms)
		}
	}

	grow((soft + hard) / 2) // between the watermarks
	waitFor(t, "soft pressure", func() bool { return h.metricIs(`levee_memory_pressure_level`, 1) })
	t.Logf("soft: heap %.0f MiB (base %.0f MiB)", heap()/mib, base/mib)
	expectRefusal(t, h.get("/sheddable/"), 503, "memory_pressure")
	served("/normal")
	served("/critical/")

	grow(hard + 32*mib) // past the hard watermark
	waitFor(t, "hard pressure", func() bool { return h.metricIs(`levee_memory_pressure_level`, 2) })
	t.Logf("hard: heap %.0f MiB", heap()/mib)
	expectRefusal(t, h.get("/sheddable/"), 503, "memory_pressure")
	expectRefusal(t, h.get("/normal"), 503, "memory_pressure")
	served("/critical/")
	if got := h.metric(`levee_shed_total{reason="memory_pressure",route="normal"}`); got != 1 {
		t.Errorf("levee_shed_total for normal = %v, want 1", got)
	}

	runtime.KeepAlive(ballast)
	ballast = nil
	runtime.GC()
	waitFor(t, "pressure to clear", func() bool { return h.metricIs(`levee_memory_pressure_level`, 0) })
	served("/sheddable/")
	served("/normal")
}

// clientFrom returns an HTTP client whose connections come from the given
// loopback address, so levee sees it as its own consumer.
func clientFrom(t *testing.T, ip string) *http.Client {
	t.Helper()
	d := &net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP(ip)}, Timeout: 5 * time.Second}
	tr := &http.Transport{DialContext: d.DialContext, MaxIdleConnsPerHost: 64}
	t.Cleanup(tr.CloseIdleConnections)
	return &http.Client{Transport: tr, Timeout: 10 * time.Second}
}

// TestFairnessAcrossConsumers: consumer A (one client address) keeps 20
// requests outstanding against an upstream limited to 4 in flight with a
// queue of 8, 20x its fair share; consumers B and C send one request at a
// time. B and C must see no refusal at all, while A is refused.
func TestFairnessAcrossConsumers(t *testing.T) {
	slow := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		time.Sleep(20 * time.Millisecond)
	}))
	t.Cleanup(slow.Close)
	h := start(t, fmt.Sprintf(`
listen: 127.0.0.1:0
admin: {listen: 127.0.0.1:0}
log: {access: false}
upstreams:
  data:
    endpoints: [{address: %s}]
    limits: {max_concurrency: 4, max_queue: 8, queue_timeout: 2s}
routes:
  - {name: data, match: {path_prefix: /}, upstream: data}
`, hostPort(slow)))
	a, b, c := clientFrom(t, "127.0.0.2"), clientFrom(t, "127.0.0.3"), clientFrom(t, "127.0.0.4")
	stop := make(chan struct{})
	var aOK, aRefused atomic.Int64
	var wg sync.WaitGroup
	repeatUntil(stop, &wg, 20, func() {
		resp, err := a.Get(h.base + "/")
		if err != nil {
			return
		}
		io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		if resp.StatusCode == 200 {
			aOK.Add(1)
		} else {
			aRefused.Add(1)
		}
	})
	waitFor(t, "consumer A to be refused", func() bool { return aRefused.Load() > 0 })
	var others sync.WaitGroup
	var refusedOthers atomic.Int64
	var served [2]atomic.Int64
	for i, cl := range []*http.Client{b, c} {
		others.Add(1)
		go func() {
			defer others.Done()
			for range 30 {
				resp, err := cl.Get(h.base + "/")
				if err != nil {
					refusedOthers.Add(1)
					continue
				}
				io.Copy(io.Discard, resp.Body)
				resp.Body.Close()
				if resp.StatusCode != 200 {
					refusedOthers.Add(1)
				} else {
					served[i].Add(1)
				}
			}
		}()
	}
	others.Wait()
	close(stop)
	wg.Wait()
	t.Logf("A: %d served, %d refused; B: %d served, C: %d served; B and C refused: %d",
		aOK.Load(), aRefused.Load(), served[0].Load(), served[1].Load(), refusedOthers.Load())
	if refusedOthers.Load() != 0 {
		t.Errorf("B and C were refused %d times; a flooding consumer must not push them out", refusedOthers.Load())
	}
}

// TestHealthzUnderOverload: with 1,000 slow requests in flight on the data
// plane (a backend that holds them) and more arriving, 200 sequential
// /healthz calls on the admin listener all answer 200 within their 2 s
// deadline; their p99 is reported. /readyz stays ready: load is never a
// reason to be taken out of rotation.
func TestHealthzUnderOverload(t *testing.T) {
	release := make(chan struct{})
	var held atomic.Int64
	slow := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		held.Add(1)
		select {
		case <-release:
		case <-r.Context().Done():
		}
	}))
	t.Cleanup(slow.Close)
	h := start(t, fmt.Sprintf(`
listen: 127.0.0.1:0
admin: {listen: 127.0.0.1:0}
log: {access: false}
upstreams:
  slow: {endpoints: [{address: %s}], timeouts: {response_header: 30s}}
routes:
  - {name: slow, match: {path_prefix: /}, upstream: slow}
`, hostPort(slow)))
	const inFlight = 1000
	tr := &http.Transport{MaxConnsPerHost: 0, MaxIdleConnsPerHost: inFlight}
	t.Cleanup(tr.CloseIdleConnections)
	cl := &http.Client{Transport: tr, Timeout: 60 * time.Second}
	stop := make(chan struct{})
	var wg sync.WaitGroup
	repeatUntil(stop, &wg, inFlight, func() {
		resp, err := cl.Get(h.base + "/")
		if err == nil {
			io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
		}
	})
	t.Cleanup(func() { close(stop); close(release); wg.Wait() })
	// A thousand connections take a while to open on a busy 2-core host
	// under -race (over 10 s once, beside another test run): the deadline
	// only guards against a hang.
	testkit.Eventually(t, 60*time.Second, func() (bool, string) {
		n := held.Load()
		return n >= inFlight, fmt.Sprintf("%d of 1,000 slow requests in flight", n)
	})

	lat, err := sequentialLatencies(h.g.AdminAddr().String(), "/healthz", 200, 2*time.Second)
	if err != nil {
		t.Fatalf("/healthz under overload: %v", err)
	}
	t.Logf("/healthz with %d requests in flight: 200 of 200 answered, p50 %v p99 %v max %v",
		held.Load(), percentile(lat, 50), percentile(lat, 99), percentile(lat, 100))
	resp, err := http.Get(h.admin + "/readyz")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != 200 {
		t.Errorf("/readyz under load: %d, want 200", resp.StatusCode)
	}
}
