package openapi

import (
	"fmt"
	"slices"
	"strconv"
	"strings"

	"github.com/levee-gw/levee/internal/dataquery"
	"github.com/levee-gw/levee/internal/valuekind"
)

// dataParams are a data route's query parameters: its declared
// parameters (SQL mode) or filters (table mode), then limit and cursor
// when it pages.
func (r *renderer) dataParams(d *Data, captures []capture) []any {
	var out []any
	for _, p := range d.Params {
		if !slices.ContainsFunc(captures, func(c capture) bool { return c.name == p.Name }) {
			out = append(out, param(p))
		}
	}
	for _, f := range d.Filters {
		out = append(out, filter(f, d.MaxFilters))
	}
	if d.Single { // one row: nothing to choose, limit or count
		return out
	}
	out = append(out, choices(d)...)
	pg := d.Page
	paged := pg != nil && slices.Contains(d.Formats, MediaJSON)
	if d.MaxRows > 0 {
		desc := fmt.Sprintf("The most rows of the answer: 1 to max_rows (%d).", d.MaxRows)
		limit := obj{{"type", "integer"}, {"format", "int64"}, {"minimum", 1}, {"maximum", d.MaxRows}}
		if paged {
			desc = fmt.Sprintf("Rows per page of a JSON answer (1 to %d, default %d); the most rows of an NDJSON or CSV answer (1 to max_rows, %d).", pg.Max, pg.Default, d.MaxRows)
			limit.set("maximum", max(pg.Max, d.MaxRows))
			limit.set("default", pg.Default)
		}
		out = append(out, obj{{"name", "limit"}, {"in", "query"}, {"required", false}, {"description", desc}, {"schema", limit}})
	}
	if paged {
		out = append(out,
			obj{{"name", "cursor"}, {"in", "query"}, {"required", false},
				{"description", "The `next_cursor` of the previous page: opaque, bound to this route, its version and the other parameters " +
					"(any other value is refused 400 `invalid_cursor`). Pages are ordered by the keyset [" + strings.Join(pg.Keyset, ", ") + "]. " +
					"JSON answers only."},
				{"schema", obj{{"type", "string"}, {"pattern", "^[A-Za-z0-9_-]+$"}}}},
		)
	}
	return out
}

// param is one declared SQL-mode parameter.
func param(p dataquery.Param) obj {
	kind := p.Type.String()
	if p.MaxLen == 0 && kind == valuekind.String {
		p.MaxLen = dataquery.DefaultMaxLen
	}
	if p.MaxItems == 0 && p.List {
		p.MaxItems = dataquery.DefaultMaxItems
	}
	s := scalarSchema(kind, p.MaxLen)
	var desc strings.Builder
	fmt.Fprintf(&desc, "Type %s", kind)
	if p.Min != "" || p.Max != "" {
		lo, hi := p.Min, p.Max
		if lo == "" {
			lo = "-inf"
		}
		if hi == "" {
			hi = "+inf"
		}
		fmt.Fprintf(&desc, " in [%s, %s]", lo, hi)
		bound := func(key, v string) {
			if v == "" {
				return
			}
			if (kind == valuekind.Int64 || kind == valuekind.Float64) && jsonNumber(v) {
				s.set(key, number(v))
			} else { // dates and timestamps: JSON Schema has no bound for strings
				s.set("x-levee-"+key, v)
			}
		}
		bound("minimum", p.Min)
		bound("maximum", p.Max)
	}
	if kind == valuekind.String {
		fmt.Fprintf(&desc, " of at most %d bytes (UTF-8, no NUL)", p.MaxLen)
	}
	if p.List {
		fmt.Fprintf(&desc, "; a comma-separated list of 1 to %d items (a comma or backslash inside an item is escaped with a backslash)", p.MaxItems)
		s = obj{{"type", "array"}, {"items", s}, {"minItems", 1}, {"maxItems", p.MaxItems}}
	}
	if p.Default != "" {
		s.set("default", defaultValue(p))
		fmt.Fprintf(&desc, "; default %s", p.Default)
	} else if !p.Required {
		desc.WriteString("; absent, it is SQL NULL")
	}
	desc.WriteString(".")
	o := obj{{"name", p.Name}, {"in", "query"}, {"required", p.Required}, {"description", desc.String()}, {"schema", s}}
	if p.List {
		o.set("style", "form")
		o.set("explode", false)
	}
	return o
}

// scalarSchema is the schema of one value of kind (a parameter's or a
// filter's): its valuekind row's, a plain string for a kind without one.
func scalarSchema(kind string, maxLen int) obj {
	spec, _ := valuekind.Lookup(kind)
	if len(spec.ParamSchema) == 0 {
		return obj{{"type", "string"}}
	}
	s := schemaObj(spec.ParamSchema)
	if kind == valuekind.String && maxLen > 0 {
		s.set("maxLength", maxLen)
	}
	return s
}

// schemaObj is a valuekind schema as a new obj (nested objects too).
func schemaObj(ms []valuekind.Member) obj {
	o := make(obj, 0, len(ms))
	for _, m := range ms {
		o = append(o, member{m.Key, schemaVal(m.Val)})
	}
	return o
}

func schemaVal(v any) any {
	switch x := v.(type) {
	case []valuekind.Member:
		return schemaObj(x)
	case []any:
		out := make([]any, len(x))
		for i, e := range x {
			out[i] = schemaVal(e)
		}
		return out
	}
	return v
}

// dropNull returns schema s without "null" among its types: in its own
// "type" list and in those of its anyOf branches (the kinds' schemas are
// two levels deep at most). A "type" list left with one type becomes that
// type.
func dropNull(s obj) obj {
	out := make(obj, 0, len(s))
	for _, m := range s {
		switch v := m.val.(type) {
		case []string:
			if m.key == "type" {
				ts := slices.DeleteFunc(slices.Clone(v), func(t string) bool { return t == "null" })
				if len(ts) == 1 {
					m.val = ts[0]
				} else {
					m.val = ts
				}
			}
		case []any:
			if m.key == "anyOf" {
				branches := make([]any, len(v))
				for i, b := range v {
					if o, ok := b.(obj); ok {
						b = dropNull(o)
					}
					branches[i] = b
				}
				m.val = branches
			}
		}
		out = append(out, m)
	}
	return out
}

// defaultValue is a parameter's default as a JSON value of its type.
func defaultValue(p dataquery.Param) any {
	if !p.List {
		return scalarValue(p.Type.String(), p.Default)
	}
	var items []any
	for _, it := range splitList(p.Default) {
		items = append(items, scalarValue(p.Type.String(), it))
	}
	return items
}

// scalarValue is v (valid for kind, the configuration checked it) as a
// JSON value: a number or boolean when it reads as one, else a string.
func scalarValue(kind, v string) any {
	switch kind {
	case valuekind.Int64, valuekind.Float64:
		if jsonNumber(v) {
			return number(v)
		}
	case valuekind.Bool:
		if b, err := strconv.ParseBool(v); err == nil && (v == "true" || v == "false") {
			return b
		}
	}
	return v
}

// jsonNumber reports whether s is a number in JSON's grammar (RFC 8259
// section 6), so it can be written as it is.
func jsonNumber(s string) bool {
	i := 0
	if i < len(s) && s[i] == '-' {
		i++
	}
	digits := func() int {
		j := i
		for i < len(s) && '0' <= s[i] && s[i] <= '9' {
			i++
		}
		return i - j
	}
	start := i
	if n := digits(); n == 0 || n > 1 && s[start] == '0' {
		return false
	}
	if i < len(s) && s[i] == '.' {
		i++
		if digits() == 0 {
			return false
		}
	}
	if i < len(s) && (s[i] == 'e' || s[i] == 'E') {
		i++
		if i < len(s) && (s[i] == '+' || s[i] == '-') {
			i++
		}
		if digits() == 0 {
			return false
		}
	}
	return i == len(s)
}

// splitList splits a list value at its unescaped commas (dataquery's
// rule: \, and \\ inside an item).
func splitList(s string) []string {
	var out []string
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		switch c := s[i]; {
		case c == '\\' && i+1 < len(s):
			i++
			b.WriteByte(s[i])
		case c == ',':
			out = append(out, b.String())
			b.Reset()
		default:
			b.WriteByte(c)
		}
	}
	return append(out, b.String())
}

// opPatterns are the regular expressions of a filter with each operator.
var opPatterns = map[string]string{
	"eq": `eq\..*`, "neq": `neq\..*`, "lt": `lt\..*`, "lte": `lte\..*`, "gt": `gt\..*`, "gte": `gte\..*`,
	"in": `in\.\(.*\)`, "is": `is\.(null|true|false)`, "like": `like\..*`, "ilike": `ilike\..*`,
}

// choices are a table-mode route's select=, order=, or=, and= and the
// Prefer header's count.
func choices(d *Data) []any {
	if d.Table == "" {
		return []any{prefer()}
	}
	var out []any
	if len(d.Select) > 0 {
		names := make([]string, len(d.Select))
		for i, c := range d.Select {
			names[i] = regexpQuote(c)
		}
		one := "(" + strings.Join(names, "|") + ")"
		out = append(out, obj{{"name", "select"}, {"in", "query"}, {"required", false},
			{"description", "The columns of the answer, in this order, each once: a comma-separated subset of " + strings.Join(d.Select, ", ") + " (* for all, the default)."},
			{"schema", obj{{"type", "string"}, {"pattern", "^(\\*|" + one + "(," + one + ")*)$"}}}, {"x-levee-columns", d.Select}})
	}
	if len(d.Orders) > 0 {
		out = append(out, obj{{"name", "order"}, {"in", "query"}, {"required", false},
			{"description", "One of the orders this route allows: " + strings.Join(d.Orders, "; ") + ", in PostgREST's syntax (col, col.asc, col.desc; .asc may be left out). " +
				"Pages follow each order's keyset; a cursor is valid only under the order (and select) it was made with."},
			{"schema", obj{{"type", "string"}}}, {"x-levee-orders", d.Orders}})
	}
	if len(d.Filters) > 0 {
		for _, k := range []string{"or", "and"} {
			out = append(out, obj{{"name", k}, {"in", "query"}, {"required", false},
				{"description", "A logical group of filters, PostgREST's " + k + "=(col.op.value,...), nesting and(...), or(...), not.and(...), not.or(...) " +
					"at most " + strconv.Itoa(dataquery.MaxLogicDepth) + " deep and " + strconv.Itoa(dataquery.MaxLogicTerms) + " conditions in all; each condition obeys its column's filter operators. " +
					"Quote a value holding a comma or parenthesis: \"a,b\"."},
				{"schema", obj{{"type", "string"}, {"pattern", "^\\(.*\\)$"}}}})
		}
	}
	return append(out, prefer())
}

// prefer is the Prefer header's count preference.
func prefer() obj {
	return obj{{"name", "Prefer"}, {"in", "header"}, {"required", false},
		{"description", "count=exact (at most the route's count_max, else 400), count=planned (PostgreSQL's planner estimate) or count=estimated " +
			"(exact up to count_max, planned beyond): the total is in Content-Range (0-24/3573458), as PostgREST sends it."},
		{"schema", obj{{"type", "string"}}}}
}

// regexpQuote escapes a column name for a pattern.
func regexpQuote(s string) string {
	var b strings.Builder
	for _, r := range s {
		if strings.ContainsRune(`\.+*?()|[]{}^$`, r) {
			b.WriteByte('\\')
		}
		b.WriteRune(r)
	}
	return b.String()
}

// filter is one table-mode column a request may filter on: a repeatable
// query parameter named as the column, each value an operator and a value.
func filter(f Filter, maxFilters int) obj {
	var alts []string
	for _, op := range f.Ops {
		if p, ok := opPatterns[op]; ok {
			alts = append(alts, p)
		}
	}
	item := obj{{"type", "string"}, {"pattern", "^(not\\.)?(" + strings.Join(alts, "|") + ")$"}}
	kind := f.Kind
	if kind == "" {
		kind = "the column's type (unknown for now: the data source could not be asked)"
	}
	desc := fmt.Sprintf("Filters column `%s` with PostgREST's operators: %s (`%s=eq.V`, `%s=in.(A,B)`, `is.null`; `like` and `ilike` take `*` as the wildcard; `not.` before the operator negates it). "+
		"Values are parsed as %s. Repeated filters on the column are ANDed.", f.Column, strings.Join(f.Ops, ", "), f.Column, f.Column, kind)
	s := obj{{"type", "array"}, {"items", item}, {"minItems", 1}}
	if maxFilters > 0 {
		s.set("maxItems", maxFilters)
	}
	return obj{{"name", f.Column}, {"in", "query"}, {"required", false}, {"description", desc},
		{"schema", s}, {"style", "form"}, {"explode", true}}
}

// dataOK is a data route's 200: its row schema and one content per format.
func (r *renderer) dataOK(rt *Route, head bool) obj {
	d := rt.Data
	rowName := rt.Name + ".row"
	rowRef := obj{{"$ref", "#/components/schemas/" + rowName}}
	if !r.hasSchema(rowName) {
		r.rows = append(r.rows, member{rowName, rowSchema(d)})
	}
	if d.Single {
		return r.singleOK(rt, rowRef, head)
	}
	headers := obj{{"Levee-Truncated", obj{{"description", "Present (as a header, or a trailer on a long answer) when a cap cut the answer: max_rows or max_bytes."},
		{"schema", obj{{"type", "string"}, {"enum", []string{"max_rows", "max_bytes"}}}}}}}
	headers.set("Content-Range", obj{{"description", "With Prefer: count=...: the rows of the answer and the total, as PostgREST sends it: 0-24/3573458 (*/N after a cursor or with no rows)."},
		{"schema", obj{{"type", "string"}}}})
	headers.set("Preference-Applied", obj{{"description", "The count preference applied (count=exact, planned or estimated)."}, {"schema", obj{{"type", "string"}}}})
	if d.Cached {
		headers.set("Levee-Cache", obj{{"description", "hit (fresh from the cache), stale (the source failing: an older answer within stale_if_error) or miss."},
			{"schema", obj{{"type", "string"}, {"enum", []string{"hit", "stale", "miss"}}}}})
		headers.set("Age", obj{{"description", "Seconds since a cached answer was read from the database."}, {"schema", obj{{"type", "integer"}, {"minimum", 0}}}})
	}
	resp := obj{{"description", "The rows, streamed as the database sends them, in the format Accept picks among: " + strings.Join(d.Formats, ", ") +
		" (the first when Accept is absent or */*). A stream cut short after the status is detectable: JSON left unterminated, " +
		"NDJSON a last line {\"error\",\"reason\"}, CSV an unclosed quoted last record."}, {"headers", headers}}
	if head {
		return resp
	}
	content := obj{}
	for _, f := range d.Formats {
		switch f {
		case MediaJSON:
			pageName := rt.Name + ".page"
			if !r.hasSchema(pageName) {
				r.rows = append(r.rows, member{pageName, pageSchema(rowRef, d.Page != nil)})
			}
			content.set(f, obj{{"schema", obj{{"$ref", "#/components/schemas/" + pageName}}}})
		case MediaNDJSON:
			content.set(f, obj{{"schema", obj{{"type", "string"},
				{"description", "One JSON object a line, each a row (schema " + rowName + "); a capped answer ends with {\"truncated\":true,\"reason\":...}, one cut short with {\"error\",\"reason\"}. Every row up to max_rows, not paged."}}},
				{"x-levee-item-schema", rowRef}})
		case MediaCSV:
			content.set(f, obj{{"schema", obj{{"type", "string"},
				{"description", "RFC 4180, UTF-8: a header line of the column names, then one CRLF-ended record per row; NULL is an empty unquoted field, the empty string \"\". Every row up to max_rows, not paged."}}}})
		default:
			content.set(f, obj{{"schema", obj{{"type", "string"}}}})
		}
	}
	resp.set("content", content)
	return resp
}

// singleOK is a single-row route's 200: the row itself, a JSON object.
func (r *renderer) singleOK(rt *Route, rowRef obj, head bool) obj {
	resp := obj{{"description", "The one row the query returned, as a JSON object (no row: 404 not_found; more than one: 502 query_failed, detail more_than_one_row)."}}
	if rt.Data.Cached {
		resp.set("headers", obj{
			{"Levee-Cache", obj{{"description", "hit (fresh from the cache), stale (the source failing: an older answer within stale_if_error) or miss."},
				{"schema", obj{{"type", "string"}, {"enum", []string{"hit", "stale", "miss"}}}}}},
			{"Age", obj{{"description", "Seconds since a cached answer was read from the database."}, {"schema", obj{{"type", "integer"}, {"minimum", 0}}}}},
		})
	}
	if !head {
		resp.set("content", obj{{MediaJSON, obj{{"schema", rowRef}}}})
	}
	return resp
}

func (r *renderer) hasSchema(name string) bool {
	return slices.ContainsFunc(r.rows, func(m member) bool { return m.key == name })
}

// pageSchema is a JSON answer: the rows, then the trailing members.
func pageSchema(row obj, paged bool) obj {
	cursor := "null: JSON answers of this route are not paged."
	if paged {
		cursor = "The cursor of the next page (pass it as cursor=); null on the last page."
	}
	return obj{{"type", "object"}, {"required", []string{"rows", "next_cursor", "truncated"}},
		{"properties", obj{
			{"rows", obj{{"type", "array"}, {"items", row}}},
			{"next_cursor", obj{{"type", []string{"string", "null"}}, {"description", cursor}}},
			{"truncated", obj{{"type", "boolean"}, {"description", "true when max_rows, max_bytes or the app's row or byte quota cut the answer."}}},
			{"reason", obj{{"type", "string"}, {"enum", []string{"quota_exhausted"}}, {"description", "Present when the app's row or byte quota cut the answer: its next call is refused 429 quota_exhausted until the quota's window ends."}}},
		}},
		{"additionalProperties", false}}
}

// rowSchema is one row: an object keyed by column name in column order,
// each value nullable unless the database's catalogue says the column is
// NOT NULL (Column.NotNull).
func rowSchema(d *Data) obj {
	if !d.ColumnsKnown {
		return obj{{"type", "object"}, {"description", "The columns are unknown for now (" + d.ColumnsNote + "); ask for the document again later."},
			{"x-levee-columns", "unknown"}}
	}
	props := obj{}
	names := make([]string, 0, len(d.Columns))
	for _, c := range d.Columns {
		props.set(c.Name, columnSchema(c))
		names = append(names, c.Name)
	}
	desc := "One row, keyed by column name in this order."
	if d.ColumnsNote != "" {
		desc += " Columns " + d.ColumnsNote + "."
	}
	return obj{{"type", "object"}, {"description", desc}, {"required", names}, {"properties", props}, {"additionalProperties", false}}
}

// columnSchema is the schema of a column's values as levee writes them
// in JSON (docs/data-formats.md, "Values"): its valuekind row's.
func columnSchema(c Column) obj {
	s, note := obj{}, "kind "+strconv.Quote(c.Kind)+": any value"
	if spec, ok := valuekind.Lookup(c.Kind); ok {
		s, note = schemaObj(spec.ColumnSchema), spec.ColumnNote
	}
	desc := c.Kind
	if c.Type != "" {
		desc += " (database type " + c.Type + ")"
	}
	if note != "" {
		desc += ": " + note
	}
	if c.NotNull {
		s = dropNull(s)
		s.set("description", desc+"; never null (NOT NULL in the database).")
	} else {
		s.set("description", desc+"; null for NULL.")
	}
	if c.Type != "" {
		s.set("x-levee-db-type", c.Type)
	}
	return s
}
