package dataquery

import (
	"reflect"
	"sync"
	"testing"
	"time"
)

// TestIssueExamples: the two routes of issue 16's configuration and the
// query strings it names.
func TestIssueExamples(t *testing.T) {
	orders := mustSQL(t, ordersSQL, []Param{{Name: "customer_id", Type: Int64, Required: true, Min: "1"}},
		&Page{Keyset: []string{"created_at", "id"}, Default: 100, Max: 1000, Key: testKey, Scope: "orders-v1@1"}, Postgres)
	b, err := orders.Bind(query(t, "customer_id=42"), true)
	if err != nil || len(b.Args) != 2 || b.Args[0] != int64(42) || b.Args[1] != int64(101) {
		t.Errorf("orders: %q %v %v", b.SQL, b.Args, err)
	}
	customers := mustTable(t, TableSpec{
		Table:   "customers",
		Columns: []Column{{Name: "id", Kind: Int64}, {Name: "name", Kind: String}, {Name: "region", Kind: String}, {Name: "created_at", Kind: Timestamp}},
		Filters: map[string][]Op{"region": {OpEq, OpIn}, "created_at": {OpGte, OpLt}, "id": {OpEq}},
		Order:   []string{"id"},
	}, &Page{Keyset: []string{"id"}, Default: 100, Max: 1000, Key: testKey, Scope: "customers-v1@1"}, Postgres)
	sel := `SELECT "id", "name", "region", "created_at" FROM "customers"`
	for _, tc := range []struct {
		in, sql string
		args    []any
	}{
		{"region=eq.north", sel + ` WHERE "region" = $1 ORDER BY "id" LIMIT $2`, []any{"north", int64(101)}},
		{"region=in.(north,south)", sel + ` WHERE "region" IN ($1, $2) ORDER BY "id" LIMIT $3`, []any{"north", "south", int64(101)}},
		{"created_at=gte.2025-01-01T00:00:00Z", sel + ` WHERE "created_at" >= $1 ORDER BY "id" LIMIT $2`,
			[]any{time.Date(2025, 1, 1, 0, 0, 0, 0, time.UTC), int64(101)}},
	} {
		b, err := customers.Bind(query(t, tc.in), true)
		if err != nil || b.SQL != tc.sql || !reflect.DeepEqual(b.Args, tc.args) {
			t.Errorf("%q: %q %#v %v\nwant %q %#v", tc.in, b.SQL, b.Args, err, tc.sql, tc.args)
		}
	}
}

// TestConcurrentBind: one compiled query serves many goroutines (the race
// detector watches the shared cursor signer).
func TestConcurrentBind(t *testing.T) {
	q := mustSQL(t, ordersSQL, []Param{{Name: "customer_id", Type: Int64, Required: true}}, ordersPage(), SQLite)
	var wg sync.WaitGroup
	errs := make(chan error, 8)
	for g := range 8 {
		wg.Go(func() {
			v := query(t, "customer_id=1")
			for i := range 100 {
				b, err := q.Bind(v, true)
				if err != nil {
					errs <- err
					return
				}
				c, err := q.NextCursor(b, []any{time.Unix(int64(g), 0).UTC(), int64(i)})
				if err != nil {
					errs <- err
					return
				}
				v.Set("cursor", c)
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
}
