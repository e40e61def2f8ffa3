//go:build !race

package gateway

import (
	"context"
	"encoding/json"
	"errors"
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

// memoryMargin is how far above memory.limit levee's resident set may
// go, as docs/admission.md ("Memory guard") documents it for this load:
// the binary's resident text and data, goroutine stacks and per-connection
// buffers of a few hundred connections, and the runtime's own overshoot of
// its soft limit.
const memoryMargin = 32 << 20

// TestMemoryLimitHolds is issue 14's memory storm, with levee alone in a
// child process (so its resident memory is its own) under
// `memory: {limit: 256MiB}` and retries replaying bodies up to 16 MiB, in
// front of a slow upstream that refuses the first attempt of half the
// uploads with 503 (so replay copies are held and sent again):
//
//   - 64 clients upload 4 MiB bodies slowly (4 s each) to a normal route,
//     8 to a sheddable route, 4 send 4 MiB bodies chunked (no length: the
//     replay limit is reserved until the body ends);
//   - 6 clients download 32 MiB answers, reading slowly (12.5 MiB/s), on
//     a critical route (so they run throughout);
//   - one client calls a critical route every 25 ms, alternately a GET and
//     a PUT with a 64 KiB body.
//
// levee's RSS is sampled every 100 ms and must never pass the limit plus
// memoryMargin; every critical request must succeed, and never 3 s pass
// without one served; the memory budget must have refused reservations
// (the load is beyond it); 1 s after the load stops, sheddable and normal
// requests are served, none refused memory_pressure.
//
// It runs twice: with the memory block, and with none while GOMEMLIMIT is
// 256MiB (issue 28: the guard is on by default, its limit taken from
// GOMEMLIMIT or the cgroup's memory.max), and must hold the same bound.
func TestMemoryLimitHolds(t *testing.T) {
	if testing.Short() {
		t.Skip("a 2 x 20 s load test")
	}
	t.Run("memory block", func(t *testing.T) { memoryStorm(t, "memory: {limit: 256MiB}\n") })
	t.Run("no memory block, GOMEMLIMIT", func(t *testing.T) {
		t.Setenv("GOMEMLIMIT", "256MiB") // the child levee inherits it
		memoryStorm(t, "")
	})
}

// memoryStorm runs the storm against a levee whose config has memoryBlock.
func memoryStorm(t *testing.T, memoryBlock string) {
	const (
		mib       = 1 << 20
		limit     = 256 * mib
		upload    = 4 * mib
		download  = 32 * mib
		load      = 12 * time.Second
		upService = 300 * time.Millisecond
		uploaders = 64
		upTime    = 4 * time.Second // each upload's length
	)
	var seen sync.Map // request ids whose first attempt was refused
	var retried atomic.Int64
	zeros := make([]byte, 64<<10)
	be := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch {
		case strings.HasPrefix(r.URL.Path, "/down/"):
			w.Header().Set("Content-Length", fmt.Sprint(download))
			for n := 0; n < download; n += len(zeros) {
				if _, err := w.Write(zeros); err != nil {
					return
				}
			}
			return
		case strings.HasPrefix(r.URL.Path, "/critical/"):
			io.Copy(io.Discard, r.Body)
			w.Write([]byte("ok"))
			return
		}
		if _, err := io.Copy(io.Discard, r.Body); err != nil {
			return
		}
		time.Sleep(upService)
		if r.Header.Get("Fail-First") != "" {
			id := r.Header.Get("X-Request-Id")
			if _, again := seen.LoadAndDelete(id); again {
				retried.Add(1)
			} else {
				seen.Store(id, true)
				w.WriteHeader(http.StatusServiceUnavailable)
				return
			}
		}
		w.Write([]byte("ok"))
	}))
	t.Cleanup(be.Close)

	lv := startLeveeChild(t, fmt.Sprintf(`
listen: 127.0.0.1:0
admin: {listen: 127.0.0.1:0}
log: {access: false}
%supstreams:
  slow:
    endpoints: [{address: %s}]
    retry: {attempts: 2, on: [503], replay_body_limit: 16MiB, backoff: {base: 5ms, max: 10ms}, budget: {ratio: 1, min_per_second: 1000}}
routes:
  - {name: critical, match: {path_prefix: /critical/}, upstream: slow, priority: critical}
  - {name: download, match: {path_prefix: /down/}, upstream: slow, priority: critical}
  - {name: shed, match: {path_prefix: /shed/}, upstream: slow, priority: sheddable}
  - {name: normal, match: {path_prefix: /}, upstream: slow}
`, memoryBlock, hostPort(be)))
	base := "http://" + lv.addr

	// RSS every 100 ms, from before the load until the test's last request.
	var peak atomic.Pointer[procMem]
	var samples atomic.Int64
	stopSampling := make(chan struct{})
	var stopOnce sync.Once
	endSampling := func() { stopOnce.Do(func() { close(stopSampling) }) }
	t.Cleanup(endSampling) // also when the test stops early
	sampled := make(chan error, 1)
	idle, err := readProcMem(lv.pid)
	if err != nil {
		t.Fatal(err)
	}
	peak.Store(&idle)
	go func() {
		tick := time.NewTicker(100 * time.Millisecond)
		defer tick.Stop()
		for {
			m, err := readProcMem(lv.pid)
			if err != nil {
				sampled <- err
				return
			}
			samples.Add(1)
			if m.RSS > peak.Load().RSS {
				peak.Store(&m)
			}
			select {
			case <-stopSampling:
				sampled <- nil
				return
			case <-tick.C:
			}
		}
	}()

	tr := &http.Transport{MaxIdleConnsPerHost: 128, DisableCompression: true}
	t.Cleanup(tr.CloseIdleConnections)
	client := &http.Client{Transport: tr, Timeout: 30 * time.Second}
	critTr := &http.Transport{DisableCompression: true} // its own connection, not queued behind uploads
	t.Cleanup(critTr.CloseIdleConnections)
	critClient := &http.Client{Transport: critTr, Timeout: 10 * time.Second}
	ctx, stopLoad := context.WithCancel(context.Background())
	defer stopLoad()

	var mu sync.Mutex
	outcomes := map[string]int{} // "route status reason" → count, while loaded
	note := func(route string, code int, reason string, err error) {
		k := fmt.Sprintf("%s %d %s", route, code, reason)
		if err != nil {
			k = route + " error"
		}
		mu.Lock()
		outcomes[k]++
		mu.Unlock()
	}
	var wg sync.WaitGroup
	put := func(path string, size int, chunked, failFirst bool) (int, string, error) {
		body := &slowBody{ctx: ctx, left: size, chunk: len(zeros), pause: upTime * time.Duration(len(zeros)) / time.Duration(upload), zeros: zeros}
		req, err := http.NewRequestWithContext(ctx, http.MethodPut, base+path, body)
		if err != nil {
			return 0, "", err
		}
		if !chunked {
			req.ContentLength = int64(size)
		}
		if failFirst {
			req.Header.Set("Fail-First", "1")
		}
		return do(client, req)
	}
	uploader := func(route, path string, chunked bool, i int) {
		for n := 0; ctx.Err() == nil; n++ {
			code, reason, err := put(path, upload, chunked, (i+n)%2 == 0)
			if ctx.Err() != nil {
				return
			}
			note(route, code, reason, err)
		}
	}
	for i := range uploaders {
		wg.Go(func() { uploader("normal", "/up/", false, i) })
	}
	for i := range 8 {
		wg.Go(func() { uploader("shed", "/shed/", false, i) })
	}
	for i := range 4 {
		wg.Go(func() { uploader("chunked", "/up/", true, i) })
	}
	for range 6 {
		wg.Go(func() {
			for ctx.Err() == nil {
				req, _ := http.NewRequestWithContext(ctx, http.MethodGet, base+"/down/", nil)
				resp, err := client.Do(req)
				if err != nil {
					if ctx.Err() == nil {
						note("download", 0, "", err)
					}
					continue
				}
				n, err := slowRead(ctx, resp.Body, 256<<10, 20*time.Millisecond)
				resp.Body.Close()
				if ctx.Err() != nil {
					return
				}
				if err == nil && n != download {
					err = fmt.Errorf("%d bytes", n)
				}
				note("download", resp.StatusCode, "", err)
			}
		})
	}
	var critical []string
	var criticalN int
	var criticalGap time.Duration // the longest time without a critical answer
	lastCritical := time.Now()
	wg.Go(func() {
		tick := time.NewTicker(25 * time.Millisecond)
		defer tick.Stop()
		for i := 0; ; i++ {
			select {
			case <-ctx.Done():
				return
			case <-tick.C:
			}
			var code int
			var reason string
			var err error
			if i%2 == 0 {
				req, _ := http.NewRequest(http.MethodGet, base+"/critical/", nil)
				code, reason, err = do(critClient, req)
			} else {
				req, _ := http.NewRequest(http.MethodPut, base+"/critical/", strings.NewReader(strings.Repeat("c", 64<<10)))
				code, reason, err = do(critClient, req)
			}
			mu.Lock()
			criticalN++
			if err != nil || code != 200 {
				critical = append(critical, fmt.Sprintf("%d %s %v", code, reason, err))
			} else {
				criticalGap = max(criticalGap, time.Since(lastCritical))
				lastCritical = time.Now()
			}
			mu.Unlock()
		}
	})

	// The Go runtime's own figures, at their highest over the load (one
	// scrape a second), for the margin's parts.
	runtime := map[string]float64{}
	for range int(load / time.Second) {
		time.Sleep(time.Second) // the load's length, not a wait for a state
		for k, v := range scrape(t, client, "http://"+lv.admin+"/metrics") {
			if strings.HasPrefix(k, "go_") || strings.HasPrefix(k, "levee_memory_") {
				runtime[k] = max(runtime[k], v)
			}
		}
	}
	stopLoad()
	stopped := time.Now()
	wg.Wait()
	tr.CloseIdleConnections()

	// 1 s after the load stopped: nothing is refused for memory.
	time.Sleep(time.Until(stopped.Add(time.Second)))
	after := map[string]int{}
	for i := range 40 {
		path := []string{"/shed/after", "/after"}[i%2]
		req, _ := http.NewRequest(http.MethodPut, base+path, strings.NewReader("small"))
		code, reason, err := do(client, req)
		k := fmt.Sprintf("%s %d %s", path, code, reason)
		if err != nil {
			k = fmt.Sprintf("%s error %v", path, err)
		}
		after[k]++
	}
	endSampling()
	if err := <-sampled; err != nil {
		t.Fatal(err)
	}

	metrics := scrape(t, client, "http://"+lv.admin+"/metrics")
	p := peak.Load()
	t.Logf("levee's RSS: %.1f MiB idle, peak %.1f MiB (anon %.1f, file %.1f) over %d samples (limit %d MiB + margin %d MiB = %d MiB)",
		float64(idle.RSS)/mib, float64(p.RSS)/mib, float64(p.Anon)/mib, float64(p.File)/mib, samples.Load(), limit/mib, memoryMargin/mib, (limit+memoryMargin)/mib)
	t.Logf("highest under load: goroutines %.0f, stacks %.1f MiB, heap in use %.1f MiB, Go sys %.1f MiB, live heap (guard) %.1f MiB, reserved %.1f MiB",
		runtime["go_goroutines"], runtime["go_memstats_stack_inuse_bytes"]/mib, runtime["go_memstats_heap_inuse_bytes"]/mib,
		runtime["go_memstats_sys_bytes"]/mib, runtime["levee_memory_heap_bytes"]/mib, runtime["levee_memory_reserved_bytes"]/mib)
	t.Logf("under load: %v; upstream saw %d replayed bodies; reservations refused %v, forced collections %v, levee_retries_total %v",
		outcomes, retried.Load(), metrics["levee_memory_reservations_refused_total"], metrics["levee_memory_forced_collections_total"], metrics["levee_retries_total"])
	t.Logf("critical: %d requests, %d failed, longest time without an answer %v; 1 s after the load: %v", criticalN, len(critical), criticalGap, after)

	if p.RSS > limit+memoryMargin {
		t.Errorf("levee's RSS peaked at %.1f MiB, above the limit plus margin (%d MiB)", float64(p.RSS)/mib, (limit+memoryMargin)/mib)
	}
	if len(critical) > 0 {
		t.Errorf("%d of %d critical requests failed: %v", len(critical), criticalN, critical[:min(len(critical), 5)])
	}
	if criticalGap > 3*time.Second {
		t.Errorf("%v passed without a critical request served, want at most 3 s", criticalGap)
	}
	if got := metrics["levee_memory_limit_bytes"]; got != limit {
		t.Errorf("levee_memory_limit_bytes = %v, want %d (%q)", got, limit, memoryBlock)
	}
	if metrics["levee_memory_reservations_refused_total"] == 0 {
		t.Errorf("the memory budget refused no reservation: the load did not test it")
	}
	if retried.Load() == 0 {
		t.Errorf("no body was replayed: the load did not test replay copies")
	}
	for k, n := range after {
		if !strings.HasSuffix(k, " 200 ") {
			t.Errorf("1 s after the load: %d answers %q, want 200", n, k)
		}
	}
}

// do sends req and returns the status and the refusal reason, if any.
func do(c *http.Client, req *http.Request) (int, string, error) {
	resp, err := c.Do(req)
	if err != nil {
		return 0, "", err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(io.LimitReader(resp.Body, 64<<10))
	var refusal struct{ Reason string }
	if resp.StatusCode != 200 {
		json.Unmarshal(b, &refusal)
	}
	return resp.StatusCode, refusal.Reason, err
}

// slowBody yields left zero bytes, chunk at a time, pausing before each.
type slowBody struct {
	ctx   context.Context
	left  int
	chunk int
	pause time.Duration
	zeros []byte
}

func (b *slowBody) Read(p []byte) (int, error) {
	if b.left == 0 {
		return 0, io.EOF
	}
	t := time.NewTimer(b.pause)
	defer t.Stop()
	select {
	case <-b.ctx.Done():
		return 0, b.ctx.Err()
	case <-t.C:
	}
	n := min(len(p), b.chunk, b.left, len(b.zeros))
	copy(p, b.zeros[:n])
	b.left -= n
	return n, nil
}

// slowRead reads r to its end, chunk bytes per pause.
func slowRead(ctx context.Context, r io.Reader, chunk int, pause time.Duration) (int, error) {
	var n int
	for {
		m, err := io.CopyN(io.Discard, r, int64(chunk))
		n += int(m)
		if errors.Is(err, io.EOF) {
			return n, nil
		}
		if err != nil {
			return n, err
		}
		t := time.NewTimer(pause)
		select {
		case <-ctx.Done():
			t.Stop()
			return n, ctx.Err()
		case <-t.C:
		}
	}
}

// scrape reads a Prometheus text page into name → sum of its samples.
func scrape(t *testing.T, c *http.Client, url string) map[string]float64 {
	t.Helper()
	resp, err := c.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]float64{}
	for _, line := range strings.Split(string(b), "\n") {
		if line == "" || line[0] == '#' {
			continue
		}
		name, rest, ok := strings.Cut(line, " ")
		if !ok {
			continue
		}
		if i := strings.IndexByte(name, '{'); i >= 0 {
			name = name[:i]
		}
		var v float64
		fmt.Sscanf(rest, "%g", &v)
		out[name] += v
	}
	return out
}
