package gateway

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/levee-gw/levee/internal/dataapis"
	"github.com/levee-gw/levee/internal/testsvc"
)

// statementsSchemaSQL is what the accepted PostgreSQL statements of
// internal/dataquery/testdata/statements.json read.
const statementsSchemaSQL = `
CREATE TABLE orders (id int8 PRIMARY KEY);
INSERT INTO orders VALUES (1), (2);
CREATE TABLE t (id int8, a int8, name text, x text, "a;b" int, "a"";b" int, "delete" int, "into" int, "insert" int,
  copy_count int, updated_at timestamptz, deleted bool, intox int);
INSERT INTO t VALUES (1, 1, 'ana', 'x', 1, 2, 3, 4, 5, 6, '2025-01-01Z', false, 7);
CREATE TABLE scores (id int8 PRIMARY KEY, score numeric NOT NULL);
INSERT INTO scores SELECT g, g * 1.5 FROM generate_series(1, 10) g;
`

// statementCase is one statement of internal/dataquery's
// testdata/statements.json.
type statementCase struct {
	Name     string            `json:"name"`
	SQL      string            `json:"sql"`
	Dialects string            `json:"dialects"` // both, postgres or sqlite
	Params   map[string]string `json:"params"`
	Want     string            `json:"want"`
}

func readStatements(t *testing.T) (refused, accepted []statementCase) {
	t.Helper()
	raw, err := os.ReadFile("../dataquery/testdata/statements.json")
	if err != nil {
		t.Fatal(err)
	}
	var doc struct{ Refused, Accepted []statementCase }
	if err := json.Unmarshal(raw, &doc); err != nil || len(doc.Refused) == 0 || len(doc.Accepted) == 0 {
		t.Fatalf("statements.json: %v", err)
	}
	return doc.Refused, doc.Accepted
}

// statementDef is a data-API definition of c's SQL on source at prefix.
func statementDef(name, prefix, source string, c statementCase) string {
	data := map[string]any{"source": source, "sql": c.SQL}
	if len(c.Params) > 0 {
		ps := map[string]any{}
		for n, typ := range c.Params {
			ps[n] = map[string]any{"type": typ}
		}
		data["params"] = ps
	}
	def := map[string]any{"match": map[string]any{"path_prefix": prefix}, "data": data}
	if name != "" {
		def["name"] = name
	}
	b, _ := json.Marshal(def)
	return string(b)
}

// getData sends GET path to in's data listener.
func getData(t *testing.T, in *instance, path string) (int, []byte) {
	t.Helper()
	resp, err := http.Get("http://" + in.g.Addr().String() + path)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return resp.StatusCode, body
}

// TestDataStatementsAreQueries (issue 22, parts 2 and 6b) through a real
// levee over a real PostgreSQL (and a SQLite source for SQLite's lexical
// rules):
//   - the admin API refuses every statement that is not one query, on
//     create and on a new version, 422 invalid_data_api naming data.sql
//     and what it found, and stores nothing;
//   - every accepted PostgreSQL statement is created, published and
//     answers 200 from the database;
//   - a version stored before the check (an older levee's store) is
//     refused at publish, 422 naming data.sql;
//   - a value the database refuses (a numeric filter, a numeric cast of a
//     string parameter) is 400 invalid_parameter naming the parameter,
//     with no SQLSTATE or database text in the body.
func TestDataStatementsAreQueries(t *testing.T) {
	pg := testsvc.StartPostgres(t)
	pg.Exec(t, statementsSchemaSQL)
	dbPath, _ := sqliteOrders(t)
	dir := t.TempDir()
	stateDir := filepath.Join(dir, "state")
	cfgPath := filepath.Join(dir, "levee.yaml")
	yaml := fmt.Sprintf(`
listen: 127.0.0.1:0
admin: {listen: 127.0.0.1:0}
state_dir: %s
log: {access: false}
data_sources:
  sales: {driver: postgres, dsn: %s, max_conns: 4}
  local: {driver: sqlite, path: %s, max_conns: 2}
routes:
  - name: scores
    match: {path_prefix: /v1/scores}
    data: {source: sales, table: scores, columns: [id, score], filters: {score: [gt, eq], id: [gte]}, order: [id]}
  - name: above
    match: {path_prefix: /v1/above}
    data:
      source: sales
      sql: "SELECT id FROM scores WHERE id >= :from AND score > :min::numeric ORDER BY id; -- the one ';' allowed"
      params: {from: {type: int64, default: "1"}, min: {type: string, required: true}}
      page: {keyset: [id], default: 3, max: 10}
`, dataQuote(stateDir), dataQuote(pg.DSN), dataQuote(dbPath))
	if err := os.WriteFile(cfgPath, []byte(yaml), 0o600); err != nil {
		t.Fatal(err)
	}
	in := launch(t, cfgPath, "")
	defer func() { in.stop() }()
	refused, accepted := readStatements(t)

	// Refused at create and at a new version, naming the field.
	in.expectAPI("POST", "/api/v1/data-apis", statementDef("holder", "/v1/holder", "sales", statementCase{SQL: "SELECT 1"}), 201, "")
	n := 0
	for _, c := range refused {
		for _, src := range []string{"sales", "local"} {
			if c.Dialects == "postgres" && src == "local" || c.Dialects == "sqlite" && src == "sales" {
				continue
			}
			for _, call := range []struct{ path, def string }{
				{"/api/v1/data-apis", statementDef("bad", "/v1/bad", src, c)},
				{"/api/v1/data-apis/holder/versions", statementDef("", "/v1/holder", src, c)},
			} {
				doc := in.expectAPI("POST", call.path, call.def, 422, "invalid_data_api")
				if msg, _ := doc["error"].(string); doc["field"] != "data.sql" || !strings.Contains(msg, c.Want) {
					t.Errorf("%s (%s) POST %s: field %v, error %q; want data.sql and %q", c.Name, src, call.path, doc["field"], msg, c.Want)
				}
				n++
			}
		}
	}
	in.expectAPI("GET", "/api/v1/data-apis/bad", "", 404, "not_found")
	if a := in.expectAPI("GET", "/api/v1/data-apis/holder", "", 200, ""); a["latest_version"] != 1.0 {
		t.Errorf("a refused version was stored: %v", a)
	}
	t.Logf("%d refusals by the admin API (%d statements, create and new version)", n, len(refused))

	// The accepted ones run on PostgreSQL; the others are created on SQLite.
	ran := 0
	for i, c := range accepted {
		name, prefix := fmt.Sprintf("ok%d", i), fmt.Sprintf("/v1/ok%d", i)
		if c.Dialects == "sqlite" {
			in.expectAPI("POST", "/api/v1/data-apis", statementDef(name, prefix, "local", c), 201, "")
			continue
		}
		in.expectAPI("POST", "/api/v1/data-apis", statementDef(name, prefix, "sales", c), 201, "")
		in.expectAPI("POST", "/api/v1/data-apis/"+name+"/publish", "", 200, "")
		if status, body := getData(t, in, prefix); status != 200 {
			t.Errorf("%s: %q answered %d %s", c.Name, c.SQL, status, body)
		}
		ran++
	}
	t.Logf("%d accepted statements answered 200 from PostgreSQL", ran)

	// A version stored by a levee without the check is refused at publish.
	in.stop()
	store, err := dataapis.Open(context.Background(), dataapis.Options{Path: filepath.Join(stateDir, "data-apis.db")})
	if err != nil {
		t.Fatal(err)
	}
	copyDef := `{"match": {"path_prefix": "/v1/holder"}, "data": {"source": "sales", "sql": "COPY (SELECT 1) TO PROGRAM 'id'"}}`
	if _, err := store.AddVersion(context.Background(), "holder", []byte(copyDef)); err != nil {
		t.Fatal(err)
	}
	store.Close()
	in = launch(t, cfgPath, "")
	doc := in.expectAPI("POST", "/api/v1/data-apis/holder/publish", `{"version": 2}`, 422, "invalid_data_api")
	if msg, _ := doc["error"].(string); doc["field"] != "data.sql" || !strings.Contains(msg, "COPY is not a query") {
		t.Errorf("publish of a stored COPY: field %v, error %q", doc["field"], msg)
	}
	if status, body := getData(t, in, "/v1/holder"); status != 404 {
		t.Errorf("the unpublished holder answers %d %s", status, body)
	}

	// A value the database refuses names the parameter, nothing of the database's.
	for _, c := range []struct{ path, param string }{
		{"/v1/scores?score=gt.abc", "score"},
		{"/v1/scores?id=gte.2&score=eq.1e999999", "score"},
		{"/v1/above?min=ten", "min"},
		{"/v1/above?from=2&min=1.5.5", "min"},
	} {
		status, body := getData(t, in, c.path)
		var r struct{ Reason, Parameter, Detail string }
		_ = json.Unmarshal(body, &r)
		if status != 400 || r.Reason != "invalid_parameter" || r.Parameter != c.param || !strings.Contains(r.Detail, `"`+c.param+`"`) {
			t.Errorf("GET %s: %d %s, want 400 invalid_parameter naming %q", c.path, status, body, c.param)
		}
		for _, leak := range []string{"SQLSTATE", "22P02", "22003", "invalid input syntax", "numeric"} {
			if strings.Contains(string(body), leak) {
				t.Errorf("GET %s: the body repeats %q: %s", c.path, leak, body)
			}
		}
		t.Logf("GET %s: %d %s", c.path, status, body)
	}
	// The route with the trailing ';' pages as any other.
	status, body := getData(t, in, "/v1/above?min=2&limit=2")
	var page jsonPage
	if status != 200 || json.Unmarshal(body, &page) != nil || len(page.Rows) != 2 || page.Rows[0]["id"] != 2.0 {
		t.Errorf("paged route with a trailing ';': %d %s", status, body)
	}
}
