package main

import (
	"bytes"
	"database/sql"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"

	_ "modernc.org/sqlite"
)

// TestDataAPIsCLI drives "levee data-apis" against a real levee (a child
// process) serving a real SQLite database: create from a YAML file, publish,
// update from standard input, rollback, offline, delete; refusals exit 1
// with the API's status and reason, bad usage exits 2.
func TestDataAPIsCLI(t *testing.T) {
	dir := t.TempDir()
	dbPath := filepath.Join(dir, "shop.db")
	db, err := sql.Open("sqlite", dbPath)
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range []string{`CREATE TABLE items (id INTEGER PRIMARY KEY, name TEXT NOT NULL)`, `INSERT INTO items VALUES (1, 'pen'), (2, 'ink')`} {
		if _, err := db.Exec(s); err != nil {
			t.Fatal(err)
		}
	}
	db.Close()
	tokenFile := filepath.Join(dir, "token")
	if err := os.WriteFile(tokenFile, []byte("cli-test-token-0123456789\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	cfg := writeFile(t, fmt.Sprintf(`
listen: 127.0.0.1:0
admin: {listen: 127.0.0.1:0, token_file: %s}
state_dir: %s
data_sources:
  shop: {driver: sqlite, path: %s}
routes:
  - {name: all-items, match: {path_prefix: /all}, data: {source: shop, table: items, columns: [id, name], order: [id]}}
`, tokenFile, filepath.Join(dir, "state"), dbPath))
	p := startProcess(t, "run", "-config", cfg)
	cli := func(stdin string, args ...string) (int, map[string]any, string) {
		t.Helper()
		var out, errOut bytes.Buffer
		code := cmdDataAPIs(append(args, "-admin", p.admin, "-token-file", tokenFile), strings.NewReader(stdin), &out, &errOut)
		var doc map[string]any
		if code == 0 {
			if err := json.Unmarshal(out.Bytes(), &doc); err != nil {
				t.Fatalf("data-apis %v: output is not JSON: %q", args, out.String())
			}
		}
		return code, doc, errOut.String()
	}
	names := func() string {
		t.Helper()
		resp, err := http.Get("http://" + p.data + "/items")
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		body, _ := io.ReadAll(resp.Body)
		if resp.StatusCode != 200 {
			return fmt.Sprint(resp.StatusCode)
		}
		var page struct{ Rows []map[string]any }
		if err := json.Unmarshal(body, &page); err != nil {
			t.Fatalf("%s: %v", body, err)
		}
		var out []string
		for _, r := range page.Rows {
			out = append(out, fmt.Sprint(r["name"]))
		}
		return strings.Join(out, ",")
	}
	v1 := writeFile(t, `# version 1: every item
match: {path_prefix: /items}
data:
  source: shop
  sql: SELECT id, name FROM items ORDER BY id
`)
	if code, doc, stderr := cli("", "create", "items", "-f", v1); code != 0 || doc["state"] != "draft" {
		t.Fatalf("create: %d %v %s", code, doc, stderr)
	}
	if got := names(); got != "404" {
		t.Fatalf("a draft answers %s", got)
	}
	if code, doc, stderr := cli("", "publish", "items"); code != 0 || doc["published_version"] != 1.0 {
		t.Fatalf("publish: %d %v %s", code, doc, stderr)
	}
	if got := names(); got != "pen,ink" {
		t.Fatalf("published answers %s", got)
	}
	v2 := `{"name": "items", "match": {"path_prefix": "/items"}, "data": {"source": "shop", "sql": "SELECT id, name FROM items WHERE id = 2"}}`
	if code, doc, stderr := cli(v2, "update", "items", "-f", "-"); code != 0 || doc["latest_version"] != 2.0 {
		t.Fatalf("update: %d %v %s", code, doc, stderr)
	}
	if got := names(); got != "pen,ink" {
		t.Fatalf("after update, before publish: %s", got)
	}
	if code, _, stderr := cli("", "publish", "items", "-version", "2"); code != 0 || names() != "ink" {
		t.Fatalf("publish 2: %d %s", code, stderr)
	}
	if code, _, stderr := cli("", "rollback", "items"); code != 0 || names() != "pen,ink" {
		t.Fatalf("rollback: %d %s", code, stderr)
	}
	if code, doc, stderr := cli("", "offline", "items"); code != 0 || doc["state"] != "offline" || names() != "404" {
		t.Fatalf("offline: %d %v %s", code, doc, stderr)
	}
	if code, doc, _ := cli("", "get", "items"); code != 0 || len(doc["versions"].([]any)) != 2 {
		t.Fatalf("get: %d %v", code, doc)
	}
	if code, doc, _ := cli("", "list", "-all", "-limit", "1"); code != 0 || len(doc["data_apis"].([]any)) != 2 {
		t.Fatalf("list -all: %d %v (want items and the file's all-items)", code, doc)
	}
	bad := writeFile(t, "match: {path_prefix: /bad}\ndata: {source: shop, sql: 'SELECT id FROM items WHERE id = :id'}\n")
	if code, _, stderr := cli("", "create", "bad", "-f", bad); code != 1 || !strings.Contains(stderr, "422 invalid_data_api") || !strings.Contains(stderr, "data.sql") {
		t.Errorf("bad definition: %d %q", code, stderr)
	}
	if code, _, stderr := cli("", "publish", "nope"); code != 1 || !strings.Contains(stderr, "404 not_found") {
		t.Errorf("publish of a missing API: %d %q", code, stderr)
	}
	if code, doc, _ := cli("", "delete", "items"); code != 0 || doc["deleted"] != "items" {
		t.Errorf("delete: %d %v", code, doc)
	}
	for _, args := range [][]string{{}, {"frob"}, {"get"}, {"create", "x"}, {"create", "other", "-f", v1 + ".missing"}, {"publish", "x", "-version", "-1"}} {
		var out, errOut bytes.Buffer
		if code := cmdDataAPIs(args, strings.NewReader(""), &out, &errOut); code != 2 {
			t.Errorf("%v: exit %d, want 2 (%s)", args, code, errOut.String())
		}
	}
	if code, _, stderr := cli(v2, "create", "other", "-f", "-"); code != 2 || !strings.Contains(stderr, `names "items"`) {
		t.Errorf("a file naming another API: %d %q", code, stderr)
	}
}
