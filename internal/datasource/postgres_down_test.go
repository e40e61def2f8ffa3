package datasource

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/levee-gw/levee/internal/testsvc"
)

func TestPostgresDownAndBack(t *testing.T) {
	pg := testsvc.StartPostgres(t)
	ctx := context.Background()
	pg.Stop()
	// Open does not fail with the database down: the source is
	// unavailable now and answered later.
	src := openPG(t, pg.DSN, Options{MaxConns: 4, ConnectTimeout: 500 * time.Millisecond})
	assertUnavailable := func(when string) {
		t.Helper()
		start := time.Now()
		_, err := src.Query(ctx, Query{SQL: "SELECT 1"})
		took := time.Since(start)
		if !errors.Is(err, ErrUnavailable) {
			t.Fatalf("%s: err = %v, want ErrUnavailable", when, err)
		}
		notHung(t, when+": ErrUnavailable", took)
		t.Logf("%s: ErrUnavailable in %v", when, took)
	}
	assertUnavailable("down at start")
	if err := pg.Start(); err != nil {
		t.Fatal(err)
	}
	recovered := waitAnswers(t, src)
	t.Logf("answers %v after the database is back", recovered)
	// Warm the pool to its cap, then stop the database under it.
	var wg sync.WaitGroup
	for i := 0; i < 4; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			r, err := src.Query(ctx, Query{SQL: "SELECT pg_sleep(0.05)"})
			if err != nil {
				t.Error(err)
				return
			}
			r.Close()
		}()
	}
	wg.Wait()
	// A query in flight when the database stops ends with ErrUnavailable.
	inflight := make(chan error, 1)
	go func() {
		r, err := src.Query(ctx, Query{SQL: "SELECT pg_sleep(30)", Timeout: time.Minute})
		if err == nil {
			r.Close()
		}
		inflight <- err
	}()
	waitActive(t, pg, "pg_sleep(30)")
	pg.Stop()
	select {
	case err := <-inflight:
		if !errors.Is(err, ErrUnavailable) {
			t.Fatalf("query in flight when the database stopped: %v, want ErrUnavailable", err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("query in flight did not end within 5s of the database stopping")
	}
	assertUnavailable("stopped mid-test")
	if err := pg.Start(); err != nil {
		t.Fatal(err)
	}
	recovered = waitAnswers(t, src)
	t.Logf("answers %v after the restart", recovered)
	// Every pooled connection from before the stop is gone; each query
	// now succeeds at the first try.
	for i := 0; i < 8; i++ {
		if rows := collectQuery(t, src, Query{SQL: "SELECT 1"}); len(rows) != 1 {
			t.Fatal("no row")
		}
	}
	if st := src.Stats(); st.Open > 4 || st.InUse != 0 {
		t.Fatalf("stats = %+v", st)
	}
}

// waitAnswers polls the source until a query succeeds (10 s at most) and
// returns how long that took.
func waitAnswers(t testing.TB, s *Source) time.Duration {
	t.Helper()
	start := time.Now()
	for {
		r, err := s.Query(context.Background(), Query{SQL: "SELECT 1"})
		if err == nil {
			r.Close()
			return time.Since(start)
		}
		if !errors.Is(err, ErrUnavailable) {
			t.Fatalf("while the database comes back: %v", err)
		}
		if time.Since(start) > 10*time.Second {
			t.Fatalf("no answer 10s after the database is back: %v", err)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// TestPostgresNextDoesNotAllocate pins that Rows adds no allocation per row
// of its own: small integers and booleans box without allocating, so a
// row of them costs nothing once the driver has read it.
func TestPostgresNextDoesNotAllocate(t *testing.T) {
	pg := testsvc.StartPostgres(t)
	src := openPG(t, pg.DSN, Options{MaxConns: 1, StatementTimeout: time.Minute})
	r, err := src.Query(context.Background(), Query{SQL: "SELECT (g % 200)::int8, g % 2 = 0, NULL::text FROM (SELECT generate_series(1, 100000) AS g) s"})
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	allocs := testing.AllocsPerRun(10000, func() {
		if !r.Next() {
			t.Fatal("rows ended early")
		}
		_ = r.Values()
	})
	if allocs > 0.1 {
		t.Fatalf("%.2f allocations per row", allocs)
	}
}

// TestPostgresPoolTimeoutAndClosed: a full pool answers ErrPoolTimeout
// within the query's budget, not a hang; a closed source ErrClosed.
func TestPostgresPoolTimeoutAndClosed(t *testing.T) {
	pg := testsvc.StartPostgres(t)
	ctx := context.Background()
	o := Options{Driver: "postgres", DSN: pg.DSN, MaxConns: 1, ConnectTimeout: 200 * time.Millisecond}
	src, err := Open(ctx, o)
	if err != nil {
		t.Fatal(err)
	}
	defer src.Close()
	held, err := src.Query(ctx, Query{SQL: "SELECT generate_series(1, 10)", Timeout: time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	if st := src.Stats(); st != (PoolStats{Max: 1, Open: 1, InUse: 1, Idle: 0}) {
		t.Fatalf("stats with one query open = %+v", st)
	}
	start := time.Now()
	_, err = src.Query(ctx, Query{SQL: "SELECT 1", Timeout: 100 * time.Millisecond})
	took := time.Since(start)
	if !errors.Is(err, ErrPoolTimeout) {
		t.Fatalf("err = %v, want ErrPoolTimeout", err)
	}
	notHung(t, "ErrPoolTimeout", took)
	// Closed with rows left: the statement is cancelled and its
	// connection closed, which the pool counts down a moment later.
	held.Close()
	waitIdle(t, src)
	if st := src.Stats(); st.Max != 1 || st.Open > 1 || st.InUse != 0 {
		t.Fatalf("stats after Close = %+v", st)
	}
	src.Close()
	if _, err := src.Query(ctx, Query{SQL: "SELECT 1"}); !errors.Is(err, ErrClosed) {
		t.Fatalf("after Close: %v, want ErrClosed", err)
	}
}
