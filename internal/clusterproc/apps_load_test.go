//go:build !race

package clusterproc

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/levee-gw/levee/internal/testsvc"
)

// propagation is the bound on a change reaching every node.
const propagation = time.Second

// clusterView returns the node ids GET /api/v1/cluster lists on n, and
// whether it says etcd is up.
func clusterView(t *testing.T, n *Node) ([]string, bool) {
	t.Helper()
	code, doc, _ := api(t, n, "GET", "/api/v1/cluster", "")
	if code != 200 {
		t.Fatalf("%s: GET /api/v1/cluster: %d %v", n.Name, code, doc)
	}
	var ids []string
	list, _ := doc["nodes"].([]any)
	for _, x := range list {
		m, _ := x.(map[string]any)
		if m["version"] == "" || m["admin"] == "" || m["since"] == "" {
			t.Errorf("%s: a node without version, admin or since: %v", n.Name, m)
		}
		id, _ := m["id"].(string)
		ids = append(ids, id)
	}
	etcd, _ := doc["etcd"].(map[string]any)
	up, _ := etcd["up"].(bool)
	return ids, up
}

// reach waits (bounded by 10 s) until each node answers key with want and
// fails t if one took longer than propagation since since; it logs each
// node's time.
func reach(t *testing.T, what string, nodes []*Node, key string, want int, since time.Time) {
	t.Helper()
	for _, n := range nodes {
		waitFor(t, fmt.Sprintf("%s answering %d: %s", n.Name, want, what), 10*time.Second, func() bool { return call(t, n, key) == want })
		d := time.Since(since)
		t.Logf("%s: %s answers %d on %s after %v", what, key[:8], want, n.Name, d.Round(time.Millisecond))
		if d > propagation {
			t.Errorf("%s: %s answered %d after %v, want within %v", what, n.Name, want, d, propagation)
		}
	}
}

// newKey creates a key for app on n and returns it with its id.
func newKey(t *testing.T, n *Node, app string) (key, id string) {
	t.Helper()
	code, doc, _ := api(t, n, "POST", "/api/v1/apps/"+app+"/keys", "")
	key, _ = doc["key"].(string)
	id, _ = doc["id"].(string)
	if code != 201 || key == "" || id == "" {
		t.Fatalf("%s: create a key for %s: %d %v", n.Name, app, code, doc)
	}
	return key, id
}

// revoke revokes key id of app through n.
func revoke(t *testing.T, n *Node, app, id string) {
	t.Helper()
	if code, doc, _ := api(t, n, "DELETE", "/api/v1/apps/"+app+"/keys/"+id, ""); code != 200 {
		t.Fatalf("%s: revoke %s: %d %v", n.Name, id, code, doc)
	}
}

// TestProcsSharedApps: three levee processes on one etcd. A key created
// through node 1's admin API answers on nodes 2 and 3 within 1 s; revoked
// through node 3, it is refused on nodes 1 and 2 within 1 s. With etcd
// killed (SIGKILL) nothing is served wrong (the revoked key refused, the
// valid ones admitted, on every node, at every check), admin writes answer
// 503 store_unavailable with Retry-After, /readyz stays ready with a note,
// and node 3 killed and started again serves its last snapshot. With etcd
// back, a revocation made through node 1 and a key made through the
// restarted node 3 reach every node within 1 s. A node killed leaves GET
// /api/v1/cluster within 10 s (lease TTL 2 s here).
func TestProcsSharedApps(t *testing.T) {
	e := testsvc.StartEtcd(t)
	nodes, paths := startNodes(t, 3, cluster{etcd: e.Endpoint})
	for _, n := range nodes {
		waitFor(t, n.Name+" listing 3 nodes", 10*time.Second, func() bool { ids, _ := clusterView(t, n); return len(ids) == 3 })
		waitFor(t, n.Name+" admitting the file's key", 10*time.Second, func() bool { return call(t, n, goodKey) == 200 })
		if up := metric(t, n, `levee_cluster_store_up{store="etcd"}`); up != 1 {
			t.Errorf("%s: levee_cluster_store_up{store=\"etcd\"} %v, want 1", n.Name, up)
		}
	}
	if code, doc, _ := api(t, nodes[0], "POST", "/api/v1/apps", `{"id":"shop","grants":["api"]}`); code != 201 {
		t.Fatalf("create app on node 1: %d %v", code, doc)
	}
	key, keyID := newKey(t, nodes[0], "shop")
	reach(t, "key created on node 1", nodes[1:], key, 200, time.Now())
	revoke(t, nodes[2], "shop", keyID)
	reach(t, "key revoked on node 3", nodes[:2], key, 401, time.Now())
	key2, key2ID := newKey(t, nodes[0], "shop")
	reach(t, "second key created on node 1", nodes, key2, 200, time.Now())

	// served checks every node serves what it knew: nothing wrong.
	served := func(when string) {
		t.Helper()
		for _, n := range nodes {
			for _, c := range []struct {
				key  string
				want int
			}{{goodKey, 200}, {key2, 200}, {key, 401}} {
				if got := call(t, n, c.key); got != c.want {
					t.Errorf("%s, %s: key %s answered %d, want %d", when, n.Name, c.key[:8], got, c.want)
				}
			}
		}
	}

	e.Kill()
	served("etcd just killed")
	for _, n := range nodes {
		waitFor(t, n.Name+" noticing etcd gone", 10*time.Second, func() bool { _, up := clusterView(t, n); return !up })
	}
	served("etcd down")
	code, doc, h := api(t, nodes[1], "DELETE", "/api/v1/apps/shop/keys/"+key2ID, "")
	if code != 503 || doc["reason"] != "store_unavailable" || h.Get("Retry-After") == "" {
		t.Errorf("revoke on node 2 with etcd down: %d %v Retry-After %q, want 503 store_unavailable with Retry-After", code, doc, h.Get("Retry-After"))
	}
	if code, doc, _ := api(t, nodes[0], "POST", "/api/v1/apps", `{"id":"other"}`); code != 503 {
		t.Errorf("create app on node 1 with etcd down: %d %v, want 503", code, doc)
	}
	if code, doc, _ := api(t, nodes[1], "GET", "/readyz", ""); code != 200 || doc["status"] != "ready" ||
		!strings.Contains(fmt.Sprint(doc["notes"]), "cluster.etcd unreachable") {
		t.Errorf("node 2's /readyz with etcd down: %d %v, want 200 ready with a cluster.etcd note", code, doc)
	}
	nodes[2].Kill()
	began := time.Now()
	nodes[2] = Start(t, levee, "node 3 (restarted)", paths[2])
	t.Logf("node 3 killed and started again with etcd down: ready after %v", time.Since(began).Round(time.Millisecond))
	served("etcd down, node 3 restarted")
	if code, _, _ := api(t, nodes[2], "GET", "/api/v1/apps/other", ""); code != 404 {
		t.Errorf("app other (refused during the outage) on node 3: %d, want 404", code)
	}

	e.Restart(t)
	began = time.Now()
	for _, n := range nodes {
		waitFor(t, n.Name+" reaching etcd again", 10*time.Second, func() bool { _, up := clusterView(t, n); return up })
	}
	t.Logf("every node reaching etcd again %v after its restart", time.Since(began).Round(time.Millisecond))
	served("etcd back")
	revoke(t, nodes[0], "shop", key2ID)
	reach(t, "key revoked on node 1 after etcd returned", nodes, key2, 401, time.Now())
	key3, _ := newKey(t, nodes[2], "shop")
	reach(t, "key created on the restarted node 3 after etcd returned", nodes, key3, 200, time.Now())

	waitFor(t, "node 1 listing 3 nodes again", 10*time.Second, func() bool { ids, _ := clusterView(t, nodes[0]); return len(ids) == 3 })
	nodes[1].Kill()
	d := waitFor(t, "node 1 listing 2 nodes after node 2 was killed", 10*time.Second,
		func() bool { ids, _ := clusterView(t, nodes[0]); return len(ids) == 2 })
	t.Logf("node 2 killed (SIGKILL) left the list after %v", d.Round(time.Millisecond))
}
