package datasource

import (
	"context"
	"testing"
	"time"

	"github.com/levee-gw/levee/internal/testsvc"
)

// TestPostgresPageKeepsConnection: a caller that stops reading at the
// last row of its statement's LIMIT (a data API's page: Limit+1 rows
// asked, all read but the end) keeps the pooled connection; one that
// leaves many rows has the statement cancelled and its connection
// closed, and the next query still works. Before, every page closed its
// connection and the next request opened a new one (bench/soak.sh).
func TestPostgresPageKeepsConnection(t *testing.T) {
	pg := testsvc.StartPostgres(t)
	ctx := context.Background()
	src := openPG(t, pg.DSN, Options{MaxConns: 2})
	pid := func() int64 {
		t.Helper()
		r, err := src.Query(ctx, Query{SQL: "SELECT pg_backend_pid()::int8"})
		if err != nil {
			t.Fatal(err)
		}
		rows := collect(t, r)
		return rows[0][0].(int64)
	}
	first := pid()
	for i := 0; i < 10; i++ {
		r, err := src.Query(ctx, Query{SQL: "SELECT g FROM generate_series(1, 6) g LIMIT 6"})
		if err != nil {
			t.Fatal(err)
		}
		for n := 0; n < 6 && r.Next(); n++ { // the page's 5 rows and the extra one; not the end
		}
		if err := r.Close(); err != nil {
			t.Fatal(err)
		}
		if st := src.Stats(); st.Open != 1 || st.Idle != 1 {
			t.Fatalf("page %d: pool %+v after Close, want the one connection kept idle", i, st)
		}
	}
	if got := pid(); got != first {
		t.Errorf("the backend changed from %d to %d: a page closed its connection", first, got)
	}
	// Many rows left: cancelled, the connection closed, the pool recovers.
	r, err := src.Query(ctx, Query{SQL: "SELECT g FROM generate_series(1, 1000000) g"})
	if err != nil {
		t.Fatal(err)
	}
	r.Next()
	begin := time.Now()
	_ = r.Close()
	if el := time.Since(begin); el > 2*time.Second {
		t.Errorf("Close with a million rows left took %s", el)
	}
	if got := pid(); got == first {
		t.Errorf("the connection of a cancelled statement was kept (backend %d)", got)
	}
}
