//go:build !race

package gateway

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io"
	"net/http"
	"os"
	"runtime"
	"runtime/metrics"
	"runtime/pprof"
	"sort"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// Proof at scale (issue 28.5): reload and publish time, and memory, with
// 5,000 routes (4,000 proxied over 50 upstreams and 1,000 data APIs on
// one embedded SQLite source) and 10,000 apps. Judged by wall-clock and
// heap: a load test (!race, LOAD_TEST_NAMES). bench/scale.sh runs it and
// prints the figures; docs/performance.md ("Scale") has them.
//
// It asserts the targets where a busy 2-core machine does not
// decide them: a reload's memory (peak and allocation) and its CPU, and
// a publish's CPU; wall times are logged ("SCALE ...") and compared with
// the targets in docs/performance.md.

const (
	scaleHTTPRoutes = 4005
	scaleDataAPIs   = 995 // in the file; 5 more through the admin API make the store's 1,000 (its cap)
	scaleUpstreams  = 50
	scaleApps       = 10000
)

// scaleYAML is a configuration with httpRoutes proxied routes, dataRoutes
// data routes and apps apps; gen changes one header (a reload that
// changes something).
func scaleYAML(backend, dbPath string, httpRoutes, dataRoutes, apps, gen int) string {
	var b strings.Builder
	fmt.Fprintf(&b, "listen: 127.0.0.1:0\nadmin: {listen: 127.0.0.1:0}\nlog: {access: false, level: warn}\n")
	fmt.Fprintf(&b, "data_sources:\n  sales: {driver: sqlite, path: %s, max_conns: 2}\n", dataQuote(dbPath))
	b.WriteString("upstreams:\n")
	for u := 0; u < scaleUpstreams; u++ {
		fmt.Fprintf(&b, "  u%d: {endpoints: [{address: %s}]}\n", u, backend)
	}
	b.WriteString("routes:\n")
	for i := 0; i < httpRoutes; i++ {
		fmt.Fprintf(&b, "  - {name: r%d, match: {path_prefix: /r%d/}, upstream: u%d", i, i, i%scaleUpstreams)
		if i == 0 {
			fmt.Fprintf(&b, ", headers: {response: {set: {X-Generation: \"%d\"}}}", gen)
		}
		if i%2 == 1 {
			b.WriteString(", auth: api_key")
		}
		b.WriteString("}\n")
	}
	for i := 0; i < dataRoutes; i++ {
		fmt.Fprintf(&b, `  - name: d%d
    match: {path_prefix: /d%d}
    data:
      source: sales
      sql: SELECT id, %d AS v FROM orders WHERE customer_id = :customer_id ORDER BY id
      params: {customer_id: {type: int64, required: true, min: 1}}
`, i, i, i)
	}
	if apps > 0 {
		b.WriteString("apps:\n")
		for i := 0; i < apps; i++ {
			sum := sha256.Sum256([]byte("scale-key-" + strconv.Itoa(i)))
			fmt.Fprintf(&b, "  - {id: app%d, api_key_sha256: [%s], grants: [r%d, r%d]}\n", i, hex.EncodeToString(sum[:]), (2*i+1)%httpRoutes, (2*i+3)%httpRoutes)
		}
	}
	return b.String()
}

// liveHeap is the heap in use after a collection.
func liveHeap() uint64 {
	runtime.GC()
	runtime.GC()
	var m runtime.MemStats
	runtime.ReadMemStats(&m)
	return m.HeapInuse
}

// peakLive samples the live heap objects' bytes (runtime/metrics, no
// stop-the-world) every 5 ms while f runs and returns the highest
// sample less the first: the extra memory f needed at its peak.
func peakLive(f func()) uint64 {
	sample := []metrics.Sample{{Name: "/memory/classes/heap/objects:bytes"}}
	read := func() uint64 { metrics.Read(sample); return sample[0].Value.Uint64() }
	runtime.GC()
	base := read()
	peak := base
	done := make(chan struct{})
	stopped := make(chan struct{})
	go func() {
		defer close(stopped)
		tick := time.NewTicker(5 * time.Millisecond)
		defer tick.Stop()
		for {
			select {
			case <-done:
				return
			case <-tick.C:
				peak = max(peak, read())
			}
		}
	}()
	f()
	close(done)
	<-stopped
	peak = max(peak, read())
	return peak - base
}

// cpuTime is the process's CPU time so far (user and system): what a
// reload costs whatever the machine's load does to its wall time.
func cpuTime() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

func totalAlloc() uint64 {
	var m runtime.MemStats
	runtime.ReadMemStats(&m)
	return m.TotalAlloc
}

func median(d []time.Duration) time.Duration {
	s := append([]time.Duration(nil), d...)
	sort.Slice(s, func(i, j int) bool { return s[i] < s[j] })
	return s[len(s)/2]
}

func TestScaleReloadAndPublish(t *testing.T) {
	const mib = 1 << 20
	testBegin := time.Now()
	up, _ := backend(t, "scale")
	dbPath, _ := sqliteOrders(t)

	// LEVEE_SCALE_FULL=1 (bench/scale.sh) adds the memory per route and
	// per app (two more levees) and five reloads and publishes for the
	// medians; the load step runs one levee at full scale, three reloads
	// and three publishes: the same proof in a fraction of the time (the
	// median of three, since a reload right after the start costs more
	// CPU than the next: 0.6 to 0.9 s against 0.35 to 0.55 s).
	full := os.Getenv("LEVEE_SCALE_FULL") != ""
	runs := 3
	if full {
		runs = 5
	}
	if n, err := strconv.Atoi(os.Getenv("LEVEE_SCALE_RUNS")); err == nil && n > 0 && n <= 20 {
		runs = n // reloads and publishes (bench/scale.sh RUNS=n), at most 20
	}
	var heap0, heapRoutes uint64
	var perRoute float64
	if full {
		// Memory: the heap with one route, then with every route, then
		// with every app as well (each a fresh levee, in this process).
		t0 := time.Now()
		start(t, scaleYAML(hostPort(up), dbPath, 1, 0, 0, 0))
		t.Logf("SCALE start one route: %s", time.Since(t0))
		heap0 = liveHeap()
		t0 = time.Now()
		start(t, scaleYAML(hostPort(up), dbPath, scaleHTTPRoutes, scaleDataAPIs, 0, 0))
		t.Logf("SCALE start routes: %s", time.Since(t0))
		heapRoutes = liveHeap()
		perRoute = float64(heapRoutes-heap0) / float64(scaleHTTPRoutes+scaleDataAPIs)
	}

	begin := time.Now()
	h := start(t, scaleYAML(hostPort(up), dbPath, scaleHTTPRoutes, scaleDataAPIs, scaleApps, 0))
	startTime := time.Since(begin)
	heapAll := liveHeap()
	// The cost of one full collection at this heap (what a reload's
	// collection after the parse costs, gateway/reload.go).
	gcWall, gcCPU := time.Now(), cpuTime()
	runtime.GC()
	gcCost, gcCostCPU := time.Since(gcWall), cpuTime()-gcCPU
	perApp := float64(int64(heapAll)-int64(heapRoutes)-int64(heapRoutes-heap0)) / scaleApps
	rssBefore := rssBaseline(t) // after debug.FreeOSMemory: the start's garbage returned

	// Sanity: a proxied route, a data API and an app's key serve.
	for _, c := range []struct {
		path, key string
		want      int
	}{{"/r3998/x", "", 200}, {"/r3999/x", "scale-key-1999", 200}, {"/r3999/x", "", 401}, {"/d994?customer_id=1", "", 200}} {
		var hdr []string
		if c.key != "" {
			hdr = []string{"X-Api-Key", c.key}
		}
		resp := h.get(c.path, hdr...)
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != c.want {
			t.Fatalf("GET %s (key %q): %d, want %d: %s\nlog: %.2000s", c.path, c.key, resp.StatusCode, c.want, body, h.logs.String())
		}
	}

	// LEVEE_SCALE_HEAPPROF=PREFIX (bench/scale.sh MEM=1) writes heap
	// profiles before and after the reloads (PREFIX.before, PREFIX.after):
	// go tool pprof -sample_index=alloc_space -diff_base PREFIX.before
	// shows what the reloads allocated.
	heapProf := func(suffix string) {
		if prefix := os.Getenv("LEVEE_SCALE_HEAPPROF"); prefix != "" {
			writeHeapProfile(t, prefix+suffix)
		}
	}
	heapProf(".before")
	// LEVEE_SCALE_CPUPROF=FILE: a CPU profile of the reloads alone.
	if path := os.Getenv("LEVEE_SCALE_CPUPROF"); path != "" {
		f, err := os.Create(path)
		if err != nil {
			t.Fatal(err)
		}
		if err := pprof.StartCPUProfile(f); err != nil {
			t.Fatal(err)
		}
		defer f.Close()
		defer pprof.StopCPUProfile() // also when the test fails
	}
	// Reloads: runs of them, each changing one header.
	var reloads, reloadCPU []time.Duration
	var reloadAlloc, reloadPeak uint64
	for gen := 1; gen <= runs; gen++ {
		h.writeConfig(scaleYAML(hostPort(up), dbPath, scaleHTTPRoutes, scaleDataAPIs, scaleApps, gen))
		a0 := totalAlloc()
		var el time.Duration
		var rerr error
		var cpu time.Duration
		peak := peakLive(func() {
			t0, c0 := time.Now(), cpuTime()
			rerr = h.g.Reload()
			el, cpu = time.Since(t0), cpuTime()-c0
		})
		reloadCPU = append(reloadCPU, cpu)
		if rerr != nil {
			t.Fatalf("reload %d: %v", gen, rerr)
		}
		reloads = append(reloads, el)
		reloadAlloc = max(reloadAlloc, totalAlloc()-a0)
		reloadPeak = max(reloadPeak, peak)
	}
	resp := h.get("/r0/x")
	io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	if want := strconv.Itoa(runs); resp.Header.Get("X-Generation") != want {
		t.Fatalf("after %d reloads the header is %q, want %s", runs, resp.Header.Get("X-Generation"), want)
	}
	if os.Getenv("LEVEE_SCALE_CPUPROF") != "" {
		pprof.StopCPUProfile()
	}
	heapAfter := liveHeap()
	heapProf(".after")
	// What the target's "extra memory" means for an operator: the
	// process's RSS across the reloads (the Go runtime returns freed
	// pages lazily, so this is an upper bound), and the live heap after
	// the reloads against before (what a reload retains).
	rssAfter := rssBytes(t)

	// A data-API publish at 1,000 APIs: create drafts, then time each
	// publish.
	var publishCPU []time.Duration
	admin := func(method, path, body string, want int) time.Duration {
		t.Helper()
		req, _ := http.NewRequest(method, h.admin+path, strings.NewReader(body))
		req.Header.Set("Content-Type", "application/json")
		t0, c0 := time.Now(), cpuTime()
		defer func() { publishCPU = append(publishCPU, cpuTime()-c0) }()
		resp, err := h.client.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		el := time.Since(t0)
		if resp.StatusCode != want {
			t.Fatalf("%s %s: %d %s", method, path, resp.StatusCode, b)
		}
		return el
	}
	var publishes, pubCPU []time.Duration
	pubs := min(runs, 5) // 995 + 5 fill the store's cap of 1,000
	for i := 0; i < pubs; i++ {
		name := fmt.Sprintf("scale-api-%d", i)
		admin("POST", "/api/v1/data-apis", fmt.Sprintf(`{"name": %q, `, name)+versionDef(fmt.Sprintf("/v1/scale%d", i), 1)[1:], 201)
		publishCPU = publishCPU[:0:0]
		publishes = append(publishes, admin("POST", "/api/v1/data-apis/"+name+"/publish", "", 200))
		pubCPU = append(pubCPU, publishCPU[0])
	}
	resp = h.get(fmt.Sprintf("/v1/scale%d?customer_id=1", pubs-1))
	io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 200 {
		t.Fatalf("the published API answers %d", resp.StatusCode)
	}

	t.Logf("SCALE test_s=%.1f (start, %d reloads, %d publishes)", time.Since(testBegin).Seconds(), runs, pubs)
	t.Logf("SCALE routes=%d (http %d, data %d) upstreams=%d apps=%d", scaleHTTPRoutes+scaleDataAPIs, scaleHTTPRoutes, scaleDataAPIs, scaleUpstreams, scaleApps)
	t.Logf("SCALE start_ms=%d reload_ms_median=%d reload_ms_max=%d reload_peak_extra_mib=%.1f reload_alloc_mib=%.1f", startTime.Milliseconds(),
		median(reloads).Milliseconds(), slicesMax(reloads).Milliseconds(), float64(reloadPeak)/mib, float64(reloadAlloc)/mib)
	t.Logf("SCALE reloads=%d rss_mib before_reloads=%.1f after_reloads=%.1f growth=%.1f live_heap_mib before_reloads=%.1f after_reloads=%.1f retained=%.1f",
		runs, float64(rssBefore)/mib, float64(rssAfter)/mib, (float64(rssAfter)-float64(rssBefore))/mib,
		float64(heapAll)/mib, float64(heapAfter)/mib, (float64(heapAfter)-float64(heapAll))/mib)
	if full {
		t.Logf("SCALE heap_mib one_route=%.1f routes=%.1f routes_and_apps=%.1f after_reloads=%.1f (three levees in this process: each figure adds one)",
			float64(heap0)/mib, float64(heapRoutes)/mib, float64(heapAll)/mib, float64(heapAfter)/mib)
	}
	t.Logf("SCALE full_gc_ms=%d full_gc_cpu_ms=%d (one runtime.GC at %.0f MiB of live heap)", gcCost.Milliseconds(), gcCostCPU.Milliseconds(), float64(heapAll)/mib)
	t.Logf("SCALE reload_cpu_ms_median=%d publish_cpu_ms_median=%d (process CPU, user+system) reload_cpu_ms=%v reload_ms=%v", median(reloadCPU).Milliseconds(), median(pubCPU).Milliseconds(),
		msList(reloadCPU), msList(reloads))
	if full {
		t.Logf("SCALE bytes_per_route=%.0f bytes_per_app=%.0f", perRoute, perApp)
	}
	t.Logf("SCALE publish_ms_median=%d publish_ms_max=%d (an admin round trip each, at %d to %d data APIs)",
		median(publishes).Milliseconds(), slicesMax(publishes).Milliseconds(), scaleDataAPIs+1, scaleDataAPIs+pubs)

	// The targets, asserted where the machine's load does not
	// decide them (docs/performance.md, "Scale"):
	//   - memory, deterministic: a reload's live heap peak above its
	//     start under 100 MiB (70 MiB measured since session 27: the
	//     parse's garbage collected before the build, data-API
	//     definitions not parsed again), and all it allocates under
	//     140 MiB (99 MiB measured; 211 MiB before), which catches a
	//     cache that stopped working before the peak does;
	//   - time, as CPU: the machine's load multiplies wall time (0.5 to
	//     1.9 s were seen for the same 0.35 to 0.6 s of CPU at a load
	//     average of 40), so a reload's CPU (process user + system) is
	//     held to the 1 s target and a publish's to the 200 ms one; wall
	//     time is reported, and bounded only against a hang.
	if m := median(reloadCPU); m > time.Second {
		t.Errorf("reload with %d routes: median %s of CPU; want under 1 s (0.35 to 0.6 s measured)", scaleHTTPRoutes+scaleDataAPIs, m)
	}
	if m := median(reloads); m > 60*time.Second {
		t.Errorf("reload with %d routes: median %s", scaleHTTPRoutes+scaleDataAPIs, m)
	}
	if reloadPeak > 100*mib {
		t.Errorf("a reload's live heap peaked %.1f MiB above its start; want under 100 MiB (70 MiB measured)", float64(reloadPeak)/mib)
	}
	if reloadAlloc > 140*mib {
		t.Errorf("a reload allocated %.1f MiB; want under 140 MiB (99 MiB measured)", float64(reloadAlloc)/mib)
	}
	if heapAfter > heapAll+64*mib {
		t.Errorf("heap after %d reloads %.1f MiB, before %.1f MiB: reloads retain memory", runs, float64(heapAfter)/mib, float64(heapAll)/mib)
	}
	if m := median(pubCPU); m > 200*time.Millisecond {
		t.Errorf("data-API publish at %d APIs: median %s of CPU; want under 200 ms (30 to 70 ms measured)", scaleDataAPIs+5, m)
	}
	if m := median(publishes); m > 30*time.Second {
		t.Errorf("data-API publish at %d APIs: median %s", scaleDataAPIs+5, m)
	}
}

func writeHeapProfile(t *testing.T, path string) {
	t.Helper()
	f, err := os.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if err := pprof.Lookup("heap").WriteTo(f, 0); err != nil {
		t.Fatal(err)
	}
}

func msList(d []time.Duration) []int64 {
	out := make([]int64, len(d))
	for i, v := range d {
		out[i] = v.Milliseconds()
	}
	return out
}

func slicesMax(d []time.Duration) time.Duration {
	m := d[0]
	for _, v := range d {
		m = max(m, v)
	}
	return m
}
