package dataquery

import (
	"fmt"
	"net/url"
	"slices"
	"strconv"
	"strings"
)

// Op is a table-mode filter operator, written before the value as in
// PostgREST: ?region=eq.north.
//
//	eq neq lt lte gt gte  = <> < <= > >=, the value parsed by the column's kind
//	in                    in.(a,b,c): IN with one placeholder per item, items as in
//	                      a list parameter (\, for a comma), at most DefaultMaxItems
//	is                    is.null (IS NULL); is.true, is.false (bool columns only)
//	like                  like.ab*c: LIKE with * as the wildcard; a literal %, _ or !
//	                      is escaped (ESCAPE '!'); string columns only. SQLite's LIKE
//	                      ignores ASCII case, PostgreSQL's does not.
//	ilike                 as like, ignoring case (PostgreSQL's ILIKE; SQLite's LIKE)
//
// Any allowed operator may be negated with a not. prefix (not.eq.x is
// NOT ("col" = $1)); see filterops.go, also for or=(...) groups.
//
// lt, lte, gt and gte are not allowed on bool columns. The zero Op is
// invalid.
type Op uint8

const (
	OpEq Op = iota + 1
	OpNeq
	OpLt
	OpLte
	OpGt
	OpGte
	OpIn
	OpIs
	OpLike
	OpIlike
)

var opNames = [...]string{"", "eq", "neq", "lt", "lte", "gt", "gte", "in", "is", "like", "ilike"}

var opSQL = [...]string{OpEq: " = ", OpNeq: " <> ", OpLt: " < ", OpLte: " <= ", OpGt: " > ", OpGte: " >= "}

// String returns the operator's name as written in a query ("eq", ...).
func (o Op) String() string {
	if o > 0 && int(o) < len(opNames) {
		return opNames[o]
	}
	return "op(" + strconv.Itoa(int(o)) + ")"
}

// OpNames lists every Op's name, in Op order (a new slice each call): the
// configuration's allowed filter operators.
func OpNames() []string { return append([]string(nil), opNames[1:]...) }

// ParseOp turns an operator's name into an Op.
func ParseOp(s string) (Op, error) {
	if o := opByName(s); o != 0 {
		return o, nil
	}
	return 0, fmt.Errorf("unknown operator %q (want one of %s)", clip(s), strings.Join(opNames[1:], ", "))
}

func opByName(s string) Op {
	for o := OpEq; int(o) < len(opNames); o++ {
		if opNames[o] == s {
			return o
		}
	}
	return 0
}

// Column is one allow-listed table column and the kind of its values.
type Column struct {
	Name string
	Kind Kind
	// DBType is the database's own type name when known (PostgreSQL's
	// typname: int4, numeric, ...): a filter value is then also held to
	// what that type reads (filterops.go, checkValue), and like/ilike
	// need a text type.
	DBType string
}

// TableSpec declares a table-mode query.
//
// Table is a table name, or schema.table (each part quoted on its own; a
// name holding a dot cannot be expressed). Columns are the selected,
// allow-listed columns, in output order. Filters maps a column to the
// operators a request may use on it; a column not in Filters cannot be
// filtered. Order lists columns, each optionally followed by " asc" or
// " desc" (ascending by default); with a Page it must be the keyset, or
// empty to order by the keyset ascending.
//
// Orders are the orders a request may choose with order= (selectorder.go);
// without them order= is refused. select= is always available.
//
// RowFilters are columns bound to the caller's identity (a route's
// `row_filter`, from.go): each adds "column" = <bind argument> to every
// statement's WHERE, its value the one the caller of Bind puts under the
// column's name in the query values (a data route fills it from the
// verified identity after refusing a client that sends it). A row filter
// column is one of Columns and not one of Filters: a request cannot
// filter it, in any form.
type TableSpec struct {
	Table      string
	Columns    []Column
	Filters    map[string][]Op
	Order      []string
	Orders     []OrderSpec
	RowFilters []string
}

// Bounds of a table-mode declaration and request.
const (
	MaxColumns = 256
	// MaxFiltersPerColumn bounds the repeats of one column's key
	// (created_at=gte.X&created_at=lt.Y).
	MaxFiltersPerColumn = 8
)

// TableQuery is a compiled table-mode query. It is immutable and safe for
// concurrent use.
type TableQuery struct {
	d       Dialect
	prefix  string         // SELECT <columns> FROM <table>
	order   string         // " ORDER BY ..." or ""
	filters []tableFilter  // sorted by column name
	findex  map[string]int // column → filters index
	rows    []tableFilter  // row filters (TableSpec.RowFilters), in order, OpEq only
	rindex  map[string]int // column → rows index
	columns map[string]int // column → Columns index
	page    *pager
	from    string       // the quoted table
	names   []string     // Columns' names
	quoted  []string     // Columns' quoted names
	keycols []string     // the route's own order's keyset (the page's), nil unpaged
	orders  []tableOrder // allowed client orders (selectorder.go)
}

type tableFilter struct {
	name    string
	quoted  string
	rule    rule
	ops     uint16 // 1<<Op for each allowed Op
	dbCheck uint8  // checkValue's database-type check
}

// CompileTable checks a table-mode declaration and compiles it. Filters
// in a request are ANDed: by column name, then in request order. Paged,
// the statement is
//
//	SELECT <columns> FROM <table> WHERE <filters> AND <keyset after the cursor>
//	ORDER BY <keyset> LIMIT <n+1>
func CompileTable(spec TableSpec, page *Page, d Dialect) (*TableQuery, error) {
	if !d.valid() {
		return nil, fmt.Errorf("invalid dialect %v", d)
	}
	t := &TableQuery{d: d, findex: map[string]int{}, columns: map[string]int{}}
	parts := strings.Split(spec.Table, ".")
	if len(parts) > 2 {
		return nil, fmt.Errorf("table %q: at most schema.table", clip(spec.Table))
	}
	var table []string
	for _, p := range parts {
		if err := checkIdent(p); err != nil {
			return nil, fmt.Errorf("table %q: %w", clip(spec.Table), err)
		}
		table = append(table, d.QuoteIdent(p))
	}
	if len(spec.Columns) == 0 || len(spec.Columns) > MaxColumns {
		return nil, fmt.Errorf("columns: %d, want 1 to %d", len(spec.Columns), MaxColumns)
	}
	var sel []string
	for i, c := range spec.Columns {
		if err := checkIdent(c.Name); err != nil {
			return nil, fmt.Errorf("column %q: %w", clip(c.Name), err)
		}
		if !c.Kind.valid() {
			return nil, fmt.Errorf("column %q: invalid type %v", c.Name, c.Kind)
		}
		if _, dup := t.columns[c.Name]; dup {
			return nil, fmt.Errorf("column %q: listed twice", c.Name)
		}
		t.columns[c.Name] = i
		sel = append(sel, d.QuoteIdent(c.Name))
		t.names = append(t.names, c.Name)
	}
	t.quoted = sel
	t.from = strings.Join(table, ".")
	t.prefix = "SELECT " + strings.Join(sel, ", ") + " FROM " + t.from

	names := make([]string, 0, len(spec.Filters))
	for name := range spec.Filters {
		names = append(names, name)
	}
	slices.Sort(names)
	for _, name := range names {
		ci, ok := t.columns[name]
		switch {
		case !ok:
			return nil, fmt.Errorf("filters: %q is not one of the columns", clip(name))
		case name == "limit" || name == "cursor":
			return nil, fmt.Errorf("filters: %q is a paging key and cannot be a filter's name", name)
		case reservedKey(name):
			return nil, fmt.Errorf("filters: %q is a query key of its own (select, order, or, and) and cannot be a filter's name", name)
		}
		kind := spec.Columns[ci].Kind
		dbType := spec.Columns[ci].DBType
		f := tableFilter{name: name, quoted: d.QuoteIdent(name), dbCheck: dbCheckOf(d, dbType)}
		f.rule, _ = newRule("", kind, false, 0, 0, "", "")
		for _, o := range spec.Filters[name] {
			switch {
			case o == 0 || int(o) >= len(opNames):
				return nil, fmt.Errorf("filters: %q: invalid operator %v", name, o)
			case f.ops&(1<<o) != 0:
				return nil, fmt.Errorf("filters: %q: operator %v listed twice", name, o)
			case (o == OpLike || o == OpIlike) && kind != String:
				return nil, fmt.Errorf("filters: %q: %v applies to string columns, not %v", name, o, kind)
			case (o == OpLike || o == OpIlike) && (!textType(d, dbType) || f.dbCheck == checkDecimal):
				return nil, fmt.Errorf("filters: %q: %v applies to text columns, not %s", name, o, dbType)
			case (o == OpLt || o == OpLte || o == OpGt || o == OpGte) && kind == Bool:
				return nil, fmt.Errorf("filters: %q: %v does not apply to a bool column", name, o)
			}
			f.ops |= 1 << o
		}
		if f.ops == 0 {
			return nil, fmt.Errorf("filters: %q: no operators", name)
		}
		t.findex[name] = len(t.filters)
		t.filters = append(t.filters, f)
	}
	if err := t.compileRowFilters(spec, d); err != nil {
		return nil, err
	}

	var items []orderItem
	for _, o := range spec.Order {
		fs := strings.Fields(o)
		it := orderItem{}
		switch {
		case len(fs) == 1:
		case len(fs) == 2 && strings.EqualFold(fs[1], "asc"):
		case len(fs) == 2 && strings.EqualFold(fs[1], "desc"):
			it.desc = true
		default:
			return nil, fmt.Errorf("order: %q: want a column, optionally followed by asc or desc", clip(o))
		}
		it.name = fs[0]
		if _, ok := t.columns[it.name]; !ok {
			return nil, fmt.Errorf("order: %q is not one of the columns", clip(it.name))
		}
		for _, prev := range items {
			if prev.name == it.name {
				return nil, fmt.Errorf("order: %q listed twice", it.name)
			}
		}
		items = append(items, it)
	}
	if page != nil {
		g, err := newPager(page, d)
		if err != nil {
			return nil, err
		}
		for _, k := range g.keyset {
			if _, ok := t.columns[k]; !ok {
				return nil, fmt.Errorf("page: keyset column %q is not one of the columns", k)
			}
		}
		if len(items) == 0 {
			for _, k := range g.keyset {
				items = append(items, orderItem{name: k})
			}
		}
		if err := g.matchOrder(items, Postgres); err != nil {
			return nil, err
		}
		t.page = g
		t.keycols = g.keyset
	}
	if err := t.compileOrders(spec, page); err != nil {
		return nil, err
	}
	if len(items) > 0 {
		var b strings.Builder
		b.WriteString(" ORDER BY ")
		for i, it := range items {
			if i > 0 {
				b.WriteString(", ")
			}
			b.WriteString(d.QuoteIdent(it.name))
			if it.desc {
				b.WriteString(" DESC")
			}
		}
		t.order = b.String()
	}
	return t, nil
}

// Bind implements Query.Bind. A filterable column's key may repeat up to
// MaxFiltersPerColumn times; each value is op.value.
func (t *TableQuery) Bind(q url.Values, paged bool) (Bound, error) { return t.bind(q, paged, nil) }

// ArgParam implements Query.ArgParam.
func (t *TableQuery) ArgParam(q url.Values, paged bool, i int) string {
	var names []string
	if _, err := t.bind(q, paged, &names); err != nil || i < 0 || i >= len(names) {
		return ""
	}
	return names[i]
}

// bind is Bind, naming each argument into names when it is not nil.
func (t *TableQuery) bind(q url.Values, paged bool, names *[]string) (Bound, error) {
	var badKey string
	var bad *Error
	for k, vs := range q {
		var e *Error
		if k == "limit" || k == "cursor" {
			e = pagingKey(t.page, k, vs, paged)
		} else if reservedKey(k) {
			if len(vs) > 1 {
				e = paramErr(k, ReasonDuplicateParameter, "parameter "+strconv.Quote(k)+" given more than once")
			}
		} else if _, ok := t.rindex[k]; ok {
			if len(vs) != 1 {
				e = invalid(k, "a row filter takes exactly one value")
			}
		} else if _, ok := t.findex[k]; ok {
			if len(vs) > MaxFiltersPerColumn {
				e = invalid(k, "more than "+strconv.Itoa(MaxFiltersPerColumn)+" filters")
			}
		} else if _, ok := t.columns[k]; ok {
			e = paramErr(k, ReasonUnknownParameter, "column "+strconv.Quote(k)+" cannot be filtered")
		} else {
			e = unknownKey(k)
		}
		if e != nil && (bad == nil || k < badKey) {
			badKey, bad = k, e
		}
	}
	if bad != nil {
		return Bound{}, bad
	}
	sel, e := t.selectArg(q["select"])
	if e != nil {
		return Bound{}, e
	}
	oi, e := t.orderArg(q["order"])
	if e != nil {
		return Bound{}, e
	}
	pg, orderSQL, keyset := t.page, t.order, t.keycols
	if oi >= 0 {
		o := &t.orders[oi]
		pg, orderSQL, keyset = o.page, o.sql, o.keyset
	}
	paged = paged && pg != nil
	prefix, hidden := t.prefix, 0
	if sel != nil {
		var ks []string
		if paged {
			ks = keyset
		}
		prefix, hidden = t.selectPrefix(sel, ks)
	}
	b := builder{d: t.d, sql: make([]byte, 0, len(prefix)+len(orderSQL)+64*len(q)+32), args: make([]any, 0, len(q)+2), names: names}
	b.text(prefix)
	var canonBuf [256]byte
	canon := canonBuf[:0]
	conj := " WHERE "
	for i := range t.rows {
		f := &t.rows[i]
		vs := q[f.name]
		if len(vs) != 1 {
			return Bound{}, paramErr(f.name, ReasonIdentityClaimMissing, "row filter "+strconv.Quote(f.name)+": no value from the caller's identity")
		}
		b.text(conj)
		conj = " AND "
		if len(canon) > 0 {
			canon = append(canon, '&')
		}
		canon = append(append(canon, f.name...), '=')
		var e *Error
		if canon, e = f.bind(&b, canon, "eq."+vs[0]); e != nil {
			return Bound{}, e
		}
	}
	for i := range t.filters {
		f := &t.filters[i]
		for _, v := range q[f.name] {
			b.text(conj)
			conj = " AND "
			if len(canon) > 0 {
				canon = append(canon, '&')
			}
			canon = append(append(canon, f.name...), '=')
			var e *Error
			if canon, e = f.bind(&b, canon, v); e != nil {
				return Bound{}, e
			}
		}
	}
	for _, key := range [...]string{"and", "or"} {
		if vs := q[key]; len(vs) > 0 {
			b.text(conj)
			conj = " AND "
			var e *Error
			if canon, e = t.logicArg(&b, canon, key, vs[0]); e != nil {
				return Bound{}, e
			}
		}
	}
	whereEnd, nwhere := len(b.sql), len(b.args)
	if oi >= 0 {
		if len(canon) > 0 {
			canon = append(canon, '&')
		}
		canon = append(append(canon, "order="...), t.orders[oi].canon...)
	}
	if sel != nil {
		if len(canon) > 0 {
			canon = append(canon, '&')
		}
		canon = t.canonSelect(canon, sel)
	}
	out := Bound{Params: string(canon), nwhere: nwhere}
	if paged {
		limit, after, e := pageArgs(pg, q, out.Params)
		if e != nil {
			return Bound{}, e
		}
		out.Limit, out.cursor, out.pg, out.Hidden = limit, after != nil, pg, hidden
		if oi >= 0 || hidden > 0 {
			out.Keyset = keyset
		}
		if after != nil {
			b.text(conj)
			pg.predicate(&b, after)
		}
		b.text(orderSQL)
		b.text(" LIMIT ")
		b.name = "limit"
		b.arg(int64(limit + 1))
	} else {
		b.text(orderSQL)
	}
	out.SQL, out.Args = string(b.sql), b.args
	out.where = out.SQL[len(prefix):whereEnd] // a substring: no copy
	return out, nil
}

// reservedKey reports the query keys of their own in table mode: select=,
// order= and the logical groups or=, and=.
func reservedKey(k string) bool {
	return k == "select" || k == "order" || k == "or" || k == "and"
}

// bind appends one filter's condition to b and its canonical
// [not.]op.value to canon.
func (f *tableFilter) bind(b *builder, canon []byte, v string) ([]byte, *Error) {
	opName, val, ok := strings.Cut(v, ".")
	not := false
	if ok && opName == "not" {
		not = true
		opName, val, ok = strings.Cut(val, ".")
	}
	op := opByName(opName)
	if !ok || op == 0 || f.ops&(1<<op) == 0 {
		return canon, paramErr(f.name, ReasonOperatorNotAllowed,
			"filter on "+strconv.Quote(f.name)+" must be [not.]op.value with op one of ["+f.opList()+"], not "+quote(v))
	}
	return f.cond(b, canon, f.name, not, op, val)
}

func (f *tableFilter) opList() string {
	var s []string
	for o := OpEq; int(o) < len(opNames); o++ {
		if f.ops&(1<<o) != 0 {
			s = append(s, opNames[o])
		}
	}
	return strings.Join(s, ", ")
}

// likePattern turns a like. value into a LIKE pattern with ESCAPE '!':
// * becomes %, and a literal %, _ or ! is escaped with !.
func likePattern(v string) string {
	if !strings.ContainsAny(v, "*%_!") {
		return v
	}
	b := make([]byte, 0, len(v)+8)
	for i := 0; i < len(v); i++ {
		switch c := v[i]; c {
		case '*':
			b = append(b, '%')
		case '%', '_', '!':
			b = append(b, '!', c)
		default:
			b = append(b, c)
		}
	}
	return string(b)
}

// NextCursor implements Query.NextCursor.
func (t *TableQuery) NextCursor(b Bound, last []any) (string, error) {
	return nextCursor(t.page, b, last)
}

// Keyset implements Query.Keyset.
func (t *TableQuery) Keyset() []string {
	if t.page == nil {
		return nil
	}
	return slices.Clone(t.page.keyset)
}
