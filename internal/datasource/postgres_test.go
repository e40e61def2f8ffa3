package datasource

import (
	"context"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/levee-gw/levee/internal/testkit"
	"github.com/levee-gw/levee/internal/testsvc"
	"github.com/levee-gw/levee/internal/valuekind"
)

// typesSetup is a table with a column of every type levee maps, rows of
// ordinary values, extremes, unicode and NULLs.
const typesSetup = `
CREATE TYPE mood AS ENUM ('calm', 'stormy');
CREATE TABLE types (
	id int4 PRIMARY KEY, i2 int2, i4 int4, i8 int8, n numeric, f4 float4, f8 float8,
	t text, vc varchar(20), b bool, d date, ts timestamp, tstz timestamptz, u uuid,
	by bytea, j json, jb jsonb, tm time, iv interval, m mood, arr int4[]
);
INSERT INTO types VALUES
 (1, 32767, 2147483647, 9223372036854775807, 123456789012345678901234567890.000000001, 1.1, 0.1,
  'plain', 'vc', true, '2025-01-02', '2025-01-02 03:04:05.123456', '2025-01-02 03:04:05.5+05:30',
  'A0EEBC99-9C0B-4EF8-BB6D-6BB9BD380A11', '\x00ff10', '{"b": 1,  "a": [1, 2]}', '{"b": 1,  "a": [1, 2]}',
  '12:34:56.789', '1 day 02:03:04', 'stormy', '{1,2,NULL}'),
 (2, -32768, -2147483648, -9223372036854775808, 'NaN', 'NaN', '-Infinity',
  'ünïcödé ✓ 日本語 🎉 "quoted" \ back', '', false, '0044-03-15 BC', '1999-12-31 23:59:59', '1970-01-01 00:00:00+00',
  '00000000-0000-0000-0000-000000000000', '\x', '[]', 'null', '00:00', '-3 mons', 'calm', '{}'),
 (3, 0, 0, 0, 0.00000000000000000001, 3.4e38, 1e300, '', NULL, NULL, 'infinity', 'infinity', '-infinity',
  NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL),
 (4, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL);
`

const typesQuery = `SELECT id, i2, i4, i8, n, f4, f8, t, vc, b, d, ts, tstz, u, by, j, jb, tm, iv, m, arr FROM types ORDER BY id`

func openPG(t testing.TB, dsn string, o Options) *Source {
	t.Helper()
	o.Driver, o.DSN = "postgres", dsn
	s, err := Open(context.Background(), o)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(s.Close)
	return s
}

// collect reads every row, copying the values.
func collect(t testing.TB, r *Rows) [][]any {
	t.Helper()
	defer r.Close()
	var out [][]any
	for r.Next() {
		out = append(out, append([]any(nil), r.Values()...))
	}
	if err := r.Err(); err != nil {
		t.Fatal(err)
	}
	return out
}

// pgText renders a decoded value the way PostgreSQL renders the column in
// text with TimeZone UTC, to compare with psql's output.
func pgText(c Column, v any) string {
	switch x := v.(type) {
	case int64:
		return strconv.FormatInt(x, 10)
	case float64:
		s := strconv.FormatFloat(x, 'g', -1, 64)
		switch s {
		case "NaN":
			return "NaN"
		case "+Inf":
			return "Infinity"
		case "-Inf":
			return "-Infinity"
		}
		return strings.Replace(s, "e+", "e+", 1)
	case bool:
		if x {
			return "t"
		}
		return "f"
	case string:
		return x
	case time.Time:
		s := x.Format("2006-01-02 15:04:05.999999")
		if c.Type == "timestamptz" {
			s += "+00"
		}
		return s
	case []byte:
		return `\x` + hex.EncodeToString(x)
	case json.RawMessage:
		return string(x)
	}
	return fmt.Sprintf("unexpected %T", v)
}

func TestPostgres(t *testing.T) {
	pg := testsvc.StartPostgres(t)
	pg.Exec(t, typesSetup)
	ctx := context.Background()
	src := openPG(t, pg.DSN, Options{MaxConns: 4})

	t.Run("TypesMatchDatabaseText", func(t *testing.T) {
		r, err := src.Query(ctx, Query{SQL: typesQuery})
		if err != nil {
			t.Fatal(err)
		}
		cols := r.Columns()
		got := collect(t, r)
		want := pg.QueryText(t, "SET TimeZone = 'UTC'; "+typesQuery)
		if len(got) != len(want) {
			t.Fatalf("%d rows, database has %d", len(got), len(want))
		}
		for i := range got {
			for j, v := range got[i] {
				w := want[i][j]
				if w == nil || v == nil {
					if w != nil || v != nil {
						t.Errorf("row %d %s: got %#v, database %v", i+1, cols[j].Name, v, w)
					}
					continue
				}
				if s := pgText(cols[j], v); s != *w {
					t.Errorf("row %d %s (%s): got %q (%T), database %q", i+1, cols[j].Name, cols[j].Type, s, v, *w)
				}
			}
		}
	})

	t.Run("ValueTypesAndKinds", func(t *testing.T) {
		r, err := src.Query(ctx, Query{SQL: typesQuery + " LIMIT 1"})
		if err != nil {
			t.Fatal(err)
		}
		cols := r.Columns()
		row := collect(t, r)[0]
		wantKinds := map[string]string{"id": "int64", "i2": "int64", "i4": "int64", "i8": "int64", "n": "numeric",
			"f4": "float64", "f8": "float64", "t": "string", "vc": "string", "b": "bool", "d": "date",
			"ts": "timestamp", "tstz": "timestamp", "u": "uuid", "by": "bytes", "j": "json", "jb": "json",
			"tm": "string", "iv": "string", "m": "string", "arr": "string"}
		wantTypes := map[string]string{"i2": "int2", "n": "numeric", "vc": "varchar", "tstz": "timestamptz", "m": "mood", "arr": "_int4"}
		for i, c := range cols {
			if c.Kind != wantKinds[c.Name] {
				t.Errorf("column %s kind %q, want %q", c.Name, c.Kind, wantKinds[c.Name])
			}
			if w, ok := wantTypes[c.Name]; ok && c.Type != w {
				t.Errorf("column %s type %q, want %q", c.Name, c.Type, w)
			}
			if !vocabulary(row[i]) {
				t.Errorf("column %s value %#v is not in the vocabulary", c.Name, row[i])
			}
		}
		if row[4] != "123456789012345678901234567890.000000001" {
			t.Errorf("numeric = %#v", row[4])
		}
		if row[5] != 1.1 {
			t.Errorf("float4 1.1 = %#v, want 1.1 exactly as a float64", row[5])
		}
		if row[13] != "a0eebc99-9c0b-4ef8-bb6d-6bb9bd380a11" {
			t.Errorf("uuid = %#v", row[13])
		}
		if ts := row[12].(time.Time); ts.Location() != time.UTC || !ts.Equal(time.Date(2025, 1, 1, 21, 34, 5, 500000000, time.UTC)) {
			t.Errorf("timestamptz = %v", ts)
		}
		if _, ok := row[15].(json.RawMessage); !ok {
			t.Errorf("json = %T", row[15])
		}
	})

	t.Run("DatabaseTimeZoneDoesNotChangeOutput", func(t *testing.T) {
		before := collectQuery(t, src, Query{SQL: "SELECT ts, tstz, tstz::text, tstz::date FROM types WHERE id = 1"})
		pg.Exec(t, "ALTER DATABASE postgres SET timezone = 'Pacific/Chatham'")
		defer pg.Exec(t, "ALTER DATABASE postgres RESET timezone")
		// A new pool: new sessions, which would get the database's zone.
		other := openPG(t, pg.DSN, Options{MaxConns: 1})
		after := collectQuery(t, other, Query{SQL: "SELECT ts, tstz, tstz::text, tstz::date FROM types WHERE id = 1"})
		if fmt.Sprint(before) != fmt.Sprint(after) {
			t.Fatalf("output changed with the database's TimeZone:\n before %v\n after  %v", before, after)
		}
		// Nor does a DSN's own timezone setting.
		dsnZone := openPG(t, pg.DSN+"&timezone=Asia/Kathmandu&DateStyle=SQL,DMY", Options{MaxConns: 1})
		if got := collectQuery(t, dsnZone, Query{SQL: "SELECT ts, tstz, tstz::text, tstz::date FROM types WHERE id = 1"}); fmt.Sprint(got) != fmt.Sprint(before) {
			t.Fatalf("output changed with the DSN's timezone:\n before %v\n after  %v", before, got)
		}
		if s := pg.QueryText(t, "SELECT tstz::text FROM types WHERE id = 1"); *s[0][0] == before[0][2] {
			t.Fatalf("the database's own rendering did not change (%q): the test proves nothing", *s[0][0])
		}
	})

	t.Run("ArgsMatchColumnTypes", func(t *testing.T) {
		cases := []struct {
			where string
			arg   any
		}{
			{"i2 = $1", int64(32767)},
			{"i4 = $1", int64(2147483647)},
			{"i8 = $1", int64(9223372036854775807)},
			{"n = $1", "123456789012345678901234567890.000000001"},
			{"n > $1 AND n <> 'NaN'", int64(1)},
			{"n > $1 AND n <> 'NaN'", float64(1.5)},
			{"f4 = $1", float64(float32(1.1))},
			{"f8 = $1", 0.1},
			{"t = $1", "plain"},
			{"vc = $1", "vc"},
			{"b = $1", true},
			{"d = $1", time.Date(2025, 1, 2, 0, 0, 0, 0, time.UTC)},
			{"ts = $1", time.Date(2025, 1, 2, 3, 4, 5, 123456000, time.UTC)},
			{"tstz = $1", time.Date(2025, 1, 1, 21, 34, 5, 500000000, time.UTC)},
			{"tstz > $1", time.Date(2025, 1, 1, 21, 34, 5, 0, time.FixedZone("x", 3600))},
			{"u = $1", "a0eebc99-9c0b-4ef8-bb6d-6bb9bd380a11"},
			{"u = $1", "A0EEBC99-9C0B-4EF8-BB6D-6BB9BD380A11"},
			{"m = $1", "stormy"},
		}
		for _, c := range cases {
			rows := collectQuery(t, src, Query{SQL: "SELECT id FROM types WHERE " + c.where, Args: []any{c.arg}})
			if len(rows) != 1 || rows[0][0] != int64(1) {
				t.Errorf("WHERE %s with %T %v: rows %v, want id 1", c.where, c.arg, c.arg, rows)
			}
		}
		// A value the database refuses is the client's fault, not a 500.
		_, err := src.Query(ctx, Query{SQL: "SELECT id FROM types WHERE i2 = $1::int8::int2", Args: []any{int64(1 << 40)}})
		var qe *QueryError
		if !errors.As(err, &qe) || !qe.ClientFault() {
			t.Errorf("out of range int2: %v, want a client-fault QueryError", err)
		}
		// Injection strings are values, never SQL.
		for _, inj := range []string{"1; DROP TABLE types", "' OR '1'='1", "plain'--", `\'; DELETE FROM types; --`} {
			rows := collectQuery(t, src, Query{SQL: "SELECT id FROM types WHERE t = $1", Args: []any{inj}})
			if len(rows) != 0 {
				t.Errorf("injection %q matched %v", inj, rows)
			}
		}
		if n := pg.QueryText(t, "SELECT count(*) FROM types"); *n[0][0] != "4" {
			t.Fatalf("types has %s rows", *n[0][0])
		}
		if _, err := src.Query(ctx, Query{SQL: "SELECT $1", Args: []any{int32(1)}}); err == nil {
			t.Error("an int32 argument was accepted")
		}
	})

	t.Run("RefusedValueNamesItsArgument", func(t *testing.T) { testRefusedValueNamesItsArgument(t, src) })
	t.Run("ReaderRole", func(t *testing.T) { testReaderRole(t, pg, src) })

	t.Run("ReadOnly", func(t *testing.T) {
		for _, sql := range []string{
			"INSERT INTO types (id) VALUES (99) RETURNING id",
			"WITH d AS (DELETE FROM types RETURNING id) SELECT * FROM d",
			"UPDATE types SET t = 'x' RETURNING id",
			"SELECT 1; DELETE FROM types",
			"CREATE TABLE evil (id int)",
		} {
			r, err := src.Query(ctx, Query{SQL: sql})
			if err == nil {
				r.Close()
				t.Errorf("%s: accepted", sql)
				continue
			}
			var qe *QueryError
			if !errors.As(err, &qe) {
				t.Errorf("%s: %v, want a QueryError", sql, err)
			}
		}
		_, err := src.Query(ctx, Query{SQL: "INSERT INTO types (id) VALUES (99) RETURNING id"})
		var qe *QueryError
		if errors.As(err, &qe) && qe.SQLState != "25006" {
			t.Errorf("INSERT refused with SQLSTATE %s, want 25006 read_only_sql_transaction", qe.SQLState)
		}
		if n := pg.QueryText(t, "SELECT count(*), count(*) FILTER (WHERE t = 'x') FROM types"); *n[0][0] != "4" || *n[0][1] != "0" {
			t.Fatalf("types changed: %v", n)
		}
	})

	t.Run("StatementTimeoutCancelsInDatabase", func(t *testing.T) {
		start := time.Now()
		_, err := src.Query(ctx, Query{SQL: "SELECT pg_sleep(30)", Timeout: 200 * time.Millisecond})
		took := time.Since(start)
		if !errors.Is(err, ErrStatementTimeout) {
			t.Fatalf("err = %v, want ErrStatementTimeout", err)
		}
		notHung(t, "the 200ms statement timeout of pg_sleep(30)", took)
		waitNoActive(t, pg, "pg_sleep(30)")
		// Past its timeout mid-stream: the rows so far, then the error.
		r, err := src.Query(ctx, Query{SQL: "SELECT g, pg_sleep(0.05) FROM generate_series(1, 100) g", Timeout: 300 * time.Millisecond})
		if err != nil {
			t.Fatal(err)
		}
		n := 0
		for r.Next() {
			n++
		}
		if !errors.Is(r.Err(), ErrStatementTimeout) || n == 0 || n >= 100 {
			t.Fatalf("after %d rows err = %v, want ErrStatementTimeout mid-stream", n, r.Err())
		}
		r.Close()
		waitNoActive(t, pg, "generate_series(1, 100)")
		waitIdle(t, src)
		// The source's own timeout applies when the query has none.
		short := openPG(t, pg.DSN, Options{MaxConns: 1, StatementTimeout: 150 * time.Millisecond})
		if _, err := short.Query(ctx, Query{SQL: "SELECT pg_sleep(30)"}); !errors.Is(err, ErrStatementTimeout) {
			t.Fatalf("source timeout: err = %v", err)
		}
		waitNoActive(t, pg, "pg_sleep(30)")
		// A query's own timeout overrides the source's (a long export).
		if rows := collectQuery(t, short, Query{SQL: "SELECT pg_sleep(0.3), 1", Timeout: 5 * time.Second}); len(rows) != 1 {
			t.Fatalf("rows = %v", rows)
		}
	})

	t.Run("CallerCancelCancelsInDatabase", func(t *testing.T) {
		cctx, cancel := context.WithCancel(ctx)
		go func() {
			waitActive(t, pg, "pg_sleep(20)")
			cancel()
		}()
		_, err := src.Query(cctx, Query{SQL: "SELECT pg_sleep(20)", Timeout: time.Minute})
		if !errors.Is(err, context.Canceled) {
			t.Fatalf("err = %v, want context.Canceled", err)
		}
		waitNoActive(t, pg, "pg_sleep(20)")
		waitIdle(t, src)
	})

	t.Run("EarlyCloseCancelsTheRest", func(t *testing.T) {
		r, err := src.Query(ctx, Query{SQL: "SELECT generate_series(1, 100000000) AS g", Timeout: time.Minute})
		if err != nil {
			t.Fatal(err)
		}
		for i := 0; i < 10 && r.Next(); i++ {
		}
		start := time.Now()
		if err := r.Close(); err != nil {
			t.Fatalf("Close: %v", err)
		}
		took := time.Since(start)
		t.Logf("Close with rows left took %v", took)
		notHung(t, "Close with rows left", took)
		waitNoActive(t, pg, "generate_series(1, 100000000)")
		waitIdle(t, src)
		if rows := collectQuery(t, src, Query{SQL: "SELECT 1"}); len(rows) != 1 {
			t.Fatal("the source does not answer after an early close")
		}
	})

	t.Run("NeverMoreThanMaxConns", func(t *testing.T) {
		const maxConns, workers, perWorker = 4, 32, 8
		capped := openPG(t, pg.DSN+"&application_name=levee_cap", Options{MaxConns: maxConns})
		watch, err := pgx.Connect(ctx, pg.DSN)
		if err != nil {
			t.Fatal(err)
		}
		defer watch.Close(ctx)
		var stop atomic.Bool
		var maxSeen, maxOpen, samples int
		sampled := make(chan struct{})
		go func() {
			defer close(sampled)
			for !stop.Load() {
				var n int
				if err := watch.QueryRow(ctx, "SELECT count(*) FROM pg_stat_activity WHERE application_name = 'levee_cap'").Scan(&n); err != nil {
					t.Error(err)
					return
				}
				maxSeen = max(maxSeen, n)
				maxOpen = max(maxOpen, capped.Stats().Open)
				samples++
			}
		}()
		var wg sync.WaitGroup
		var failures atomic.Int64
		for w := 0; w < workers; w++ {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for i := 0; i < perWorker; i++ {
					r, err := capped.Query(ctx, Query{SQL: "SELECT pg_sleep(0.01), $1::int8", Args: []any{int64(i)}, Timeout: 10 * time.Second})
					if err != nil {
						failures.Add(1)
						continue
					}
					for r.Next() {
					}
					if r.Close() != nil {
						failures.Add(1)
					}
				}
			}()
		}
		wg.Wait()
		stop.Store(true)
		<-sampled
		t.Logf("%d queries by %d workers: at most %d sessions in pg_stat_activity, %d open in the pool (%d samples)",
			workers*perWorker, workers, maxSeen, maxOpen, samples)
		if failures.Load() != 0 {
			t.Fatalf("%d queries failed", failures.Load())
		}
		if maxSeen > maxConns || maxOpen > maxConns {
			t.Fatalf("saw %d sessions, %d open, cap %d", maxSeen, maxOpen, maxConns)
		}
		if maxSeen < maxConns {
			t.Fatalf("never saw the pool full (%d sessions): the test did not load it", maxSeen)
		}
		if st := capped.Stats(); st.Max != maxConns || st.InUse != 0 {
			t.Fatalf("stats after = %+v", st)
		}
	})

	t.Run("TableChangedUnderAPreparedStatement", func(t *testing.T) {
		one := openPG(t, pg.DSN, Options{MaxConns: 1})
		pg.Exec(t, "CREATE TABLE changing (id int4, v int4); INSERT INTO changing VALUES (1, 2)")
		if rows := collectQuery(t, one, Query{SQL: "SELECT * FROM changing"}); fmt.Sprint(rows) != "[[1 2]]" {
			t.Fatalf("rows = %v", rows)
		}
		pg.Exec(t, "ALTER TABLE changing ALTER COLUMN v TYPE text")
		r, err := one.Query(ctx, Query{SQL: "SELECT * FROM changing"})
		if err != nil {
			t.Fatalf("after ALTER TABLE: %v", err)
		}
		if c := r.Columns()[1]; c.Type != "text" || c.Kind != valuekind.String {
			t.Fatalf("column after ALTER TABLE = %+v", c)
		}
		if rows := collect(t, r); rows[0][1] != "2" {
			t.Fatalf("rows = %v", rows)
		}
	})

	t.Run("DescribeAndTableColumns", func(t *testing.T) {
		cols, err := src.Describe(ctx, "SELECT id, n, tstz AS created_at, m, now() FROM types WHERE id = $1 AND t = $2", 2)
		if err != nil {
			t.Fatal(err)
		}
		want := []Column{{"id", "int4", "int64", false}, {"n", "numeric", "numeric", false}, {"created_at", "timestamptz", "timestamp", false},
			{"m", "mood", "string", false}, {"now", "timestamptz", "timestamp", false}}
		if fmt.Sprint(cols) != fmt.Sprint(want) {
			t.Fatalf("Describe = %v, want %v", cols, want)
		}
		if _, err := src.Describe(ctx, "SELECT id FROM types WHERE id = $1", 2); err == nil {
			t.Fatal("Describe accepted 2 arguments for 1 placeholder")
		}
		for _, table := range []string{"types", "public.types"} {
			cols, err := src.TableColumns(ctx, table)
			if err != nil {
				t.Fatal(err)
			}
			if len(cols) != 21 || cols[0].Name != "id" || cols[12].Kind != valuekind.Timestamp || cols[19].Type != "mood" {
				t.Fatalf("TableColumns(%s) = %v", table, cols)
			}
			// pg_attribute.attnotnull: the primary key id is NOT NULL,
			// i2 is not.
			if !cols[0].NotNull || cols[1].NotNull {
				t.Fatalf("TableColumns(%s) NotNull: id %v, i2 %v; want true, false", table, cols[0].NotNull, cols[1].NotNull)
			}
		}
		_, err = src.TableColumns(ctx, `types"; DROP TABLE types; --`)
		var qe *QueryError
		if !errors.As(err, &qe) || qe.SQLState != "42P01" {
			t.Fatalf("odd table name: %v, want undefined_table", err)
		}
		if _, err := src.TableColumns(ctx, "a.b.c"); err == nil {
			t.Fatal("a.b.c accepted")
		}
	})
}

func collectQuery(t testing.TB, s *Source, q Query) [][]any {
	t.Helper()
	r, err := s.Query(context.Background(), q)
	if err != nil {
		t.Fatalf("%s: %v", q.SQL, err)
	}
	return collect(t, r)
}

// vocabulary reports whether v is one of the shared value types.
func vocabulary(v any) bool {
	switch v.(type) {
	case nil, bool, int64, float64, string, time.Time, []byte, json.RawMessage:
		return true
	}
	return false
}

// activeCount counts sessions other than psql's own running a statement
// containing text.
func activeCount(t testing.TB, pg *testsvc.Postgres, text string) int {
	rows := pg.QueryText(t, "SELECT count(*) FROM pg_stat_activity WHERE state = 'active' AND pid <> pg_backend_pid() AND position("+
		pgQuote(text)+" in query) > 0")
	n, _ := strconv.Atoi(*rows[0][0])
	return n
}

func pgQuote(s string) string { return "'" + strings.ReplaceAll(s, "'", "''") + "'" }

// waitNoActive polls pg_stat_activity until no statement containing text
// runs (2 s at most: a cancelled statement stops within milliseconds).
func waitNoActive(t testing.TB, pg *testsvc.Postgres, text string) {
	t.Helper()
	testkit.Eventually(t, 2*time.Second, func() (bool, string) {
		n := activeCount(t, pg, text)
		return n == 0, fmt.Sprintf("%q still running in the database (%d) after its query ended", text, n)
	})
}

func waitActive(t testing.TB, pg *testsvc.Postgres, text string) {
	deadline := time.Now().Add(10 * time.Second)
	for activeCount(t, pg, text) == 0 {
		if time.Now().After(deadline) {
			t.Errorf("%q never started", text)
			return
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// waitIdle polls until the source has no connection in use.
func waitIdle(t testing.TB, s *Source) {
	t.Helper()
	testkit.Eventually(t, 2*time.Second, func() (bool, string) {
		st := s.Stats()
		return st.InUse == 0, fmt.Sprintf("connections still in use: %+v", st)
	})
}

// hangBound catches a call that hangs. These tests run under the race
// detector on shared cores, so they do not judge how fast a deadline
// fired: the typed error says which one did, and the time is logged.
const hangBound = 10 * time.Second

// notHung fails t when what took hangBound or longer, and logs the time.
func notHung(t *testing.T, what string, took time.Duration) {
	t.Helper()
	t.Logf("%s after %v", what, took)
	if took >= hangBound {
		t.Fatalf("%s after %v: hung", what, took)
	}
}
