//go:build !race

package clusterproc

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/levee-gw/levee/internal/testsvc"
)

// dataNodeConfig writes node i's configuration for the data-API tests:
// cluster.etcd at etcd, PostgreSQL at dsn as data source sales, its own
// state_dir, and no data routes in the file (every data API is made
// through the admin API, so the shared store is all that serves).
func dataNodeConfig(t *testing.T, i int, etcd, dsn string) string {
	t.Helper()
	dir := t.TempDir()
	cfg := fmt.Sprintf(`listen: 127.0.0.1:0
admin: {listen: 127.0.0.1:0, token: none}
state_dir: %s
log: {access: false}
cluster:
  node_id: node-%d
  etcd: {endpoints: [%s], prefix: /data/, lease_ttl: 2s, dial_timeout: 500ms, op_timeout: 1s}
data_sources:
  sales: {driver: postgres, dsn: %q, max_conns: 2}
upstreams:
  web: {endpoints: [{address: 127.0.0.1:9}]}
routes:
  - {name: web, match: {path_prefix: /web}, upstream: web}
`, filepath.Join(dir, "state"), i, etcd, dsn)
	path := filepath.Join(dir, "levee.yaml")
	if err := os.WriteFile(path, []byte(cfg), 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

// dataDef is a data-API version whose rows say which version answered:
// every row of customer 1 with v = version.
func dataDef(prefix string, v int) string {
	return fmt.Sprintf(`{"match": {"path_prefix": %q}, "data": {"source": "sales",
		"sql": "SELECT id, %d AS v FROM orders WHERE customer_id = :customer_id ORDER BY id",
		"params": {"customer_id": {"type": "int64", "required": true, "min": 1}}}}`, prefix, v)
}

// servedVersion asks n's data listener for path?customer_id=1 and returns
// the version that answered (every row's v), 0 when no route answers it,
// and -1 for any other answer.
func servedVersion(t *testing.T, n *Node, path string) int {
	t.Helper()
	resp, err := httpc.Get("http://" + n.Data + path + "?customer_id=1")
	if err != nil {
		t.Fatalf("%s: GET %s: %v", n.Name, path, err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	if resp.StatusCode == http.StatusNotFound {
		return 0
	}
	var page struct {
		Rows []struct{ V int } `json:"rows"`
	}
	if resp.StatusCode != http.StatusOK || json.Unmarshal(body, &page) != nil || len(page.Rows) != dataRows {
		t.Logf("%s: GET %s: %d %.200s", n.Name, path, resp.StatusCode, body)
		return -1
	}
	v := page.Rows[0].V
	for _, r := range page.Rows {
		if r.V != v {
			return -1
		}
	}
	return v
}

// dataRows is how many orders customer 1 has.
const dataRows = 5

// expectAPI calls n's admin API and fails t unless it answers code (and
// reason, when not "").
func expectAPI(t *testing.T, n *Node, method, path, body string, code int, reason string) map[string]any {
	t.Helper()
	got, doc, _ := api(t, n, method, path, body)
	if got != code || (reason != "" && doc["reason"] != reason) {
		t.Fatalf("%s: %s %s: %d %v, want %d %s", n.Name, method, path, got, doc, code, reason)
	}
	return doc
}

// TestProcsSharedDataAPIs (issue 29 item 1) runs three levee processes
// with cluster.etcd on one real etcd and one real PostgreSQL:
//   - a data API created and published through node 1 is served by nodes
//     2 and 3 within 1 s; a new version published on node 1 reaches all;
//     a rollback through node 3 is seen by all within 1 s;
//   - etcd killed (SIGKILL): every node keeps serving its version, data-API
//     writes answer 503 store_unavailable on every node, and node 2
//     killed and started again serves from its snapshot under state_dir;
//   - etcd back: a new version published on node 1 reaches all within 1 s;
//   - 30 more publishes, the nodes taking turns, each timed until all
//     three serve it: the 99th percentile within 1 s.
func TestProcsSharedDataAPIs(t *testing.T) {
	e := testsvc.StartEtcd(t)
	pg := testsvc.StartPostgres(t)
	pg.Exec(t, `CREATE TABLE orders (id int PRIMARY KEY, customer_id int NOT NULL);
		INSERT INTO orders SELECT g, 1 + g % 3 FROM generate_series(1, 15) g;`)
	if got := pg.QueryText(t, "SELECT count(*) FROM orders WHERE customer_id = 1"); len(got) != 1 || got[0][0] == nil || *got[0][0] != fmt.Sprint(dataRows) {
		t.Fatalf("customer 1's orders in PostgreSQL: %v, want %d", got, dataRows)
	}
	nodes, paths := make([]*Node, 3), make([]string, 3)
	for i := range nodes {
		paths[i] = dataNodeConfig(t, i+1, e.Endpoint, pg.DSN)
		nodes[i] = Start(t, levee, fmt.Sprintf("node %d", i+1), paths[i])
	}
	const path = "/v1/orders"
	// served waits (bounded by 10 s) until every node in ns serves version
	// v and fails t when one took longer than propagation after since.
	served := func(what string, ns []*Node, v int, since time.Time) {
		t.Helper()
		for _, n := range ns {
			waitFor(t, fmt.Sprintf("%s serving version %d: %s", n.Name, v, what), 10*time.Second, func() bool { return servedVersion(t, n, path) == v })
			d := time.Since(since)
			t.Logf("%s: %s serves version %d after %v", what, n.Name, v, d.Round(time.Millisecond))
			if d > propagation {
				t.Errorf("%s: %s served version %d after %v, want within %v", what, n.Name, v, d, propagation)
			}
		}
	}

	began := time.Now()
	expectAPI(t, nodes[0], "POST", "/api/v1/data-apis", `{"name": "orders", `+dataDef(path, 1)[1:], 201, "")
	expectAPI(t, nodes[0], "POST", "/api/v1/data-apis/orders/publish", "", 200, "")
	served("created and published on node 1", nodes, 1, began)

	began = time.Now()
	expectAPI(t, nodes[0], "POST", "/api/v1/data-apis/orders/versions", dataDef(path, 2), 201, "")
	expectAPI(t, nodes[0], "POST", "/api/v1/data-apis/orders/publish", "", 200, "")
	served("version 2 published on node 1", nodes, 2, began)

	began = time.Now()
	expectAPI(t, nodes[2], "POST", "/api/v1/data-apis/orders/rollback", "", 200, "")
	served("rolled back on node 3", nodes, 1, began)

	e.Kill()
	for _, n := range nodes {
		if v := servedVersion(t, n, path); v != 1 {
			t.Errorf("etcd killed: %s serves version %d, want 1", n.Name, v)
		}
	}
	for i, n := range nodes {
		// The first write after the kill may wait for the etcd client's
		// own timeout; each answers 503 within it.
		waitFor(t, n.Name+" refusing data-API writes with etcd down", 10*time.Second, func() bool {
			code, doc, h := api(t, n, "POST", "/api/v1/data-apis/orders/versions", dataDef(path, 10+i))
			return code == 503 && doc["reason"] == "store_unavailable" && h.Get("Retry-After") != ""
		})
		expectAPI(t, n, "POST", "/api/v1/data-apis/orders/publish", `{"version": 2}`, 503, "store_unavailable")
	}
	nodes[1].Kill()
	began = time.Now()
	nodes[1] = Start(t, levee, "node 2 (restarted)", paths[1])
	t.Logf("node 2 killed and started again with etcd down: ready after %v", time.Since(began).Round(time.Millisecond))
	for _, n := range nodes {
		if v := servedVersion(t, n, path); v != 1 {
			t.Errorf("etcd down, node 2 restarted: %s serves version %d, want 1", n.Name, v)
		}
	}

	e.Restart(t)
	for _, n := range nodes {
		waitFor(t, n.Name+" reaching etcd again", 10*time.Second, func() bool { _, up := clusterView(t, n); return up })
	}
	began = time.Now()
	expectAPI(t, nodes[0], "POST", "/api/v1/data-apis/orders/versions", dataDef(path, 3), 201, "")
	expectAPI(t, nodes[0], "POST", "/api/v1/data-apis/orders/publish", "", 200, "")
	served("version 3 published on node 1 after etcd returned", nodes, 3, began)

	// 30 publishes of alternating versions, the writing node taking
	// turns: the time until all three serve each.
	var took []time.Duration
	for k := range 30 {
		w := nodes[k%3]
		v := 1 + k%3
		began := time.Now()
		expectAPI(t, w, "POST", "/api/v1/data-apis/orders/publish", fmt.Sprintf(`{"version": %d}`, v), 200, "")
		for _, n := range nodes {
			waitFor(t, fmt.Sprintf("%s serving version %d", n.Name, v), 10*time.Second, func() bool { return servedVersion(t, n, path) == v })
		}
		took = append(took, time.Since(began))
	}
	slices.Sort(took)
	p50, p99 := took[len(took)/2], took[len(took)*99/100]
	t.Logf("DATA-API PUBLISH ACROSS 3 PROCESSES: %d publishes, until all three serve: p50 %v p99 %v max %v",
		len(took), p50.Round(time.Millisecond), p99.Round(time.Millisecond), took[len(took)-1].Round(time.Millisecond))
	if p99 > propagation {
		t.Errorf("p99 %v until three processes serve a publish, want within %v", p99, propagation)
	}
	if s := nodes[2].Stderr(); strings.Contains(s, "panic") {
		t.Errorf("node 3 logged a panic: %.2000s", s)
	}
}
