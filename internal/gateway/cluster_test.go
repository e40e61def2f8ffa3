package gateway

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/redis/go-redis/v9"

	"github.com/levee-gw/levee/internal/testsvc"
)

// clusterConfig is one node of a cluster sharing limits through Redis at
// redisAddr: an app "good" limited on route limited (rate 0.01/s, burst
// 3: nothing refills during a test), with a quota of 4 per day on route
// quota and an anonymous route at burst 2, all shared; extra is appended
// under cluster.redis. The store timeout is 1 s: these tests count exact
// admissions, and under the race detector a 50 ms operation sometimes
// times out and falls back (clusterproc.TestProcsRedisOutage uses the default 50 ms).
func clusterConfig(node, upstream, redisAddr, extra string) string {
	return fmt.Sprintf(`
listen: 127.0.0.1:0
admin: {listen: 127.0.0.1:0}
log: {access: false}
cluster:
  node_id: %s
  redis:
    address: %s
    prefix: "test:"
    timeout: 1s
%s
upstreams:
  data: {endpoints: [{address: %s}]}
routes:
  - {name: limited, match: {path_prefix: /limited/}, upstream: data, auth: api_key}
  - {name: quota, match: {path_prefix: /quota/}, upstream: data, auth: api_key}
  - {name: signed, match: {path_prefix: /signed/}, upstream: data, auth: hmac}
  - {name: open, match: {path_prefix: /}, upstream: data, anonymous_limits: {rate: 0.01, burst: 2}}
apps:
  - id: good
    api_key_sha256: [%s]
    grants: [limited, quota, signed]
    route_limits:
      limited: {rate: 0.01, burst: 3}
      quota: {quota: {requests: 4, per: 24h}}
`, node, redisAddr, extra, upstream, keyHash(goodKey))
}

// startCluster starts n nodes sharing r.
func startCluster(t *testing.T, n int, r *testsvc.Redis, extra string) []*harness {
	t.Helper()
	up := hostPort(echoBackend(t))
	nodes := make([]*harness, n)
	for i := range nodes {
		nodes[i] = start(t, clusterConfig(fmt.Sprintf("node-%d", i+1), up, r.Address, extra))
	}
	return nodes
}

// TestClusterSharesLimits: three nodes, requests spread over them, are
// held to one limit: an app × route burst of 3 admits 3 in all (with
// RateLimit-Remaining 2, 1, 0 whichever node answers), then 429
// rate_limited with the exact Retry-After on every node; a quota of 4 per
// day admits 4 in all; an anonymous client address's burst of 2 admits 2.
// The nodes count each other (levee_cluster_nodes 3).
func TestClusterSharesLimits(t *testing.T) {
	r := testsvc.StartRedis(t)
	nodes := startCluster(t, 3, r, "")
	for i, want := range []string{"2", "1", "0"} {
		resp := nodes[i].get("/limited/", "X-Api-Key", goodKey)
		io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		if resp.StatusCode != 200 || resp.Header.Get("Ratelimit-Limit") != "3" || resp.Header.Get("Ratelimit-Remaining") != want {
			t.Fatalf("request %d on node %d: %d, RateLimit-Limit %q Remaining %q; want 200, 3, %s", i+1, i+1, resp.StatusCode,
				resp.Header.Get("Ratelimit-Limit"), resp.Header.Get("Ratelimit-Remaining"), want)
		}
	}
	for i, n := range nodes {
		resp := n.get("/limited/", "X-Api-Key", goodKey)
		// One request per 100 s: the next is due 100 s after the first.
		if ra, _ := strconv.Atoi(resp.Header.Get("Retry-After")); ra < 95 || ra > 100 {
			t.Errorf("node %d: Retry-After %d, want about 100", i+1, ra)
		}
		expectRefusal(t, resp, 429, "rate_limited")
	}
	admitted := 0
	for i := range 7 {
		resp := nodes[i%3].get("/quota/", "X-Api-Key", goodKey)
		io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		switch resp.StatusCode {
		case 200:
			admitted++
		case 429:
			if resp.Header.Get("Ratelimit-Limit") != "4" {
				t.Errorf("quota refusal: RateLimit-Limit %q, want 4", resp.Header.Get("Ratelimit-Limit"))
			}
		default:
			t.Fatalf("quota request %d: %d", i, resp.StatusCode)
		}
	}
	if admitted != 4 {
		t.Errorf("a quota of 4 admitted %d across three nodes", admitted)
	}
	admitted = 0
	for i := range 6 {
		resp := nodes[i%3].get("/anything")
		io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		if resp.StatusCode == 200 {
			admitted++
		}
	}
	if admitted != 2 {
		t.Errorf("an anonymous burst of 2 admitted %d across three nodes", admitted)
	}
	for i, n := range nodes {
		waitFor(t, fmt.Sprintf("node %d counting 3 nodes", i+1), func() bool { return n.metricIs("levee_cluster_nodes", 3) })
		if up := n.metric(`levee_cluster_store_up{store="redis"}`); up != 1 {
			t.Errorf("node %d: levee_cluster_store_up %v, want 1", i+1, up)
		}
	}
}

// TestClusterDegradedIsReady: with Redis killed a node stays ready, with a
// note naming the fallback; levee_cluster_store_up drops to 0 and
// decisions count in levee_ratelimit_fallback_total; with Redis back the
// note goes and the store is up again.
func TestClusterDegradedIsReady(t *testing.T) {
	r := testsvc.StartRedis(t)
	n := startCluster(t, 1, r, "")[0]
	r.Kill()
	for range 5 { // enough failures in a row to open the breaker (3)
		resp := n.get("/limited/", "X-Api-Key", goodKey)
		io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		if resp.StatusCode >= 500 {
			t.Fatalf("with Redis down a limited request answered %d", resp.StatusCode)
		}
	}
	waitFor(t, "store down", func() bool { return n.metricIs(`levee_cluster_store_up{store="redis"}`, 0) })
	if f := n.metric(`levee_ratelimit_fallback_total{mode="local"}`); f < 1 {
		t.Errorf("levee_ratelimit_fallback_total{mode=local} = %v, want at least 1", f)
	}
	notes := readyNotes(t, n)
	if len(notes) != 1 || !strings.Contains(notes[0], "cluster.redis unreachable") || !strings.Contains(notes[0], "divided by the 1 live node") {
		t.Fatalf("readyz notes with Redis down: %q", notes)
	}
	r.Restart(t)
	waitFor(t, "store up", func() bool { return n.metricIs(`levee_cluster_store_up{store="redis"}`, 1) })
	if notes := readyNotes(t, n); len(notes) != 0 {
		t.Fatalf("readyz notes with Redis back: %q", notes)
	}
}

// readyNotes asserts /readyz answers 200 ready and returns its notes.
func readyNotes(t *testing.T, h *harness) []string {
	t.Helper()
	resp, err := h.client.Get(h.admin + "/readyz")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var body struct {
		Status string   `json:"status"`
		Notes  []string `json:"notes"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&body); err != nil || resp.StatusCode != 200 || body.Status != "ready" {
		t.Fatalf("/readyz: %d %+v (%v), want 200 ready", resp.StatusCode, body, err)
	}
	return body.Notes
}

// TestClusterRedisPassword: with requirepass set, a node given the
// password in cluster.redis.password_file shares its limits (the key is
// in Redis); one given the wrong password falls back and says why in
// /readyz's note.
func TestClusterRedisPassword(t *testing.T) {
	r := testsvc.StartRedis(t)
	rc := redis.NewClient(&redis.Options{Addr: r.Address})
	defer rc.Close()
	if err := rc.ConfigSet(context.Background(), "requirepass", "s3cret-pass").Err(); err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	good, bad := filepath.Join(dir, "good.pass"), filepath.Join(dir, "bad.pass")
	os.WriteFile(good, []byte("s3cret-pass\n"), 0o600)
	os.WriteFile(bad, []byte("wrong\n"), 0o600)
	up := hostPort(echoBackend(t))
	n := start(t, clusterConfig("node-1", up, r.Address, "    password_file: "+good))
	resp := n.get("/limited/", "X-Api-Key", goodKey)
	resp.Body.Close()
	if resp.StatusCode != 200 {
		t.Fatalf("with the password: %d", resp.StatusCode)
	}
	n.noCount(`levee_ratelimit_fallback_total{mode="local"}`)
	authed := redis.NewClient(&redis.Options{Addr: r.Address, Password: "s3cret-pass"})
	defer authed.Close()
	if k, err := authed.Exists(context.Background(), "test:l:good\x00limited").Result(); err != nil || k != 1 {
		t.Fatalf("the shared key is not in Redis: %d, %v", k, err)
	}
	m := start(t, clusterConfig("node-2", up, r.Address, "    password_file: "+bad))
	waitFor(t, "node 2 falling back", func() bool { return m.metricIs(`levee_cluster_store_up{store="redis"}`, 0) })
	if notes := readyNotes(t, m); len(notes) != 1 || !strings.Contains(notes[0], "WRONGPASS") {
		t.Fatalf("notes with a wrong password: %q", notes)
	}
}

// TestClusterBlockNeedsRestart: the cluster block is read at start; a
// reload that changes it is refused with an error at `cluster`, and the
// node keeps sharing its limits.
func TestClusterBlockNeedsRestart(t *testing.T) {
	r := testsvc.StartRedis(t)
	up := hostPort(echoBackend(t))
	n := start(t, clusterConfig("node-1", up, r.Address, ""))
	n.writeConfig(clusterConfig("node-1", up, r.Address, "    on_failure: deny"))
	if err := n.g.Reload(); err == nil || !strings.Contains(err.Error(), "cluster: cannot change on reload") {
		t.Fatalf("reload changing cluster.redis.on_failure: %v, want refused at cluster", err)
	}
	n.writeConfig(clusterConfig("node-1", up, r.Address, ""))
	if err := n.g.Reload(); err != nil {
		t.Fatalf("reload with the same cluster block: %v", err)
	}
}

// TestClusterBothStores: a node with both cluster.redis and cluster.etcd
// (the recommended topology) starts (both stores export
// levee_cluster_store_up, one help text for the name), reports both stores
// up, and counts the live nodes from etcd's membership.
func TestClusterBothStores(t *testing.T) {
	r := testsvc.StartRedis(t)
	e := testsvc.StartEtcd(t)
	up := hostPort(echoBackend(t))
	n := start(t, clusterConfig("node-1", up, r.Address, "  etcd: {endpoints: ["+e.Endpoint+"], prefix: /test/}"))
	waitFor(t, "both stores up, one node counted", func() bool {
		return n.metricIs(`levee_cluster_store_up{store="redis"}`, 1) && n.metricIs(`levee_cluster_store_up{store="etcd"}`, 1) &&
			n.metricIs("levee_cluster_nodes", 1)
	})
}
