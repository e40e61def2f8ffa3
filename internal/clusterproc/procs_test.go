package clusterproc

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/levee-gw/levee/client"
	"github.com/levee-gw/levee/internal/testsvc"
)

// levee is the binary TestMain built for this run.
var levee string

// TestMain builds levee once (bounded: 5 minutes covers a cold build on
// two busy cores); a failed build fails every test of the package.
func TestMain(m *testing.M) {
	dir, err := os.MkdirTemp("", "levee-clusterproc-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	levee, err = Build(dir, 5*time.Minute)
	if err != nil {
		fmt.Fprintln(os.Stderr, "clusterproc:", err)
		os.RemoveAll(dir)
		os.Exit(1)
	}
	code := m.Run()
	os.RemoveAll(dir)
	os.Exit(code)
}

// goodKey is app "good"'s API key; its digest is in the file, and its
// HMAC signing key is sha256(key) under the key id digest[:12]
// (docs/apps.md).
const goodKey = "good-key-0123456789abcdef"

func keyHash(key string) string {
	s := sha256.Sum256([]byte(key))
	return hex.EncodeToString(s[:])
}

// cluster is what a node's cluster block points at: Redis (empty: none)
// with its per-operation timeout, and etcd (empty: none); limit is app
// "good"'s rate per second and burst (0: 100).
type cluster struct {
	redis        string
	redisTimeout time.Duration
	etcd         string
	limit        int
}

// nodeConfig writes node i's configuration file in its own directory,
// with its own state_dir, and returns the file's path. App "good" (key
// goodKey) is limited to c.limit/s with a burst of c.limit (default 100)
// on route api and may call route signed with an HMAC signature.
func nodeConfig(t *testing.T, i int, c cluster, upstream string) string {
	t.Helper()
	dir := t.TempDir()
	var b strings.Builder
	// admin.token none: these tests are about the cluster, not the admin
	// API's credentials (the admin listener is on loopback).
	fmt.Fprintf(&b, "listen: 127.0.0.1:0\nadmin: {listen: 127.0.0.1:0, token: none}\nstate_dir: %s\nlog: {access: false}\n",
		filepath.Join(dir, "state"))
	fmt.Fprintf(&b, "cluster:\n  node_id: node-%d\n", i)
	if c.redis != "" {
		fmt.Fprintf(&b, "  redis: {address: %s, prefix: \"test:\", timeout: %v}\n", c.redis, c.redisTimeout)
	}
	if c.etcd != "" {
		fmt.Fprintf(&b, "  etcd: {endpoints: [%s], prefix: /test/, lease_ttl: 2s, dial_timeout: 500ms, op_timeout: 1s}\n", c.etcd)
	}
	limit := c.limit
	if limit == 0 {
		limit = 100
	}
	fmt.Fprintf(&b, `upstreams:
  data: {endpoints: [{address: %s}]}
routes:
  - {name: api, match: {path_prefix: /api/}, upstream: data, auth: api_key}
  - {name: signed, match: {path_prefix: /signed/}, upstream: data, auth: hmac}
apps:
  - id: good
    api_key_sha256: [%s]
    grants: [api, signed]
    limits: {rate: %d, burst: %d}
`, upstream, keyHash(goodKey), limit, limit)
	path := filepath.Join(dir, "levee.yaml")
	if err := os.WriteFile(path, []byte(b.String()), 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

// upstream is the nodes' upstream: it answers 200 "ok".
func upstream(t *testing.T) string {
	t.Helper()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { io.WriteString(w, "ok") }))
	t.Cleanup(srv.Close)
	return strings.TrimPrefix(srv.URL, "http://")
}

// startNodes starts n levee processes on c and returns them with their
// configuration files (to start a node again).
func startNodes(t *testing.T, n int, c cluster) ([]*Node, []string) {
	t.Helper()
	up := upstream(t)
	nodes, paths := make([]*Node, n), make([]string, n)
	for i := range n {
		paths[i] = nodeConfig(t, i+1, c, up)
		nodes[i] = Start(t, levee, fmt.Sprintf("node %d", i+1), paths[i])
	}
	return nodes, paths
}

// httpc is the tests' client: every call bounded.
var httpc = &http.Client{Timeout: 5 * time.Second}

// TestProcsReplayAcrossNodes: two levee processes sharing Redis; a signed
// request accepted on node 1 and replayed (same date, same signature) to
// node 2 answers 401 with detail replayed; a fresh signature is admitted
// on node 2.
func TestProcsReplayAcrossNodes(t *testing.T) {
	r := testsvc.StartRedis(t)
	nodes, _ := startNodes(t, 2, cluster{redis: r.Address, redisTimeout: time.Second})
	secret := sha256.Sum256([]byte(goodKey))
	keyID := keyHash(goodKey)[:12]
	send := func(n *Node, date time.Time) (int, string, string) {
		req, _ := http.NewRequest("GET", "http://"+n.Data+"/signed/x?a=1", nil)
		if err := client.Sign(req, keyID, secret[:], nil, date); err != nil {
			t.Fatal(err)
		}
		resp, err := httpc.Do(req)
		if err != nil {
			t.Fatalf("%s: %v", n.Name, err)
		}
		defer resp.Body.Close()
		var body struct{ Reason, Detail string }
		raw, _ := io.ReadAll(resp.Body)
		_ = json.Unmarshal(raw, &body)
		return resp.StatusCode, body.Reason, body.Detail
	}
	date := time.Now()
	if code, reason, detail := send(nodes[0], date); code != 200 {
		t.Fatalf("signed request on node 1: %d %s %s, want 200", code, reason, detail)
	}
	if code, reason, detail := send(nodes[1], date); code != 401 || reason != "unauthenticated" || detail != "replayed" {
		t.Fatalf("the same signed request on node 2: %d reason %q detail %q, want 401 unauthenticated replayed", code, reason, detail)
	}
	if code, reason, detail := send(nodes[1], date.Add(time.Second)); code != 200 {
		t.Fatalf("a new signature on node 2: %d %s %s, want 200", code, reason, detail)
	}
}
