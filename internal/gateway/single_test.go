package gateway

import (
	"database/sql"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"path/filepath"
	"strings"
	"testing"

	"github.com/levee-gw/levee/internal/testsvc"
)

// singleSQL is the products table of the single-row tests: two rows share
// the name "dup", so a route selecting by name returns more than one.
const singleSQL = `
CREATE TABLE products (id INTEGER PRIMARY KEY, name TEXT NOT NULL);
INSERT INTO products VALUES (1, 'Anvil'), (2, 'Rope "long"'), (3, 'dup'), (4, 'dup');
`

// singleRoutes are the single-row routes over data source sales.
const singleRoutes = `
routes:
  - name: product
    match: {path_template: "/v1/products/{id:int}"}
    data:
      source: sales
      sql: SELECT id, name FROM products WHERE id = :id
      params: {id: {type: int64, required: true}}
      single: true
      cache: {ttl: 1h}
  - name: thing
    match: {path_template: "/v1/things/{id}"}
    data:
      source: sales
      sql: SELECT id, name FROM products WHERE id = :id
      params: {id: {type: int64, required: true}}
      single: true
  - name: by_name
    match: {path_template: "/v1/by-name/{name}"}
    data:
      source: sales
      sql: SELECT id FROM products WHERE name = :name
      params: {name: {type: string, required: true}}
      single: true
`

type detailedRefusal struct {
	Error     string `json:"error"`
	Reason    string `json:"reason"`
	Parameter string `json:"parameter"`
	Detail    string `json:"detail"`
}

// TestSingleRowOverSQLite and TestSingleRowOverPostgres (issue 25 item 9):
// a `single: true` route answers its one row as a JSON object, 404
// not_found when there is none, and its answer is cached like any other.
func TestSingleRowOverSQLite(t *testing.T) {
	path := filepath.Join(t.TempDir(), "shop.db")
	db, err := sql.Open("sqlite", path)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	if _, err := db.Exec(singleSQL); err != nil {
		t.Fatal(err)
	}
	h := start(t, fmt.Sprintf(`
listen: 127.0.0.1:0
admin: {listen: 127.0.0.1:0}
state_dir: %s
log: {access: false}
data_sources:
  sales: {driver: sqlite, path: %s, max_conns: 2}
`, dataQuote(t.TempDir()), dataQuote(path))+singleRoutes)
	testSingleRow(t, h, func(stmt string) {
		if _, err := db.Exec(stmt); err != nil {
			t.Fatal(err)
		}
	})
}

func TestSingleRowOverPostgres(t *testing.T) {
	pg := testsvc.StartPostgres(t)
	pg.Exec(t, singleSQL)
	h := start(t, fmt.Sprintf(`
listen: 127.0.0.1:0
admin: {listen: 127.0.0.1:0}
state_dir: %s
log: {access: false}
data_sources:
  sales: {driver: postgres, dsn: %s, max_conns: 2, statement_timeout: 2s, connect_timeout: 500ms}
`, dataQuote(t.TempDir()), dataQuote(pg.DSN))+singleRoutes)
	testSingleRow(t, h, func(stmt string) { pg.Exec(t, stmt) })
}

func testSingleRow(t *testing.T, h *harness, exec func(string)) {
	// The one row, as an object, exactly as levee writes it.
	status, hdr, body := dataGet(t, h, "/v1/products/2", "")
	if want := `{"id":2,"name":"Rope \"long\""}` + "\n"; status != 200 || string(body) != want {
		t.Fatalf("GET /v1/products/2: %d %q, want 200 %q", status, body, want)
	}
	if ct, cache := hdr.Get("Content-Type"), hdr.Get("Levee-Cache"); ct != "application/json" || cache != "miss" {
		t.Errorf("GET /v1/products/2: Content-Type %q, Levee-Cache %q; want application/json, miss", ct, cache)
	}
	// The second call is the cache's: the database changed, the answer not.
	exec(`UPDATE products SET name = 'changed' WHERE id = 2`)
	status, hdr, body2 := dataGet(t, h, "/v1/products/2", "application/json")
	if status != 200 || string(body2) != string(body) || hdr.Get("Levee-Cache") != "hit" {
		t.Errorf("second GET /v1/products/2: %d %q Levee-Cache %q; want 200, the first body, hit", status, body2, hdr.Get("Levee-Cache"))
	}
	// The uncached route reads the change.
	if status, _, body := dataGet(t, h, "/v1/things/2", ""); status != 200 || string(body) != `{"id":2,"name":"changed"}`+"\n" {
		t.Errorf("GET /v1/things/2: %d %q", status, body)
	}

	tests := []struct {
		path, accept string
		status       int
		reason       string
		param        string
		detail       string
	}{
		{"/v1/products/999", "", 404, "not_found", "", ""},
		{"/v1/products/999", "", 404, "not_found", "", ""}, // a 404 is not cached: asked again
		{"/v1/products/x", "", 404, "no_route", "", ""},    // {id:int}: the template does not match
		{"/v1/products/2/x", "", 404, "no_route", "", ""},
		{"/v1/things/x", "", 400, "invalid_parameter", "id", ""}, // {id}: matched, then refused as the parameter
		{"/v1/things/999", "", 404, "not_found", "", ""},
		{"/v1/by-name/dup", "", 502, "query_failed", "", "more_than_one_row"},
		{"/v1/by-name/nobody", "", 404, "not_found", "", ""},
		{"/v1/products/1", "text/csv", 406, "not_acceptable", "", ""},
		{"/v1/products/1", "application/x-ndjson", 406, "not_acceptable", "", ""},
		{"/v1/things/1?limit=1", "", 400, "unknown_parameter", "limit", ""},
		{"/v1/things/1?id=2", "", 400, "invalid_parameter", "id", ""},
	}
	for _, tc := range tests {
		status, hdr, body := dataGet(t, h, tc.path, tc.accept)
		var r detailedRefusal
		if err := json.Unmarshal(body, &r); err != nil || status != tc.status || r.Reason != tc.reason || r.Error == "" ||
			r.Parameter != tc.param || (tc.detail != "" && r.Detail != tc.detail) || hdr.Get("Content-Type") != "application/json" {
			t.Errorf("GET %s (Accept %q): %d %s %q, want %d reason %s parameter %q detail %q",
				tc.path, tc.accept, status, hdr.Get("Content-Type"), body, tc.status, tc.reason, tc.param, tc.detail)
		}
	}
	if status, _, body := dataGet(t, h, "/v1/by-name/Anvil", ""); status != 200 || string(body) != `{"id":1}`+"\n" {
		t.Errorf("GET /v1/by-name/Anvil: %d %q", status, body)
	}

	// HEAD: the GET's status and length, no body.
	for path, want := range map[string]int{"/v1/things/1": 200, "/v1/things/999": 404} {
		req, _ := http.NewRequest(http.MethodHead, h.base+path, nil)
		resp, err := h.client.Do(req)
		if err != nil {
			t.Fatalf("HEAD %s: %v", path, err)
		}
		n, _ := io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		if resp.StatusCode != want || n != 0 || want == 200 && resp.ContentLength != int64(len(`{"id":1,"name":"Anvil"}`+"\n")) {
			t.Errorf("HEAD %s: %d, %d body bytes, Content-Length %d; want %d, none, the GET's", path, resp.StatusCode, n, resp.ContentLength, want)
		}
	}

	// The OpenAPI document (checked by openapitest.Check in fetchOpenAPI):
	// each template keyed in OpenAPI's form, its capture a required path
	// parameter typed by its declaration, the 200 the row itself, 404
	// not_found among the answers.
	doc, _ := fetchOpenAPI(t, h, "")
	for _, key := range []string{"/v1/products/{id}", "/v1/things/{id}", "/v1/by-name/{name}"} {
		p, _ := dig(doc, "paths", key, "get", "parameters", 0).(map[string]any)
		want := "integer"
		if key == "/v1/by-name/{name}" {
			want = "string"
		}
		if p["in"] != "path" || p["required"] != true || dig(p, "schema", "type") != want {
			t.Errorf("%s: first parameter %v, want a required path parameter of type %s", key, p, want)
		}
		if ref, _ := dig(doc, "paths", key, "get", "responses", "200", "content", "application/json", "schema", "$ref").(string); !strings.HasSuffix(ref, ".row") {
			t.Errorf("%s: 200 schema %q, want the row", key, ref)
		}
		if enum := fmt.Sprint(dig(doc, "paths", key, "get", "responses", "404", "content", "application/json", "schema", "properties", "reason", "enum")); !strings.Contains(enum, "not_found") {
			t.Errorf("%s: 404 reasons %s, want not_found", key, enum)
		}
	}
}
