package dataquery

import (
	"testing"
	"time"
)

// The Bind benchmarks take an already parsed query string, as the request
// path has one; they measure the binding alone.

func BenchmarkBindSQL(b *testing.B) {
	q := mustSQL(b, ordersSQL, []Param{{Name: "customer_id", Type: Int64, Required: true, Min: "1"}}, ordersPage(), Postgres)
	vals := query(b, "customer_id=7")
	first, _ := q.Bind(vals, true)
	cur, _ := q.NextCursor(first, []any{time.Unix(1e9, 0).UTC(), int64(1234)})
	withCursor := query(b, "customer_id=7&limit=50&cursor="+cur)
	for _, bc := range []struct {
		name  string
		paged bool
		v     map[string][]string
	}{{"unpaged", false, vals}, {"first-page", true, vals}, {"cursor", true, withCursor}} {
		b.Run(bc.name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				if _, err := q.Bind(bc.v, bc.paged); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

func BenchmarkBindSQLList(b *testing.B) {
	q := mustSQL(b, "SELECT * FROM orders WHERE customer_id = :c AND status IN (:s) AND created_at >= :since",
		[]Param{{Name: "c", Type: Int64, Required: true}, {Name: "s", Type: String, List: true, Required: true}, {Name: "since", Type: Timestamp, Required: true}}, nil, Postgres)
	vals := query(b, "c=7&s=open,paid,shipped&since=2025-01-01T00:00:00Z")
	b.ReportAllocs()
	for b.Loop() {
		if _, err := q.Bind(vals, false); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkBindTable(b *testing.B) {
	q := mustTable(b, customersSpec(), &Page{Keyset: []string{"id"}, Key: testKey, Scope: "customers-v1@1"}, Postgres)
	vals := query(b, "region=in.(north,south)&created_at=gte.2025-01-01T00:00:00Z&id=gt.10")
	b.ReportAllocs()
	for b.Loop() {
		if _, err := q.Bind(vals, true); err != nil {
			b.Fatal(err)
		}
	}
}
