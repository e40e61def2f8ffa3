package gateway

import (
	"database/sql"
	"fmt"
	"path/filepath"
	"testing"

	"github.com/levee-gw/levee/internal/testsvc"
)

// catalogueRoutes are three table-mode routes over table t (id int NOT
// NULL, note text, n int): one as the database reports it, one with
// column_types declared (which win: no NOT NULL, the declared kinds).
const catalogueRoutes = `routes:
  - name: things
    match: {path_prefix: /v1/things}
    data: {source: db, table: t, columns: [id, note, n], order: [id]}
  - name: declared
    match: {path_prefix: /v1/declared}
    data:
      source: db
      table: t
      columns: [id, note, n]
      order: [id]
      column_types: {id: string, note: string, n: float64}
`

// TestOpenAPIFromCatalogue: a table-mode route's row schema takes its
// nullability from the database's catalogue (PostgreSQL's
// pg_attribute.attnotnull, SQLite's PRAGMA table_info), its types from the
// database's types, and column_types still wins when declared.
func TestOpenAPIFromCatalogue(t *testing.T) {
	check := func(t *testing.T, doc map[string]any, idType string) {
		t.Helper()
		row := dig(doc, "components", "schemas", "things.row", "properties")
		expectJSON(t, "NOT NULL int id", dig(row, "id", "type"), `["integer","string"]`)
		expectJSON(t, "id db type", dig(row, "id", "x-levee-db-type"), idType)
		expectJSON(t, "nullable text note", dig(row, "note", "type"), `["string","null"]`)
		expectJSON(t, "nullable int n", dig(row, "n", "type"), `["integer","string","null"]`)
		declared := dig(doc, "components", "schemas", "declared.row", "properties")
		expectJSON(t, "declared id", dig(declared, "id", "type"), `["string","null"]`)
		expectJSON(t, "declared id has no db type", dig(declared, "id", "x-levee-db-type"), `null`)
		expectJSON(t, "declared n", dig(declared, "n", "anyOf", 0, "type"), `["number","null"]`)
	}

	t.Run("postgres", func(t *testing.T) {
		pg := testsvc.StartPostgres(t)
		pg.Exec(t, `CREATE TABLE t (id int4 NOT NULL PRIMARY KEY, note text, n int8); INSERT INTO t VALUES (1, NULL, NULL);`)
		h := start(t, fmt.Sprintf(`
listen: 127.0.0.1:0
admin: {listen: 127.0.0.1:0}
state_dir: %s
log: {access: false}
data_sources:
  db:
    driver: postgres
    dsn: %s
    max_conns: 2
    connect_timeout: 2s
`, t.TempDir(), pg.DSN)+catalogueRoutes)
		doc, took := fetchOpenAPI(t, h, "")
		t.Logf("document over PostgreSQL in %v", took)
		check(t, doc, `"int4"`)
	})

	t.Run("sqlite", func(t *testing.T) {
		path := filepath.Join(t.TempDir(), "c.db")
		db, err := sql.Open("sqlite", path)
		if err != nil {
			t.Fatal(err)
		}
		defer db.Close()
		if _, err := db.Exec(`CREATE TABLE t (id INT NOT NULL PRIMARY KEY, note TEXT, n BIGINT); INSERT INTO t VALUES (1, NULL, NULL);`); err != nil {
			t.Fatal(err)
		}
		h := start(t, fmt.Sprintf(`
listen: 127.0.0.1:0
admin: {listen: 127.0.0.1:0}
state_dir: %s
log: {access: false}
data_sources:
  db: {driver: sqlite, path: %s, max_conns: 2}
`, t.TempDir(), path)+catalogueRoutes)
		doc, took := fetchOpenAPI(t, h, "")
		t.Logf("document over SQLite in %v", took)
		check(t, doc, `"INT"`)
	})
}
