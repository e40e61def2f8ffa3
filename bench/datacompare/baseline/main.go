// Command baseline is the bare server levee's data routes are compared with
// (bench/datacompare, issue 16's "Speed"): net/http and pgx's pgxpool on
// the same PostgreSQL database and queries, and a database/sql loop over
// modernc.org/sqlite, each writing rows as levee does (NDJSON one object a
// line, JSON {"rows":[...]}), with no admission, caps, read-only
// transactions or statement timeouts: what a hand-written service does.
//
// It exists only to be measured as a separate process (its own RSS and
// CPU): it is not part of levee.
package main

import (
	"bufio"
	"context"
	"database/sql"
	"flag"
	"fmt"
	"log"
	"net/http"
	"runtime"
	"strconv"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	_ "modernc.org/sqlite"
)

// The statements of bench/datacompare, verbatim (levee's routes write the
// same with :name placeholders).
const (
	streamSQL = `SELECT id, customer_id, total, created_at FROM orders`
	// streamTextSQL has the server render numeric as text, sparing the
	// client pgx's binary numeric decoding: the fastest a bare program gets.
	streamTextSQL = `SELECT id, customer_id, total::text, created_at FROM orders`
	lookupSQL     = `SELECT id, customer_id, total, created_at FROM orders WHERE customer_id = $1 ORDER BY created_at DESC, id DESC LIMIT 20`
	slowSQL       = `SELECT id, pg_sleep(0.2)::text AS slept FROM orders WHERE id = $1`
	sqliteSQL     = `SELECT id, customer_id, total, created_at FROM orders`
)

func main() {
	listen := flag.String("listen", "127.0.0.1:0", "address to serve on")
	dsn := flag.String("pg", "", "PostgreSQL DSN")
	poolSize := flag.Int("pool", 8, "pgxpool MaxConns")
	sqlitePath := flag.String("sqlite", "", "SQLite database file")
	flag.Parse()

	mux := http.NewServeMux()
	mux.HandleFunc("/healthz", func(w http.ResponseWriter, r *http.Request) { w.WriteHeader(http.StatusNoContent) })
	mux.HandleFunc("/heap", func(w http.ResponseWriter, r *http.Request) {
		var m runtime.MemStats
		runtime.ReadMemStats(&m)
		fmt.Fprintf(w, "%d %d %d\n", m.HeapInuse, m.TotalAlloc, m.Mallocs)
	})
	if *dsn != "" {
		cfg, err := pgxpool.ParseConfig(*dsn)
		if err != nil {
			log.Fatal(err)
		}
		cfg.MaxConns = int32(*poolSize)
		pool, err := pgxpool.NewWithConfig(context.Background(), cfg)
		if err != nil {
			log.Fatal(err)
		}
		mux.HandleFunc("/stream", func(w http.ResponseWriter, r *http.Request) { pgStream(w, r, pool, streamSQL) })
		mux.HandleFunc("/stream-text", func(w http.ResponseWriter, r *http.Request) { pgStream(w, r, pool, streamTextSQL) })
		mux.HandleFunc("/lookup", func(w http.ResponseWriter, r *http.Request) { pgLookup(w, r, pool) })
		mux.HandleFunc("/slow", func(w http.ResponseWriter, r *http.Request) { pgSlow(w, r, pool) })
	}
	if *sqlitePath != "" {
		db, err := sql.Open("sqlite", "file:"+*sqlitePath+"?mode=ro")
		if err != nil {
			log.Fatal(err)
		}
		db.SetMaxOpenConns(*poolSize)
		mux.HandleFunc("/sqlite", func(w http.ResponseWriter, r *http.Request) { sqliteStream(w, r, db) })
	}
	srv := &http.Server{Addr: *listen, Handler: mux, ReadHeaderTimeout: 10 * time.Second}
	log.Fatal(srv.ListenAndServe())
}

// appendRow appends {"id":..,"customer_id":..,"total":"..","created_at":".."}:
// integers as numbers, numeric as its exact text, the time as RFC 3339 UTC.
func appendRow(b []byte, id, customer int64, total string, created time.Time) []byte {
	b = append(b, `{"id":`...)
	b = strconv.AppendInt(b, id, 10)
	b = append(b, `,"customer_id":`...)
	b = strconv.AppendInt(b, customer, 10)
	b = append(b, `,"total":"`...)
	b = append(b, total...) // numeric text: digits, '-', '.'; nothing to escape
	b = append(b, `","created_at":"`...)
	b = created.UTC().AppendFormat(b, time.RFC3339Nano)
	return append(b, `"}`...)
}

func fail(w http.ResponseWriter, err error) {
	http.Error(w, `{"error":`+strconv.Quote(err.Error())+`,"reason":"baseline"}`, http.StatusInternalServerError)
}

// pgStream writes every row of query as NDJSON through one 32 KiB
// buffer, as levee's encoder does.
func pgStream(w http.ResponseWriter, r *http.Request, pool *pgxpool.Pool, query string) {
	rows, err := pool.Query(r.Context(), query)
	if err != nil {
		fail(w, err)
		return
	}
	defer rows.Close()
	w.Header().Set("Content-Type", "application/x-ndjson")
	bw := bufio.NewWriterSize(w, 32<<10)
	var (
		id, customer int64
		total        string
		created      time.Time
		line         []byte
	)
	for rows.Next() {
		if err := rows.Scan(&id, &customer, &total, &created); err != nil {
			return
		}
		line = appendRow(line[:0], id, customer, total, created)
		line = append(line, '\n')
		if _, err := bw.Write(line); err != nil {
			return
		}
	}
	if rows.Err() != nil {
		fmt.Fprintf(bw, `{"error":%q,"reason":"baseline"}`+"\n", rows.Err().Error())
	}
	_ = bw.Flush()
}

// pgLookup answers ?customer_id=N with {"rows":[...],"next_cursor":null,
// "truncated":false} and a Content-Length.
func pgLookup(w http.ResponseWriter, r *http.Request, pool *pgxpool.Pool) {
	c, err := strconv.ParseInt(r.URL.Query().Get("customer_id"), 10, 64)
	if err != nil {
		http.Error(w, `{"error":"bad customer_id","reason":"invalid_parameter"}`, http.StatusBadRequest)
		return
	}
	rows, err := pool.Query(r.Context(), lookupSQL, c)
	if err != nil {
		fail(w, err)
		return
	}
	b := make([]byte, 0, 4096)
	b = append(b, `{"rows":[`...)
	var (
		id, customer int64
		total        string
		created      time.Time
	)
	n := 0
	_, err = pgx.ForEachRow(rows, []any{&id, &customer, &total, &created}, func() error {
		if n > 0 {
			b = append(b, ',')
		}
		n++
		b = appendRow(b, id, customer, total, created)
		return nil
	})
	if err != nil {
		fail(w, err)
		return
	}
	b = append(b, "],\"next_cursor\":null,\"truncated\":false}\n"...)
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Content-Length", strconv.Itoa(len(b)))
	_, _ = w.Write(b)
}

// pgSlow runs a 200 ms statement: the pool's waiters queue in pgxpool,
// with no bound but the client's patience.
func pgSlow(w http.ResponseWriter, r *http.Request, pool *pgxpool.Pool) {
	id, err := strconv.ParseInt(r.URL.Query().Get("id"), 10, 64)
	if err != nil {
		http.Error(w, `{"error":"bad id","reason":"invalid_parameter"}`, http.StatusBadRequest)
		return
	}
	var got int64
	var slept string
	if err := pool.QueryRow(r.Context(), slowSQL, id).Scan(&got, &slept); err != nil {
		fail(w, err)
		return
	}
	b := strconv.AppendInt([]byte(`{"rows":[{"id":`), got, 10)
	b = append(b, `,"slept":""}],"next_cursor":null,"truncated":false}`+"\n"...)
	w.Header().Set("Content-Length", strconv.Itoa(len(b)))
	_, _ = w.Write(b)
}

// sqliteStream is the bare modernc loop: database/sql, reused scan
// destinations, NDJSON through one 32 KiB buffer. SQLite keeps the time as
// RFC 3339 text, which is copied as it is.
func sqliteStream(w http.ResponseWriter, r *http.Request, db *sql.DB) {
	rows, err := db.QueryContext(r.Context(), sqliteSQL)
	if err != nil {
		fail(w, err)
		return
	}
	defer rows.Close()
	w.Header().Set("Content-Type", "application/x-ndjson")
	bw := bufio.NewWriterSize(w, 32<<10)
	var (
		id, customer int64
		total        float64
		created      sql.RawBytes
		line         []byte
	)
	for rows.Next() {
		if err := rows.Scan(&id, &customer, &total, &created); err != nil {
			return
		}
		line = append(line[:0], `{"id":`...)
		line = strconv.AppendInt(line, id, 10)
		line = append(line, `,"customer_id":`...)
		line = strconv.AppendInt(line, customer, 10)
		line = append(line, `,"total":`...)
		line = strconv.AppendFloat(line, total, 'g', -1, 64)
		line = append(line, `,"created_at":"`...)
		line = append(line, created...)
		line = append(line, "\"}\n"...)
		if _, err := bw.Write(line); err != nil {
			return
		}
	}
	if rows.Err() != nil {
		fmt.Fprintf(bw, `{"error":%q,"reason":"baseline"}`+"\n", rows.Err().Error())
	}
	_ = bw.Flush()
}
