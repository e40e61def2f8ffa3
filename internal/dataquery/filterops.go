package dataquery

import (
	"errors"
	"math"
	"strconv"
	"strings"
)

// Table-mode filter conditions (issue 29, item 4): every operator with
// an optional not. prefix, and or=(...) / and=(...) groups, PostgREST's
// logical trees:
//
//	?price=not.lt.10                      NOT ("price" < $1)
//	?name=ilike.*ann*                     "name" ILIKE $1 ESCAPE '!' (SQLite: LIKE, which ignores ASCII case)
//	?or=(price.lt.10,and(region.eq.north,price.gt.100),name.not.is.null)
//
// A group holds at most MaxLogicTerms conditions in all and nests at
// most MaxLogicDepth deep (the outer parentheses are depth 1). In a group
// a value holding a comma or a parenthesis is written in double quotes
// ("a,b", with \" and \\ inside); an in.(...) list keeps its parentheses.
// Every condition of a group obeys its column's filters entry (the
// operator must be allowed) and its value is parsed by the column's kind,
// exactly as a filter of its own; a refusal names the group's key ("or").
// Values are only ever bind arguments.

// Bounds of logical groups.
const (
	MaxLogicDepth = 3
	MaxLogicTerms = 16
	maxLogicLen   = 4096
)

// LogicNode is a parsed or=/and= group: a group (Kids) or a condition
// (Column, Not, Op, Value, the operator's name as written).
type LogicNode struct {
	Or, Not bool
	Kids    []*LogicNode
	Leaf    bool
	Column  string
	Op      string
	Value   string
}

// ParseLogic reads the value of an or= (or=true) or and= key: a
// parenthesised list of conditions and nested and(...) / or(...) /
// not.and(...) / not.or(...) groups, within MaxLogicDepth and
// MaxLogicTerms.
func ParseLogic(s string, or bool) (*LogicNode, error) {
	if len(s) > maxLogicLen {
		return nil, errors.New("longer than " + strconv.Itoa(maxLogicLen) + " bytes")
	}
	p := logicParser{s: s}
	n, err := p.group(or, false, 1)
	if err != nil {
		return nil, err
	}
	if p.i != len(s) {
		return nil, errors.New("unexpected " + quote(s[p.i:]) + " after the group's closing parenthesis")
	}
	return n, nil
}

type logicParser struct {
	s     string
	i     int
	terms int
}

func (p *logicParser) group(or, not bool, depth int) (*LogicNode, error) {
	if depth > MaxLogicDepth {
		return nil, errors.New("groups nest deeper than " + strconv.Itoa(MaxLogicDepth))
	}
	if p.i >= len(p.s) || p.s[p.i] != '(' {
		return nil, errors.New("a group is a parenthesised list: (col.op.value,...)")
	}
	p.i++
	n := &LogicNode{Or: or, Not: not}
	for {
		rest := p.s[p.i:]
		neg := strings.HasPrefix(rest, "not.and(") || strings.HasPrefix(rest, "not.or(")
		if neg {
			rest = rest[4:]
		}
		switch {
		case strings.HasPrefix(rest, "and("), strings.HasPrefix(rest, "or("):
			sub := strings.HasPrefix(rest, "or(")
			p.i += len(p.s[p.i:]) - len(rest)
			if sub {
				p.i += 2
			} else {
				p.i += 3
			}
			k, err := p.group(sub, neg, depth+1)
			if err != nil {
				return nil, err
			}
			n.Kids = append(n.Kids, k)
		default:
			k, err := p.leaf()
			if err != nil {
				return nil, err
			}
			n.Kids = append(n.Kids, k)
		}
		if p.i >= len(p.s) {
			return nil, errors.New("a group's closing parenthesis is missing")
		}
		c := p.s[p.i]
		p.i++
		if c == ')' {
			return n, nil
		}
		// c is ',' (leaf and group end only at ',' or ')').
	}
}

// leaf reads one condition, col.[not.]op.value, up to the ',' or ')'
// that ends it.
func (p *logicParser) leaf() (*LogicNode, error) {
	p.terms++
	if p.terms > MaxLogicTerms {
		return nil, errors.New("more than " + strconv.Itoa(MaxLogicTerms) + " conditions")
	}
	start := p.i
	depth := 0
	for p.i < len(p.s) {
		c := p.s[p.i]
		if c == '"' {
			j := p.i + 1
			for ; j < len(p.s) && p.s[j] != '"'; j++ {
				if p.s[j] == '\\' {
					j++
				}
			}
			if j >= len(p.s) {
				return nil, errors.New("a quoted value is not closed")
			}
			p.i = j + 1
			continue
		}
		if c == '(' {
			depth++
		} else if c == ')' {
			if depth == 0 {
				break
			}
			depth--
		} else if c == ',' && depth == 0 {
			break
		}
		p.i++
	}
	text := p.s[start:p.i]
	col, rest, ok := strings.Cut(text, ".")
	if !ok || col == "" {
		return nil, errors.New("condition " + quote(text) + " is not column.operator.value")
	}
	n := &LogicNode{Leaf: true, Column: col}
	if strings.HasPrefix(rest, "not.") {
		n.Not, rest = true, rest[4:]
	}
	op, val, ok := strings.Cut(rest, ".")
	if !ok {
		return nil, errors.New("condition " + quote(text) + " is not column.operator.value")
	}
	if len(val) >= 2 && val[0] == '"' && val[len(val)-1] == '"' {
		var b strings.Builder
		for i := 1; i < len(val)-1; i++ {
			if val[i] == '\\' && i+1 < len(val)-1 {
				i++
			} else if val[i] == '"' {
				return nil, errors.New("condition " + quote(text) + ": a quoted value must be the whole value")
			}
			b.WriteByte(val[i])
		}
		val = b.String()
	}
	n.Op, n.Value = op, val
	return n, nil
}

// logicArg binds the group given as key (or, and) into b: " AND (...)".
func (t *TableQuery) logicArg(b *builder, canon []byte, key, v string) ([]byte, *Error) {
	n, err := ParseLogic(v, key == "or")
	if err != nil {
		return canon, invalid(key, err.Error())
	}
	if len(canon) > 0 {
		canon = append(canon, '&')
	}
	canon = append(canon, key...)
	canon = append(canon, '=')
	return t.bindLogic(b, canon, key, n)
}

func (t *TableQuery) bindLogic(b *builder, canon []byte, key string, n *LogicNode) ([]byte, *Error) {
	if n.Leaf {
		fi, ok := t.findex[n.Column]
		if _, bound := t.rindex[n.Column]; bound {
			return canon, paramErr(n.Column, ReasonUnknownParameter, "column "+strconv.Quote(n.Column)+" is bound to the caller's identity and cannot be filtered")
		}
		if !ok {
			return canon, paramErr(key, ReasonOperatorNotAllowed, "condition on "+quote(n.Column)+": not a column this route lets a request filter")
		}
		f := &t.filters[fi]
		canon = append(append(canon, n.Column...), '.')
		op := opByName(n.Op)
		if op == 0 || f.ops&(1<<op) == 0 {
			return canon, paramErr(key, ReasonOperatorNotAllowed,
				"condition on "+quote(n.Column)+" must use one of ["+f.opList()+"], not "+quote(n.Op))
		}
		mark := len(canon)
		canon, e := f.cond(b, canon, key, n.Not, op, n.Value)
		if e != nil {
			return canon, e
		}
		// Parentheses of a value are escaped, so a value cannot pass for
		// the group's structure in the canonical form.
		return escapeParens(canon, mark), nil
	}
	if n.Not {
		canon = append(canon, "not."...)
		b.text("NOT ")
	}
	if n.Or {
		canon = append(canon, "or("...)
	} else {
		canon = append(canon, "and("...)
	}
	b.text("(")
	for i, k := range n.Kids {
		if i > 0 {
			canon = append(canon, ',')
			if n.Or {
				b.text(" OR ")
			} else {
				b.text(" AND ")
			}
		}
		var e *Error
		if canon, e = t.bindLogic(b, canon, key, k); e != nil {
			return canon, e
		}
	}
	b.text(")")
	return append(canon, ')'), nil
}

// escapeParens percent-encodes the parentheses of canon[from:].
func escapeParens(canon []byte, from int) []byte {
	if !strings.ContainsAny(string(canon[from:]), "()") {
		return canon
	}
	tail := append([]byte(nil), canon[from:]...)
	canon = canon[:from]
	for _, c := range tail {
		switch c {
		case '(':
			canon = append(canon, "%28"...)
		case ')':
			canon = append(canon, "%29"...)
		default:
			canon = append(canon, c)
		}
	}
	return canon
}

// cond appends one condition on f's column to b, and "[not.]op.value"
// (canonical) to canon; a refusal names param (the column's key, or the
// group's).
func (f *tableFilter) cond(b *builder, canon []byte, param string, not bool, op Op, val string) ([]byte, *Error) {
	if not {
		canon = append(canon, "not."...)
		b.text("NOT (")
	}
	canon = append(append(canon, opNames[op]...), '.')
	b.text(f.quoted)
	b.name = param
	what := ""
	if param != f.name {
		what = "column " + strconv.Quote(f.name) + ": "
	}
	switch op {
	case OpIs:
		switch {
		case val == "null":
			b.text(" IS NULL")
		case (val == "true" || val == "false") && f.rule.kind == Bool:
			b.text(" IS ")
			b.text(strings.ToUpper(val))
		default:
			return canon, invalid(param, what+"is. takes null (or true, false on a bool column), not "+quote(val))
		}
		canon = append(canon, val...)
	case OpIn:
		if len(val) < 2 || val[0] != '(' || val[len(val)-1] != ')' {
			return canon, invalid(param, what+"in. takes a list in parentheses, in.(a,b), not "+quote(val))
		}
		items, e := f.rule.items(param, val[1:len(val)-1], DefaultMaxItems)
		if e != nil {
			return canon, e
		}
		for _, it := range items.([]any) {
			if e := f.checkValue(param, what, it); e != nil {
				return canon, e
			}
		}
		b.text(" IN (")
		for i, it := range items.([]any) {
			if i > 0 {
				b.text(", ")
			}
			b.arg(it)
		}
		b.text(")")
		canon = append(canon, '(')
		canon = appendCanon(canon, f.rule.kind, items)
		canon = append(canon, ')')
	case OpLike, OpIlike:
		if _, e := f.rule.scalar(param, val); e != nil {
			return canon, e
		}
		if op == OpIlike && b.d == Postgres {
			b.text(" ILIKE ")
		} else {
			b.text(" LIKE ")
		}
		b.arg(likePattern(val))
		b.text(" ESCAPE '!'")
		canon = appendCanon(canon, String, val)
	default:
		x, e := f.rule.scalar(param, val)
		if e != nil {
			return canon, e
		}
		if e := f.checkValue(param, what, x); e != nil {
			return canon, e
		}
		b.text(opSQL[op])
		b.arg(x)
		canon = appendCanon(canon, f.rule.kind, x)
	}
	if not {
		b.text(")")
	}
	return canon, nil
}

// checkValue holds a parsed value to the column's database type where
// the kind alone is wider (PostgreSQL): numeric text must be a decimal,
// int2/int4 in range, float4 finite as a float4. So the database never
// sees a value it would refuse with SQLSTATE 22P02 or 22003.
func (f *tableFilter) checkValue(param, what string, x any) *Error {
	switch f.dbCheck {
	case checkDecimal:
		if s, _ := x.(string); !isDecimal(s) {
			return invalid(param, what+quote(s)+" is not a decimal number")
		}
	case checkInt2, checkInt4:
		n, _ := x.(int64)
		lim := int64(math.MaxInt16)
		if f.dbCheck == checkInt4 {
			lim = math.MaxInt32
		}
		if n > lim || n < -lim-1 {
			return invalid(param, what+strconv.FormatInt(n, 10)+" is out of the column's range ["+strconv.FormatInt(-lim-1, 10)+", "+strconv.FormatInt(lim, 10)+"]")
		}
	case checkFloat4:
		if v, _ := x.(float64); math.Abs(v) > math.MaxFloat32 {
			return invalid(param, what+strconv.FormatFloat(v, 'g', -1, 64)+" is out of a real (float4) column's range")
		}
	}
	return nil
}

// Database-type checks of a filter's values (tableFilter.dbCheck).
const (
	checkNone uint8 = iota
	checkDecimal
	checkInt2
	checkInt4
	checkFloat4
)

// dbCheckOf is the check of a PostgreSQL column type; SQLite refuses no
// value for its type.
func dbCheckOf(d Dialect, dbType string) uint8 {
	if d != Postgres {
		return checkNone
	}
	switch dbType {
	case "numeric", "decimal":
		return checkDecimal
	case "int2":
		return checkInt2
	case "int4":
		return checkInt4
	case "float4":
		return checkFloat4
	}
	return checkNone
}

// textType reports whether a PostgreSQL column type takes LIKE (a
// string kind that is not text, such as time or an enum, does not).
func textType(d Dialect, dbType string) bool {
	switch dbType {
	case "", "text", "varchar", "bpchar", "name", "citext":
		return true
	}
	return d != Postgres
}

// isDecimal reports whether s is a decimal PostgreSQL's numeric input
// reads: an optional sign, digits with an optional fraction, an optional
// exponent of at most 4 digits; or NaN, Infinity, -Infinity. At most
// maxDecimalLen bytes.
func isDecimal(s string) bool {
	switch s {
	case "NaN", "Infinity", "-Infinity", "+Infinity":
		return true
	}
	if len(s) == 0 || len(s) > maxDecimalLen {
		return false
	}
	i := 0
	if s[0] == '-' || s[0] == '+' {
		i++
	}
	digits := 0
	for ; i < len(s) && s[i] >= '0' && s[i] <= '9'; i++ {
		digits++
	}
	if i < len(s) && s[i] == '.' {
		i++
		for ; i < len(s) && s[i] >= '0' && s[i] <= '9'; i++ {
			digits++
		}
	}
	if digits == 0 {
		return false
	}
	if i < len(s) && (s[i] == 'e' || s[i] == 'E') {
		i++
		if i < len(s) && (s[i] == '-' || s[i] == '+') {
			i++
		}
		exp := 0
		for ; i < len(s) && s[i] >= '0' && s[i] <= '9'; i++ {
			exp++
		}
		if exp == 0 || exp > 4 {
			return false
		}
	}
	return i == len(s)
}

// maxDecimalLen bounds a numeric filter value's text.
const maxDecimalLen = 1000
