package dataquery

import (
	"errors"
	"fmt"
	"strconv"
	"strings"
)

// Page configures keyset pagination of one route's JSON answers.
//
// Keyset names the columns that order the rows and make each row's place
// unique (the last one usually the primary key); they must not be NULL in
// any row, since a NULL cannot be compared. Default is the page size when
// the request sends no limit= (0 means DefaultPageSize); Max is the largest
// limit= accepted (0 means DefaultMaxPageSize, at most MaxPageSize). Key
// signs the cursors (at least MinCursorKeyLen bytes, secret); Scope is
// what, besides the request's parameters, a cursor is bound to: the
// route's name and version (e.g. "orders-v1@3"), so a cursor from another
// route or an earlier version is refused.
type Page struct {
	Keyset  []string
	Default int
	Max     int
	Key     []byte
	Scope   string
}

// Bounds of paging.
const (
	DefaultPageSize    = 100
	DefaultMaxPageSize = 1000
	MaxPageSize        = 10000
	MaxKeyset          = 8
	MinCursorKeyLen    = 16
)

// pager is a compiled Page: keyset columns with their directions.
type pager struct {
	keyset []string
	quoted []string
	tuple  string // the quoted keyset joined by ", "
	order  string // the ORDER BY list, with directions
	desc   []bool
	def    int
	max    int
	signer *signer
	scope  string
}

func newPager(p *Page, d Dialect) (*pager, error) {
	g := &pager{def: p.Default, max: p.Max, signer: newSigner(p.Key), scope: p.Scope}
	if g.def == 0 {
		g.def = DefaultPageSize
	}
	if g.max == 0 {
		g.max = max(DefaultMaxPageSize, g.def)
	}
	switch {
	case len(p.Keyset) == 0 || len(p.Keyset) > MaxKeyset:
		return nil, fmt.Errorf("page: keyset needs 1 to %d columns, has %d", MaxKeyset, len(p.Keyset))
	case g.max < 1 || g.max > MaxPageSize:
		return nil, fmt.Errorf("page: max %d out of range [1, %d]", g.max, MaxPageSize)
	case g.def < 1 || g.def > g.max:
		return nil, fmt.Errorf("page: default %d out of range [1, max %d]", g.def, g.max)
	case len(p.Key) < MinCursorKeyLen:
		return nil, fmt.Errorf("page: cursor key has %d bytes, needs at least %d", len(p.Key), MinCursorKeyLen)
	case strings.IndexByte(p.Scope, 0) >= 0:
		return nil, errors.New("page: scope holds a NUL byte")
	}
	for i, c := range p.Keyset {
		if err := checkIdent(c); err != nil {
			return nil, fmt.Errorf("page: keyset column %q: %w", clip(c), err)
		}
		for _, o := range p.Keyset[:i] {
			if o == c {
				return nil, fmt.Errorf("page: keyset column %q named twice", c)
			}
		}
		g.quoted = append(g.quoted, d.QuoteIdent(c))
	}
	g.tuple = strings.Join(g.quoted, ", ")
	g.keyset = append([]string(nil), p.Keyset...)
	g.desc = make([]bool, len(p.Keyset))
	return g, nil
}

// checkIdent refuses names quoting cannot carry or PostgreSQL would
// truncate.
func checkIdent(name string) error {
	switch {
	case name == "":
		return errors.New("empty name")
	case len(name) > maxIdentLen:
		return fmt.Errorf("longer than %d bytes", maxIdentLen)
	case strings.IndexByte(name, 0) >= 0:
		return errors.New("holds a NUL byte")
	case !validUTF8(name):
		return errors.New("not valid UTF-8")
	}
	return nil
}

// orderItem is one ORDER BY column with its direction.
type orderItem struct {
	name string
	desc bool
}

// lastOrderBy finds the last ORDER BY outside parentheses and reads its
// items, each a column name, optionally qualified (the last part counts) and
// followed by ASC or DESC. found is false without one; tail reports a
// LIMIT, OFFSET, FETCH or FOR after it. Unquoted names are folded to lower
// case, as PostgreSQL does.
func lastOrderBy(sql string, toks []token) (items []orderItem, found, tail bool, err error) {
	word := func(i int, w string) bool {
		return i < len(toks) && toks[i].kind == tWord && toks[i].depth == 0 &&
			strings.EqualFold(sql[toks[i].start:toks[i].end], w)
	}
	at := -1
	for i := range toks {
		if word(i, "ORDER") && word(i+1, "BY") {
			at = i + 2
		}
	}
	if at < 0 {
		return nil, false, false, nil
	}
	bad := errors.New("the last ORDER BY must list plain column names, each with ASC or DESC at most")
	for i := at; ; {
		name, ok := identAt(sql, toks, i)
		if !ok {
			return nil, true, false, bad
		}
		i++
		for i+1 < len(toks) && toks[i].kind == tPunct && sql[toks[i].start:toks[i].end] == "." {
			if name, ok = identAt(sql, toks, i+1); !ok {
				return nil, true, false, bad
			}
			i += 2
		}
		it := orderItem{name: name}
		if word(i, "DESC") {
			it.desc = true
			i++
		} else if word(i, "ASC") {
			i++
		}
		items = append(items, it)
		switch {
		case i == len(toks):
			return items, true, false, nil
		case toks[i].kind == tPunct && sql[toks[i].start:toks[i].end] == ",":
			i++
		case word(i, "LIMIT") || word(i, "OFFSET") || word(i, "FETCH") || word(i, "FOR"):
			return items, true, true, nil
		default:
			return nil, true, false, bad
		}
	}
}

// identAt returns the identifier at toks[i]: a bare word folded to lower
// case, or a quoted identifier unquoted.
func identAt(sql string, toks []token, i int) (string, bool) {
	if i >= len(toks) || toks[i].depth != 0 {
		return "", false
	}
	t := sql[toks[i].start:toks[i].end]
	switch toks[i].kind {
	case tWord:
		return strings.ToLower(t), true
	case tQIdent:
		q := t[0]
		inner := t[1 : len(t)-1]
		if q == '[' {
			return inner, true
		}
		return strings.ReplaceAll(inner, string([]byte{q, q}), string(q)), true
	}
	return "", false
}

// matchOrder sets the pager's directions from an ORDER BY that must list
// exactly the keyset, in order.
func (g *pager) matchOrder(items []orderItem, d Dialect) error {
	same := len(items) == len(g.keyset)
	for i := 0; same && i < len(items); i++ {
		same = items[i].name == g.keyset[i] || d == SQLite && strings.EqualFold(items[i].name, g.keyset[i])
	}
	if !same {
		names := make([]string, len(items))
		for i, it := range items {
			names[i] = it.name
		}
		return fmt.Errorf("page: the ORDER BY columns [%s] must be the keyset [%s], in that order",
			strings.Join(names, ", "), strings.Join(g.keyset, ", "))
	}
	for i, it := range items {
		g.desc[i] = it.desc
	}
	g.order = g.orderText()
	return nil
}

// limit reads limit=: absent is the default; otherwise a decimal in
// [1, max].
func (g *pager) limit(vals []string) (int, *Error) {
	if len(vals) == 0 {
		return g.def, nil
	}
	if len(vals) > 1 {
		return 0, paramErr("limit", ReasonDuplicateParameter, `parameter "limit" given more than once`)
	}
	n, ok := parseInt64(vals[0])
	if !ok || n < 1 || n > int64(g.max) {
		return 0, paramErr("limit", ReasonInvalidLimit,
			"limit must be an integer from 1 to "+strconv.Itoa(g.max)+", not "+quote(vals[0]))
	}
	return int(n), nil
}

// builder accumulates a statement and its arguments, numbering
// placeholders as it goes.
// With skip it collects only the arguments, for a statement whose text
// was built at compile time.
type builder struct {
	d    Dialect
	skip bool
	sql  []byte
	args []any
	// names, when not nil, gets name for each argument: what the
	// argument is the value of (ArgParam; the error path only).
	names *[]string
	name  string
}

func (b *builder) text(s string) {
	if !b.skip {
		b.sql = append(b.sql, s...)
	}
}

func (b *builder) arg(v any) {
	b.args = append(b.args, v)
	if b.names != nil {
		*b.names = append(*b.names, b.name)
	}
	if !b.skip {
		b.sql = b.d.appendPlaceholder(b.sql, len(b.args))
	}
}

// predicate appends the keyset condition "after the row holding vals".
// With one direction for every column it is a row comparison, which
// PostgreSQL can answer from a composite index:
//
//	("a", "b") > ($1, $2)            (< when descending)
//
// With mixed directions it is the expanded form, one disjunct per column:
//
//	("a" > $1 OR ("a" = $2 AND "b" < $3))
//
// Each occurrence gets its own placeholder, so both dialects bind the same
// way and the placeholders always number len(Args).
func (g *pager) predicate(b *builder, vals []any) {
	b.name = "cursor"
	mixed := false
	for _, d := range g.desc[1:] {
		mixed = mixed || d != g.desc[0]
	}
	op := func(desc bool) string {
		if desc {
			return " < "
		}
		return " > "
	}
	if len(vals) == 1 {
		b.text(g.quoted[0])
		b.text(op(g.desc[0]))
		b.arg(vals[0])
		return
	}
	if !mixed {
		b.text("(")
		b.text(g.tuple)
		b.text(")")
		b.text(op(g.desc[0]))
		b.text("(")
		for i, v := range vals {
			if i > 0 {
				b.text(", ")
			}
			b.arg(v)
		}
		b.text(")")
		return
	}
	b.text("(")
	for i := range vals {
		if i > 0 {
			b.text(" OR ")
		}
		if i > 0 {
			b.text("(")
		}
		for j := 0; j < i; j++ {
			b.text(g.quoted[j])
			b.text(" = ")
			b.arg(vals[j])
			b.text(" AND ")
		}
		b.text(g.quoted[i])
		b.text(op(g.desc[i]))
		b.arg(vals[i])
		if i > 0 {
			b.text(")")
		}
	}
	b.text(")")
}

// orderText is the ORDER BY list of the keyset with its directions.
func (g *pager) orderText() string {
	var s strings.Builder
	for i, q := range g.quoted {
		if i > 0 {
			s.WriteString(", ")
		}
		s.WriteString(q)
		if g.desc[i] {
			s.WriteString(" DESC")
		}
	}
	return s.String()
}
