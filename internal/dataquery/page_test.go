package dataquery

import (
	"cmp"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"testing"
)

// TestPredicateShapes: the text of the keyset condition for one column,
// uniform and mixed directions.
func TestPredicateShapes(t *testing.T) {
	tests := []struct {
		desc []bool
		pg   string
	}{
		{[]bool{false}, `"k0" > $1`},
		{[]bool{true}, `"k0" < $1`},
		{[]bool{false, false}, `("k0", "k1") > ($1, $2)`},
		{[]bool{true, true, true}, `("k0", "k1", "k2") < ($1, $2, $3)`},
		{[]bool{true, false}, `("k0" < $1 OR ("k0" = $2 AND "k1" > $3))`},
		{[]bool{false, true, false}, `("k0" > $1 OR ("k0" = $2 AND "k1" < $3) OR ("k0" = $4 AND "k1" = $5 AND "k2" > $6))`},
	}
	for _, tc := range tests {
		g := testPager(t, tc.desc)
		vals := make([]any, len(tc.desc))
		for i := range vals {
			vals[i] = int64(i)
		}
		for _, d := range []Dialect{Postgres, SQLite} {
			b := builder{d: d}
			g.predicate(&b, vals)
			want := tc.pg
			if d == SQLite {
				want = dollarsToQ(want)
			}
			if string(b.sql) != want {
				t.Errorf("%v %v: %q, want %q", tc.desc, d, b.sql, want)
			}
			if n := countPlaceholders(string(b.sql), d); n != len(b.args) {
				t.Errorf("%v %v: %d placeholders, %d args", tc.desc, d, n, len(b.args))
			}
		}
	}
}

func testPager(t *testing.T, desc []bool) *pager {
	t.Helper()
	var keyset []string
	var items []orderItem
	for i, d := range desc {
		keyset = append(keyset, "k"+strconv.Itoa(i))
		items = append(items, orderItem{name: keyset[i], desc: d})
	}
	g, err := newPager(&Page{Keyset: keyset, Key: testKey}, Postgres)
	if err != nil {
		t.Fatal(err)
	}
	if err := g.matchOrder(items, Postgres); err != nil {
		t.Fatal(err)
	}
	return g
}

// TestPredicateSemantics: for every direction mix of up to three columns,
// the rows the generated condition admits after each row are exactly the
// rows that follow it in the keyset order. The condition is evaluated by a
// small interpreter of its text, not by the code that built it.
func TestPredicateSemantics(t *testing.T) {
	for n := 1; n <= 3; n++ {
		for mask := 0; mask < 1<<n; mask++ {
			desc := make([]bool, n)
			for i := range desc {
				desc[i] = mask&(1<<i) != 0
			}
			g := testPager(t, desc)
			rows := allRows(n, 3)
			slices.SortFunc(rows, func(a, b []int64) int {
				for i := range a {
					if c := cmp.Compare(a[i], b[i]); c != 0 {
						if desc[i] {
							return -c
						}
						return c
					}
				}
				return 0
			})
			for i, cur := range rows {
				b := builder{d: Postgres}
				vals := make([]any, n)
				for j, v := range cur {
					vals[j] = v
				}
				g.predicate(&b, vals)
				var got [][]int64
				for _, r := range rows {
					ok, err := evalPredicate(string(b.sql), b.args, r)
					if err != nil {
						t.Fatalf("%q: %v", b.sql, err)
					}
					if ok {
						got = append(got, r)
					}
				}
				if !slices.EqualFunc(got, rows[i+1:], slices.Equal) {
					t.Fatalf("directions %v after %v: %q admits %v, want %v", desc, cur, b.sql, got, rows[i+1:])
				}
			}
		}
	}
}

func allRows(n, base int) [][]int64 {
	if n == 0 {
		return [][]int64{{}}
	}
	var out [][]int64
	for _, r := range allRows(n-1, base) {
		for v := 0; v < base; v++ {
			out = append(out, append(slices.Clone(r), int64(v)))
		}
	}
	return out
}

// evalPredicate interprets the subset of SQL the keyset condition uses:
// OR, AND, parentheses, = < >, row values, "kN" columns and $n parameters
// (int64), on a row whose kN is row[N].
func evalPredicate(sql string, args []any, row []int64) (bool, error) {
	p := &predParser{toks: strings.Fields(strings.NewReplacer("(", " ( ", ")", " ) ", ",", " , ").Replace(sql)), args: args, row: row}
	v, err := p.or()
	if err == nil && p.i != len(p.toks) {
		err = fmt.Errorf("trailing %q", p.toks[p.i:])
	}
	return v, err
}

type predParser struct {
	toks []string
	i    int
	args []any
	row  []int64
}

func (p *predParser) peek(k int) string {
	if p.i+k < len(p.toks) {
		return p.toks[p.i+k]
	}
	return ""
}

func (p *predParser) or() (bool, error) {
	v, err := p.and()
	for err == nil && p.peek(0) == "OR" {
		p.i++
		var w bool
		w, err = p.and()
		v = v || w
	}
	return v, err
}

func (p *predParser) and() (bool, error) {
	v, err := p.cmp()
	for err == nil && p.peek(0) == "AND" {
		p.i++
		var w bool
		w, err = p.cmp()
		v = v && w
	}
	return v, err
}

func (p *predParser) cmp() (bool, error) {
	if p.peek(0) == "(" && p.peek(2) != "," {
		p.i++
		v, err := p.or()
		if err != nil || p.peek(0) != ")" {
			return false, fmt.Errorf("want ) at %d: %v", p.i, err)
		}
		p.i++
		return v, nil
	}
	l, err := p.operand()
	if err != nil {
		return false, err
	}
	op := p.peek(0)
	p.i++
	r, err := p.operand()
	if err != nil {
		return false, err
	}
	if len(l) != len(r) {
		return false, fmt.Errorf("row sizes %d and %d", len(l), len(r))
	}
	c := slices.Compare(l, r)
	switch op {
	case "=":
		return c == 0, nil
	case "<":
		return c < 0, nil
	case ">":
		return c > 0, nil
	}
	return false, fmt.Errorf("operator %q", op)
}

func (p *predParser) operand() ([]int64, error) {
	if p.peek(0) != "(" {
		v, err := p.scalar()
		return []int64{v}, err
	}
	p.i++
	var out []int64
	for {
		v, err := p.scalar()
		if err != nil {
			return nil, err
		}
		out = append(out, v)
		switch p.peek(0) {
		case ",":
			p.i++
		case ")":
			p.i++
			return out, nil
		default:
			return nil, fmt.Errorf("want , or ) at %d", p.i)
		}
	}
}

func (p *predParser) scalar() (int64, error) {
	t := p.peek(0)
	p.i++
	switch {
	case strings.HasPrefix(t, `"k`):
		n, err := strconv.Atoi(strings.Trim(t, `"k`))
		if err != nil || n >= len(p.row) {
			return 0, fmt.Errorf("column %q", t)
		}
		return p.row[n], nil
	case strings.HasPrefix(t, "$"):
		n, err := strconv.Atoi(t[1:])
		if err != nil || n < 1 || n > len(p.args) {
			return 0, fmt.Errorf("parameter %q", t)
		}
		return p.args[n-1].(int64), nil
	}
	return 0, fmt.Errorf("operand %q", t)
}

// countPlaceholders counts the ? or $n placeholders of a built
// statement, outside its strings and comments; -1 if it does not lex.
func countPlaceholders(sql string, d Dialect) int {
	toks, err := lexBuilt(sql, d)
	if err != nil {
		return -1
	}
	n := 0
	for _, t := range toks {
		if t.kind == tPositional {
			n++
		}
	}
	return n
}

// TestLimit: limit= parsing and its bounds.
func TestLimit(t *testing.T) {
	g, err := newPager(&Page{Keyset: []string{"id"}, Default: 20, Max: 50, Key: testKey}, Postgres)
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		in   []string
		want int
	}{
		{nil, 20}, {[]string{"1"}, 1}, {[]string{"50"}, 50}, {[]string{"51"}, 0}, {[]string{"0"}, 0},
		{[]string{"-1"}, 0}, {[]string{"05"}, 0}, {[]string{""}, 0}, {[]string{"1e1"}, 0},
		{[]string{"99999999999999999999"}, 0}, {[]string{"1", "2"}, 0},
	} {
		n, e := g.limit(tc.in)
		if n != tc.want || (e == nil) != (tc.want != 0) {
			t.Errorf("limit %q: %d, %v; want %d", tc.in, n, e, tc.want)
		}
	}
	if g, _ := newPager(&Page{Keyset: []string{"id"}, Key: testKey}, Postgres); g.def != DefaultPageSize || g.max != DefaultMaxPageSize {
		t.Errorf("zero Page: default %d max %d", g.def, g.max)
	}
}
