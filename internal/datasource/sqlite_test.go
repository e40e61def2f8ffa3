package datasource

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/levee-gw/levee/internal/valuekind"
)

const sqliteSetup = `
CREATE TABLE types (id INTEGER PRIMARY KEY, i BIGINT, r REAL, n NUMERIC(30,9), t TEXT, vc VARCHAR(20),
	b BOOLEAN, d DATE, ts TIMESTAMP, u UUID, by BLOB, j JSON, anything);
INSERT INTO types VALUES
 (1, 9223372036854775807, 0.1, 12.5, 'plain', 'vc', 1, '2025-01-02', '2025-01-02T03:04:05.123456Z',
  'a0eebc99-9c0b-4ef8-bb6d-6bb9bd380a11', x'00ff10', '{"b": 1,  "a": [1, 2]}', 42),
 (2, -9223372036854775808, -1e300, 7, 'ünïcödé ✓ 日本語 🎉 "quoted" \ back', '', 0, '1999-12-31', '1970-01-01T00:00:00Z',
  x'a0eebc999c0b4ef8bb6d6bb9bd380a11', x'', '[]', 'text'),
 (3, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL);
`

// sqliteFile creates a database file with the types table, written by a
// read-write handle that is closed again.
func sqliteFile(t testing.TB) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "data.db")
	db, err := sql.Open("sqlite", path)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	if _, err := db.Exec(sqliteSetup); err != nil {
		t.Fatal(err)
	}
	return path
}

func openSQLiteSource(t testing.TB, path string, o Options) *Source {
	t.Helper()
	o.Driver, o.DSN = "sqlite", path
	s, err := Open(context.Background(), o)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(s.Close)
	return s
}

func TestSQLite(t *testing.T) {
	path := sqliteFile(t)
	src := openSQLiteSource(t, path, Options{MaxConns: 2})
	ctx := context.Background()

	t.Run("Values", func(t *testing.T) {
		r, err := src.Query(ctx, Query{SQL: "SELECT id, i, r, n, t, vc, b, d, ts, u, by, j, anything, id * 2 AS expr FROM types ORDER BY id"})
		if err != nil {
			t.Fatal(err)
		}
		cols := r.Columns()
		rows := collect(t, r)
		wantCols := []Column{{"id", "INTEGER", "int64", false}, {"i", "BIGINT", "int64", false}, {"r", "REAL", "float64", false},
			{"n", "NUMERIC(30,9)", "numeric", false}, {"t", "TEXT", "string", false}, {"vc", "VARCHAR(20)", "string", false},
			{"b", "BOOLEAN", "bool", false}, {"d", "DATE", "date", false}, {"ts", "TIMESTAMP", "timestamp", false}, {"u", "UUID", "uuid", false},
			{"by", "BLOB", "bytes", false}, {"j", "JSON", "json", false}, {"anything", "", "string", false}, {"expr", "", "string", false}}
		if fmt.Sprint(cols) != fmt.Sprint(wantCols) {
			t.Fatalf("columns %v\nwant    %v", cols, wantCols)
		}
		want := [][]any{
			{int64(1), int64(9223372036854775807), 0.1, "12.5", "plain", "vc", true, "2025-01-02",
				time.Date(2025, 1, 2, 3, 4, 5, 123456000, time.UTC), "a0eebc99-9c0b-4ef8-bb6d-6bb9bd380a11",
				[]byte{0, 0xff, 0x10}, json.RawMessage(`{"b": 1,  "a": [1, 2]}`), int64(42), int64(2)},
			{int64(2), int64(-9223372036854775808), -1e300, "7", `ünïcödé ✓ 日本語 🎉 "quoted" \ back`, "", false, "1999-12-31",
				time.Date(1970, 1, 1, 0, 0, 0, 0, time.UTC), "a0eebc99-9c0b-4ef8-bb6d-6bb9bd380a11",
				[]byte{}, json.RawMessage(`[]`), "text", int64(4)},
			{int64(3), nil, nil, nil, nil, nil, nil, nil, nil, nil, nil, nil, nil, int64(6)},
		}
		for i := range want {
			for j := range want[i] {
				g, w := rows[i][j], want[i][j]
				if !vocabulary(g) {
					t.Errorf("row %d %s: %T is not in the vocabulary", i+1, cols[j].Name, g)
				}
				if fmt.Sprintf("%T %v", g, g) != fmt.Sprintf("%T %v", w, w) {
					t.Errorf("row %d %s: got %T %v, want %T %v", i+1, cols[j].Name, g, g, w, w)
				}
			}
		}
		if ts := rows[0][8].(time.Time); ts.Location() != time.UTC {
			t.Errorf("timestamp in %v, want UTC", ts.Location())
		}
	})

	t.Run("Args", func(t *testing.T) {
		cases := []struct {
			where string
			arg   any
		}{
			{"i = ?", int64(9223372036854775807)},
			{"r = ?", 0.1},
			{"n = ?", 12.5},
			{"t = ?", "plain"},
			{"b = ?", true},
			{"d = date(?)", time.Date(2025, 1, 2, 0, 0, 0, 0, time.UTC)},
			{"ts = ?", time.Date(2025, 1, 2, 3, 4, 5, 123456000, time.UTC)},
			{"ts > ?", time.Date(2025, 1, 2, 4, 0, 0, 0, time.FixedZone("x", 3600))},
			{"u = ?", "a0eebc99-9c0b-4ef8-bb6d-6bb9bd380a11"},
		}
		for _, c := range cases {
			rows := collectQuery(t, src, Query{SQL: "SELECT id FROM types WHERE " + c.where, Args: []any{c.arg}})
			if len(rows) != 1 || rows[0][0] != int64(1) {
				t.Errorf("WHERE %s with %T %v: rows %v, want id 1", c.where, c.arg, c.arg, rows)
			}
		}
		for _, inj := range []string{"1; DROP TABLE types", "' OR '1'='1", "plain'--"} {
			if rows := collectQuery(t, src, Query{SQL: "SELECT id FROM types WHERE t = ?", Args: []any{inj}}); len(rows) != 0 {
				t.Errorf("injection %q matched %v", inj, rows)
			}
		}
	})

	t.Run("WritesRefused", func(t *testing.T) {
		for _, q := range []string{
			"INSERT INTO types (id) VALUES (99) RETURNING id",
			"UPDATE types SET t = 'x' RETURNING id",
			"DELETE FROM types RETURNING id",
			"CREATE TABLE evil (id int)",
			"PRAGMA query_only = 0",
		} {
			r, err := src.Query(ctx, Query{SQL: q})
			if err == nil {
				err = r.Close()
			}
			var qe *QueryError
			if q == "PRAGMA query_only = 0" {
				// Allowed by SQLite, and harmless: mode=ro still refuses.
				r, err := src.Query(ctx, Query{SQL: "INSERT INTO types (id) VALUES (98) RETURNING id"})
				if err == nil {
					r.Close()
					t.Error("a write was accepted after PRAGMA query_only = 0")
				}
				continue
			}
			if !errors.As(err, &qe) {
				t.Errorf("%s: %v, want a QueryError", q, err)
			}
		}
		db, err := sql.Open("sqlite", path)
		if err != nil {
			t.Fatal(err)
		}
		defer db.Close()
		var n, x int
		if err := db.QueryRow("SELECT count(*), count(*) FILTER (WHERE t = 'x') FROM types").Scan(&n, &x); err != nil || n != 3 || x != 0 {
			t.Fatalf("table changed: %d rows, %d updated, %v", n, x, err)
		}
	})

	t.Run("StatementTimeout", func(t *testing.T) {
		start := time.Now()
		_, err := src.Query(ctx, Query{SQL: "WITH RECURSIVE c(x) AS (SELECT 1 UNION ALL SELECT x + 1 FROM c) SELECT max(x) FROM c",
			Timeout: 100 * time.Millisecond})
		if !errors.Is(err, ErrStatementTimeout) {
			t.Fatalf("err = %v, want ErrStatementTimeout", err)
		}
		notHung(t, "the interrupted endless query", time.Since(start))
		waitIdle(t, src)
	})

	t.Run("EarlyClose", func(t *testing.T) {
		r, err := src.Query(ctx, Query{SQL: "WITH RECURSIVE c(x) AS (SELECT 1 UNION ALL SELECT x + 1 FROM c) SELECT x FROM c", Timeout: time.Minute})
		if err != nil {
			t.Fatal(err)
		}
		for i := 0; i < 10 && r.Next(); i++ {
		}
		if err := r.Close(); err != nil {
			t.Fatal(err)
		}
		waitIdle(t, src)
	})

	t.Run("PoolCapped", func(t *testing.T) {
		var wg sync.WaitGroup
		var maxOpen, failures atomic.Int64
		for w := 0; w < 32; w++ {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for i := 0; i < 20; i++ {
					r, err := src.Query(ctx, Query{SQL: "SELECT id FROM types"})
					if err != nil {
						failures.Add(1)
						continue
					}
					for r.Next() {
						if o := int64(src.Stats().Open); o > maxOpen.Load() {
							maxOpen.Store(o)
						}
					}
					r.Close()
				}
			}()
		}
		wg.Wait()
		if failures.Load() != 0 || maxOpen.Load() > 2 {
			t.Fatalf("%d failures, %d connections open, cap 2", failures.Load(), maxOpen.Load())
		}
		if st := src.Stats(); st.Max != 2 || st.InUse != 0 {
			t.Fatalf("stats %+v", st)
		}
	})

	t.Run("DescribeAndTableColumns", func(t *testing.T) {
		cols, err := src.Describe(ctx, "SELECT id, ts AS created_at, n FROM types WHERE id = ? ORDER BY id;", 1)
		if err != nil {
			t.Fatal(err)
		}
		if want := "[{id INTEGER int64 false} {created_at TIMESTAMP timestamp false} {n NUMERIC(30,9) numeric false}]"; fmt.Sprint(cols) != want {
			t.Fatalf("Describe = %v, want %s", cols, want)
		}
		for _, table := range []string{"types", "main.types"} {
			cols, err := src.TableColumns(ctx, table)
			if err != nil {
				t.Fatal(err)
			}
			if len(cols) != 13 || cols[8].Kind != valuekind.Timestamp {
				t.Fatalf("TableColumns(%s) = %v", table, cols)
			}
			// The catalogue's nullability: id INTEGER PRIMARY KEY is the
			// rowid, never NULL; i has no NOT NULL.
			if !cols[0].NotNull || cols[1].NotNull {
				t.Fatalf("TableColumns(%s) NotNull: id %v, i %v; want true, false", table, cols[0].NotNull, cols[1].NotNull)
			}
		}
		if _, err := src.TableColumns(ctx, `types"; DROP TABLE types; --`); err == nil {
			t.Fatal("odd table name accepted")
		}
	})
}

func TestSQLiteMissingFileIsUnavailable(t *testing.T) {
	path := filepath.Join(t.TempDir(), "later.db")
	src := openSQLiteSource(t, path, Options{MaxConns: 1})
	_, err := src.Query(context.Background(), Query{SQL: "SELECT 1"})
	if !errors.Is(err, ErrUnavailable) {
		t.Fatalf("err = %v, want ErrUnavailable", err)
	}
	if _, err := os.Stat(path); !os.IsNotExist(err) {
		t.Fatal("the read-only source created the file")
	}
	// The file appears: the same source answers.
	db, err := sql.Open("sqlite", path)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := db.Exec("CREATE TABLE x (id INTEGER); INSERT INTO x VALUES (7)"); err != nil {
		t.Fatal(err)
	}
	db.Close()
	if rows := collectQuery(t, src, Query{SQL: "SELECT id FROM x"}); len(rows) != 1 || rows[0][0] != int64(7) {
		t.Fatalf("rows = %v", rows)
	}
}
