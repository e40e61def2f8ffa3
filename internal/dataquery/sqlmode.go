package dataquery

import (
	"errors"
	"fmt"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"unicode/utf8"
)

// Bounds of a SQL-mode declaration.
const (
	MaxSQLBytes = 64 << 10
	MaxParams   = 64
)

// SQLQuery is a compiled SQL-mode query. It is immutable and safe for
// concurrent use.
type SQLQuery struct {
	d       Dialect
	params  []sqlParam     // in declaration order
	index   map[string]int // name → params index
	byName  []int          // params indexes sorted by name
	pieces  []piece        // the SQL cut at its placeholders
	tail    string         // the SQL after the last placeholder
	hasList bool
	page    *pager
	// static holds the whole statement for each shape (unpaged, first
	// page, later page) when no list can change its length.
	static [3]string
	argCap int
	sqlCap int // a statement's usual length, to size its buffer once
}

type sqlParam struct {
	name     string
	rule     rule
	required bool
	def      any // parsed default; nil when none
}

// piece is SQL text followed by the placeholder of params[param].
type piece struct {
	text  string
	param int
}

// CompileSQL checks a SQL-mode declaration and compiles it. The SQL is one
// query with :name placeholders (see the lexer's rules in scan.go and the
// statement check's in statement.go: SELECT, WITH ... SELECT, VALUES or
// TABLE, at most one ';' at the end, no INSERT, UPDATE, DELETE, MERGE,
// INTO or COPY outside strings and quoted identifiers);
// every placeholder must be declared in params and every param used,
// else the error names both lists. A list param must appear as
// IN (:name) and binds one placeholder per item. With page, the SQL's
// last top-level ORDER BY must list exactly the keyset (each ASC or DESC)
// and have no LIMIT, OFFSET, FETCH or FOR after it: paged statements are
// wrapped as
//
//	SELECT * FROM (
//	<sql>
//	) AS levee_page WHERE <keyset after the cursor> ORDER BY <keyset> LIMIT <n+1>
//
// so the keyset names must be output column names of the SQL.
func CompileSQL(sql string, params []Param, page *Page, d Dialect) (*SQLQuery, error) {
	switch {
	case !d.valid():
		return nil, fmt.Errorf("invalid dialect %v", d)
	case len(sql) > MaxSQLBytes:
		return nil, fmt.Errorf("sql: %d bytes, over %d", len(sql), MaxSQLBytes)
	case strings.TrimSpace(sql) == "":
		return nil, errors.New("sql: empty")
	case !utf8.ValidString(sql) || strings.IndexByte(sql, 0) >= 0:
		return nil, errors.New("sql: not valid UTF-8, or holds a NUL byte")
	case len(params) > MaxParams:
		return nil, fmt.Errorf("params: %d, over %d", len(params), MaxParams)
	}
	s := &SQLQuery{d: d, index: make(map[string]int, len(params))}
	for i, p := range params {
		what := fmt.Sprintf("param %q", clip(p.Name))
		if err := checkParamName(p.Name); err != nil {
			return nil, fmt.Errorf("%s: %w", what, err)
		}
		if _, dup := s.index[p.Name]; dup {
			return nil, fmt.Errorf("%s: declared twice", what)
		}
		r, err := newRule(what, p.Type, p.List, p.MaxLen, p.MaxItems, p.Min, p.Max)
		if err != nil {
			return nil, err
		}
		sp := sqlParam{name: p.Name, rule: r, required: p.Required}
		switch {
		case p.Default != "" && p.Required:
			return nil, fmt.Errorf("%s: required and with a default; choose one", what)
		case p.Default != "":
			v, e := r.value(p.Name, p.Default)
			if e != nil {
				return nil, fmt.Errorf("%s: default: %s", what, strings.TrimPrefix(e.Message, "parameter "+strconv.Quote(p.Name)+": "))
			}
			sp.def = v
		case p.List && !p.Required:
			return nil, fmt.Errorf("%s: a list must be required or have a default", what)
		}
		s.index[p.Name] = i
		s.byName = append(s.byName, i)
		s.params = append(s.params, sp)
		s.hasList = s.hasList || p.List
	}
	slices.SortFunc(s.byName, func(a, b int) int { return strings.Compare(s.params[a].name, s.params[b].name) })

	sql, toks, err := queryTokens(sql, d)
	if err != nil {
		return nil, fmt.Errorf("sql: %w", err)
	}
	if err := s.cut(sql, toks); err != nil {
		return nil, err
	}
	if page != nil {
		g, err := newPager(page, d)
		if err != nil {
			return nil, err
		}
		items, found, tail, err := lastOrderBy(sql, toks)
		switch {
		case err != nil:
			return nil, fmt.Errorf("page: %w", err)
		case !found:
			return nil, fmt.Errorf("page: the SQL needs an ORDER BY over the keyset [%s]", strings.Join(g.keyset, ", "))
		case tail:
			return nil, errors.New("page: a paged SQL must not have its own LIMIT, OFFSET, FETCH or FOR after the ORDER BY")
		}
		if err := g.matchOrder(items, d); err != nil {
			return nil, err
		}
		s.page = g
	}
	s.sqlCap = len(sql) + 4*len(s.pieces) + 160
	s.argCap = len(s.pieces) + 1
	if s.page != nil {
		s.argCap += len(s.page.keyset) * (len(s.page.keyset) + 1) / 2
	}
	if !s.hasList {
		slots := make([]any, len(s.params))
		for i, shape := range [3]struct{ paged, after bool }{{}, {true, false}, {true, true}} {
			if shape.paged && s.page == nil {
				continue
			}
			var after []any
			if shape.after {
				after = make([]any, len(s.page.keyset))
			}
			b := builder{d: d}
			s.build(&b, slots, shape.paged, after, 0)
			s.static[i] = string(b.sql)
		}
	}
	return s, nil
}

// checkParamName allows the names a :placeholder can spell, except the
// paging keys.
func checkParamName(n string) error {
	if n == "" || len(n) > maxIdentLen || !isIdentStart(n[0]) || n[0] >= 0x80 {
		return errors.New("a name is 1 to 63 of A-Z a-z 0-9 _, not starting with a digit")
	}
	for i := 0; i < len(n); i++ {
		if c := n[i]; c >= 0x80 || !isIdentStart(c) && !isDigit(c) {
			return errors.New("a name is 1 to 63 of A-Z a-z 0-9 _, not starting with a digit")
		}
	}
	if n == "limit" || n == "cursor" {
		return errors.New("limit and cursor are the paging keys")
	}
	return nil
}

// cut splits the SQL at its placeholders and checks them against the
// declarations.
func (s *SQLQuery) cut(sql string, toks []token) error {
	var undeclared []string
	used := make([]bool, len(s.params))
	last := 0
	for i, t := range toks {
		if t.kind != tPlaceholder {
			continue
		}
		name := sql[t.start+1 : t.end]
		p, ok := s.index[name]
		if !ok {
			if !slices.Contains(undeclared, ":"+name) {
				undeclared = append(undeclared, ":"+name)
			}
			continue
		}
		used[p] = true
		if s.params[p].rule.list && !inList(sql, toks, i) {
			return fmt.Errorf("sql: list param :%s must be written IN (:%s)", name, name)
		}
		s.pieces = append(s.pieces, piece{text: separate(sql[last:t.start]), param: p})
		last = t.end
	}
	s.tail = sql[last:]
	if len(s.pieces) > 0 && s.tail != "" && (isIdentByte(s.tail[0]) || s.tail[0] == '$') {
		s.tail = " " + s.tail
	}
	var unused []string
	for i, u := range used {
		if !u {
			unused = append(unused, s.params[i].name)
		}
	}
	if len(undeclared) > 0 || len(unused) > 0 {
		return fmt.Errorf("sql and params disagree: placeholders not declared: [%s]; params not used: [%s]",
			strings.Join(undeclared, ", "), strings.Join(unused, ", "))
	}
	return nil
}

// separate keeps the text before a placeholder from running into it:
// "a:b" must bind as "a $1", not the identifier "a$1". The text after a
// placeholder never starts with a name byte but may start with $
// (":a$x"), so it gets the same space.
func separate(text string) string {
	if text != "" && (isIdentByte(text[len(text)-1]) || text[len(text)-1] == '$') {
		return text + " "
	}
	if text != "" && text[0] == '$' {
		return " " + text
	}
	return text
}

// inList reports whether toks[i] is the only thing inside IN ( ... ).
func inList(sql string, toks []token, i int) bool {
	text := func(j int) string {
		if j < 0 || j >= len(toks) {
			return ""
		}
		return sql[toks[j].start:toks[j].end]
	}
	return i >= 2 && text(i-1) == "(" && toks[i-2].kind == tWord && strings.EqualFold(text(i-2), "IN") && text(i+1) == ")"
}

// build writes the statement for slots (each param's value) into b.
func (s *SQLQuery) build(b *builder, slots []any, paged bool, after []any, limit int) {
	if paged {
		b.text("SELECT * FROM (\n")
	}
	for _, p := range s.pieces {
		b.text(p.text)
		b.name = s.params[p.param].name
		if items, ok := slots[p.param].([]any); ok {
			for i, it := range items {
				if i > 0 {
					b.text(", ")
				}
				b.arg(it)
			}
			continue
		}
		b.arg(slots[p.param])
	}
	b.text(s.tail)
	if !paged {
		return
	}
	b.text("\n) AS levee_page")
	if after != nil {
		b.text(" WHERE ")
		s.page.predicate(b, after)
	}
	b.text(" ORDER BY ")
	b.text(s.page.order)
	b.text(" LIMIT ")
	b.name = "limit"
	b.arg(int64(limit + 1))
}

// Bind implements Query.Bind. A key must appear once; a missing optional
// parameter takes its default, or binds NULL.
func (s *SQLQuery) Bind(q url.Values, paged bool) (Bound, error) { return s.bind(q, paged, nil) }

// ArgParam implements Query.ArgParam.
func (s *SQLQuery) ArgParam(q url.Values, paged bool, i int) string {
	var names []string
	if _, err := s.bind(q, paged, &names); err != nil || i < 0 || i >= len(names) {
		return ""
	}
	return names[i]
}

// bind is Bind, naming each argument into names when it is not nil.
func (s *SQLQuery) bind(q url.Values, paged bool, names *[]string) (Bound, error) {
	var badKey string
	var bad *Error
	for k, vs := range q {
		var e *Error
		if k == "limit" || k == "cursor" {
			e = pagingKey(s.page, k, vs, paged)
		} else if _, ok := s.index[k]; !ok {
			e = unknownKey(k)
		} else if len(vs) > 1 {
			e = paramErr(k, ReasonDuplicateParameter, "parameter "+quote(k)+" given more than once")
		}
		if e != nil && (bad == nil || k < badKey) {
			badKey, bad = k, e
		}
	}
	if bad != nil {
		return Bound{}, bad
	}
	var slotBuf [16]any
	slots := slotBuf[:0]
	for i := range s.params {
		p := &s.params[i]
		vs := q[p.name]
		var v any
		switch {
		case len(vs) > 0:
			var e *Error
			if v, e = p.rule.value(p.name, vs[0]); e != nil {
				return Bound{}, e
			}
		case p.required:
			return Bound{}, paramErr(p.name, ReasonMissingParameter, "parameter "+quote(p.name)+" is required")
		default:
			v = p.def
		}
		slots = append(slots, v)
	}
	out := Bound{Params: s.canon(slots)}
	var after []any
	paged = paged && s.page != nil
	if paged {
		var e *Error
		if out.Limit, after, e = pageArgs(s.page, q, out.Params); e != nil {
			return Bound{}, e
		}
		out.cursor = after != nil
	}
	b := builder{d: s.d, args: make([]any, 0, s.argCap), names: names}
	if s.hasList {
		b.sql = make([]byte, 0, s.sqlCap)
	} else {
		b.skip = true
		switch {
		case !paged:
			out.SQL = s.static[0]
		case after == nil:
			out.SQL = s.static[1]
		default:
			out.SQL = s.static[2]
		}
	}
	s.build(&b, slots, paged, after, out.Limit)
	out.Args = b.args
	if !b.skip {
		out.SQL = string(b.sql)
	}
	return out, nil
}

// canon is Bound.Params of slots.
func (s *SQLQuery) canon(slots []any) string {
	var buf [256]byte
	b := buf[:0]
	for _, i := range s.byName {
		if slots[i] == nil {
			continue
		}
		if len(b) > 0 {
			b = append(b, '&')
		}
		b = append(b, s.params[i].name...)
		b = append(b, '=')
		b = appendCanon(b, s.params[i].rule.kind, slots[i])
	}
	return string(b)
}

// NextCursor implements Query.NextCursor.
func (s *SQLQuery) NextCursor(b Bound, last []any) (string, error) {
	return nextCursor(s.page, b, last)
}

// Keyset implements Query.Keyset.
func (s *SQLQuery) Keyset() []string {
	if s.page == nil {
		return nil
	}
	return slices.Clone(s.page.keyset)
}
