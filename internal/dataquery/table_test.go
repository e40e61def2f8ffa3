package dataquery

import (
	"errors"
	"reflect"
	"strings"
	"testing"
	"time"
)

var customerColumns = []Column{
	{Name: "id", Kind: Int64}, {Name: "name", Kind: String}, {Name: "region", Kind: String}, {Name: "score", Kind: Float64}, {Name: "active", Kind: Bool},
	{Name: "born", Kind: Date}, {Name: "created_at", Kind: Timestamp}, {Name: "uid", Kind: UUID},
}

func customersSpec() TableSpec {
	all := []Op{OpEq, OpNeq, OpLt, OpLte, OpGt, OpGte, OpIn, OpIs}
	return TableSpec{
		Table:   "customers",
		Columns: customerColumns,
		Filters: map[string][]Op{
			"id": all, "name": append(all, OpLike), "region": {OpEq, OpIn}, "score": all,
			"active": {OpEq, OpNeq, OpIn, OpIs}, "born": all, "created_at": {OpGte, OpLt}, "uid": {OpEq, OpIn},
		},
	}
}

func mustTable(t testing.TB, spec TableSpec, page *Page, d Dialect) *TableQuery {
	t.Helper()
	q, err := CompileTable(spec, page, d)
	if err != nil {
		t.Fatalf("CompileTable: %v", err)
	}
	return q
}

const customersSelect = `SELECT "id", "name", "region", "score", "active", "born", "created_at", "uid" FROM "customers"`

// TestTableOperators: every operator's SQL and arguments.
func TestTableOperators(t *testing.T) {
	q := mustTable(t, customersSpec(), nil, Postgres)
	day := time.Date(2024, 2, 29, 0, 0, 0, 0, time.UTC)
	tests := []struct {
		in    string
		where string
		args  []any
	}{
		{"id=eq.5", `"id" = $1`, []any{int64(5)}},
		{"id=neq.-5", `"id" <> $1`, []any{int64(-5)}},
		{"id=lt.5", `"id" < $1`, []any{int64(5)}},
		{"id=lte.5", `"id" <= $1`, []any{int64(5)}},
		{"id=gt.5", `"id" > $1`, []any{int64(5)}},
		{"id=gte.5", `"id" >= $1`, []any{int64(5)}},
		{"id=in.(1,2,3)", `"id" IN ($1, $2, $3)`, []any{int64(1), int64(2), int64(3)}},
		{"id=is.null", `"id" IS NULL`, []any{}},
		{"active=is.true", `"active" IS TRUE`, []any{}},
		{"active=is.false", `"active" IS FALSE`, []any{}},
		{"active=eq.false", `"active" = $1`, []any{false}},
		{"score=gt.1.5e3", `"score" > $1`, []any{1500.0}},
		{"born=eq.2024-02-29", `"born" = $1`, []any{day}},
		{"created_at=gte.2024-02-29T01:00:00%2B01:00&created_at=lt.2024-03-01T00:00:00Z",
			`"created_at" >= $1 AND "created_at" < $2`, []any{day.Add(0), day.AddDate(0, 0, 1)}},
		{"uid=eq.123E4567-E89B-12D3-A456-426614174000", `"uid" = $1`, []any{"123e4567-e89b-12d3-a456-426614174000"}},
		{"name=like.J*n", `"name" LIKE $1 ESCAPE '!'`, []any{"J%n"}},
		{"name=like.100%25_off!*", `"name" LIKE $1 ESCAPE '!'`, []any{"100!%!_off!!%"}},
		{"name=eq.", `"name" = $1`, []any{""}},
		{"name=eq.a.b", `"name" = $1`, []any{"a.b"}},
		{"name=eq.%27%20OR%201=1%20--", `"name" = $1`, []any{"' OR 1=1 --"}},
		{"name=in.(a\\,b,c)", `"name" IN ($1, $2)`, []any{"a,b", "c"}},
		{"region=eq.north&id=gt.1", `"id" > $1 AND "region" = $2`, []any{int64(1), "north"}},
	}
	for _, tc := range tests {
		b, err := q.Bind(query(t, tc.in), false)
		if err != nil {
			t.Errorf("%q: %v", tc.in, err)
			continue
		}
		want := customersSelect + " WHERE " + tc.where
		if b.SQL != want || !reflect.DeepEqual(b.Args, tc.args) {
			t.Errorf("%q:\n got %q %#v\nwant %q %#v", tc.in, b.SQL, b.Args, want, tc.args)
		}
		if n := countPlaceholders(b.SQL, Postgres); n != len(b.Args) {
			t.Errorf("%q: %d placeholders, %d args", tc.in, n, len(b.Args))
		}
	}
	b, err := q.Bind(nil, false)
	if err != nil || b.SQL != customersSelect || len(b.Args) != 0 {
		t.Errorf("no filters: %q %v %v", b.SQL, b.Args, err)
	}
}

// TestTableRefuses: unknown columns and operators, bad values, each named.
func TestTableRefuses(t *testing.T) {
	spec := customersSpec()
	spec.Filters["created_at"] = []Op{OpGte, OpLt}
	q := mustTable(t, spec, &Page{Keyset: []string{"id"}, Key: testKey, Scope: "customers-v1"}, SQLite)
	unfiltered := mustTable(t, TableSpec{Table: "t", Columns: []Column{{Name: "id", Kind: Int64}, {Name: "x", Kind: String}}, Filters: map[string][]Op{"id": {OpEq}}}, nil, SQLite)
	tests := []struct {
		q      *TableQuery
		in     string
		param  string
		reason string
	}{
		{q, "nope=eq.1", "nope", ReasonUnknownParameter},
		{unfiltered, "x=eq.1", "x", ReasonUnknownParameter},
		{q, "id=5", "id", ReasonOperatorNotAllowed},
		{q, "id=like.5", "id", ReasonOperatorNotAllowed},
		{q, "id=EQ.5", "id", ReasonOperatorNotAllowed},
		{q, "id=ilike.5", "id", ReasonOperatorNotAllowed},
		{q, "created_at=eq.2025-01-01T00:00:00Z", "created_at", ReasonOperatorNotAllowed},
		{q, "region=like.n*", "region", ReasonOperatorNotAllowed},
		{q, "id=eq.abc", "id", ReasonInvalidParameter},
		{q, "id=eq.1%3B%20DROP%20TABLE%20x", "id", ReasonInvalidParameter},
		{q, "id=in.1,2", "id", ReasonInvalidParameter},
		{q, "id=in.()", "id", ReasonInvalidParameter},
		{q, "id=in.(1,,2)", "id", ReasonInvalidParameter},
		{q, "id=in.(" + strings.Repeat("1,", DefaultMaxItems) + "1)", "id", ReasonInvalidParameter},
		{q, "id=is.true", "id", ReasonInvalidParameter},
		{q, "id=is.NULL", "id", ReasonInvalidParameter},
		{q, "born=eq.2023-02-29", "born", ReasonInvalidParameter},
		{q, "score=eq.NaN", "score", ReasonInvalidParameter},
		{q, "uid=eq.not-a-uuid", "uid", ReasonInvalidParameter},
		{q, "name=eq.%00", "name", ReasonInvalidParameter},
		{q, "name=like." + strings.Repeat("x", DefaultMaxLen+1), "name", ReasonInvalidParameter},
		{q, strings.Repeat("id=gt.1&", MaxFiltersPerColumn+1), "id", ReasonInvalidParameter},
		{q, "limit=0", "limit", ReasonInvalidLimit},
		{q, "cursor=AAAA", "cursor", ReasonInvalidCursor},
	}
	for _, tc := range tests {
		b, err := tc.q.Bind(query(t, tc.in), true)
		var e *Error
		if !errors.As(err, &e) {
			t.Errorf("%.40q: got %q, %v; want an *Error", tc.in, b.SQL, err)
			continue
		}
		if e.Param != tc.param || e.Reason != tc.reason || !strings.Contains(e.Message, tc.param) {
			t.Errorf("%.40q: %+v, want param %q reason %q", tc.in, e, tc.param, tc.reason)
		}
	}
}

// TestCompileTableRefuses: configuration errors of table mode.
func TestCompileTableRefuses(t *testing.T) {
	base := func(f func(*TableSpec)) TableSpec {
		s := TableSpec{Table: "t", Columns: []Column{{Name: "id", Kind: Int64}, {Name: "ok", Kind: Bool}, {Name: "s", Kind: String}}}
		f(&s)
		return s
	}
	page := &Page{Keyset: []string{"id"}, Key: testKey}
	tests := []struct {
		name string
		spec TableSpec
		page *Page
		want string
	}{
		{"three parts", base(func(s *TableSpec) { s.Table = "a.b.c" }), nil, "at most schema.table"},
		{"empty part", base(func(s *TableSpec) { s.Table = "a." }), nil, "empty name"},
		{"NUL", base(func(s *TableSpec) { s.Table = "a\x00" }), nil, "NUL"},
		{"long", base(func(s *TableSpec) { s.Table = strings.Repeat("t", 64) }), nil, "longer than 63"},
		{"no columns", base(func(s *TableSpec) { s.Columns = nil }), nil, "columns: 0"},
		{"column twice", base(func(s *TableSpec) { s.Columns = append(s.Columns, Column{Name: "id", Kind: Int64}) }), nil, "listed twice"},
		{"column kind", base(func(s *TableSpec) { s.Columns[0].Kind = 0 }), nil, "invalid type"},
		{"filter on unknown column", base(func(s *TableSpec) { s.Filters = map[string][]Op{"x": {OpEq}} }), nil, `"x" is not one of the columns`},
		{"like on int", base(func(s *TableSpec) { s.Filters = map[string][]Op{"id": {OpLike}} }), nil, "like applies to string"},
		{"lt on bool", base(func(s *TableSpec) { s.Filters = map[string][]Op{"ok": {OpLt}} }), nil, "does not apply to a bool"},
		{"op twice", base(func(s *TableSpec) { s.Filters = map[string][]Op{"id": {OpEq, OpEq}} }), nil, "listed twice"},
		{"no ops", base(func(s *TableSpec) { s.Filters = map[string][]Op{"id": {}} }), nil, "no operators"},
		{"bad op", base(func(s *TableSpec) { s.Filters = map[string][]Op{"id": {99}} }), nil, "invalid operator"},
		{"order unknown", base(func(s *TableSpec) { s.Order = []string{"x"} }), nil, `"x" is not one of the columns`},
		{"order bad direction", base(func(s *TableSpec) { s.Order = []string{"id down"} }), nil, "asc or desc"},
		{"order twice", base(func(s *TableSpec) { s.Order = []string{"id", "id desc"} }), nil, "listed twice"},
		{"keyset not a column", base(func(s *TableSpec) {}), &Page{Keyset: []string{"x"}, Key: testKey}, `keyset column "x"`},
		{"order not the keyset", base(func(s *TableSpec) { s.Order = []string{"s"} }), page, "[s] must be the keyset [id]"},
	}
	for _, tc := range tests {
		_, err := CompileTable(tc.spec, tc.page, Postgres)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: error %v, want one containing %q", tc.name, err, tc.want)
		}
	}
}

// TestTablePaging: the keyset condition joins the filters, the order
// defaults to the keyset, and a cursor is bound to the filters.
func TestTablePaging(t *testing.T) {
	spec := customersSpec()
	spec.Order = []string{"region desc", "id"}
	q := mustTable(t, spec, &Page{Keyset: []string{"region", "id"}, Default: 2, Key: testKey, Scope: "customers-v1@2"}, SQLite)
	b, err := q.Bind(query(t, "id=gt.0"), true)
	if err != nil {
		t.Fatal(err)
	}
	if want := customersSelect + ` WHERE "id" > ? ORDER BY "region" DESC, "id" LIMIT ?`; b.SQL != want || !reflect.DeepEqual(b.Args, []any{int64(0), int64(3)}) {
		t.Errorf("first page: %q %v", b.SQL, b.Args)
	}
	cur, err := q.NextCursor(b, []any{"north", int64(7)})
	if err != nil {
		t.Fatal(err)
	}
	b2, err := q.Bind(query(t, "cursor="+cur+"&id=gt.0&limit=5"), true)
	if err != nil {
		t.Fatal(err)
	}
	want := customersSelect + ` WHERE "id" > ? AND ("region" < ? OR ("region" = ? AND "id" > ?)) ORDER BY "region" DESC, "id" LIMIT ?`
	if b2.SQL != want || !reflect.DeepEqual(b2.Args, []any{int64(0), "north", "north", int64(7), int64(6)}) || b2.Limit != 5 {
		t.Errorf("next page:\n got %q %v\nwant %q", b2.SQL, b2.Args, want)
	}
	noFilter := mustTable(t, TableSpec{Table: "s.t", Columns: []Column{{Name: "id", Kind: Int64}}}, &Page{Keyset: []string{"id"}, Key: testKey}, Postgres)
	b3, _ := noFilter.Bind(nil, true)
	c3, _ := noFilter.NextCursor(b3, []any{int64(4)})
	b3, err = noFilter.Bind(query(t, "cursor="+c3), true)
	if want := `SELECT "id" FROM "s"."t" WHERE "id" > $1 ORDER BY "id" LIMIT $2`; err != nil || b3.SQL != want {
		t.Errorf("no filters, next page: %q, %v", b3.SQL, err)
	}
	for _, other := range []string{"id=gt.1", "id=gt.0&region=eq.x", ""} {
		_, err := q.Bind(query(t, "cursor="+cur+"&"+other), true)
		var e *Error
		if !errors.As(err, &e) || e.Reason != ReasonInvalidCursor {
			t.Errorf("cursor with %q: %v, want invalid_cursor", other, err)
		}
	}
}

// TestQuotedIdentifiers: configured names with quotes stay one identifier.
func TestQuotedIdentifiers(t *testing.T) {
	q := mustTable(t, TableSpec{Table: `we"ird.ta ble`, Columns: []Column{{Name: `a"b`, Kind: Int64}}, Filters: map[string][]Op{`a"b`: {OpEq}}}, nil, Postgres)
	b, err := q.Bind(query(t, `a"b=eq.1`), false)
	if want := `SELECT "a""b" FROM "we""ird"."ta ble" WHERE "a""b" = $1`; err != nil || b.SQL != want {
		t.Errorf("%q, %v; want %q", b.SQL, err, want)
	}
}
