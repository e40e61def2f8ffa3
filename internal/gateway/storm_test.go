//go:build !race

package gateway

import (
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"runtime/debug"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"
)

// TestStormReplayed is the data-API outage replayed: apps good1 and good2
// call at a steady rate within their limits while app storm sends 20x
// its rate limit (2,000 requests/s from 64 connections against a limit of
// 100/s), each refusal followed at once by the next request, as a client
// retrying without backoff does; the storm is paced at that rate, as real
// clients are by their own speed, and comes from a child process. good1
// and good2: at least 99.9 % success and p99 within 1.5x their baseline;
// storm: 429 with Retry-After, the 429s' p99 under 20 ms; the backend
// receives from storm no more than its limit allows (+5 %); levee's
// resident memory grows less than 64 MiB.
func TestStormReplayed(t *testing.T) {
	if testing.Short() {
		t.Skip("a 15 s load test")
	}
	const (
		goodRate  = 100 // requests/s per good app (limit 200/s)
		stormRate = 2000
		stormLim  = 100 // storm's limit, requests/s, burst 100
		baseline  = 4 * time.Second
		storm     = 10 * time.Second
		service   = 5 * time.Millisecond
	)
	var fromStorm, fromGood atomic.Int64
	be := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("Levee-App") == "storm" {
			fromStorm.Add(1)
		} else {
			fromGood.Add(1)
		}
		time.Sleep(service)
		w.Write([]byte("ok"))
	}))
	t.Cleanup(be.Close)
	keys := map[string]string{}
	var apps strings.Builder
	for _, app := range []string{"good1", "good2", "storm"} {
		keys[app] = "lvk_" + app + "-0123456789abcdefghijklmnop"
		lim := "{rate: 200, burst: 200}"
		if app == "storm" {
			lim = fmt.Sprintf("{rate: %d, burst: %d}", stormLim, stormLim)
		}
		fmt.Fprintf(&apps, "  - {id: %s, api_key_sha256: [%s], grants: [data], limits: %s}\n", app, keyHash(keys[app]), lim)
	}
	h := start(t, fmt.Sprintf(`
listen: 127.0.0.1:0
admin: {listen: 127.0.0.1:0}
log: {access: false}
upstreams:
  data: {endpoints: [{address: %s}]}
routes:
  - {name: data, match: {path_prefix: /}, upstream: data, auth: api_key}
apps:
%s`, hostPort(be), apps.String()))
	addr := h.g.Addr().String()
	good := func(app string, d time.Duration) openLoop {
		return openLoop{Addr: addr, Path: "/", Rate: goodRate, Total: goodRate * int(d/time.Second), Timeout: 2 * time.Second,
			Workers: 16, Header: []string{"X-Api-Key: " + keys[app]}}
	}

	base := runOpenLoopChild(t, []openLoop{good("good1", baseline), good("good2", baseline)}, func() {})
	baseP99 := [2]time.Duration{p99OK(t, "good1 baseline", base[0]), p99OK(t, "good2 baseline", base[1])}
	for i := range 2 {
		var l []time.Duration
		for _, s := range base[i] {
			l = append(l, s.Latency)
		}
		t.Logf("baseline %d: p50 %v p90 %v p99 %v max %v", i, percentile(l, 50), percentile(l, 90), percentile(l, 99), percentile(l, 100))
	}

	rssBefore := rssBaseline(t)
	beforeStorm := fromStorm.Load()
	// The good apps' load runs in a child of its own, as in the baseline,
	// so that the storm's client does not delay their requests in the
	// client itself.
	goodLoad := startLoadChild(t, []openLoop{good("good1", storm), good("good2", storm)})
	stormLoad := startLoadChild(t, []openLoop{{Addr: addr, Path: "/", Rate: stormRate, Total: stormRate * int(storm/time.Second),
		Timeout: 2 * time.Second, Workers: 64, Header: []string{"X-Api-Key: " + keys["storm"]}}})
	began := time.Now()
	stormLoad.start()
	goodLoad.start()
	shots := append(goodLoad.wait(), stormLoad.wait()...)
	elapsed := time.Since(began)
	rssAfter := rssBytes(t)
	stormAdmitted := fromStorm.Load() - beforeStorm

	for i, app := range []string{"good1", "good2"} {
		var ok int
		for _, s := range shots[i] {
			if s.Status == 200 {
				ok++
			}
		}
		success := float64(ok) / float64(len(shots[i]))
		var l []time.Duration
		for _, s := range shots[i] {
			l = append(l, s.Latency)
		}
		t.Logf("storm %d: p50 %v p90 %v p99 %v max %v", i, percentile(l, 50), percentile(l, 90), percentile(l, 99), percentile(l, 100))
		p99 := p99OK(t, app+" during the storm", shots[i])
		t.Logf("%s: %d of %d succeeded (%.2f%%), p99 %v vs baseline %v (ratio %.2f)", app, ok, len(shots[i]), 100*success,
			p99, baseP99[i], float64(p99)/float64(baseP99[i]))
		if success < 0.999 {
			t.Errorf("%s: success %.3f%%, want at least 99.9%%", app, 100*success)
		}
		if p99 > baseP99[i]*3/2 {
			t.Errorf("%s: p99 %v during the storm, want at most 1.5x its baseline %v", app, p99, baseP99[i])
		}
	}
	var refused []time.Duration
	other := map[string]int{}
	for _, s := range shots[2] {
		switch {
		case s.Status == 429 && s.Reason == "rate_limited":
			refused = append(refused, s.Latency)
		case s.Status != 200:
			other[fmt.Sprintf("%d %s %s", s.Status, s.Reason, s.Err)]++
		}
	}
	// The storm's allowance: its burst plus its rate over the time it ran
	// (the load child's run, plus a second of slack for the child's start).
	allowed := float64(stormLim) + stormLim*(elapsed.Seconds()+1)
	t.Logf("storm: %d sent, %d refused 429 (p99 %v), other answers %v; the backend got %d from it (allowance %.0f, +5%% = %.0f)",
		len(shots[2]), len(refused), percentile(refused, 99), other, stormAdmitted, allowed, allowed*1.05)
	t.Logf("levee's RSS: %.1f MiB before the storm, %.1f MiB after (+%.1f MiB)", float64(rssBefore)/(1<<20), float64(rssAfter)/(1<<20),
		float64(rssAfter-rssBefore)/(1<<20))
	if len(refused) < len(shots[2])*9/10 {
		t.Errorf("storm: only %d of %d refused", len(refused), len(shots[2]))
	}
	if len(other) > 0 {
		t.Errorf("storm got answers other than 200 and 429 rate_limited: %v", other)
	}
	if p := percentile(refused, 99); p >= 20*time.Millisecond {
		t.Errorf("storm's 429s: p99 %v, want under 20 ms (refusals are never slowed down)", p)
	}
	if float64(stormAdmitted) > allowed*1.05 {
		t.Errorf("the backend got %d requests from storm, more than its limit allows (%.0f +5%%)", stormAdmitted, allowed)
	}
	if rssAfter-rssBefore >= 64<<20 {
		t.Errorf("levee's RSS grew %d MiB during the storm, want under 64", (rssAfter-rssBefore)>>20)
	}
	// Retry-After is on every 429 (checked by the refusal tests); here the
	// refusals must be answered, not timed out.
	for _, s := range shots[2] {
		if s.TimedOut {
			t.Fatalf("a storm request timed out after %v", s.Latency)
		}
	}
}

// p99OK returns the p99 latency of the 200 answers in shots.
func p99OK(t *testing.T, what string, shots []shot) time.Duration {
	t.Helper()
	var lat []time.Duration
	for _, s := range shots {
		if s.Status == 200 {
			lat = append(lat, s.Latency)
		}
	}
	if len(lat) == 0 {
		t.Fatalf("%s: no request succeeded", what)
	}
	return percentile(lat, 99)
}

// rssBaseline returns this process's resident set size after handing the
// heap's free pages back to the system (debug.FreeOSMemory). The load
// tests share one process: without it, a storm test's growth depended on
// the tests before it (after TestAlertsFireInPrometheus, whose uploads
// leave some 160 MiB of freed heap that the scavenger returns bit by bit,
// TestDataStormReplayed measured +72 MiB instead of +27 MiB alone). With
// it, the growth measured is the storm's own, as in a fresh levee.
func rssBaseline(t *testing.T) int64 {
	debug.FreeOSMemory()
	return rssBytes(t)
}

// rssBytes is this process's resident set size (VmRSS).
func rssBytes(t *testing.T) int64 {
	t.Helper()
	b, err := os.ReadFile("/proc/self/status")
	if err != nil {
		t.Fatal(err)
	}
	for _, line := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(line, "VmRSS:"); ok {
			kb, err := strconv.ParseInt(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(v), "kB")), 10, 64)
			if err != nil {
				t.Fatal(err)
			}
			return kb << 10
		}
	}
	t.Fatal("no VmRSS in /proc/self/status")
	return 0
}
