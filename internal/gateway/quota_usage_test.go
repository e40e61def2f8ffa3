package gateway

import (
	"bufio"
	"bytes"
	"database/sql"
	"encoding/csv"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/levee-gw/levee/internal/testkit"
	"github.com/levee-gw/levee/internal/testsvc"
)

// TestRowAndByteQuotas: apps whose limits.quota counts rows (or bytes)
// are charged as the answer streams. An app crossing its row quota
// mid-answer gets exactly its quota of rows and the format's truncation
// marker with quota_exhausted (JSON, NDJSON, CSV); its next call is
// refused 429 quota_exhausted with a Retry-After; another app is
// unaffected; a per-route quota (route_limits) counts on its own; a byte
// quota on a proxied route cuts the body at exactly its bytes and refuses
// the next call.
func TestRowAndByteQuotas(t *testing.T) {
	path := filepath.Join(t.TempDir(), "q.db")
	db, err := sql.Open("sqlite", path)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	if _, err := db.Exec(`CREATE TABLE items (id INTEGER PRIMARY KEY, name TEXT NOT NULL);
WITH RECURSIVE g(n) AS (SELECT 1 UNION ALL SELECT n + 1 FROM g WHERE n < 50) INSERT INTO items SELECT n, 'item ' || n FROM g;`); err != nil {
		t.Fatal(err)
	}
	big := bytes.Repeat([]byte("0123456789"), 20000) // 200,000 bytes
	up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { _, _ = w.Write(big) }))
	defer up.Close()

	// A window of 8784h (the longest) so the test never straddles a
	// window's end.
	apps := map[string]string{
		"json":   "limits: {quota: {rows: 7, per: 8784h}}",
		"ndjson": "limits: {quota: {rows: 7, per: 8784h}}",
		"csv":    "limits: {quota: {rows: 7, per: 8784h}}",
		"other":  "limits: {quota: {rows: 1000, requests: 100, per: 8784h}}",
		"route":  "route_limits: {items: {quota: {rows: 3, per: 8784h}}}",
		"bytes":  "limits: {quota: {bytes: 50000, per: 8784h}}",
	}
	var ay strings.Builder
	for id, lim := range apps {
		fmt.Fprintf(&ay, "  - {id: %s, api_key_sha256: [%s], grants: [items, files], %s}\n", id, keyHash("lvk_"+id+"-0123456789abcdefghijklmnop"), lim)
	}
	h := start(t, fmt.Sprintf(`
listen: 127.0.0.1:0
admin: {listen: 127.0.0.1:0}
state_dir: %s
log: {access: false}
data_sources:
  db: {driver: sqlite, path: %s, max_conns: 2}
routes:
  - name: items
    match: {path_prefix: /v1/items}
    auth: api_key
    data: {source: db, table: items, columns: [id, name], order: [id], formats: [json, ndjson, csv]}
  - name: files
    match: {path_prefix: /files}
    auth: api_key
    upstream: files
upstreams:
  files: {endpoints: [{address: %s}]}
apps:
%s`, t.TempDir(), path, hostPort(up), ay.String()))

	get := func(app, path, accept string) (*http.Response, []byte, error) {
		req, _ := http.NewRequest(http.MethodGet, h.base+path, nil)
		req.Header.Set("X-Api-Key", "lvk_"+app+"-0123456789abcdefghijklmnop")
		if accept != "" {
			req.Header.Set("Accept", accept)
		}
		resp, err := h.client.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		body, err := io.ReadAll(resp.Body)
		return resp, body, err
	}
	refusedNext := func(t *testing.T, app, path string) {
		t.Helper()
		resp, body, _ := get(app, path, "")
		var ref struct{ Reason string }
		_ = json.Unmarshal(body, &ref)
		ra, _ := strconv.Atoi(resp.Header.Get("Retry-After"))
		if resp.StatusCode != http.StatusTooManyRequests || ref.Reason != "quota_exhausted" || ra < 1 {
			t.Fatalf("next call of %s: %d %s Retry-After %q, want 429 quota_exhausted with a Retry-After", app, resp.StatusCode, body, resp.Header.Get("Retry-After"))
		}
		t.Logf("%s's next call: 429 quota_exhausted, Retry-After %d s", app, ra)
	}

	t.Run("json", func(t *testing.T) {
		resp, body, err := get("json", "/v1/items", "application/json")
		if err != nil || resp.StatusCode != 200 {
			t.Fatalf("%d %v %s", resp.StatusCode, err, body)
		}
		var page struct {
			Rows      []map[string]any `json:"rows"`
			Truncated bool             `json:"truncated"`
			Reason    string           `json:"reason"`
		}
		if err := json.Unmarshal(body, &page); err != nil {
			t.Fatalf("%v: %s", err, body)
		}
		if len(page.Rows) != 7 || !page.Truncated || page.Reason != "quota_exhausted" {
			t.Fatalf("JSON: %d rows, truncated %v, reason %q; want 7, true, quota_exhausted: %s", len(page.Rows), page.Truncated, page.Reason, body)
		}
		if got := resp.Header.Get("Levee-Truncated"); got != "quota_exhausted" {
			t.Errorf("Levee-Truncated %q", got)
		}
		refusedNext(t, "json", "/v1/items")
	})

	t.Run("ndjson", func(t *testing.T) {
		resp, body, err := get("ndjson", "/v1/items", "application/x-ndjson")
		if err != nil || resp.StatusCode != 200 {
			t.Fatalf("%d %v %s", resp.StatusCode, err, body)
		}
		var lines []string
		sc := bufio.NewScanner(bytes.NewReader(body))
		for sc.Scan() {
			lines = append(lines, sc.Text())
		}
		if len(lines) != 8 || lines[7] != `{"truncated":true,"reason":"quota_exhausted"}` || lines[6] != `{"id":7,"name":"item 7"}` {
			t.Fatalf("NDJSON: %d lines, want 7 rows and the marker:\n%s", len(lines), body)
		}
		refusedNext(t, "ndjson", "/v1/items")
	})

	t.Run("csv", func(t *testing.T) {
		resp, body, err := get("csv", "/v1/items", "text/csv")
		if err != nil || resp.StatusCode != 200 {
			t.Fatalf("%d %v %s", resp.StatusCode, err, body)
		}
		recs, err := csv.NewReader(bytes.NewReader(body)).ReadAll()
		if err != nil || len(recs) != 8 || recs[7][0] != "7" {
			t.Fatalf("CSV: %v, %d records, want the header and 7 rows:\n%s", err, len(recs), body)
		}
		if got := resp.Header.Get("Levee-Truncated") + resp.Trailer.Get("Levee-Truncated"); got != "quota_exhausted" {
			t.Fatalf("CSV's Levee-Truncated %q, want quota_exhausted", got)
		}
		refusedNext(t, "csv", "/v1/items")
	})

	t.Run("other app unaffected", func(t *testing.T) {
		resp, body, err := get("other", "/v1/items", "application/x-ndjson")
		if err != nil || resp.StatusCode != 200 || bytes.Count(body, []byte("\n")) != 50 || bytes.Contains(body, []byte("truncated")) {
			t.Fatalf("other: %d %v, %d lines:\n%s", resp.StatusCode, err, bytes.Count(body, []byte("\n")), body)
		}
	})

	t.Run("route quota", func(t *testing.T) {
		resp, body, err := get("route", "/v1/items?limit=2", "application/x-ndjson")
		if err != nil || resp.StatusCode != 200 || bytes.Count(body, []byte("\n")) != 2 {
			t.Fatalf("route, 2 of 3 rows: %d %v %s", resp.StatusCode, err, body)
		}
		_, body, _ = get("route", "/v1/items", "application/x-ndjson")
		if want := "{\"id\":1,\"name\":\"item 1\"}\n{\"truncated\":true,\"reason\":\"quota_exhausted\"}\n"; string(body) != want {
			t.Fatalf("route, the third row: %q, want %q", body, want)
		}
		refusedNext(t, "route", "/v1/items")
	})

	t.Run("proxied bytes", func(t *testing.T) {
		resp, body, err := get("bytes", "/files/big", "")
		if resp.StatusCode != 200 || err == nil || len(body) != 50000 || !bytes.Equal(body, big[:50000]) {
			t.Fatalf("proxied: %d, read error %v, %d bytes; want 200, a cut transfer after exactly 50000 bytes", resp.StatusCode, err, len(body))
		}
		t.Logf("proxied answer cut after %d bytes: %v", len(body), err)
		refusedNext(t, "bytes", "/files/big")
	})

	used := testkit.Scrape(t, h.admin+"/metrics")
	t.Logf("levee_quota_used_total rows %v bytes %v, levee_quota_truncated_total %v",
		used.Value(t, `levee_quota_used_total{kind="rows"}`), used.Value(t, `levee_quota_used_total{kind="bytes"}`), used.Value(t, "levee_quota_truncated_total"))
	if r := used.Value(t, `levee_quota_used_total{kind="rows"}`); r != 7*3+50+3 {
		t.Errorf("rows charged %v, want %d", r, 7*3+50+3)
	}
	if c := used.Value(t, "levee_quota_truncated_total"); c != 5 {
		t.Errorf("answers cut %v, want 5", c)
	}
}

// TestRowQuotaSharedThroughRedis: two levee nodes with cluster.redis
// share an app's row quota of 10: 7 rows on node 1 (the unused part of
// its grant given back when the answer ends), then node 2 gives exactly
// the 3 left and the truncation marker, and both nodes refuse the next
// call 429 quota_exhausted.
func TestRowQuotaSharedThroughRedis(t *testing.T) {
	r := testsvc.StartRedis(t)
	path := filepath.Join(t.TempDir(), "q.db")
	db, err := sql.Open("sqlite", path)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	if _, err := db.Exec(`CREATE TABLE items (id INTEGER PRIMARY KEY, name TEXT NOT NULL);
WITH RECURSIVE g(n) AS (SELECT 1 UNION ALL SELECT n + 1 FROM g WHERE n < 50) INSERT INTO items SELECT n, 'item ' || n FROM g;`); err != nil {
		t.Fatal(err)
	}
	const key = "lvk_shared-0123456789abcdefghijklmnop"
	node := func(id string) *harness {
		return start(t, fmt.Sprintf(`
listen: 127.0.0.1:0
admin: {listen: 127.0.0.1:0}
state_dir: %s
log: {access: false}
cluster:
  node_id: %s
  redis: {address: %s, prefix: "rowq:", timeout: 1s}
data_sources:
  db: {driver: sqlite, path: %s, max_conns: 2}
routes:
  - name: items
    match: {path_prefix: /v1/items}
    auth: api_key
    data: {source: db, table: items, columns: [id, name], order: [id], formats: [ndjson]}
apps:
  - {id: shared, api_key_sha256: [%s], grants: [items], limits: {quota: {rows: 10, per: 8784h}}}
`, t.TempDir(), id, r.Address, path, keyHash(key)))
	}
	n1, n2 := node("node-1"), node("node-2")
	get := func(h *harness, path string) (int, string, string) {
		req, _ := http.NewRequest(http.MethodGet, h.base+path, nil)
		req.Header.Set("X-Api-Key", key)
		resp, err := h.client.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		body, _ := io.ReadAll(resp.Body)
		var ref struct{ Reason string }
		_ = json.Unmarshal(body, &ref)
		return resp.StatusCode, string(body), ref.Reason
	}
	if code, body, _ := get(n1, "/v1/items?limit=7"); code != 200 || strings.Count(body, "\n") != 7 || strings.Contains(body, "truncated") {
		t.Fatalf("node 1, 7 rows: %d %s", code, body)
	}
	// Node 1 gives its unused grant back as its request ends, just after
	// the client has the answer: wait for that end (no request in flight).
	deadline := time.Now().Add(5 * time.Second)
	for testkit.Scrape(t, n1.admin+"/metrics").Value(t, "levee_inflight_requests") != 0 {
		if time.Now().After(deadline) {
			t.Fatal("node 1 still has a request in flight 5 s after answering")
		}
		time.Sleep(10 * time.Millisecond)
	}
	code, body, _ := get(n2, "/v1/items")
	want := "{\"id\":1,\"name\":\"item 1\"}\n{\"id\":2,\"name\":\"item 2\"}\n{\"id\":3,\"name\":\"item 3\"}\n{\"truncated\":true,\"reason\":\"quota_exhausted\"}\n"
	if code != 200 || body != want {
		t.Fatalf("node 2 after node 1's 7 rows: %d %q, want the 3 rows left and the marker", code, body)
	}
	for i, h := range []*harness{n1, n2} {
		if code, body, reason := get(h, "/v1/items"); code != 429 || reason != "quota_exhausted" {
			t.Fatalf("node %d's next call: %d %s, want 429 quota_exhausted", i+1, code, body)
		}
	}
}
