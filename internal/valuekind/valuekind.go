// Package valuekind is the one vocabulary of data values: the kinds a
// data route's parameters, filters and columns may have, each declared
// once with its configuration name, its JSON Schema forms, a sample value
// and whether a request value of it can be parsed (a parameter's type, a
// filter's value). config, datasource, dataquery, dataapi and openapi all
// read this table; it imports nothing of levee.
package valuekind

// The kind names, as a configuration writes them (a parameter's `type`,
// `column_types`) and as the OpenAPI document shows them.
const (
	Int64     = "int64"
	Float64   = "float64"
	Bool      = "bool"
	String    = "string"
	Date      = "date"
	Timestamp = "timestamp"
	UUID      = "uuid"
	Numeric   = "numeric"
	Bytes     = "bytes"
	JSON      = "json"
)

// Member is one member of a JSON Schema object, in order. Val is made of
// string, bool, int, []string, []any and []Member (a nested object).
type Member struct {
	Key string
	Val any
}

// Spec is one kind's row.
type Spec struct {
	// Name is the kind's name (one of the constants above).
	Name string
	// Param is true when a request's text can be parsed as the kind
	// (dataquery.Kind has it): a SQL-mode parameter's type may be it.
	Param bool
	// Filter is how a table-mode filter value on a column of this kind is
	// parsed (a Param kind's name), "" when the column cannot be filtered.
	// numeric values are passed as text for the database to read exactly.
	Filter string
	// Value is the Go type of a column's non-NULL values as datasource
	// hands them out (documentation).
	Value string
	// Sample is a valid request value of a Param kind, "" for the others
	// (bound to describe a statement: only its shape matters).
	Sample string
	// ParamSchema is the JSON Schema of one request value of a Param
	// kind (a string's maxLength is added by the document).
	ParamSchema []Member
	// ColumnSchema is the JSON Schema of a column's values as levee
	// writes them in JSON (docs/data-formats.md, "Values"), NULL included;
	// ColumnNote says how, "" when the schema says it all.
	ColumnSchema []Member
	ColumnNote   string
}

// table holds every kind, parameter kinds first in dataquery.Kind's order.
var table = [...]Spec{
	{Name: Int64, Param: true, Filter: Int64, Value: "int64", Sample: "0",
		ParamSchema:  []Member{{"type", "integer"}, {"format", "int64"}},
		ColumnSchema: []Member{{"type", []string{"integer", "string", "null"}}, {"format", "int64"}, {"pattern", "^-?[0-9]+$"}},
		ColumnNote:   "a JSON number within ±2^53, a decimal string beyond"},
	{Name: Float64, Param: true, Filter: Float64, Value: "float64", Sample: "0",
		ParamSchema: []Member{{"type", "number"}, {"format", "double"}},
		ColumnSchema: []Member{{"anyOf", []any{[]Member{{"type", []string{"number", "null"}}, {"format", "double"}},
			[]Member{{"enum", []string{"NaN", "Infinity", "-Infinity"}}}}}},
		ColumnNote: "a number; NaN and the infinities as strings"},
	{Name: Bool, Param: true, Filter: Bool, Value: "bool", Sample: "true",
		ParamSchema:  []Member{{"type", "boolean"}},
		ColumnSchema: []Member{{"type", []string{"boolean", "null"}}}},
	{Name: String, Param: true, Filter: String, Value: "string (text, time, interval, enums, any type without a closer kind)", Sample: "x",
		ParamSchema:  []Member{{"type", "string"}},
		ColumnSchema: []Member{{"type", []string{"string", "null"}}}},
	{Name: Date, Param: true, Filter: Date, Value: `string "YYYY-MM-DD" (PostgreSQL: "infinity" and BC dates as it renders them)`, Sample: "2000-01-01",
		ParamSchema:  []Member{{"type", "string"}, {"format", "date"}},
		ColumnSchema: []Member{{"type", []string{"string", "null"}}, {"format", "date"}},
		ColumnNote:   "YYYY-MM-DD (PostgreSQL's infinity and BC dates as it writes them)"},
	{Name: Timestamp, Param: true, Filter: Timestamp, Value: "time.Time in UTC", Sample: "2000-01-01T00:00:00Z",
		ParamSchema:  []Member{{"type", "string"}, {"format", "date-time"}, {"description", "RFC 3339 with a zone (Z or ±hh:mm)"}},
		ColumnSchema: []Member{{"type", []string{"string", "null"}}, {"format", "date-time"}},
		ColumnNote:   "RFC 3339 in UTC"},
	{Name: UUID, Param: true, Filter: UUID, Value: "string, canonical lower-case form", Sample: "00000000-0000-0000-0000-000000000000",
		ParamSchema: []Member{{"type", "string"}, {"format", "uuid"},
			{"pattern", "^[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}$"}},
		ColumnSchema: []Member{{"type", []string{"string", "null"}}, {"format", "uuid"}}},
	{Name: Numeric, Filter: String, Value: `string, exact decimal text ("NaN", "Infinity" as PostgreSQL renders them)`,
		ColumnSchema: []Member{{"type", []string{"string", "null"}}},
		ColumnNote:   "the exact decimal text"},
	{Name: Bytes, Value: "[]byte",
		ColumnSchema: []Member{{"type", []string{"string", "null"}}, {"contentEncoding", "base64"}},
		ColumnNote:   "standard base64"},
	{Name: JSON, Value: "json.RawMessage",
		ColumnNote: "the JSON value itself"},
}

// All returns every kind's row, in table order (a new slice each call).
func All() []Spec { return append([]Spec(nil), table[:]...) }

// Lookup returns name's row; ok is false for a name that is no kind.
func Lookup(name string) (Spec, bool) {
	for _, s := range table {
		if s.Name == name {
			return s, true
		}
	}
	return Spec{}, false
}

// Names lists every kind's name, in table order: what a route's
// column_types may declare.
func Names() []string {
	out := make([]string, 0, len(table))
	for _, s := range table {
		out = append(out, s.Name)
	}
	return out
}

// ParamNames lists the Param kinds' names, in table order: what a
// parameter's type may be.
func ParamNames() []string {
	var out []string
	for _, s := range table {
		if s.Param {
			out = append(out, s.Name)
		}
	}
	return out
}
