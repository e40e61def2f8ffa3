package gateway

import (
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/levee-gw/levee/internal/testsvc"
)

// pushNode is one node's config file for the shared-push tests: a push
// upstream (its discovery block with guard) behind a plain route, its
// state_dir beside the file.
func pushNode(t *testing.T, i int, etcd, guard string) string {
	t.Helper()
	dir := t.TempDir()
	path := filepath.Join(dir, "levee.yaml")
	cfg := fmt.Sprintf(`
listen: 127.0.0.1:0
admin: {listen: 127.0.0.1:0}
state_dir: %s
log: {access: false}
cluster:
  node_id: node-%d
  etcd: {endpoints: [%s], prefix: /push/, lease_ttl: 2s, dial_timeout: 500ms, op_timeout: 1s}
upstreams:
  pushed:
    discovery: {push: true, %s}
routes:
  - {name: api, match: {path_prefix: /}, upstream: pushed}
`, filepath.Join(dir, "state"), i, etcd, guard)
	if err := os.WriteFile(path, []byte(cfg), 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

// etcdUp reports whether n's GET /api/v1/cluster says etcd answers.
func etcdUp(t *testing.T, n *instance) bool {
	t.Helper()
	code, doc := n.api("GET", "/api/v1/cluster", "")
	if code != http.StatusOK {
		t.Fatalf("GET /api/v1/cluster: %d %v", code, doc)
	}
	etcd, _ := doc["etcd"].(map[string]any)
	up, _ := etcd["up"].(bool)
	return up
}

// reaches sends one request through n's data plane and reports whether it
// reached b.
func reaches(n *instance, b *countingBackend) bool {
	before := b.hits.Load()
	n.call("")
	return b.hits.Load() > before
}

// waitReach polls n until a request through it reaches b (bounded by
// waitFor's 10 s, a deadline, not a judgment of speed) and returns how
// long that took.
func waitReach(t *testing.T, what string, n *instance, b *countingBackend) time.Duration {
	t.Helper()
	start := time.Now()
	waitFor(t, what, func() bool { return reaches(n, b) })
	return time.Since(start)
}

// held reports whether n's delta guard holds an update for upstream pushed.
func held(t *testing.T, n *instance) bool {
	t.Helper()
	code, doc := n.api("GET", "/api/v1/upstreams/pushed", "")
	if code != 200 {
		t.Fatalf("GET /api/v1/upstreams/pushed: %d %v", code, doc)
	}
	d, _ := doc["discovery"].(map[string]any)
	return d["held"] != nil
}

// pushRaw pushes body to n's upstream pushed and returns the answer.
func pushRaw(t *testing.T, n *instance, body string) *http.Response {
	t.Helper()
	req, _ := http.NewRequest(http.MethodPut, n.admin+"/api/v1/upstreams/pushed/endpoints", strings.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	if tok := generatedToken(n.g); tok != "" {
		req.Header.Set("Authorization", "Bearer "+tok)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	return resp
}

// TestClusterEtcdSharedPushes runs two levee gateways in this test process
// (each its own listeners, state_dir and etcd client, over real sockets)
// on one real etcd, with an upstream that takes pushed endpoints:
//   - a push to node A is served by node B (requests through B reach the
//     pushed backend); its bad instance is quarantined and counted on both;
//   - a push to B that drops every endpoint is held on both (A keeps
//     serving the old set), a confirmation on B releases it on A;
//   - with etcd stopped a push answers 503 store_unavailable with
//     Retry-After on both nodes and changes nothing; both keep serving, and
//     B restarted serves its snapshot;
//   - etcd back, a new push on A reaches B.
//
// Propagation times are logged, judged only against a bounded deadline.
func TestClusterEtcdSharedPushes(t *testing.T) {
	e := testsvc.StartEtcd(t)
	b1, b2, b3 := newCountingBackend(t), newCountingBackend(t), newCountingBackend(t)
	paths := []string{pushNode(t, 1, e.Endpoint, "confirm_after: 1h"), pushNode(t, 2, e.Endpoint, "confirm_after: 1h")}
	nodes := []*instance{launch(t, paths[0], ""), launch(t, paths[1], "")}
	defer func() {
		for _, n := range nodes {
			n.stop()
		}
	}()
	a, b := nodes[0], nodes[1]
	for i, n := range nodes {
		waitFor(t, fmt.Sprintf("node %d reaching etcd", i+1), func() bool { return etcdUp(t, n) })
	}

	// 1. A push to A (one good instance, one quarantined) serves on B.
	code, doc := a.api("PUT", "/api/v1/upstreams/pushed/endpoints",
		fmt.Sprintf(`[{"address": %q}, {"address": "10.9.9.9:80", "weight": "NaN"}]`, hostPort(b1.srv)))
	if code != 200 || doc["result"] != "applied" {
		t.Fatalf("push on A: %d %v", code, doc)
	}
	if !reaches(a, b1) {
		t.Fatal("A does not serve its own push at once")
	}
	d := waitReach(t, "B serving the push made on A", b, b1)
	t.Logf("a push on node A served by node B after %v", d)
	for i, n := range nodes {
		waitFor(t, fmt.Sprintf("node %d counting the quarantined instance", i+1), func() bool {
			return metricOf(t, n.admin, `levee_discovery_rejected_total{reason="not_finite",upstream="pushed"}`) == 1
		})
	}

	// 2. A push to B that drops all of b1's weight is held on both.
	code, doc = b.api("PUT", "/api/v1/upstreams/pushed/endpoints", fmt.Sprintf(`[{"address": %q}]`, hostPort(b2.srv)))
	if code != 202 || doc["result"] != "held" {
		t.Fatalf("suspicious push on B: %d %v, want 202 held", code, doc)
	}
	start := time.Now()
	waitFor(t, "A holding the push made on B", func() bool { return held(t, a) })
	d = time.Since(start)
	t.Logf("a push held on node B held on node A after %v", d)
	for i, n := range nodes {
		if !reaches(n, b1) {
			t.Errorf("node %d: the held update is served", i+1)
		}
		if got := metricOf(t, n.admin, `levee_discovery_updates_total{result="held",upstream="pushed"}`); got != 1 {
			t.Errorf("node %d: held updates %v, want 1", i+1, got)
		}
	}
	if code, doc := b.api("POST", "/api/v1/upstreams/pushed/confirm", ""); code != 200 || doc["result"] != "applied" {
		t.Fatalf("confirm on B: %d %v", code, doc)
	}
	if !reaches(b, b2) {
		t.Fatal("B does not serve the update it confirmed")
	}
	d = waitReach(t, "A serving the update confirmed on B", a, b2)
	t.Logf("a confirmation on node B released the hold on node A after %v", d)
	if held(t, a) {
		t.Error("A still shows the update held after the confirmation")
	}
	if code, doc := a.api("POST", "/api/v1/upstreams/pushed/confirm", ""); code != 409 || doc["reason"] != "nothing_held" {
		t.Errorf("confirm on A after the release: %d %v, want 409 nothing_held", code, doc)
	}

	// 3. etcd stopped: pushes answer 503 on both; serving goes on.
	e.Stop()
	for i, n := range nodes {
		waitFor(t, fmt.Sprintf("node %d noticing etcd gone", i+1), func() bool { return !etcdUp(t, n) })
		resp := pushRaw(t, n, fmt.Sprintf(`[{"address": %q}]`, hostPort(b3.srv)))
		expectRefusal(t, resp, 503, "store_unavailable") // with Retry-After
		if code, doc := n.api("GET", "/readyz", ""); code != 200 || !strings.Contains(fmt.Sprint(doc["notes"]), "pushed endpoints serve as this node last saw them") {
			t.Errorf("node %d: /readyz during the outage: %d %v, want ready with a note on pushed endpoints", i+1, code, doc)
		}
	}
	nodes[1].stop()
	nodes[1] = launch(t, paths[1], "")
	b = nodes[1]
	if _, doc := b.api("GET", "/api/v1/upstreams/pushed", ""); fmt.Sprint(doc["discovery"].(map[string]any)["serving_from"]) != "snapshot" {
		t.Errorf("B restarted during the outage serves from %v, want its snapshot", doc["discovery"])
	}
	for i, n := range nodes {
		for range 3 {
			if !reaches(n, b2) {
				t.Errorf("node %d during the outage: a request did not reach the last pushed endpoint", i+1)
			}
		}
	}
	if b3.hits.Load() != 0 {
		t.Errorf("a push refused during the outage was served: %d requests reached it", b3.hits.Load())
	}

	// 4. etcd back: a new push on A reaches B.
	e.Restart(t)
	waitFor(t, "A reaching etcd again", func() bool { return etcdUp(t, a) })
	code, doc = a.api("PUT", "/api/v1/upstreams/pushed/endpoints", fmt.Sprintf(`[{"address": %q}, {"address": %q}]`, hostPort(b2.srv), hostPort(b3.srv)))
	if code != 200 || doc["result"] != "applied" {
		t.Fatalf("push on A after the outage: %d %v", code, doc)
	}
	d = waitReach(t, "B serving the push made on A after the outage", b, b3)
	t.Logf("a push on node A after etcd returned served by node B after %v", d)
}

// TestClusterEtcdPushReload: a node whose reload turns an upstream into a
// push upstream serves the push the cluster already shares for it.
func TestClusterEtcdPushReload(t *testing.T) {
	e := testsvc.StartEtcd(t)
	static, pushed := newCountingBackend(t), newCountingBackend(t)
	a := launch(t, pushNode(t, 1, e.Endpoint, "confirm_after: 1h"), "")
	defer a.stop()
	path := pushNode(t, 2, e.Endpoint, "confirm_after: 1h")
	withPush, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	staticCfg := strings.Replace(string(withPush), "discovery: {push: true, confirm_after: 1h}",
		fmt.Sprintf("endpoints: [{address: %s}]", hostPort(static.srv)), 1)
	if err := os.WriteFile(path, []byte(staticCfg), 0o600); err != nil {
		t.Fatal(err)
	}
	b := launch(t, path, "")
	defer b.stop()
	waitFor(t, "A reaching etcd", func() bool { return etcdUp(t, a) })
	if code, doc := a.api("PUT", "/api/v1/upstreams/pushed/endpoints", fmt.Sprintf(`[{"address": %q}]`, hostPort(pushed.srv))); code != 200 {
		t.Fatalf("push on A: %d %v", code, doc)
	}
	if !reaches(b, static) {
		t.Fatal("B does not serve its static endpoint before the reload")
	}
	if err := os.WriteFile(path, withPush, 0o600); err != nil {
		t.Fatal(err)
	}
	if err := b.g.Reload(); err != nil {
		t.Fatal(err)
	}
	d := waitReach(t, "B serving the shared push after its reload", b, pushed)
	t.Logf("a reload that made the upstream a push upstream served the shared push after %v", d)
}
