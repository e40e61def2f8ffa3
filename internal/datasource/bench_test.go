package datasource

import (
	"context"
	"database/sql"
	"path/filepath"
	"runtime"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/levee-gw/levee/internal/testsvc"
)

// streamSQL is 1M rows shaped like the orders query (int8, int8,
// numeric, timestamptz). The set-returning function sits in the select
// list so the server streams it instead of materialising it first.
const streamSQL = `SELECT g::int8 AS id, (g * 2)::int8 AS customer_id, (g / 100.0)::numeric(12,2) AS total,
	timestamptz '2025-01-01' + g * interval '1 second' AS created_at
	FROM (SELECT generate_series(1, 1000000) AS g) s`

const streamRows = 1000000

// reportPerRow reports rows/s and allocations and bytes per row.
func reportPerRow(b *testing.B, rows int, start time.Time, before *runtime.MemStats) {
	var after runtime.MemStats
	runtime.ReadMemStats(&after)
	total := float64(rows) * float64(b.N)
	b.ReportMetric(total/time.Since(start).Seconds(), "rows/s")
	b.ReportMetric(float64(after.Mallocs-before.Mallocs)/total, "allocs/row")
	b.ReportMetric(float64(after.TotalAlloc-before.TotalAlloc)/total, "B/row")
}

// BenchmarkPostgresStream1M streams 1M rows through Source.Query and Rows
// (decoding and normalising every value).
func BenchmarkPostgresStream1M(b *testing.B) {
	pg := testsvc.StartPostgres(b)
	src := openPG(b, pg.DSN, Options{MaxConns: 1, StatementTimeout: time.Minute})
	ctx := context.Background()
	var before runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	b.ResetTimer()
	start := time.Now()
	for i := 0; i < b.N; i++ {
		r, err := src.Query(ctx, Query{SQL: streamSQL})
		if err != nil {
			b.Fatal(err)
		}
		n := 0
		for r.Next() {
			_ = r.Values()
			n++
		}
		if err := r.Close(); err != nil || n != streamRows {
			b.Fatalf("%d rows, %v", n, err)
		}
	}
	reportPerRow(b, streamRows, start, &before)
}

// BenchmarkPostgresStream1MBarePgx is the baseline: the same query on one
// pgx connection, values decoded by pgx's own Rows.Values.
func BenchmarkPostgresStream1MBarePgx(b *testing.B) {
	pg := testsvc.StartPostgres(b)
	ctx := context.Background()
	conn, err := pgx.Connect(ctx, pg.DSN)
	if err != nil {
		b.Fatal(err)
	}
	defer conn.Close(ctx)
	var before runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	b.ResetTimer()
	start := time.Now()
	for i := 0; i < b.N; i++ {
		rows, err := conn.Query(ctx, streamSQL)
		if err != nil {
			b.Fatal(err)
		}
		n := 0
		for rows.Next() {
			if _, err := rows.Values(); err != nil {
				b.Fatal(err)
			}
			n++
		}
		rows.Close()
		if rows.Err() != nil || n != streamRows {
			b.Fatalf("%d rows, %v", n, rows.Err())
		}
	}
	reportPerRow(b, streamRows, start, &before)
}

const sqliteBenchRows = 200000

func sqliteBenchFile(b *testing.B) string {
	path := filepath.Join(b.TempDir(), "bench.db")
	db, err := sql.Open("sqlite", path)
	if err != nil {
		b.Fatal(err)
	}
	defer db.Close()
	if _, err := db.Exec(`CREATE TABLE orders (id INTEGER PRIMARY KEY, customer_id INTEGER, total NUMERIC, created_at TIMESTAMP);
		WITH RECURSIVE c(x) AS (SELECT 1 UNION ALL SELECT x + 1 FROM c WHERE x < 200000)
		INSERT INTO orders SELECT x, x * 2, x / 100.0, strftime('%Y-%m-%dT%H:%M:%SZ', 1735689600 + x, 'unixepoch') FROM c`); err != nil {
		b.Fatal(err)
	}
	return path
}

// BenchmarkSQLiteScan is a full scan through Source.Query and Rows.
func BenchmarkSQLiteScan(b *testing.B) {
	src := openSQLiteSource(b, sqliteBenchFile(b), Options{MaxConns: 1, StatementTimeout: time.Minute})
	ctx := context.Background()
	var before runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	b.ResetTimer()
	start := time.Now()
	for i := 0; i < b.N; i++ {
		r, err := src.Query(ctx, Query{SQL: "SELECT id, customer_id, total, created_at FROM orders"})
		if err != nil {
			b.Fatal(err)
		}
		n := 0
		for r.Next() {
			_ = r.Values()
			n++
		}
		if err := r.Close(); err != nil || n != sqliteBenchRows {
			b.Fatalf("%d rows, %v", n, err)
		}
	}
	reportPerRow(b, sqliteBenchRows, start, &before)
}

// BenchmarkSQLiteScanBare is the baseline: database/sql and modernc, each
// row scanned into reused *any destinations.
func BenchmarkSQLiteScanBare(b *testing.B) {
	db, err := sql.Open("sqlite", "file:"+sqliteBenchFile(b)+"?mode=ro")
	if err != nil {
		b.Fatal(err)
	}
	defer db.Close()
	vals := make([]any, 4)
	ptrs := []any{&vals[0], &vals[1], &vals[2], &vals[3]}
	var before runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	b.ResetTimer()
	start := time.Now()
	for i := 0; i < b.N; i++ {
		rows, err := db.Query("SELECT id, customer_id, total, created_at FROM orders")
		if err != nil {
			b.Fatal(err)
		}
		n := 0
		for rows.Next() {
			if err := rows.Scan(ptrs...); err != nil {
				b.Fatal(err)
			}
			n++
		}
		rows.Close()
		if n != sqliteBenchRows {
			b.Fatalf("%d rows", n)
		}
	}
	reportPerRow(b, sqliteBenchRows, start, &before)
}

const lookupSetup = `CREATE TABLE orders AS SELECT g AS id, g % 5000 AS customer_id, (g / 100.0)::numeric(12,2) AS total,
	timestamptz '2025-01-01' + g * interval '1 second' AS created_at FROM generate_series(1, 100000) g;
CREATE INDEX ON orders (customer_id, created_at DESC, id DESC); ANALYZE orders;`

const lookupSQL = `SELECT id, customer_id, total, created_at FROM orders WHERE customer_id = $1 ORDER BY created_at DESC, id DESC LIMIT 20`

// BenchmarkPostgresLookup is 20-row indexed lookups from 64 goroutines
// over a pool of 8, each a read-only transaction with its timeout.
func BenchmarkPostgresLookup(b *testing.B) {
	pg := testsvc.StartPostgres(b)
	pg.Exec(b, lookupSetup)
	src := openPG(b, pg.DSN, Options{MaxConns: 8})
	ctx := context.Background()
	b.SetParallelism(32) // 64 goroutines on 2 cores
	b.ResetTimer()
	b.RunParallel(func(p *testing.PB) {
		c := int64(0)
		for p.Next() {
			c++
			r, err := src.Query(ctx, Query{SQL: lookupSQL, Args: []any{c % 5000}})
			if err != nil {
				b.Error(err)
				return
			}
			for r.Next() {
			}
			if err := r.Close(); err != nil {
				b.Error(err)
				return
			}
		}
	})
}

// BenchmarkPostgresLookupBarePgxpool is the baseline: the same lookups
// straight through a pgxpool of 8, no transaction.
func BenchmarkPostgresLookupBarePgxpool(b *testing.B) {
	pg := testsvc.StartPostgres(b)
	pg.Exec(b, lookupSetup)
	src := openPG(b, pg.DSN, Options{MaxConns: 8})
	pool := src.backend.(*pgSource).pool
	ctx := context.Background()
	b.SetParallelism(32)
	b.ResetTimer()
	b.RunParallel(func(p *testing.PB) {
		c := int64(0)
		for p.Next() {
			c++
			rows, err := pool.Query(ctx, lookupSQL, c%5000)
			if err != nil {
				b.Error(err)
				return
			}
			for rows.Next() {
				if _, err := rows.Values(); err != nil {
					b.Error(err)
					return
				}
			}
			rows.Close()
		}
	})
}
