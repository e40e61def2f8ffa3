//go:build !race

package gateway

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/levee-gw/levee/internal/testsvc"
)

// alertFault is one of the shipped alerts (deploy/prometheus) with the
// label that names where its fault is.
type alertFault struct {
	alert, label, value string
}

var alertFaults = []alertFault{
	{"LeveeUpstreamDown", "upstream", "dying"},
	{"LeveeHighErrorRate", "upstream", "flaky"},
	{"LeveeOverloadShedding", "route", "busy"},
	{"LeveeAppThrottled", "app", "storm"},
	{"LeveeMemoryPressure", "", ""},
	{"LeveeDiscoveryQuarantine", "upstream", "pushed"},
	{"LeveeConfigReloadFailed", "", ""},
}

const (
	// alertBudget is how soon after its fault each alert must fire.
	alertBudget = 60 * time.Second
	// alertWait is how long the test waits for the slowest one (the
	// budget plus a margin, so a late alert is reported with its time).
	alertWait = alertBudget + 20*time.Second
	// stormKey is the API key of the app that retries into its limit.
	stormKey = "lvk_storm-key-0123456789abcdefghij"
	// uploads × uploadSize are reserved from the memory budget while the
	// uploads trickle in: 128 MiB, above the soft watermark (0.2 × 512 MiB)
	// by reservations alone, far below the hard one (0.95) even once the
	// buffers are live too (256 MiB plus the test process's own heap).
	uploads    = 8
	uploadSize = 16 << 20
)

// TestAlertsFireInPrometheus is issue 18's proof of the shipped alert
// rules: a real levee (real sockets) and a real Prometheus (Debian's 2.42,
// scraping levee's /metrics every 2 s and evaluating
// deploy/prometheus/levee.rules.yaml every 2 s). First normal traffic on
// every route until Prometheus has scraped levee six times (about 12 s):
// no alert may be pending or firing. Then seven faults at once, each on
// its own upstream, route or app of the same levee:
//
//   - the only endpoint of upstream dying fails its health checks;
//   - upstream flaky answers 500;
//   - route busy (max_concurrency 2, queue 2) is offered ~160 requests/s
//     against a 100 ms upstream, so admission control sheds;
//   - app storm calls ~100 times a second against its 5/s rate limit;
//   - eight uploads trickle 16 MiB bodies in, reserving 128 MiB of the
//     512 MiB memory budget for their replay copies (memory pressure);
//   - a discovery push to upstream pushed has one bad record (quarantined);
//   - a reload of a broken configuration file is refused.
//
// Each alert must fire (GET /api/v1/alerts) within 60 s of its fault; the
// time each took is logged.
//
// The 2 s intervals (5 s before) keep the test near 40 s: the rules' own
// "for" (15 to 20 s) sets the floor of the fault phase, the intervals only
// the rest, and the decisions are the same (six samples in the normal
// phase, a 3 m rate window either way). The rules at realistic intervals
// (15 s and 60 s) are proved by promtool's unit tests in deploy/prometheus
// (levee.rules_test_15s.yaml, levee.rules_test_60s.yaml).
func TestAlertsFireInPrometheus(t *testing.T) {
	if testing.Short() {
		t.Skip("a 40 s test against a real Prometheus")
	}
	rules, err := filepath.Abs("../../deploy/prometheus/levee.rules.yaml")
	if err != nil {
		t.Fatal(err)
	}
	var dying, flaky atomic.Bool
	mux := http.NewServeMux()
	mux.HandleFunc("/healthz", func(w http.ResponseWriter, r *http.Request) {
		if dying.Load() {
			w.WriteHeader(http.StatusServiceUnavailable)
		}
	})
	mux.HandleFunc("/flaky/", func(w http.ResponseWriter, r *http.Request) {
		if flaky.Load() {
			w.WriteHeader(http.StatusInternalServerError)
		}
	})
	mux.HandleFunc("/busy/", func(w http.ResponseWriter, r *http.Request) {
		select {
		case <-time.After(100 * time.Millisecond):
		case <-r.Context().Done():
		}
	})
	mux.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
	})
	be := httptest.NewServer(mux)
	t.Cleanup(be.Close)
	// A second server for the health-checked upstream, so its failing
	// checks concern it alone.
	dyingBe := httptest.NewServer(mux)
	t.Cleanup(dyingBe.Close)

	cfg := fmt.Sprintf(`
listen: 127.0.0.1:0
admin: {listen: 127.0.0.1:0}
log: {access: false}
memory: {limit: 512MiB, soft_watermark: 0.2, hard_watermark: 0.95}
upstreams:
  ok: {endpoints: [{address: %[1]s}]}
  flaky: {endpoints: [{address: %[1]s}]}
  dying:
    endpoints: [{address: %[2]s}]
    health_check: {http: {path: /healthz}, interval: 500ms, timeout: 500ms, healthy_after: 1, unhealthy_after: 2}
  busy:
    endpoints: [{address: %[1]s}]
    limits: {max_concurrency: 2, max_queue: 2, queue_timeout: 50ms}
  pushed: {discovery: {push: true}}
  uploads:
    endpoints: [{address: %[1]s}]
    retry: {attempts: 2, on: [503], replay_body_limit: 16MiB}
routes:
  - {name: ok, match: {path_prefix: /ok/}, upstream: ok}
  - {name: flaky, match: {path_prefix: /flaky/}, upstream: flaky}
  - {name: dying, match: {path_prefix: /dying/}, upstream: dying}
  - {name: busy, match: {path_prefix: /busy/}, upstream: busy}
  - {name: pushed, match: {path_prefix: /pushed/}, upstream: pushed}
  - {name: upload, match: {path_prefix: /upload/}, upstream: uploads}
  - {name: keyed, match: {path_prefix: /app/}, upstream: ok, auth: api_key}
apps:
  - id: storm
    api_key_sha256: [%[3]s]
    grants: [keyed]
    route_limits:
      keyed: {rate: 5, burst: 5}
`, hostPort(be), hostPort(dyingBe), keyHash(stormKey))
	h := start(t, cfg)
	if status, doc := pushEndpoints(t, h, "pushed", fmt.Sprintf(`[{"address": %q}]`, hostPort(be))); status != 200 || doc["result"] != "applied" {
		t.Fatalf("first push: %d %v", status, doc)
	}
	prom := testsvc.StartPrometheus(t, fmt.Sprintf(`
global: {scrape_interval: 2s, scrape_timeout: 2s, evaluation_interval: 2s}
rule_files: [%q]
scrape_configs:
  - job_name: levee
    static_configs: [{targets: [%q]}]
`, rules, h.g.AdminAddr().String()))
	pc := &promClient{t: t, base: prom.URL, c: &http.Client{Timeout: 3 * time.Second}}
	defer pc.c.CloseIdleConnections()

	tr := &http.Transport{MaxIdleConnsPerHost: 64}
	defer tr.CloseIdleConnections()
	client := &http.Client{Transport: tr, Timeout: 10 * time.Second}
	ctx, stop := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	defer wg.Wait() // after stop (defers run last in, first out)
	defer stop()
	tally := &statusTally{counts: map[string]int{}}
	call := func(method, route, path string, hdr ...string) func(context.Context) {
		return func(ctx context.Context) {
			req, err := http.NewRequestWithContext(ctx, method, h.base+path, nil)
			if err != nil {
				t.Error(err)
				return
			}
			for i := 0; i+1 < len(hdr); i += 2 {
				req.Header.Set(hdr[i], hdr[i+1])
			}
			resp, err := client.Do(req)
			if err != nil {
				if ctx.Err() == nil {
					tally.add(route, "error")
				}
				return
			}
			_, _ = io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
			tally.add(route, strconv.Itoa(resp.StatusCode))
		}
	}

	// Normal traffic on every route, from now to the end.
	paced(ctx, &wg, 100*time.Millisecond, call(http.MethodGet, "ok", "/ok/"))
	paced(ctx, &wg, 100*time.Millisecond, call(http.MethodGet, "flaky", "/flaky/"))
	paced(ctx, &wg, 500*time.Millisecond, call(http.MethodGet, "dying", "/dying/"))
	paced(ctx, &wg, 200*time.Millisecond, call(http.MethodGet, "busy", "/busy/"))
	paced(ctx, &wg, 500*time.Millisecond, call(http.MethodGet, "pushed", "/pushed/"))
	paced(ctx, &wg, 500*time.Millisecond, call(http.MethodGet, "keyed", "/app/", "X-Api-Key", stormKey))
	paced(ctx, &wg, time.Second, call(http.MethodPut, "upload", "/upload/"))

	// Normal phase: until Prometheus has six good scrapes of levee, no
	// alert may be pending or firing.
	normalStart := time.Now()
	for deadline := time.Now().Add(60 * time.Second); ; {
		if active := pc.alerts(); len(active) > 0 {
			t.Fatalf("alerts active in normal operation after %v: %v", time.Since(normalStart).Round(time.Second), active)
		}
		if pc.query(`sum_over_time(up{job="levee"}[5m])`) >= 6 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("Prometheus did not scrape levee 6 times in 60 s (scrapes %v); its log:\n%s", pc.query(`count_over_time(up{job="levee"}[5m])`), prom.Log())
		}
		time.Sleep(500 * time.Millisecond) // Prometheus changes at its 2 s scrapes; the loop has a deadline
	}
	normal := tally.snapshot()
	for k, n := range normal {
		if !strings.HasSuffix(k, " 200") {
			t.Errorf("normal phase: %d answers %q, want only 200", n, k)
		}
	}
	t.Logf("normal phase: %v, no alert active; answers %v", time.Since(normalStart).Round(time.Second), normal)

	// The faults, at once.
	began := map[string]time.Time{}
	mark := func(alert string) { began[alert] = time.Now() }
	dying.Store(true)
	mark("LeveeUpstreamDown")
	flaky.Store(true)
	mark("LeveeHighErrorRate")
	for range 8 {
		paced(ctx, &wg, 50*time.Millisecond, call(http.MethodGet, "busy", "/busy/"))
	}
	mark("LeveeOverloadShedding")
	for range 2 {
		paced(ctx, &wg, 20*time.Millisecond, call(http.MethodGet, "keyed", "/app/", "X-Api-Key", stormKey))
	}
	mark("LeveeAppThrottled")
	uploader := &http.Client{Transport: tr} // no timeout: the uploads last until ctx ends
	for range uploads {
		wg.Go(func() { trickleUpload(ctx, uploader, h.base+"/upload/big") })
	}
	mark("LeveeMemoryPressure")
	status, doc := pushEndpoints(t, h, "pushed", fmt.Sprintf(`[{"address": %q}, {"address": "not an address"}]`, hostPort(be)))
	if rej, _ := doc["rejected"].([]any); status != 200 || doc["result"] != "applied" || len(rej) != 1 {
		t.Fatalf("push with a bad record: %d %v, want applied with one rejected", status, doc)
	}
	mark("LeveeDiscoveryQuarantine")
	h.writeConfig("no_such_field: 1\n" + cfg)
	resp, err := h.client.Post(h.admin+"/api/v1/reload", "application/json", nil) // h.client sends the generated admin token
	if err != nil {
		t.Fatal(err)
	}
	_, _ = io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	if resp.StatusCode < 400 {
		t.Fatalf("reload of a broken file: %d, want it refused", resp.StatusCode)
	}
	mark("LeveeConfigReloadFailed")

	fired := map[string]time.Duration{}
	for deadline := time.Now().Add(alertWait); len(fired) < len(alertFaults) && time.Now().Before(deadline); {
		active := pc.alerts()
		for _, f := range alertFaults {
			if _, done := fired[f.alert]; done {
				continue
			}
			for _, a := range active {
				if a.Labels["alertname"] == f.alert && a.State == "firing" && (f.label == "" || a.Labels[f.label] == f.value) {
					fired[f.alert] = time.Since(began[f.alert])
				}
			}
		}
		time.Sleep(500 * time.Millisecond) // the loop has a deadline
	}
	for _, f := range alertFaults {
		d, ok := fired[f.alert]
		switch {
		case !ok:
			t.Errorf("%s did not fire within %v of its fault", f.alert, alertWait)
		case d > alertBudget:
			t.Errorf("%s fired %.1f s after its fault, over the %v budget", f.alert, d.Seconds(), alertBudget)
		default:
			t.Logf("%s fired %.1f s after its fault", f.alert, d.Seconds())
		}
	}
	t.Logf("answers over the whole test: %v", tally.snapshot())
	if t.Failed() {
		t.Logf("alerts now: %v\nPrometheus log:\n%s", pc.alerts(), prom.Log())
	}
}

// paced calls do every period (after the previous call returns, at the
// earliest) on a goroutine counted in wg, until ctx ends.
func paced(ctx context.Context, wg *sync.WaitGroup, period time.Duration, do func(context.Context)) {
	wg.Go(func() {
		tick := time.NewTicker(period)
		defer tick.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case <-tick.C:
			}
			do(ctx)
		}
	})
}

// trickleUpload PUTs a uploadSize body, 4 KiB every 250 ms, until ctx
// ends (long before the body does): levee reserves the body's length for
// its replay copy at once and holds it while the body arrives.
func trickleUpload(ctx context.Context, client *http.Client, target string) {
	pr, pw := io.Pipe()
	go func() {
		chunk := make([]byte, 4<<10)
		tick := time.NewTicker(250 * time.Millisecond)
		defer tick.Stop()
		for sent := 0; sent < uploadSize; sent += len(chunk) {
			if _, err := pw.Write(chunk); err != nil {
				return
			}
			select {
			case <-ctx.Done():
				pw.CloseWithError(ctx.Err())
				return
			case <-tick.C:
			}
		}
		pw.Close()
	}()
	req, err := http.NewRequestWithContext(ctx, http.MethodPut, target, pr)
	if err != nil {
		pr.CloseWithError(err)
		return
	}
	req.ContentLength = uploadSize
	if resp, err := client.Do(req); err == nil {
		_, _ = io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
	}
	pr.CloseWithError(io.ErrClosedPipe) // the writer stops if the request ended first
}

// statusTally counts answers by "route status"; safe for concurrent use.
type statusTally struct {
	mu     sync.Mutex
	counts map[string]int
}

func (s *statusTally) add(route, status string) {
	s.mu.Lock()
	s.counts[route+" "+status]++
	s.mu.Unlock()
}

func (s *statusTally) snapshot() map[string]int {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make(map[string]int, len(s.counts))
	for k, v := range s.counts {
		out[k] = v
	}
	return out
}

// promClient reads Prometheus's HTTP API.
type promClient struct {
	t    *testing.T
	base string
	c    *http.Client
}

type promAlert struct {
	Labels map[string]string `json:"labels"`
	State  string            `json:"state"`
}

func (a promAlert) String() string {
	keys := make([]string, 0, len(a.Labels))
	for k := range a.Labels {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	var b strings.Builder
	for _, k := range keys {
		fmt.Fprintf(&b, "%s=%s ", k, a.Labels[k])
	}
	return a.State + " {" + strings.TrimSpace(b.String()) + "}"
}

// get decodes GET path's data member into v, failing the test on any
// error.
func (p *promClient) get(path string, v any) {
	p.t.Helper()
	resp, err := p.c.Get(p.base + path)
	if err != nil {
		p.t.Fatalf("Prometheus GET %s: %v", path, err)
	}
	defer resp.Body.Close()
	var doc struct {
		Status string          `json:"status"`
		Data   json.RawMessage `json:"data"`
		Error  string          `json:"error"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&doc); err != nil || doc.Status != "success" {
		p.t.Fatalf("Prometheus GET %s: %d %s %s (%v)", path, resp.StatusCode, doc.Status, doc.Error, err)
	}
	if err := json.Unmarshal(doc.Data, v); err != nil {
		p.t.Fatalf("Prometheus GET %s: %v", path, err)
	}
}

// alerts returns the active (pending or firing) alerts.
func (p *promClient) alerts() []promAlert {
	p.t.Helper()
	var data struct {
		Alerts []promAlert `json:"alerts"`
	}
	p.get("/api/v1/alerts", &data)
	return data.Alerts
}

// query returns the value of an instant query's first sample, 0 if none.
func (p *promClient) query(q string) float64 {
	p.t.Helper()
	var data struct {
		Result []struct {
			Value [2]any `json:"value"`
		} `json:"result"`
	}
	p.get("/api/v1/query?query="+url.QueryEscape(q), &data)
	if len(data.Result) == 0 {
		return 0
	}
	s, _ := data.Result[0].Value[1].(string)
	v, _ := strconv.ParseFloat(s, 64)
	return v
}
