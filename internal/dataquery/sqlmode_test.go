package dataquery

import (
	"errors"
	"net/url"
	"reflect"
	"strings"
	"testing"
	"time"
)

var testKey = []byte("0123456789abcdef0123456789abcdef")

const ordersSQL = "SELECT id, customer_id, total, created_at FROM orders WHERE customer_id = :customer_id ORDER BY created_at DESC, id DESC"

func ordersPage() *Page {
	return &Page{Keyset: []string{"created_at", "id"}, Default: 100, Max: 1000, Key: testKey, Scope: "orders-v1@1"}
}

func mustSQL(t testing.TB, sql string, params []Param, page *Page, d Dialect) *SQLQuery {
	t.Helper()
	q, err := CompileSQL(sql, params, page, d)
	if err != nil {
		t.Fatalf("CompileSQL: %v", err)
	}
	return q
}

func query(t testing.TB, s string) url.Values {
	t.Helper()
	v, err := url.ParseQuery(s)
	if err != nil {
		t.Fatalf("ParseQuery(%q): %v", s, err)
	}
	return v
}

// TestCompileSQLRefuses: the configuration errors `levee validate` shows.
func TestCompileSQLRefuses(t *testing.T) {
	i64 := func(n string) Param { return Param{Name: n, Type: Int64, Required: true} }
	tests := []struct {
		name   string
		sql    string
		params []Param
		page   *Page
		want   string
	}{
		{"undeclared and unused", "SELECT :a, :b, :a FROM t", []Param{i64("a"), i64("c"), i64("d")}, nil,
			"placeholders not declared: [:b]; params not used: [c, d]"},
		{"undeclared only", "SELECT :x", nil, nil, "placeholders not declared: [:x]; params not used: []"},
		{"case matters", "SELECT :ID", []Param{i64("id")}, nil, "not declared: [:ID]; params not used: [id]"},
		{"two statements", "SELECT :a; DELETE FROM t", []Param{i64("a")}, nil, "two statements: ';' at offset 9"},
		{"positional", "SELECT $1", nil, nil, "positional placeholder"},
		{"empty", "  \n", nil, nil, "empty"},
		{"too long", "SELECT '" + strings.Repeat("x", MaxSQLBytes) + "'", nil, nil, "over 65536"},
		{"NUL", "SELECT '\x00'", nil, nil, "NUL"},
		{"too many params", "SELECT 1", make([]Param, MaxParams+1), nil, "over 64"},
		{"reserved name", "SELECT :limit", []Param{i64("limit")}, nil, "paging keys"},
		{"bad name", "SELECT 1", []Param{i64("a-b")}, nil, "a name is"},
		{"declared twice", "SELECT :a", []Param{i64("a"), i64("a")}, nil, "declared twice"},
		{"bad default", "SELECT :a", []Param{{Name: "a", Type: Int64, Default: "1.5"}}, nil, `param "a": default: not an int64: "1.5"`},
		{"default out of bounds", "SELECT :a", []Param{{Name: "a", Type: Int64, Default: "0", Min: "1"}}, nil, "outside [1, +inf]"},
		{"required with default", "SELECT :a", []Param{{Name: "a", Type: Int64, Required: true, Default: "1"}}, nil, "choose one"},
		{"optional list", "SELECT * FROM t WHERE id IN (:a)", []Param{{Name: "a", Type: Int64, List: true}}, nil, "must be required or have a default"},
		{"list outside IN", "SELECT * FROM t WHERE id = :a", []Param{{Name: "a", Type: Int64, List: true, Required: true}}, nil, "IN (:a)"},
		{"list with more in parens", "SELECT * FROM t WHERE id IN (:a, 3)", []Param{{Name: "a", Type: Int64, List: true, Required: true}}, nil, "IN (:a)"},
		{"list at start", "SELECT (:a)", []Param{{Name: "a", Type: Int64, List: true, Required: true}}, nil, "IN (:a)"},
		{"no type", "SELECT :a", []Param{{Name: "a"}}, nil, "invalid type"},
		{"page without ORDER BY", "SELECT id FROM t", nil, &Page{Keyset: []string{"id"}, Key: testKey}, "needs an ORDER BY over the keyset [id]"},
		{"page, ORDER BY only in a subquery", "SELECT * FROM (SELECT id FROM t ORDER BY id) s", nil, &Page{Keyset: []string{"id"}, Key: testKey}, "needs an ORDER BY"},
		{"page, other columns", "SELECT id, x FROM t ORDER BY x, id", nil, &Page{Keyset: []string{"id"}, Key: testKey},
			"the ORDER BY columns [x, id] must be the keyset [id]"},
		{"page, other order", ordersSQL, []Param{i64("customer_id")}, &Page{Keyset: []string{"id", "created_at"}, Key: testKey},
			"[created_at, id] must be the keyset [id, created_at]"},
		{"page, expression", "SELECT id FROM t ORDER BY lower(name)", nil, &Page{Keyset: []string{"id"}, Key: testKey}, "plain column names"},
		{"page, NULLS LAST", "SELECT id FROM t ORDER BY id NULLS LAST", nil, &Page{Keyset: []string{"id"}, Key: testKey}, "plain column names"},
		{"page, own LIMIT", "SELECT id FROM t ORDER BY id LIMIT 5", nil, &Page{Keyset: []string{"id"}, Key: testKey}, "own LIMIT"},
		{"page, short key", "SELECT id FROM t ORDER BY id", nil, &Page{Keyset: []string{"id"}, Key: []byte("short")}, "cursor key"},
		{"page, no keyset", "SELECT id FROM t ORDER BY id", nil, &Page{Key: testKey}, "keyset needs 1 to 8"},
		{"page, default over max", "SELECT id FROM t ORDER BY id", nil, &Page{Keyset: []string{"id"}, Key: testKey, Default: 50, Max: 10}, "default 50"},
		{"page, max over cap", "SELECT id FROM t ORDER BY id", nil, &Page{Keyset: []string{"id"}, Key: testKey, Max: MaxPageSize + 1}, "max 10001"},
		{"page, keyset twice", "SELECT id FROM t ORDER BY id, id", nil, &Page{Keyset: []string{"id", "id"}, Key: testKey}, "named twice"},
	}
	for _, tc := range tests {
		_, err := CompileSQL(tc.sql, tc.params, tc.page, Postgres)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: error %v, want one containing %q", tc.name, err, tc.want)
		}
	}
	if _, err := CompileSQL("SELECT 1", nil, nil, 0); err == nil {
		t.Error("the zero dialect was accepted")
	}
}

// TestOrderByForms: the ORDER BY forms a paged SQL may use, and the
// directions learned from them.
func TestOrderByForms(t *testing.T) {
	for _, tc := range []struct {
		sql    string
		keyset []string
		d      Dialect
		order  string
	}{
		{"SELECT id FROM t ORDER BY id", []string{"id"}, Postgres, `"id"`},
		{"SELECT id FROM t order by ID desc", []string{"id"}, Postgres, `"id" DESC`},
		{"SELECT o.id, o.at FROM t o ORDER BY o.at ASC, t.o.id DESC", []string{"at", "id"}, Postgres, `"at", "id" DESC`},
		{`SELECT "Id" FROM t ORDER BY "Id"`, []string{"Id"}, Postgres, `"Id"`},
		{"SELECT Id FROM t ORDER BY Id", []string{"Id"}, SQLite, `"Id"`},
		{"SELECT `x y` FROM t ORDER BY [x y] DESC", []string{"x y"}, SQLite, `"x y" DESC`},
		{"SELECT id FROM a UNION SELECT id FROM b ORDER BY id -- the union's order\n", []string{"id"}, Postgres, `"id"`},
		{"SELECT id, row_number() OVER (ORDER BY x) FROM t ORDER BY /* c */ id", []string{"id"}, Postgres, `"id"`},
	} {
		q, err := CompileSQL(tc.sql, nil, &Page{Keyset: tc.keyset, Key: testKey}, tc.d)
		if err != nil {
			t.Errorf("%q: %v", tc.sql, err)
			continue
		}
		if q.page.order != tc.order {
			t.Errorf("%q: order %q, want %q", tc.sql, q.page.order, tc.order)
		}
	}
	if _, err := CompileSQL("SELECT Id FROM t ORDER BY Id", nil, &Page{Keyset: []string{"Id"}, Key: testKey}, Postgres); err == nil {
		t.Error("PostgreSQL folds unquoted Id to id; a keyset \"Id\" must not match it")
	}
}

// TestBindSQL: what each request binds, in both dialects.
func TestBindSQL(t *testing.T) {
	params := []Param{
		{Name: "customer_id", Type: Int64, Required: true, Min: "1"},
		{Name: "region", Type: String, Default: "north", MaxLen: 8},
		{Name: "since", Type: Timestamp},
		{Name: "ids", Type: Int64, List: true, Default: "1,2"},
	}
	sql := "SELECT * FROM orders WHERE customer_id = :customer_id AND region = :region AND (:since::timestamptz IS NULL OR created_at >= :since) AND id IN (:ids)"
	pg := mustSQL(t, sql, params, nil, Postgres)
	lite := mustSQL(t, strings.ReplaceAll(sql, "::timestamptz", ""), params, nil, SQLite)
	since := time.Date(2025, 1, 1, 0, 0, 0, 0, time.UTC)
	tests := []struct {
		q      string
		pgSQL  string
		args   []any
		params string
	}{
		{"customer_id=7",
			"SELECT * FROM orders WHERE customer_id = $1 AND region = $2 AND ($3::timestamptz IS NULL OR created_at >= $4) AND id IN ($5, $6)",
			[]any{int64(7), "north", nil, nil, int64(1), int64(2)}, "customer_id=7&ids=1,2&region=north"},
		{"customer_id=7&region=s%C3%BCd&since=2025-01-01T01:00:00%2B01:00&ids=3,4,5",
			"SELECT * FROM orders WHERE customer_id = $1 AND region = $2 AND ($3::timestamptz IS NULL OR created_at >= $4) AND id IN ($5, $6, $7)",
			[]any{int64(7), "süd", since, since, int64(3), int64(4), int64(5)},
			"customer_id=7&ids=3,4,5&region=süd&since=2025-01-01T00:00:00Z"},
		{"ids=9&customer_id=1&region=a%26b%3Dc",
			"SELECT * FROM orders WHERE customer_id = $1 AND region = $2 AND ($3::timestamptz IS NULL OR created_at >= $4) AND id IN ($5)",
			[]any{int64(1), "a&b=c", nil, nil, int64(9)}, "customer_id=1&ids=9&region=a%26b%3Dc"},
	}
	for _, tc := range tests {
		b, err := pg.Bind(query(t, tc.q), false)
		if err != nil {
			t.Errorf("%q: %v", tc.q, err)
			continue
		}
		if b.SQL != tc.pgSQL || !reflect.DeepEqual(b.Args, tc.args) || b.Params != tc.params || b.Limit != 0 {
			t.Errorf("%q:\n got %q %#v %q %d\nwant %q %#v %q", tc.q, b.SQL, b.Args, b.Params, b.Limit, tc.pgSQL, tc.args, tc.params)
		}
		lb, err := lite.Bind(query(t, tc.q), false)
		if err != nil {
			t.Errorf("sqlite %q: %v", tc.q, err)
			continue
		}
		if want := strings.NewReplacer("::timestamptz", "").Replace(dollarsToQ(tc.pgSQL)); lb.SQL != want || !reflect.DeepEqual(lb.Args, tc.args) {
			t.Errorf("sqlite %q:\n got %q\nwant %q", tc.q, lb.SQL, want)
		}
	}
}

// dollarsToQ rewrites $n placeholders as ?.
func dollarsToQ(s string) string {
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] == '$' {
			b.WriteByte('?')
			for i+1 < len(s) && isDigit(s[i+1]) {
				i++
			}
			continue
		}
		b.WriteByte(s[i])
	}
	return b.String()
}

// TestBindSQLRefuses: every refusal names the parameter and its reason.
func TestBindSQLRefuses(t *testing.T) {
	q := mustSQL(t, ordersSQL+"", []Param{{Name: "customer_id", Type: Int64, Required: true, Min: "1"}}, ordersPage(), Postgres)
	plain := mustSQL(t, "SELECT * FROM t WHERE a = :a", []Param{{Name: "a", Type: String, MaxLen: 4}}, nil, SQLite)
	tests := []struct {
		q      *SQLQuery
		in     string
		paged  bool
		param  string
		reason string
	}{
		{q, "", true, "customer_id", ReasonMissingParameter},
		{q, "customer_id=abc", true, "customer_id", ReasonInvalidParameter},
		{q, "customer_id=0", true, "customer_id", ReasonInvalidParameter},
		{q, "customer_id=1%3B%20DROP%20TABLE%20x", true, "customer_id", ReasonInvalidParameter},
		{q, "customer_id=%27%20OR%201=1%20--", true, "customer_id", ReasonInvalidParameter},
		{q, "customer_id=1&customer_id=2", true, "customer_id", ReasonDuplicateParameter},
		{q, "customer_id=1&zeta=1&alpha=2", true, "alpha", ReasonUnknownParameter},
		{q, "customer_id=1&Customer_id=1", true, "Customer_id", ReasonUnknownParameter},
		{q, "customer_id=1&limit=0", true, "limit", ReasonInvalidLimit},
		{q, "customer_id=1&limit=1001", true, "limit", ReasonInvalidLimit},
		{q, "customer_id=1&limit=10&limit=10", true, "limit", ReasonDuplicateParameter},
		{q, "customer_id=1&limit=%2B5", true, "limit", ReasonInvalidLimit},
		{q, "customer_id=1&limit=5", false, "limit", ReasonInvalidLimit},
		{q, "customer_id=1&cursor=abc", false, "cursor", ReasonInvalidCursor},
		{q, "customer_id=1&cursor=abc", true, "cursor", ReasonInvalidCursor},
		{plain, "a=abcde", false, "a", ReasonInvalidParameter},
		{plain, "a=%00", false, "a", ReasonInvalidParameter},
		{plain, "a=%FF", false, "a", ReasonInvalidParameter},
		{plain, "limit=5", true, "limit", ReasonUnknownParameter},
		{plain, "cursor=x", true, "cursor", ReasonUnknownParameter},
	}
	for _, tc := range tests {
		b, err := tc.q.Bind(query(t, tc.in), tc.paged)
		var e *Error
		if !errors.As(err, &e) {
			t.Errorf("%q: got %+v, %v; want an *Error", tc.in, b, err)
			continue
		}
		if e.Param != tc.param || e.Reason != tc.reason || !strings.Contains(e.Message, tc.param) {
			t.Errorf("%q: %+v, want param %q reason %q", tc.in, e, tc.param, tc.reason)
		}
	}
}

// TestBindSQLStaticMatchesBuilt: a query without lists takes its SQL from
// the text built at compile time; it must equal what the builder makes for
// every shape.
func TestBindSQLStaticMatchesBuilt(t *testing.T) {
	params := []Param{{Name: "customer_id", Type: Int64, Required: true}}
	for _, d := range []Dialect{Postgres, SQLite} {
		q := mustSQL(t, ordersSQL, params, ordersPage(), d)
		first, err := q.Bind(query(t, "customer_id=5&limit=2"), true)
		if err != nil {
			t.Fatal(err)
		}
		at := time.Date(2025, 3, 1, 12, 0, 0, 5, time.UTC)
		cur, err := q.NextCursor(first, []any{at, int64(77)})
		if err != nil {
			t.Fatal(err)
		}
		for _, tc := range []struct {
			in    string
			paged bool
		}{{"customer_id=5", false}, {"customer_id=5&limit=2", true}, {"customer_id=5&limit=2&cursor=" + cur, true}} {
			b, err := q.Bind(query(t, tc.in), tc.paged)
			if err != nil {
				t.Fatalf("%v %q: %v", d, tc.in, err)
			}
			bb := builder{d: d}
			var after []any
			if b.cursor {
				after = []any{at, int64(77)}
			}
			q.build(&bb, []any{int64(5)}, tc.paged, after, b.Limit)
			if string(bb.sql) != b.SQL || !reflect.DeepEqual(bb.args, b.Args) {
				t.Errorf("%v %q:\nstatic %q %v\n built %q %v", d, tc.in, b.SQL, b.Args, bb.sql, bb.args)
			}
		}
	}
}

// TestPagedSQL: the wrapping, the limit (one more row than the page) and
// the cursor's values as arguments after the query's own.
func TestPagedSQL(t *testing.T) {
	q := mustSQL(t, ordersSQL+" -- newest first", []Param{{Name: "customer_id", Type: Int64, Required: true}}, ordersPage(), Postgres)
	b, err := q.Bind(query(t, "customer_id=5"), true)
	if err != nil {
		t.Fatal(err)
	}
	wantFirst := "SELECT * FROM (\n" + ordersSQL[:len(ordersSQL)-len("ORDER BY created_at DESC, id DESC")-len(" customer_id = :customer_id ")] +
		" customer_id = $1 ORDER BY created_at DESC, id DESC -- newest first\n) AS levee_page ORDER BY \"created_at\" DESC, \"id\" DESC LIMIT $2"
	if b.SQL != wantFirst || !reflect.DeepEqual(b.Args, []any{int64(5), int64(101)}) || b.Limit != 100 {
		t.Errorf("first page:\n got %q %v %d\nwant %q", b.SQL, b.Args, b.Limit, wantFirst)
	}
	at := time.Date(2025, 3, 1, 12, 0, 0, 0, time.UTC)
	cur, err := q.NextCursor(b, []any{at, int64(9)})
	if err != nil {
		t.Fatal(err)
	}
	b2, err := q.Bind(query(t, "limit=10&cursor="+cur+"&customer_id=5"), true)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasSuffix(b2.SQL, `) AS levee_page WHERE ("created_at", "id") < ($2, $3) ORDER BY "created_at" DESC, "id" DESC LIMIT $4`) ||
		!reflect.DeepEqual(b2.Args, []any{int64(5), at, int64(9), int64(11)}) || b2.Limit != 10 {
		t.Errorf("second page: %q %v", b2.SQL, b2.Args)
	}
	// The cursor is bound to the parameters: another customer's request
	// cannot use it.
	_, err = q.Bind(query(t, "cursor="+cur+"&customer_id=6"), true)
	var e *Error
	if !errors.As(err, &e) || e.Reason != ReasonInvalidCursor {
		t.Errorf("foreign parameters: %v, want invalid_cursor", err)
	}
	// An empty cursor= is the first page.
	if b3, err := q.Bind(query(t, "cursor=&customer_id=5"), true); err != nil || b3.SQL != wantFirst {
		t.Errorf("empty cursor: %q, %v", b3.SQL, err)
	}
	// Unpaged (NDJSON, CSV): the SQL as written.
	if b4, err := q.Bind(query(t, "customer_id=5"), false); err != nil || !strings.HasPrefix(b4.SQL, "SELECT id,") || len(b4.Args) != 1 {
		t.Errorf("unpaged: %q %v, %v", b4.SQL, b4.Args, err)
	}
}

// TestPlaceholderSeparated pins the fuzz crasher "0:A0": a placeholder
// right after a name or number byte must not fuse with it ("0$1" is one
// token to PostgreSQL, as "a$1" is an identifier).
func TestPlaceholderSeparated(t *testing.T) {
	for _, tc := range []struct{ sql, pg string }{
		{"SELECT 0:A0", "SELECT 0 $1"},
		{"SELECT a[lo:hi] FROM t", "SELECT a[lo $1] FROM t"},
		{"SELECT :hi$q$x$q$", "SELECT $1 $q$x$q$"},
		{"SELECT (:hi)", "SELECT ($1)"},
	} {
		var params []Param
		for _, n := range []string{"A0", "hi"} {
			if strings.Contains(tc.sql, ":"+n) {
				params = append(params, Param{Name: n, Type: Int64, Default: "1"})
			}
		}
		b, err := mustSQL(t, tc.sql, params, nil, Postgres).Bind(nil, false)
		if err != nil || b.SQL != tc.pg || countPlaceholders(b.SQL, Postgres) != len(b.Args) {
			t.Errorf("%q: %q, %v; want %q", tc.sql, b.SQL, err, tc.pg)
		}
	}
}
