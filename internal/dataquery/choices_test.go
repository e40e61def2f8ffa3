package dataquery

import (
	"errors"
	"net/url"
	"strings"
	"testing"
	"unicode/utf8"
)

// choicesSpec is customersSpec with allowed orders.
func choicesSpec() TableSpec {
	spec := customersSpec()
	spec.Filters["name"] = append(spec.Filters["name"], OpIlike)
	spec.Orders = []OrderSpec{
		{Order: "id.desc", Keyset: "id.desc"},
		{Order: "created_at.desc", Keyset: "created_at.desc,id.desc"},
		{Order: "region,score.desc", Keyset: "region,score.desc,id"},
	}
	return spec
}

func choicesQuery(t testing.TB, d Dialect) *TableQuery {
	page := &Page{Keyset: []string{"id"}, Default: 5, Max: 50, Key: testKey, Scope: "c@1"}
	return mustTable(t, choicesSpec(), page, d)
}

// TestSelectOrderSQL: select= and order= make the statement, keyset
// columns a select leaves out are fetched hidden, and both are part of
// the canonical parameters.
func TestSelectOrderSQL(t *testing.T) {
	q := choicesQuery(t, Postgres)
	cases := []struct {
		query, sql, params string
		hidden             int
	}{
		{"select=name,id", `SELECT "name", "id" FROM "customers" ORDER BY "id" LIMIT $1`, "select=name,id", 0},
		{"select=name", `SELECT "name", "id" FROM "customers" ORDER BY "id" LIMIT $1`, "select=name", 1},
		{"order=id.desc", `SELECT "id", "name", "region", "score", "active", "born", "created_at", "uid" FROM "customers" ORDER BY "id" DESC LIMIT $1`, "order=id.desc", 0},
		{"order=created_at.desc&select=name&region=eq.north",
			`SELECT "name", "created_at", "id" FROM "customers" WHERE "region" = $1 ORDER BY "created_at" DESC, "id" DESC LIMIT $2`,
			"region=eq.north&order=created_at.desc&select=name", 2},
		{"order=region.asc,score.desc&select=*", `SELECT "id", "name", "region", "score", "active", "born", "created_at", "uid" FROM "customers" ORDER BY "region", "score" DESC, "id" LIMIT $1`, "order=region.asc,score.desc", 0},
	}
	for _, c := range cases {
		b, err := q.Bind(query(t, c.query), true)
		if err != nil || b.SQL != c.sql || b.Params != c.params || b.Hidden != c.hidden {
			t.Errorf("%s:\n got %q %q hidden %d %v\nwant %q %q hidden %d", c.query, b.SQL, b.Params, b.Hidden, err, c.sql, c.params, c.hidden)
		}
	}
	// Unpaged: no hidden columns.
	b, err := q.Bind(query(t, "select=name&order=id.desc"), false)
	if err != nil || b.SQL != `SELECT "name" FROM "customers" ORDER BY "id" DESC` || b.Hidden != 0 {
		t.Errorf("unpaged: %q %d %v", b.SQL, b.Hidden, err)
	}
}

// TestFilterOpsSQL: not., ilike and logical groups.
func TestFilterOpsSQL(t *testing.T) {
	for _, d := range []Dialect{Postgres, SQLite} {
		q := choicesQuery(t, d)
		cases := []struct{ query, pg, lite string }{
			{"id=not.eq.3", `NOT ("id" = $1)`, `NOT ("id" = ?)`},
			{"name=ilike.*an*", `"name" ILIKE $1 ESCAPE '!'`, `"name" LIKE ? ESCAPE '!'`},
			{"name=not.is.null", `NOT ("name" IS NULL)`, `NOT ("name" IS NULL)`},
			{"or=(id.eq.1,and(region.eq.x,score.gt.2),name.not.like.a*)",
				`("id" = $1 OR ("region" = $2 AND "score" > $3) OR NOT ("name" LIKE $4 ESCAPE '!'))`,
				`("id" = ? OR ("region" = ? AND "score" > ?) OR NOT ("name" LIKE ? ESCAPE '!'))`},
			{"and=(id.gt.1,not.or(id.eq.5,id.in.(7,8)))", `("id" > $1 AND NOT ("id" = $2 OR "id" IN ($3, $4)))`, `("id" > ? AND NOT ("id" = ? OR "id" IN (?, ?)))`},
		}
		for _, c := range cases {
			b, err := q.Bind(query(t, c.query), false)
			want := c.pg
			if d == SQLite {
				want = c.lite
			}
			if err != nil || !strings.Contains(b.SQL, " WHERE "+want+" ORDER BY") {
				t.Errorf("%v %s: %q %v, want WHERE %s", d, c.query, b.SQL, err, want)
			}
		}
	}
}

// TestChoicesRefused: every refusal names its parameter.
func TestChoicesRefused(t *testing.T) {
	q := choicesQuery(t, Postgres)
	deep := "or=(id.eq.1,and(id.eq.2,or(id.eq.3,and(id.eq.4))))"
	many := "or=(" + strings.Repeat("id.eq.1,", MaxLogicTerms) + "id.eq.2)"
	cases := []struct{ query, param, reason string }{
		{"select=id,id", "select", ReasonInvalidParameter},
		{"select=nope", "select", ReasonInvalidParameter},
		{"select=", "select", ReasonInvalidParameter},
		{"select=a&select=b", "select", ReasonDuplicateParameter},
		{"order=name", "order", ReasonInvalidParameter},
		{"order=id.desc.nullsfirst", "order", ReasonInvalidParameter},
		{"order=id,id", "order", ReasonInvalidParameter},
		{deep, "or", ReasonInvalidParameter},
		{many, "or", ReasonInvalidParameter},
		{"or=(uid.eq.1)", "or", ReasonInvalidParameter},
		{"or=(created_at.eq.2020-01-01T00:00:00Z)", "or", ReasonOperatorNotAllowed},
		{"or=(x.eq.1)", "or", ReasonOperatorNotAllowed},
		{"or=(id.eq.1", "or", ReasonInvalidParameter},
		{`or=(name.eq."a)`, "or", ReasonInvalidParameter},
		{"or=(id.eq.1)x", "or", ReasonInvalidParameter},
		{"id=not.bogus.1", "id", ReasonOperatorNotAllowed},
		{"region=ilike.x", "region", ReasonOperatorNotAllowed},
	}
	for _, c := range cases {
		_, err := q.Bind(query(t, c.query), true)
		var e *Error
		if !errors.As(err, &e) || e.Param != c.param || e.Reason != c.reason {
			t.Errorf("%s: %v, want %s naming %s", c.query, err, c.reason, c.param)
		}
	}
	// A route without orders refuses order=.
	fixed := mustTable(t, customersSpec(), nil, Postgres)
	if _, err := fixed.Bind(query(t, "order=id"), false); err == nil || err.(*Error).Param != "order" {
		t.Errorf("order= on a fixed order: %v", err)
	}
}

// TestOrdersCompile: an allowed order needs a keyset beginning with it on
// a paged route, among the columns.
func TestOrdersCompile(t *testing.T) {
	page := &Page{Keyset: []string{"id"}, Key: testKey, Scope: "c@1"}
	for _, c := range []struct {
		o    OrderSpec
		page *Page
		want string
	}{
		{OrderSpec{Order: "created_at.desc"}, page, "has no keyset"},
		{OrderSpec{Order: "created_at.desc", Keyset: "created_at,id"}, page, "must begin with the order's items"},
		{OrderSpec{Order: "created_at.desc", Keyset: "id"}, page, "must begin with the order's items"},
		{OrderSpec{Order: "nope", Keyset: "nope"}, page, "not one of the columns"},
		{OrderSpec{Order: "id", Keyset: "id,nope"}, page, "not one of the columns"},
		{OrderSpec{Order: "id.nullslast", Keyset: "id"}, page, "not supported"},
		{OrderSpec{Order: "created_at.desc"}, nil, ""},
	} {
		spec := customersSpec()
		spec.Orders = []OrderSpec{c.o}
		_, err := CompileTable(spec, c.page, Postgres)
		if c.want == "" && err != nil || c.want != "" && (err == nil || !strings.Contains(err.Error(), c.want)) {
			t.Errorf("%+v: %v, want %q", c.o, err, c.want)
		}
	}
}

// TestValueChecksByDBType: PostgreSQL column types narrower than their
// kind are checked before the database sees the value.
func TestValueChecksByDBType(t *testing.T) {
	spec := TableSpec{Table: "t", Columns: []Column{
		{Name: "n", Kind: String, DBType: "numeric"}, {Name: "i4", Kind: Int64, DBType: "int4"},
		{Name: "i2", Kind: Int64, DBType: "int2"}, {Name: "f4", Kind: Float64, DBType: "float4"},
	}, Filters: map[string][]Op{"n": {OpEq, OpLt, OpIn}, "i4": {OpEq}, "i2": {OpEq}, "f4": {OpEq}}}
	q := mustTable(t, spec, nil, Postgres)
	for _, c := range []struct {
		query string
		ok    bool
	}{
		{"n=eq.12.50", true}, {"n=eq.-1e10", true}, {"n=eq.NaN", true}, {"n=eq..5", true}, {"n=eq.abc", false},
		{"n=eq.1e99999", false}, {"n=eq.1.2.3", false}, {"n=eq.", false}, {"n=in.(1,x)", false}, {"n=lt. 1", false},
		{"i4=eq.2147483647", true}, {"i4=eq.2147483648", false}, {"i4=eq.-2147483648", true},
		{"i2=eq.32767", true}, {"i2=eq.32768", false}, {"f4=eq.1e38", true}, {"f4=eq.1e39", false},
	} {
		_, err := q.Bind(query(t, c.query), false)
		if c.ok != (err == nil) {
			t.Errorf("%s: %v", c.query, err)
		}
		if err != nil && err.(*Error).Param != strings.SplitN(c.query, "=", 2)[0] {
			t.Errorf("%s: names %q", c.query, err.(*Error).Param)
		}
	}
	// SQLite reads any value: no check.
	if _, err := mustTable(t, spec, nil, SQLite).Bind(query(t, "n=eq.abc"), false); err != nil {
		t.Errorf("SQLite numeric: %v", err)
	}
	// like needs a text type.
	bad := TableSpec{Table: "t", Columns: []Column{{Name: "n", Kind: String, DBType: "numeric"}}, Filters: map[string][]Op{"n": {OpLike}}}
	if _, err := CompileTable(bad, nil, Postgres); err == nil {
		t.Error("like on a numeric column compiled")
	}
}

// TestCountStatements: the count reads at most max+1 rows of the filtered
// table, with the filters' arguments; the plan is EXPLAIN of the same.
func TestCountStatements(t *testing.T) {
	q := choicesQuery(t, Postgres)
	b, err := q.Bind(query(t, "region=eq.north&order=id.desc&select=name"), false)
	if err != nil {
		t.Fatal(err)
	}
	c, err := CountStatement(q, b, 100)
	if err != nil || c.SQL != `SELECT count(*) FROM (SELECT 1 FROM "customers" WHERE "region" = $1 LIMIT $2) AS levee_count` || len(c.Args) != 2 || c.Args[1] != int64(101) {
		t.Errorf("count: %q %v %v", c.SQL, c.Args, err)
	}
	p, err := PlanStatement(q, b)
	if err != nil || p.SQL != `EXPLAIN (FORMAT JSON) SELECT 1 FROM "customers" WHERE "region" = $1` || len(p.Args) != 1 {
		t.Errorf("plan: %q %v %v", p.SQL, p.Args, err)
	}
	if _, err := PlanStatement(choicesQuery(t, SQLite), b); err == nil {
		t.Error("SQLite plan accepted")
	}
	if n, err := ParsePlanRows([]byte(`[{"Plan": {"Node Type": "Seq Scan", "Plan Rows": 3573458}}]`)); err != nil || n != 3573458 {
		t.Errorf("plan rows %d %v", n, err)
	}
	for _, c := range []struct {
		first, rows int
		total       int64
		want        string
	}{{0, 25, 3573458, "0-24/3573458"}, {0, 0, 0, "*/0"}, {-1, 5, 9, "*/9"}} {
		if got := ContentRange(c.first, c.rows, c.total); got != c.want {
			t.Errorf("ContentRange(%d, %d, %d) = %q, want %q", c.first, c.rows, c.total, got, c.want)
		}
	}
}

// TestParsePrefer: PostgREST's count preferences among others.
func TestParsePrefer(t *testing.T) {
	for _, c := range []struct {
		h    []string
		want string
		ok   bool
	}{
		{nil, "", true}, {[]string{"return=minimal"}, "", true}, {[]string{"count=exact"}, "exact", true},
		{[]string{"return=minimal, count=planned"}, "planned", true}, {[]string{"count=estimated", "count=estimated"}, "estimated", true},
		{[]string{"count=exact", "count=planned"}, "", false}, {[]string{"count=all"}, "", false},
		{[]string{strings.Repeat("a,", 40)}, "", false},
	} {
		got, err := ParsePrefer(c.h)
		if got != c.want || (err == nil) != c.ok {
			t.Errorf("%q: %q %v", c.h, got, err)
		}
	}
}

// FuzzChoices: select=, order=, or= groups and Prefer never panic; a
// refusal is an *Error naming one of the keys; an accepted request's
// statement holds no request byte beyond the configuration's names and
// its placeholders number its arguments.
func FuzzChoices(f *testing.F) {
	for _, s := range []string{
		"select=name,id&order=created_at.desc", "order=region,score.desc&select=*", "or=(id.eq.1,and(region.eq.x,score.gt.2))",
		`or=(name.eq."a,b",name.like."x\"y*")`, "and=(id.gt.1,not.or(id.eq.5,id.in.(7,8)))", "select=id,id", "order=id.desc.nullslast",
		"or=(((", "or=(id.eq.1,", "id=not.eq.3&name=ilike.*a*", "or=(not.and(id.eq.1),name.is.null)",
	} {
		f.Add(s, "count=exact", false)
		f.Add(s, "return=minimal, count=planned", true)
	}
	qs := []*TableQuery{choicesQuery(f, Postgres), choicesQuery(f, SQLite)}
	f.Fuzz(func(t *testing.T, raw, prefer string, paged bool) {
		if _, err := ParsePrefer([]string{prefer}); err != nil {
			var e *Error
			if !errors.As(err, &e) || e.Param != "Prefer" {
				t.Fatalf("Prefer %q: %v", prefer, err)
			}
		}
		vals, _ := url.ParseQuery(raw)
		for _, q := range qs {
			b, err := q.Bind(vals, paged)
			if err != nil {
				if _, ok := err.(*Error); !ok {
					t.Fatalf("%q: error %T %v", raw, err, err)
				}
				continue
			}
			if n := countPlaceholders(b.SQL, q.d); n != len(b.Args) {
				t.Fatalf("%q: %d placeholders, %d args: %q", raw, n, len(b.Args), b.SQL)
			}
			if !utf8.ValidString(b.SQL) || strings.ContainsAny(b.SQL, "'\x00;") && !strings.Contains(b.SQL, "ESCAPE '!'") {
				t.Fatalf("%q: statement %q", raw, b.SQL)
			}
			for _, bad := range []string{"--", "/*"} {
				if strings.Contains(b.SQL, bad) {
					t.Fatalf("%q: statement %q holds %s", raw, b.SQL, bad)
				}
			}
			if c, err := CountStatement(q, b, 10); err == nil && countPlaceholders(c.SQL, q.d) != len(c.Args) && !paged {
				t.Fatalf("%q: count %q with %d args", raw, c.SQL, len(c.Args))
			}
		}
		// The parsers alone.
		for _, v := range vals["or"] {
			_, _ = ParseLogic(v, true)
		}
		for _, v := range vals["order"] {
			if names, desc, canon, err := ParseOrder(v); err == nil {
				if n2, d2, c2, err := ParseOrder(canon); err != nil || c2 != canon || len(n2) != len(names) || len(d2) != len(desc) {
					t.Fatalf("order %q: canon %q does not read back: %q %v", v, canon, c2, err)
				}
			}
		}
	})
}
