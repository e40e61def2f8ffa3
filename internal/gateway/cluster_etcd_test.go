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

// etcdNodeConfig is one node of a cluster sharing its apps through etcd:
// a keyed route, and a file app "filed" with key fileKey.
func etcdNodeConfig(node, stateDir, upstream, etcd string) string {
	return fmt.Sprintf(`
listen: 127.0.0.1:0
admin: {listen: 127.0.0.1:0}
state_dir: %s
log: {access: false}
cluster:
  node_id: %s
  etcd: {endpoints: [%s], prefix: /test/, lease_ttl: 2s, dial_timeout: 500ms, op_timeout: 1s}
upstreams:
  data: {endpoints: [{address: %s}]}
routes:
  - {name: api, match: {path_prefix: /}, upstream: data, auth: api_key}
apps:
  - id: filed
    api_key_sha256: [%s]
    grants: [api]
`, stateDir, node, etcd, upstream, keyHash("file-key-0123456789"))
}

// etcdNode is one node's config file, for launch.
func etcdNode(t *testing.T, i int, upstream, etcd string) string {
	t.Helper()
	dir := t.TempDir()
	path := filepath.Join(dir, "levee.yaml")
	cfg := etcdNodeConfig(fmt.Sprint("node-", i), filepath.Join(dir, "state"), upstream, etcd)
	if err := os.WriteFile(path, []byte(cfg), 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

// waitStatus polls node's answer to key until it is want (bounded by
// waitFor's 10 s: a deadline, not a judgment of speed) and returns how
// long that took.
func waitStatus(t *testing.T, what string, n *instance, key string, want int) time.Duration {
	t.Helper()
	start := time.Now()
	waitFor(t, what, func() bool { return n.call(key) == want })
	return time.Since(start)
}

// clusterNodes returns the ids GET /api/v1/cluster lists on n, and
// whether it says etcd is up.
func clusterNodes(t *testing.T, n *instance) ([]string, bool) {
	t.Helper()
	code, doc := n.api("GET", "/api/v1/cluster", "")
	if code != http.StatusOK {
		t.Fatalf("GET /api/v1/cluster: %d %v", code, doc)
	}
	var ids []string
	list, _ := doc["nodes"].([]any)
	for _, x := range list {
		m := x.(map[string]any)
		if m["version"] == "" || m["admin"] == "" || m["since"] == "" {
			t.Errorf("node without version, admin or since: %v", m)
		}
		ids = append(ids, m["id"].(string))
	}
	etcd, _ := doc["etcd"].(map[string]any)
	up, _ := etcd["up"].(bool)
	return ids, up
}

// TestClusterEtcdSharedApps runs three levee gateways in this test process
// (each its own listeners, state_dir and etcd client, over real sockets)
// on one real etcd: the file seeds the shared store once; a key created
// through node 1's admin API answers on nodes 2 and 3; revoked through
// node 3, it is refused on 1 and 2; with etcd stopped, every node keeps
// serving what it knew (no key admitted or refused wrongly), admin writes
// answer 503 store_unavailable with Retry-After, and a node restarted
// then serves its saved snapshot; once etcd is back, a change made then
// reaches every node. GET /api/v1/cluster lists the three nodes and drops
// one shut down. Propagation times are logged, judged only against a
// bounded deadline.
func TestClusterEtcdSharedApps(t *testing.T) {
	e := testsvc.StartEtcd(t)
	up := hostPort(echoBackend(t))
	paths := make([]string, 3)
	nodes := make([]*instance, 3)
	for i := range nodes {
		paths[i] = etcdNode(t, i+1, up, e.Endpoint)
		nodes[i] = launch(t, paths[i], "")
		defer func() { nodes[i].stop() }()
	}
	for i, n := range nodes {
		waitFor(t, fmt.Sprintf("node %d listing 3 nodes", i+1), func() bool { ids, _ := clusterNodes(t, n); return len(ids) == 3 })
		waitStatus(t, fmt.Sprintf("node %d admitting the file's key", i+1), n, "file-key-0123456789", 200)
		waitFor(t, fmt.Sprintf("node %d counting 3 nodes", i+1), func() bool { return metricOf(t, n.admin, "levee_cluster_nodes") == 3 })
		if up := metricOf(t, n.admin, `levee_cluster_store_up{store="etcd"}`); up != 1 {
			t.Errorf("node %d: levee_cluster_store_up{store=\"etcd\"} %v, want 1", i+1, up)
		}
	}
	if code, doc := nodes[0].api("POST", "/api/v1/apps", `{"id":"shop","grants":["api"]}`); code != 201 {
		t.Fatalf("create app: %d %v", code, doc)
	}
	code, doc := nodes[0].api("POST", "/api/v1/apps/shop/keys", "")
	if code != 201 {
		t.Fatalf("create key: %d %v", code, doc)
	}
	key, keyID := doc["key"].(string), doc["id"].(string)
	for i, n := range nodes[1:] {
		d := waitStatus(t, fmt.Sprintf("node %d admitting the new key", i+2), n, key, 200)
		t.Logf("key created on node 1 answers on node %d after %v", i+2, d)
	}
	if code, doc := nodes[2].api("DELETE", "/api/v1/apps/shop/keys/"+keyID, ""); code != 200 {
		t.Fatalf("revoke: %d %v", code, doc)
	}
	for i, n := range nodes[:2] {
		d := waitStatus(t, fmt.Sprintf("node %d refusing the revoked key", i+1), n, key, 401)
		t.Logf("key revoked on node 3 refused on node %d after %v", i+1, d)
	}
	code, doc = nodes[0].api("POST", "/api/v1/apps/shop/keys", "")
	if code != 201 {
		t.Fatalf("create key: %d %v", code, doc)
	}
	key2, key2ID := doc["key"].(string), doc["id"].(string)
	for _, n := range nodes {
		waitStatus(t, "every node admitting the second key", n, key2, 200)
	}

	e.Stop()
	waitFor(t, "node 2 noticing etcd gone", func() bool { _, up := clusterNodes(t, nodes[1]); return !up })
	waitFor(t, "node 2's etcd gauge at 0", func() bool { return metricOf(t, nodes[1].admin, `levee_cluster_store_up{store="etcd"}`) == 0 })
	req, _ := http.NewRequest("DELETE", nodes[1].admin+"/api/v1/apps/shop/keys/"+key2ID, nil)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	expectRefusal(t, resp, 503, "store_unavailable")
	if resp.Header.Get("Retry-After") == "" {
		t.Error("503 store_unavailable without Retry-After")
	}
	if code, doc := nodes[1].api("GET", "/readyz", ""); code != 200 || doc["status"] != "ready" ||
		!strings.Contains(fmt.Sprint(doc["notes"]), "cluster.etcd unreachable") {
		t.Errorf("/readyz during the etcd outage: %d %v, want 200 ready with a cluster.etcd note", code, doc)
	}
	if code, _ := nodes[0].api("POST", "/api/v1/apps", `{"id":"other"}`); code != 503 {
		t.Errorf("create app during the outage: %d, want 503", code)
	}
	nodes[2].stop()
	nodes[2] = launch(t, paths[2], "")
	for i, n := range nodes {
		if c := n.call(key2); c != 200 {
			t.Errorf("node %d during the outage: the active key answers %d", i+1, c)
		}
		if c := n.call(key); c != 401 {
			t.Errorf("node %d during the outage: the revoked key answers %d", i+1, c)
		}
	}
	if _, ok := nodes[0].g.Apps().Current().App("other"); ok {
		t.Error("an app created during the outage exists on node 1")
	}

	e.Restart(t)
	waitFor(t, "node 1 reaching etcd again", func() bool { _, up := clusterNodes(t, nodes[0]); return up })
	if code, doc := nodes[0].api("DELETE", "/api/v1/apps/shop/keys/"+key2ID, ""); code != 200 {
		t.Fatalf("revoke after the outage: %d %v", code, doc)
	}
	for i, n := range nodes[1:] {
		d := waitStatus(t, fmt.Sprintf("node %d refusing the key revoked after the outage", i+2), n, key2, 401)
		t.Logf("key revoked after etcd returned refused on node %d after %v", i+2, d)
	}
	waitFor(t, "node 1 listing 3 nodes again", func() bool { ids, _ := clusterNodes(t, nodes[0]); return len(ids) == 3 })
	nodes[1].stop()
	start := time.Now()
	waitFor(t, "node 1 listing 2 nodes", func() bool { ids, _ := clusterNodes(t, nodes[0]); return len(ids) == 2 })
	t.Logf("node 2 shut down left the list after %v", time.Since(start))
}
