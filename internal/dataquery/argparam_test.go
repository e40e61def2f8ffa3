package dataquery

import (
	"slices"
	"testing"
	"time"
)

// TestArgParam: every argument of a bound statement is named by what it
// is the value of (issue 22, 6b: a value the database refuses is answered
// naming its parameter), in both modes, with lists, cursors and limits;
// a query string Bind refuses and an index out of range name nothing.
func TestArgParam(t *testing.T) {
	sqlQ := mustSQL(t, "SELECT x, y FROM t WHERE a = :a AND id IN (:ids) AND b = :a ORDER BY x DESC, y",
		[]Param{{Name: "a", Type: Int64, Required: true}, {Name: "ids", Type: Int64, List: true, Required: true}},
		&Page{Keyset: []string{"x", "y"}, Default: 3, Max: 10, Key: testKey, Scope: "args@1"}, Postgres)
	spec := customersSpec()
	spec.Order = []string{"id"}
	tableQ := mustTable(t, spec, &Page{Keyset: []string{"id"}, Default: 3, Max: 10, Key: testKey, Scope: "customers@1"}, SQLite)

	for _, c := range []struct {
		name  string
		q     Query
		query string
		paged bool
		want  []string
	}{
		{"sql unpaged", sqlQ, "a=1&ids=4,5,6", false, []string{"a", "ids", "ids", "ids", "a"}},
		{"sql paged", sqlQ, "a=1&ids=4", true, []string{"a", "ids", "a", "limit"}},
		{"sql after a cursor", sqlQ, "a=1&ids=4", true, []string{"a", "ids", "a", "cursor", "cursor", "cursor", "limit"}},
		{"table", tableQ, "region=in.(n,s)&id=gte.3&name=like.a*", false, []string{"id", "name", "region", "region"}},
		{"table after a cursor", tableQ, "id=gte.3", true, []string{"id", "cursor", "limit"}},
	} {
		vals := query(t, c.query)
		if c.name == "sql after a cursor" || c.name == "table after a cursor" {
			b, err := c.q.Bind(vals, true)
			if err != nil {
				t.Fatal(err)
			}
			last := []any{int64(7), time.Date(2025, 1, 1, 0, 0, 0, 0, time.UTC)}[:len(c.q.Keyset())]
			cur, err := c.q.NextCursor(b, last)
			if err != nil {
				t.Fatal(err)
			}
			vals.Set("cursor", cur)
		}
		b, err := c.q.Bind(vals, c.paged)
		if err != nil {
			t.Fatalf("%s: %v", c.name, err)
		}
		var got []string
		for i := range b.Args {
			got = append(got, c.q.ArgParam(vals, c.paged, i))
		}
		if !slices.Equal(got, c.want) {
			t.Errorf("%s: %d args named %q, want %q", c.name, len(b.Args), got, c.want)
		}
		if n := c.q.ArgParam(vals, c.paged, len(b.Args)); n != "" {
			t.Errorf("%s: argument past the end named %q", c.name, n)
		}
	}
	if n := sqlQ.ArgParam(query(t, "a=x&ids=1"), false, 0); n != "" {
		t.Errorf("a query string Bind refuses: argument 0 named %q", n)
	}
}
