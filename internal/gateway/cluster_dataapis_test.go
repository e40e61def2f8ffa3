package gateway

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/levee-gw/levee/internal/testsvc"
)

// dataNode is node i's config file for the shared data-API tests: the
// sales SQLite source at dbPath and, when archive, a second source
// archive (the same file) that the other nodes may lack; its state_dir
// beside the file.
func dataNode(t *testing.T, i int, etcd, dbPath string, archive bool) string {
	t.Helper()
	dir := t.TempDir()
	path := filepath.Join(dir, "levee.yaml")
	extra := ""
	if archive {
		extra = fmt.Sprintf("  archive: {driver: sqlite, path: %s, max_conns: 2}\n", dataQuote(dbPath))
	}
	cfg := fmt.Sprintf(`
listen: 127.0.0.1:0
admin: {listen: 127.0.0.1:0}
state_dir: %s
log: {access: false}
cluster:
  node_id: node-%d
  etcd: {endpoints: [%s], prefix: /data/, lease_ttl: 2s, dial_timeout: 500ms, op_timeout: 1s}
data_sources:
  sales: {driver: sqlite, path: %s, max_conns: 2}
%supstreams:
  web: {endpoints: [{address: 127.0.0.1:9}]}
routes:
  - {name: web, match: {path_prefix: /web}, upstream: web}
`, dataQuote(filepath.Join(dir, "state")), i, etcd, dataQuote(dbPath), extra)
	if err := os.WriteFile(path, []byte(cfg), 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

// waitServed polls n until path serves version v (bounded by waitFor's
// 10 s, a deadline, not a judgment of speed) and returns how long that
// took.
func waitServed(t *testing.T, what string, n *instance, path string, v int) time.Duration {
	t.Helper()
	start := time.Now()
	waitFor(t, what, func() bool {
		got, _ := n.served(path)
		return got == v
	})
	return time.Since(start)
}

// nodeStatus returns node's entry of GET /api/v1/data-apis/{api}'s nodes
// on n (nil if absent).
func nodeStatus(t *testing.T, n *instance, api, node string) map[string]any {
	t.Helper()
	code, doc := n.api("GET", "/api/v1/data-apis/"+api, "")
	if code != 200 {
		t.Fatalf("GET /api/v1/data-apis/%s: %d %v", api, code, doc)
	}
	nodes, _ := doc["nodes"].([]any)
	for _, x := range nodes {
		if m, _ := x.(map[string]any); m["node"] == node {
			return m
		}
	}
	return nil
}

// archiveDef is versionDef over the archive source.
func archiveDef(prefix string, v int) string {
	return strings.Replace(versionDef(prefix, v), `"source": "sales"`, `"source": "archive"`, 1)
}

// TestClusterEtcdSharedDataAPIs (issue 29 item 1) runs three levee
// gateways in this test process (each its own listeners, state_dir and
// etcd client, over real sockets) on one real etcd and a real SQLite
// database:
//   - create and publish on node 1: served by nodes 2 and 3; a new
//     version published on node 1 reaches all; a rollback on node 3 is
//     seen by all;
//   - a version node 3 cannot compile (its file lacks the data source
//     archive) serves on nodes 1 and 2 while node 3 keeps its previous
//     version, reported for node 3 in GET /api/v1/data-apis/{name} (on
//     any node) and in levee_data_api_compile_failures_total and
//     levee_data_api_served_version, and node 3's reload is not refused
//     for it;
//   - etcd stopped: every node keeps serving its version, every write
//     answers 503 store_unavailable; node 2 restarted during the outage
//     serves from its snapshot;
//   - etcd back: a new version published on node 1 reaches all.
//
// Propagation times are logged; the load test judges them.
func TestClusterEtcdSharedDataAPIs(t *testing.T) {
	e := testsvc.StartEtcd(t)
	dbPath, _ := sqliteOrders(t)
	paths := []string{
		dataNode(t, 1, e.Endpoint, dbPath, true),
		dataNode(t, 2, e.Endpoint, dbPath, true),
		dataNode(t, 3, e.Endpoint, dbPath, false),
	}
	nodes := make([]*instance, 3)
	for i, p := range paths {
		nodes[i] = launch(t, p, "")
	}
	defer func() {
		for _, n := range nodes {
			n.stop()
		}
	}()
	for i, n := range nodes {
		waitFor(t, fmt.Sprintf("node %d reaching etcd", i+1), func() bool { return etcdUp(t, n) })
	}
	const path = "/v1/rt"
	all := func(what string, v int) {
		t.Helper()
		for i, n := range nodes {
			d := waitServed(t, fmt.Sprintf("node %d serving version %d %s", i+1, v, what), n, path, v)
			t.Logf("%s: node %d served version %d after %v", what, i+1, v, d)
		}
	}

	// 1. Create and publish on node 1.
	n1, n3 := nodes[0], nodes[2]
	a := n1.expectAPI("POST", "/api/v1/data-apis", `{"name": "orders-rt", `+versionDef(path, 1)[1:], 201, "")
	if a["state"] != "draft" {
		t.Fatalf("created: %v", a)
	}
	for i, n := range nodes {
		if v, reason := n.served(path); v != 0 || reason != "no_route" {
			t.Fatalf("node %d serves a draft (version %d)", i+1, v)
		}
	}
	n1.expectAPI("POST", "/api/v1/data-apis/orders-rt/publish", "", 200, "")
	if v, _ := n1.served(path); v != 1 {
		t.Fatalf("node 1 does not serve its own publish at once (version %d)", v)
	}
	all("after a publish on node 1", 1)
	n1.expectAPI("POST", "/api/v1/data-apis/orders-rt/versions", versionDef(path, 2), 201, "")
	n1.expectAPI("POST", "/api/v1/data-apis/orders-rt/publish", "", 200, "")
	all("after publishing version 2 on node 1", 2)
	if code, doc := nodes[1].api("GET", "/api/v1/data-apis/orders-rt", ""); code != 200 || doc["published_version"] != 2.0 || len(doc["versions"].([]any)) != 2 {
		t.Fatalf("node 2 reads the API as %d %v", code, doc)
	}

	// 2. A rollback on node 3 is seen by all.
	n3.expectAPI("POST", "/api/v1/data-apis/orders-rt/rollback", "", 200, "")
	all("after a rollback on node 3", 1)

	// 3. A version node 3 cannot compile: nodes 1 and 2 serve it, node 3
	// keeps version 1 and says why.
	n1.expectAPI("POST", "/api/v1/data-apis/orders-rt/versions", archiveDef(path, 3), 201, "")
	n1.expectAPI("POST", "/api/v1/data-apis/orders-rt/publish", `{"version": 3}`, 200, "")
	waitServed(t, "node 2 serving version 3", nodes[1], path, 3)
	waitFor(t, "node 3 reporting that it cannot compile version 3", func() bool {
		st := nodeStatus(t, n1, "orders-rt", "node-3")
		return st != nil && st["state"] == "previous" && st["version"] == 1.0 && st["published_version"] == 3.0 &&
			strings.Contains(fmt.Sprint(st["error"]), "archive")
	})
	if v, _ := n3.served(path); v != 1 {
		t.Fatalf("node 3 serves version %d, want 1 (it cannot compile 3)", v)
	}
	for _, node := range []string{"node-1", "node-2"} {
		if st := nodeStatus(t, n3, "orders-rt", node); st == nil || st["state"] != "serving" || st["version"] != 3.0 {
			t.Errorf("%s's status read on node 3: %v, want serving version 3", node, st)
		}
	}
	if got := metricOf(t, n3.admin, `levee_data_api_compile_failures_total{api="orders-rt"}`); got != 1 {
		t.Errorf("node 3: compile failures %v, want 1", got)
	}
	if got := metricOf(t, n3.admin, `levee_data_api_served_version{api="orders-rt"}`); got != 1 {
		t.Errorf("node 3: served version %v, want 1", got)
	}
	if got := metricOf(t, n1.admin, `levee_data_api_served_version{api="orders-rt"}`); got != 3 {
		t.Errorf("node 1: served version %v, want 3", got)
	}
	if err := n3.g.Reload(); err != nil {
		t.Fatalf("node 3's reload is refused for the version it cannot compile: %v", err)
	}
	if v, _ := n3.served(path); v != 1 {
		t.Fatalf("node 3 after a reload serves version %d, want 1", v)
	}
	nodes[1].expectAPI("POST", "/api/v1/data-apis/orders-rt/publish", `{"version": 2}`, 200, "")
	all("after publishing version 2 on node 2", 2)

	// 4. etcd stopped: serving goes on, writes answer 503.
	e.Stop()
	for i, n := range nodes {
		waitFor(t, fmt.Sprintf("node %d noticing etcd gone", i+1), func() bool { return !etcdUp(t, n) })
		n.expectAPI("POST", "/api/v1/data-apis/orders-rt/publish", `{"version": 1}`, 503, "store_unavailable")
		n.expectAPI("POST", "/api/v1/data-apis/orders-rt/versions", versionDef(path, 9), 503, "store_unavailable")
		n.expectAPI("POST", "/api/v1/data-apis", `{"name": "other", `+versionDef("/v1/other", 1)[1:], 503, "store_unavailable")
		if v, _ := n.served(path); v != 2 {
			t.Errorf("node %d during the outage serves version %d, want 2", i+1, v)
		}
		if code, doc := n.api("GET", "/readyz", ""); code != 200 || !strings.Contains(fmt.Sprint(doc["notes"]), "data APIs and pushed endpoints serve as this node last saw them") {
			t.Errorf("node %d: /readyz during the outage: %d %v, want ready with a note on data APIs", i+1, code, doc)
		}
	}
	nodes[1].stop()
	nodes[1] = launch(t, paths[1], "")
	if v, _ := nodes[1].served(path); v != 2 {
		t.Fatalf("node 2 restarted during the outage serves version %d, want 2 from its snapshot", v)
	}
	nodes[1].expectAPI("POST", "/api/v1/data-apis/orders-rt/offline", "", 503, "store_unavailable")

	// 5. etcd back: a new version published on node 1 reaches all.
	e.Restart(t)
	for i, n := range nodes {
		waitFor(t, fmt.Sprintf("node %d reaching etcd again", i+1), func() bool { return etcdUp(t, n) })
	}
	n1.expectAPI("POST", "/api/v1/data-apis/orders-rt/versions", versionDef(path, 4), 201, "")
	n1.expectAPI("POST", "/api/v1/data-apis/orders-rt/publish", "", 200, "")
	all("after a publish on node 1 once etcd returned", 4)
	a = nodes[1].expectAPI("GET", "/api/v1/data-apis/orders-rt", "", 200, "")
	if len(a["nodes"].([]any)) != 3 {
		t.Errorf("after the outage, nodes %v, want three", a["nodes"])
	}
}
