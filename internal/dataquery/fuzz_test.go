package dataquery

import (
	"net/url"
	"strings"
	"testing"
	"time"
)

// FuzzScanSQL: the lexer never panics; its tokens are in order, inside the
// SQL and non-overlapping; a placeholder is ':' and a name. When every
// placeholder found is declared, CompileSQL accepts the SQL or refuses it
// with an error, and a bound statement has as many placeholders as
// arguments.
func FuzzScanSQL(f *testing.F) {
	for _, s := range []string{
		ordersSQL, "SELECT :a::int, ':b', \":c\", $$:d$$, $t$ :e $t$ -- :f\n/* :g /* :h */ */ :i",
		"SELECT E'\\' :a', 'x\\', :b", "SELECT `:a`, [:b], :c", "SELECT * FROM t WHERE id IN (:ids) ORDER BY id DESC",
		"SELECT 1; SELECT 2", "SELECT $1, ?", "SELECT (1", "SELECT a[1:2], f(x := 1)", "SELECT '", "/*", "$a$",
	} {
		f.Add(s, false)
		f.Add(s, true)
	}
	f.Fuzz(func(t *testing.T, sql string, sqlite bool) {
		d := Postgres
		if sqlite {
			d = SQLite
		}
		toks, err := lex(sql, d)
		if err != nil {
			return
		}
		end := 0
		var params []Param
		seen := map[string]bool{}
		for _, tk := range toks {
			if tk.start < end || tk.end <= tk.start || tk.end > len(sql) || tk.depth < 0 {
				t.Fatalf("token %+v after offset %d in %q", tk, end, sql)
			}
			end = tk.end
			if tk.kind == tPlaceholder {
				name := sql[tk.start+1 : tk.end]
				if sql[tk.start] != ':' || checkPlaceholderName(name) != nil {
					t.Fatalf("placeholder %q in %q", sql[tk.start:tk.end], sql)
				}
				if !seen[name] && name != "limit" && name != "cursor" {
					seen[name] = true
					params = append(params, Param{Name: name, Type: String})
				}
			}
		}
		q, err := CompileSQL(sql, params, nil, d)
		if err != nil {
			return
		}
		vals := url.Values{}
		for _, p := range params {
			vals.Set(p.Name, "v")
		}
		b, err := q.Bind(vals, false)
		if err != nil {
			t.Fatalf("Bind of %q: %v", sql, err)
		}
		if n := countPlaceholders(b.SQL, d); n != len(b.Args) {
			t.Fatalf("%q: %d placeholders, %d args: %q", sql, n, len(b.Args), b.SQL)
		}
	})
}

// checkPlaceholderName is checkParamName without the reserved names and
// the length limit.
func checkPlaceholderName(n string) error {
	if len(n) > maxIdentLen {
		n = n[:maxIdentLen]
	}
	if n == "limit" || n == "cursor" {
		return nil
	}
	for i := 0; i < len(n); i++ {
		if !isIdentStart(n[i]) && !isDigit(n[i]) || i == 0 && isDigit(n[i]) {
			return errFuzzName
		}
	}
	return nil
}

var errFuzzName = &Error{Message: "bad placeholder name"}

// fuzzQueries are the compiled queries the Bind fuzz targets feed.
func fuzzSQLQueries(t testing.TB) []*SQLQuery {
	params := []Param{
		{Name: "i", Type: Int64, Min: "-5", Max: "1000"}, {Name: "f", Type: Float64}, {Name: "b", Type: Bool},
		{Name: "s", Type: String, MaxLen: 16}, {Name: "d", Type: Date}, {Name: "ts", Type: Timestamp, Min: "2000-01-01T00:00:00Z"},
		{Name: "u", Type: UUID}, {Name: "ids", Type: Int64, List: true, Default: "1", MaxItems: 5},
		{Name: "names", Type: String, List: true, Required: true},
	}
	sql := "SELECT x, y FROM t WHERE i = :i AND f = :f AND b = :b AND s = :s AND d = :d AND ts = :ts AND u = :u " +
		"AND id IN (:ids) AND name IN (:names) AND s2 = :s ORDER BY x DESC, y"
	page := &Page{Keyset: []string{"x", "y"}, Default: 3, Max: 10, Key: testKey, Scope: "fuzz@1"}
	var out []*SQLQuery
	for _, d := range []Dialect{Postgres, SQLite} {
		out = append(out, mustSQL(t, sql, params, page, d))
		out = append(out, mustSQL(t, "SELECT :a::int AS x", []Param{{Name: "a", Type: Int64, Default: "3"}}, nil, d))
	}
	return out
}

func fuzzTableQueries(t testing.TB) []*TableQuery {
	spec := customersSpec()
	spec.Order = []string{"created_at desc", "id"}
	page := &Page{Keyset: []string{"created_at", "id"}, Default: 5, Max: 50, Key: testKey, Scope: "customers@1"}
	return []*TableQuery{mustTable(t, spec, page, Postgres), mustTable(t, spec, page, SQLite)}
}

// FuzzBindSQL: Bind on arbitrary query strings never panics, refuses with
// an *Error, and otherwise returns a statement whose text is what the
// query's shape alone (the list lengths) makes: no request byte reaches the
// SQL. Its placeholders number its arguments.
func FuzzBindSQL(f *testing.F) {
	qs := fuzzSQLQueries(f)
	first, _ := qs[0].Bind(url.Values{"names": {"a"}}, true)
	cur, _ := qs[0].NextCursor(first, []any{time.Unix(5, 0).UTC(), "k"})
	for _, s := range []string{
		"names=a,b&i=5&f=1.5&b=true&s=x&d=2024-02-29&ts=2025-01-01T00:00:00Z&u=123e4567-e89b-12d3-a456-426614174000",
		"names=a\\,b,c&ids=1,2,3,4,5&limit=10", "names=a&cursor=" + cur, "names=a&i=1%3B%20DROP%20TABLE%20x",
		"names=%27%20OR%201=1%20--", "a=7", "a=1&a=2", "names=%00", "x=1", "names=a&limit=0",
	} {
		for i := range qs {
			f.Add(s, i, true)
			f.Add(s, i, false)
		}
	}
	f.Fuzz(func(t *testing.T, raw string, which int, paged bool) {
		q := qs[uint(which)%uint(len(qs))]
		vals, _ := url.ParseQuery(raw)
		b, err := q.Bind(vals, paged)
		if err != nil {
			if _, ok := err.(*Error); !ok {
				t.Fatalf("%q: error %T %v is not an *Error", raw, err, err)
			}
			if e := err.(*Error); len(e.Param) > maxEcho+3 || len(e.Message) > 400 {
				t.Fatalf("%q: error echoes too much: %+v", raw, e)
			}
			return
		}
		checkBound(t, raw, b, q.d)
		// The same shape with every value blanked builds the same text.
		slots := make([]any, len(q.params))
		for i, p := range q.params {
			v, ok := vals[p.name]
			if !ok || !p.rule.list {
				continue
			}
			if len(v) == 0 {
				continue
			}
			items, _ := p.rule.value(p.name, v[0])
			slots[i] = make([]any, len(items.([]any)))
		}
		for i, p := range q.params {
			if _, ok := vals[p.name]; !ok && p.def != nil {
				if l, ok := p.def.([]any); ok {
					slots[i] = make([]any, len(l))
				}
			}
		}
		var after []any
		if b.cursor {
			after = make([]any, len(q.page.keyset))
		}
		bb := builder{d: q.d}
		q.build(&bb, slots, paged && q.page != nil, after, b.Limit)
		if string(bb.sql) != b.SQL {
			t.Fatalf("%q: SQL depends on values:\n got %q\nwant %q", raw, b.SQL, bb.sql)
		}
	})
}

// FuzzBindTable: as FuzzBindSQL for table mode; the statement's tokens
// are only keywords, the configured quoted names, the ESCAPE '!' literal,
// punctuation and placeholders.
func FuzzBindTable(f *testing.F) {
	qs := fuzzTableQueries(f)
	first, _ := qs[0].Bind(nil, true)
	cur, _ := qs[0].NextCursor(first, []any{time.Unix(5, 0).UTC(), int64(3)})
	for _, s := range []string{
		"id=eq.5&name=like.a*b%25_!&region=in.(north,south)&active=is.true", "created_at=gte.2025-01-01T00:00:00Z&created_at=lt.2026-01-01T00:00:00Z",
		"born=lt.2024-02-29&score=gte.-1.5e3&uid=in.(123e4567-e89b-12d3-a456-426614174000)", "cursor=" + cur + "&limit=5",
		"name=eq.%27%20OR%201=1%20--", "id=in.(1;DROP TABLE x)", "nope=eq.1", "id=is.null&name=neq.\"x\"",
	} {
		f.Add(s, 0, true)
		f.Add(s, 1, false)
	}
	f.Fuzz(func(t *testing.T, raw string, which int, paged bool) {
		q := qs[uint(which)%uint(len(qs))]
		vals, _ := url.ParseQuery(raw)
		b, err := q.Bind(vals, paged)
		if err != nil {
			if _, ok := err.(*Error); !ok {
				t.Fatalf("%q: error %T %v is not an *Error", raw, err, err)
			}
			return
		}
		checkBound(t, raw, b, q.d)
		toks, _ := lexBuilt(b.SQL, q.d)
		for _, tk := range toks {
			text := b.SQL[tk.start:tk.end]
			switch tk.kind {
			case tPositional, tPunct:
			case tWord:
				if !tableWords[text] {
					t.Fatalf("%q: word %q in %q", raw, text, b.SQL)
				}
			case tQIdent:
				if !strings.Contains(customersSelect, text) {
					t.Fatalf("%q: identifier %q in %q", raw, text, b.SQL)
				}
			case tString:
				if text != "'!'" {
					t.Fatalf("%q: literal %q in %q", raw, text, b.SQL)
				}
			default:
				t.Fatalf("%q: token %q in %q", raw, text, b.SQL)
			}
		}
	})
}

var tableWords = map[string]bool{
	"SELECT": true, "FROM": true, "WHERE": true, "AND": true, "OR": true, "IN": true, "IS": true, "NULL": true,
	"TRUE": true, "FALSE": true, "LIKE": true, "ESCAPE": true, "ORDER": true, "BY": true, "DESC": true, "LIMIT": true,
}

// checkBound: the statement lexes, its placeholders number its
// arguments, and the arguments are of the binding vocabulary.
func checkBound(t *testing.T, raw string, b Bound, d Dialect) {
	t.Helper()
	if n := countPlaceholders(b.SQL, d); n != len(b.Args) {
		t.Fatalf("%q: %d placeholders, %d args in %q", raw, n, len(b.Args), b.SQL)
	}
	for _, a := range b.Args {
		switch a.(type) {
		case nil, int64, float64, bool, string, time.Time:
		default:
			t.Fatalf("%q: argument of type %T", raw, a)
		}
	}
}

// FuzzDecodeCursor: decoding never panics; a cursor that decodes is the
// one encoding of its values (re-encoding gives the same text), and
// anything else is invalid_cursor.
func FuzzDecodeCursor(f *testing.F) {
	for _, vals := range [][]any{{int64(1)}, {"a", 1.5, true, time.Unix(1, 2).UTC()}, {int64(-1), int64(2)}} {
		c, _ := EncodeCursor(testKey, "b", vals)
		f.Add(c)
		f.Add(c[:len(c)-2])
	}
	f.Add("")
	f.Add(strings.Repeat("A", 2000))
	f.Fuzz(func(t *testing.T, c string) {
		vals, err := DecodeCursor(testKey, "b", c)
		if err != nil {
			if e, ok := err.(*Error); !ok || e.Reason != ReasonInvalidCursor {
				t.Fatalf("%q: %v", c, err)
			}
			return
		}
		again, err := EncodeCursor(testKey, "b", vals)
		if err != nil || again != c {
			t.Fatalf("%q decodes to %v, which encodes to %q, %v", c, vals, again, err)
		}
		// And the payload parser alone, on the fuzzer's bytes, agrees
		// with itself.
		if p, err := parseCursorPayload([]byte(c)); err == nil {
			if _, err := encodeCursor(newSigner(testKey), "b", "", false, p); err != nil && len(c) < 600 {
				t.Fatalf("payload %q parsed to %v that does not encode: %v", c, p, err)
			}
		}
	})
}
