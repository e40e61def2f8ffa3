package gateway

import (
	"bufio"
	"bytes"
	"fmt"
	"io"
	"os"
	"os/exec"
	"regexp"
	"runtime"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/levee-gw/levee/internal/testsvc"
	"github.com/prometheus/client_golang/prometheus"
)

// catalogueConfig turns on every part of levee that registers metrics
// (memory guard, access log, discovery, apps, health checks).
func catalogueConfig(upstream string) string {
	return fmt.Sprintf(`
listen: 127.0.0.1:0
admin: {listen: 127.0.0.1:0}
log: {access: true}
memory: {limit: 512MiB}
upstreams:
  web:
    endpoints: [{address: %[1]s}]
    health_check: {http: {path: /}, interval: 1s}
    limits: {max_concurrency: 8}
  pushed: {discovery: {push: true}}
routes:
  - {name: keyed, match: {path_prefix: /app/}, upstream: web, auth: api_key}
  - {name: web, match: {path_prefix: /}, upstream: web}
apps:
  - {id: one, api_key_sha256: [%[2]s], grants: [keyed]}
`, upstream, keyHash(goodKey))
}

// registeredFamilies returns each levee_ family the registry describes, with its
// labels (variable and constant) sorted.
func registeredFamilies(reg *prometheus.Registry) map[string][]string {
	ch := make(chan *prometheus.Desc, 64)
	go func() {
		reg.Describe(ch)
		close(ch)
	}()
	name := regexp.MustCompile(`fqName: "([^"]+)"`)
	constLabels := regexp.MustCompile(`constLabels: \{([^}]*)\}`)
	varLabels := regexp.MustCompile(`variableLabels: \{([^}]*)\}`)
	out := map[string][]string{}
	for d := range ch {
		s := d.String()
		n := name.FindStringSubmatch(s)
		if n == nil || !strings.HasPrefix(n[1], "levee_") {
			continue
		}
		var labels []string
		if m := constLabels.FindStringSubmatch(s); m != nil && m[1] != "" {
			for _, kv := range strings.Split(m[1], ",") {
				k, _, _ := strings.Cut(kv, "=")
				labels = append(labels, k)
			}
		}
		if m := varLabels.FindStringSubmatch(s); m != nil && m[1] != "" {
			labels = append(labels, strings.Split(m[1], ",")...)
		}
		slices.Sort(labels)
		out[n[1]] = labels
	}
	return out
}

// documented returns each family in docs/metrics.md's tables with its
// labels sorted.
func documented(t *testing.T) map[string][]string {
	t.Helper()
	b, err := os.ReadFile("../../docs/metrics.md")
	if err != nil {
		t.Fatal(err)
	}
	code := regexp.MustCompile("`([a-z0-9_]+)`")
	out := map[string][]string{}
	sc := bufio.NewScanner(bytes.NewReader(b))
	for sc.Scan() {
		cells := strings.Split(sc.Text(), "|")
		if len(cells) < 5 || !strings.HasPrefix(strings.TrimSpace(cells[1]), "`levee_") {
			continue
		}
		name := strings.Trim(strings.TrimSpace(cells[1]), "`")
		if _, dup := out[name]; dup {
			t.Errorf("docs/metrics.md lists %s twice", name)
		}
		labels := []string{}
		for _, m := range code.FindAllStringSubmatch(cells[3], -1) {
			labels = append(labels, m[1])
		}
		slices.Sort(labels)
		out[name] = labels
	}
	return out
}

// TestMetricsCatalogue: docs/metrics.md lists every levee_ family the
// registry holds, with its labels, and nothing else.
func TestMetricsCatalogue(t *testing.T) {
	be, _ := backend(t, "web")
	h := start(t, catalogueConfig(hostPort(be))+clusterRedisBlock(t))
	reg, doc := registeredFamilies(h.g.Registry()), documented(t)
	if len(reg) < 30 {
		t.Fatalf("only %d levee_ families registered: %v", len(reg), reg)
	}
	for name, labels := range reg {
		got, ok := doc[name]
		switch {
		case !ok:
			t.Errorf("%s (labels %v) is registered but not in docs/metrics.md", name, labels)
		case !slices.Equal(got, labels):
			t.Errorf("%s: docs/metrics.md gives labels %v, the registry %v", name, got, labels)
		}
	}
	for name := range doc {
		if _, ok := reg[name]; !ok {
			t.Errorf("docs/metrics.md lists %s, which levee does not register", name)
		}
	}
}

// TestSelfMetrics: build info, and the last reload's result and time
// (start counts as a successful load; a refused reload sets 0 until the
// next good one); the reload counter's results exist from the start.
func TestSelfMetrics(t *testing.T) {
	be, _ := backend(t, "web")
	cfg := catalogueConfig(hostPort(be))
	before := float64(time.Now().Unix())
	h := start(t, cfg)
	if got := h.metric(fmt.Sprintf(`levee_build_info{go=%q,version="dev"}`, runtime.Version())); got != 1 {
		t.Errorf("levee_build_info = %v, want 1 with version dev and go %s", got, runtime.Version())
	}
	check := func(when string, success, errors, okReloads float64) float64 {
		t.Helper()
		if got := h.metric("levee_config_last_reload_success"); got != success {
			t.Errorf("%s: levee_config_last_reload_success = %v, want %v", when, got, success)
		}
		if got := h.metric(`levee_config_reloads_total{result="error"}`); got != errors {
			t.Errorf("%s: reloads with error = %v, want %v", when, got, errors)
		}
		if got := h.metric(`levee_config_reloads_total{result="success"}`); got != okReloads {
			t.Errorf("%s: successful reloads = %v, want %v", when, got, okReloads)
		}
		ts := h.metric("levee_config_last_reload_timestamp_seconds")
		if ts < before-1 || ts > float64(time.Now().Unix())+1 {
			t.Errorf("%s: levee_config_last_reload_timestamp_seconds = %v, want between %v and now", when, ts, before)
		}
		return ts
	}
	// Present at 0 before any reload (increase() sees the first one).
	for _, r := range []string{"success", "error"} {
		if !strings.Contains(h.metricsPage(), fmt.Sprintf("levee_config_reloads_total{result=%q} 0\n", r)) {
			t.Errorf("levee_config_reloads_total{result=%q} is not exported at 0 at start", r)
		}
	}
	t0 := check("start", 1, 0, 0)
	h.writeConfig("no_such_field: 1\n" + cfg)
	if err := h.g.Reload(); err == nil {
		t.Fatal("a reload of a broken file succeeded")
	}
	t1 := check("after a refused reload", 0, 1, 0)
	if err := h.g.Reload(); err == nil {
		t.Fatal("a reload of a broken file succeeded")
	}
	check("after two refused reloads", 0, 2, 0)
	h.writeConfig(cfg)
	if err := h.g.Reload(); err != nil {
		t.Fatal(err)
	}
	t2 := check("after a good reload", 1, 2, 1)
	if t1 < t0 || t2 < t1 {
		t.Errorf("reload timestamps went back: %v, %v, %v", t0, t1, t2)
	}
}

// TestPreDeclaredSeries: counters with known label values exist at 0
// before their first event (the shipped alert rules take increase() or
// rate() of them): each route's shed reasons, each discovery upstream's
// results and reasons, each upstream's spent retry budgets and picker
// fallbacks, the HTTP/1.1 handoff reasons, each route's common codes and
// bytes, each upstream's retry failure reasons, the listener's refusals
// and TLS handshake results.
func TestPreDeclaredSeries(t *testing.T) {
	be, _ := backend(t, "web")
	h := start(t, catalogueConfig(hostPort(be)))
	body := h.metricsPage()
	for _, want := range []string{
		`levee_shed_total{reason="queue_full",route="web"} 0`,
		`levee_shed_total{reason="memory_pressure",route="keyed"} 0`,
		`levee_refusals_total{reason="concurrency_limit",route="web"} 0`,
		`levee_discovery_updates_total{result="refused",upstream="pushed"} 0`,
		`levee_discovery_rejected_total{reason="bad_address",upstream="pushed"} 0`,
		`levee_retry_budget_exhausted_total{upstream="web"} 0`,
		`levee_picker_fallbacks_total{upstream="web"} 0`,
		`levee_h1_handoffs_total{reason="upgrade"} 0`,
		`levee_requests_total{code="503",route="web",upstream="web"} 0`,
		`levee_retries_total{reason="connect_failure",upstream="web"} 0`,
		`levee_refusals_total{reason="connection_limit",route=""} 0`,
		`levee_request_bytes_total{route="keyed"} 0`,
		`levee_response_bytes_total{route="web"} 0`,
		`levee_tls_handshakes_total{result="success"} 0`,
		`levee_proxy_protocol_refused_total{reason="untrusted"} 0`,
		`levee_proxy_protocol_headers_total{version="v2"} 0`,
	} {
		if !strings.Contains(body, want+"\n") {
			t.Errorf("/metrics lacks %s", want)
		}
	}
	if strings.Contains(body, `levee_shed_total{reason="queue_full",route=""}`) {
		t.Error("shed series declared for the no-route route, which sheds nothing")
	}
}

// TestMetricsLint: promtool check metrics finds nothing to say about a
// scrape of levee with every part on and some traffic (an app's request
// and 429, a quarantined push, a refused reload). It needs promtool
// (scripts/install-services.sh): it fails without it under
// LEVEE_REQUIRE_SERVICES=1, as make test runs it.
func TestMetricsLint(t *testing.T) {
	promtool := testsvc.Promtool(t)
	be, _ := backend(t, "web")
	cfg := catalogueConfig(hostPort(be))
	h := start(t, cfg)
	for _, path := range []string{"/", "/app/"} {
		resp := h.get(path, "X-Api-Key", goodKey)
		io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
	}
	if status, _ := pushEndpoints(t, h, "pushed", fmt.Sprintf(`[{"address": %q}, {"address": "nowhere"}]`, hostPort(be))); status != 200 {
		t.Fatalf("push: %d", status)
	}
	h.writeConfig("no_such_field: 1\n" + cfg)
	_ = h.g.Reload()
	body := h.metricsPage()
	cmd := exec.Command(promtool, "check", "metrics")
	cmd.Stdin = strings.NewReader(body)
	out, err := cmd.CombinedOutput()
	if err != nil || len(bytes.TrimSpace(out)) > 0 {
		t.Fatalf("promtool check metrics: %v\n%s", err, out)
	}
	t.Logf("promtool check metrics: clean (%d lines scraped)", strings.Count(body, "\n"))
}

// TestAppThrottledCounted: an app's 429s (here its route rate limit's)
// are counted in levee_app_throttled_total under its own label, and in
// its 4xx class too.
func TestAppThrottledCounted(t *testing.T) {
	h := start(t, consumersConfig(hostPort(echoBackend(t))))
	call := func() int {
		resp := h.get("/limited/", "X-Api-Key", goodKey)
		io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		return resp.StatusCode
	}
	if code := call(); code != 200 {
		t.Fatalf("first call: %d", code)
	}
	h.metricsPage() // this scrape gives app good its own label, from 0
	throttled := 0
	for range 10 {
		if call() == 429 {
			throttled++
		}
	}
	if throttled == 0 {
		t.Fatal("no call was rate limited")
	}
	if got := h.metric(`levee_app_throttled_total{app="good"}`); got != float64(throttled) {
		t.Errorf("levee_app_throttled_total{app=good} = %v, want %d", got, throttled)
	}
	if got := h.metric(`levee_app_requests_total{app="good",class="4xx"}`); got != float64(throttled) {
		t.Errorf("levee_app_requests_total{app=good,class=4xx} = %v, want %d", got, throttled)
	}
	h.noCount(`levee_app_throttled_total{app="other"}`)
}
