package dataapi

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/levee-gw/levee/internal/dataformat"
	"github.com/levee-gw/levee/internal/dataquery"
	"github.com/levee-gw/levee/internal/datasource"
	"github.com/levee-gw/levee/internal/testsvc"
	"github.com/levee-gw/levee/internal/upstream"
)

// clock is a fake clock for the retry spacing.
type clock struct{ ns atomic.Int64 }

func (c *clock) now() time.Time          { return time.Unix(0, c.ns.Load()) }
func (c *clock) advance(d time.Duration) { c.ns.Add(int64(d)) }

// countingHandler counts the log records at Error level (each failed
// attempt to learn a table's columns logs one).
type countingHandler struct{ errors atomic.Int64 }

func (h *countingHandler) Enabled(context.Context, slog.Level) bool { return true }
func (h *countingHandler) Handle(_ context.Context, r slog.Record) error {
	if r.Level >= slog.LevelError {
		h.errors.Add(1)
	}
	return nil
}
func (h *countingHandler) WithAttrs([]slog.Attr) slog.Handler { return h }
func (h *countingHandler) WithGroup(string) slog.Handler      { return h }

// tableRoute is a table-mode route over pg's table items.
func tableRoute(t *testing.T, src *datasource.Source, columns []string, clk *clock, log slog.Handler) *Route {
	t.Helper()
	m, err := NewMetrics(prometheus.NewRegistry())
	if err != nil {
		t.Fatal(err)
	}
	rt, err := New(Options{Name: "items", Version: "v1", Source: src, SourceName: "pg", Driver: "postgres", Metrics: m,
		Formats: []dataformat.Format{dataformat.JSON}, Limits: dataformat.Limits{MaxRows: 100, MaxBytes: 1 << 20},
		Table: &TableOptions{Table: "items", Columns: columns, Order: []string{"id"}, Dialect: dataquery.Postgres},
		Now:   clk.now, Logger: slog.New(log)})
	if err != nil {
		t.Fatal(err)
	}
	return rt
}

func get(ctx context.Context, rt *Route) (*http.Response, error) {
	return rt.Forward(ctx, httptest.NewRequest(http.MethodGet, "/items", nil), upstream.Outbound{})
}

// TestConcurrentFirstRequestsDoNotWaitOnColumnLookup: the first request
// to a table route asks PostgreSQL for the table's columns, and the test
// holds an ACCESS EXCLUSIVE lock on the table so that question hangs. A
// second request with a short context returns by its own deadline
// (its context's error: the client's, not a refusal) while the first is
// still waiting on the lock; so does the OpenAPI document's question.
// Once the lock goes, the first request is answered with the rows.
func TestConcurrentFirstRequestsDoNotWaitOnColumnLookup(t *testing.T) {
	pg := testsvc.StartPostgres(t)
	pg.Exec(t, "CREATE TABLE items (id int PRIMARY KEY, name text); INSERT INTO items VALUES (1, 'a'), (2, 'b')")
	src, err := datasource.Open(context.Background(), datasource.Options{Driver: "postgres", DSN: pg.DSN, MaxConns: 4,
		StatementTimeout: 30 * time.Second, ConnectTimeout: 5 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	defer src.Close()

	// The lock, held in an open transaction on a connection of the test's.
	ctx := context.Background()
	locker, err := pgx.Connect(ctx, pg.DSN)
	if err != nil {
		t.Fatal(err)
	}
	defer locker.Close(ctx)
	tx, err := locker.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer tx.Rollback(ctx)
	if _, err := tx.Exec(ctx, "LOCK TABLE items IN ACCESS EXCLUSIVE MODE"); err != nil {
		t.Fatal(err)
	}

	rt := tableRoute(t, src, []string{"id", "name"}, &clock{}, slog.DiscardHandler)
	type result struct {
		resp *http.Response
		err  error
	}
	first := make(chan result, 1)
	firstCtx, cancelFirst := context.WithTimeout(ctx, time.Minute)
	defer cancelFirst()
	go func() {
		resp, err := get(firstCtx, rt)
		first <- result{resp, err}
	}()

	// The first request's question is waiting on the lock: poll
	// pg_locks for a lock not granted, with a deadline.
	deadline := time.Now().Add(20 * time.Second)
	for {
		var waiting int
		if err := tx.QueryRow(ctx, "SELECT count(*) FROM pg_locks WHERE NOT granted").Scan(&waiting); err != nil {
			t.Fatal(err)
		}
		if waiting > 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the first request's column lookup never waited on the lock")
		}
		time.Sleep(10 * time.Millisecond)
	}

	// A second request with a short context returns by its deadline, the
	// first still waiting.
	const short = 200 * time.Millisecond
	secondCtx, cancelSecond := context.WithTimeout(ctx, short)
	defer cancelSecond()
	began := time.Now()
	returned := make(chan error, 1)
	go func() {
		resp, err := get(secondCtx, rt)
		if resp != nil {
			resp.Body.Close()
		}
		returned <- err
	}()
	select {
	case err := <-returned:
		took := time.Since(began)
		if !errors.Is(err, context.DeadlineExceeded) {
			t.Errorf("second request: %v, want its own context's deadline", err)
		}
		t.Logf("second request returned after %v (its deadline %v) while the first's lookup held", took, short)
	case <-time.After(15 * time.Second):
		t.Fatal("the second request waited on the first's column lookup past its own deadline")
	}
	docCtx, cancelDoc := context.WithTimeout(ctx, short)
	cols := rt.Columns(docCtx)
	cancelDoc()
	if cols.Known || cols.Note != "another request is reading them from the data source" {
		t.Errorf("document's columns while the first asks: %+v", cols)
	}
	select {
	case r := <-first:
		t.Fatalf("the first request ended while the lock was held: %v", r.err)
	default:
	}

	// The lock goes: the first request is answered.
	if err := tx.Rollback(ctx); err != nil {
		t.Fatal(err)
	}
	var r result
	select {
	case r = <-first:
	case <-time.After(20 * time.Second):
		t.Fatal("the first request was not answered after the lock went")
	}
	if r.err != nil {
		t.Fatalf("first request: %v", r.err)
	}
	body, _ := io.ReadAll(r.resp.Body)
	r.resp.Body.Close()
	if r.resp.StatusCode != 200 || !strings.Contains(string(body), `"name":"b"`) {
		t.Errorf("first request: %d %s", r.resp.StatusCode, body)
	}
	if cols := rt.Columns(ctx); !cols.Known || len(cols.Columns) != 2 || cols.Columns[1].Name != "name" {
		t.Errorf("columns once learnt: %+v", cols)
	}
}

// TestColumnLookupRetrySpacing: while the table does not match the
// route's declaration (a column it lacks), the database is asked at most
// once per ColumnsRetry on the route's clock (each attempt logs once),
// the requests between answered from the last failure (query_failed);
// once the table has the column, the next attempt serves it.
func TestColumnLookupRetrySpacing(t *testing.T) {
	pg := testsvc.StartPostgres(t)
	pg.Exec(t, "CREATE TABLE items (id int PRIMARY KEY, name text); INSERT INTO items VALUES (1, 'a')")
	src, err := datasource.Open(context.Background(), datasource.Options{Driver: "postgres", DSN: pg.DSN, MaxConns: 2,
		StatementTimeout: 10 * time.Second, ConnectTimeout: 5 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	defer src.Close()
	clk, log := &clock{}, &countingHandler{}
	clk.advance(time.Hour)
	rt := tableRoute(t, src, []string{"id", "name", "size"}, clk, log)
	ctx := context.Background()

	refused := func(when string, wantAsks int64) {
		t.Helper()
		resp, err := get(ctx, rt)
		if resp != nil {
			resp.Body.Close()
		}
		var ref *upstream.Refusal
		if !errors.As(err, &ref) || ref.Reason != dataquery.ReasonQueryFailed {
			t.Errorf("%s: %v, want refused query_failed", when, err)
		}
		if n := log.errors.Load(); n != wantAsks {
			t.Errorf("%s: %d attempts, want %d", when, n, wantAsks)
		}
	}
	refused("first request", 1)
	refused("at once", 1)
	clk.advance(ColumnsRetry - time.Nanosecond)
	refused("just within the spacing", 1)
	if cols := rt.Columns(ctx); cols.Known || cols.Note != "table items has no column size (the route answers 502 query_failed)" {
		t.Errorf("document's columns: %+v", cols)
	}
	clk.advance(time.Nanosecond)
	refused("after the spacing", 2)

	pg.Exec(t, "ALTER TABLE items ADD COLUMN size int")
	clk.advance(ColumnsRetry)
	resp, err := get(ctx, rt)
	if err != nil {
		t.Fatalf("once the table has the column: %v", err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 200 || !strings.Contains(string(body), `"size":null`) {
		t.Errorf("once the table has the column: %d %s", resp.StatusCode, body)
	}
	if n := log.errors.Load(); n != 2 {
		t.Errorf("%d failed attempts logged, want 2", n)
	}
}
