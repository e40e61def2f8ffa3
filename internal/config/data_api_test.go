package config

import (
	"encoding/json"
	"reflect"
	"slices"
	"strings"
	"testing"
)

// lifecycleExtra adds a data route using many route and data fields to
// dataYAML's routes.
const lifecycleExtra = `  - name: rich
    match: {path_prefix: /v1/rich, host: api.example.com, methods: [get]}
    auth: api_key
    priority: critical
    timeout: 1500ms
    data:
      source: sales
      sql: SELECT z, id FROM t WHERE a = :a AND b IN (:b) AND c >= :c AND d = :d
      column_types: {z: string, id: int64}
      params:
        d: {type: string, max_len: 8, default: "1.50"}
        a: {type: float64, min: 0.5, max: 1e3, default: 16}
        b: {type: int64, list: true, max_items: 4, required: true}
        c: {type: timestamp, default: "2025-01-01T00:00:00Z"}
      formats: [ndjson]
      statement_timeout: 30s
      limits: {max_rows: 5, max_bytes: 1MiB}
`

// TestDataDefinitionRoundTrip: every file data route's definition
// (Config.DataDefinition, canonical JSON) reads back through
// ParseDataAPI as the very route the file parsed, so a route seeded into
// the data-API store serves as the file says.
func TestDataDefinitionRoundTrip(t *testing.T) {
	cfg, err := Parse([]byte(dataYAML(t, lifecycleExtra)))
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, r := range cfg.Routes {
		if r.Data == nil {
			continue
		}
		n++
		def := cfg.DataDefinition(r.Name)
		var top map[string]any
		if err := json.Unmarshal(def, &top); err != nil || top["name"] != nil {
			t.Errorf("%s: the definition keeps the name: %s", r.Name, def)
		}
		got, err := ParseDataAPI(cfg, r.Name, def)
		if err != nil {
			t.Fatalf("%s: %s: %v", r.Name, def, err)
		}
		if !reflect.DeepEqual(*got, r) {
			t.Errorf("%s: read back as\n%+v\nwant\n%+v", r.Name, *got.Data, *r.Data)
		}
		if got.Data.Version() != r.Data.Version() {
			t.Errorf("%s: the version differs", r.Name)
		}
		again, _, err := DefinitionJSON(def)
		if err != nil || string(again) != string(def) {
			t.Errorf("%s: canonical JSON is not a fixed point: %s, %v", r.Name, again, err)
		}
	}
	if n != 3 {
		t.Fatalf("%d data routes, want 3", n)
	}
	if rich, _ := ParseDataAPI(cfg, "rich", cfg.DataDefinition("rich")); !slices.Equal(rich.Data.ColumnTypeOrder, []string{"z", "id"}) ||
		!slices.Equal(rich.Data.ParamOrder, []string{"d", "a", "b", "c"}) {
		t.Errorf("orders not kept: column_types %v, params %v", rich.Data.ColumnTypeOrder, rich.Data.ParamOrder)
	}
	if !strings.Contains(string(cfg.DataDefinition("rich")), `"default":"1.50"`) || !strings.Contains(string(cfg.DataDefinition("rich")), `"default":16`) {
		t.Errorf("scalars not kept as written: %s", cfg.DataDefinition("rich"))
	}
}

// TestParseDataAPIErrors: a runtime definition is refused as a file route
// would be, with paths relative to the definition, and the lifecycle's own
// rules: the name, no upstream, data required, the namespace of routes.
func TestParseDataAPIErrors(t *testing.T) {
	cfg, err := Parse([]byte(dataYAML(t, `  - {name: web, match: {path_prefix: /web}, upstream: web}
upstreams:
  web: {endpoints: [{address: 127.0.0.1:1}]}
`)))
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct{ name, def, want string }{
		{"x", `match: {path_prefix: /x}
data: {source: nope, table: t, columns: [id]}`, `data.source: unknown data source "nope"`},
		{"x", `{"match": {"path_prefix": "/x"}, "data": {"source": "local", "sql": "SELECT :a"}}`, "data.sql: "},
		{"x", `{"match": {"path_prefix": "/x"}, "data": {"source": "sales", "sql": "COPY (SELECT 1) TO PROGRAM 'id'"}}`,
			"data.sql: COPY is not a query (line 1 column 1)"},
		{"x", `{"match": {"path_prefix": "/x"}, "data": {"source": "local", "sql": "SELECT 1; DELETE FROM t"}}`,
			"data.sql: two statements: ';' at offset 8"},
		{"x", `{"match": {"path_prefix": "x"}, "data": {"source": "local", "table": "t", "columns": ["id"]}}`, "match.path_prefix: "},
		{"x", `{"match": {"path_prefix": "/x"}, "data": {"source": "local", "table": "t", "columns": ["id"]}, "max_body_bytes": 10}`, "max_body_bytes: does not apply to a data route"},
		{"x", `{"match": {"path_prefix": "/x"}, "upstream": "web"}`, "upstream: a data API answers from a data source"},
		{"x", `{"match": {"path_prefix": "/x"}}`, "data: required"},
		{"x", `{"name": "y", "match": {"path_prefix": "/x"}, "data": {"source": "local", "table": "t", "columns": ["id"]}}`, `name: must be the data API's name "x"`},
		{"Bad", `{"data": {"source": "local", "table": "t", "columns": ["id"]}}`, "name: name must be"},
		{"web", `{"data": {"source": "local", "table": "t", "columns": ["id"]}}`, "not a data route"},
		{"x", `[1, 2]`, "the definition must be a mapping"},
		{"x", `{"match": {}, "match": {}, "data": {"source": "local", "table": "t", "columns": ["id"]}}`, "duplicate key"},
		{"x", "match: {path_prefix: /x}\ndata: {source: local, table: t, columns: [id], limits: {max_rows: 0x10}}", "data.limits.max_rows: the number 0x10 is not written as JSON"},
		{"x", ``, "the definition must be a mapping"},
	}
	for _, tt := range tests {
		_, err := ParseDataAPI(cfg, tt.name, []byte(tt.def))
		if err == nil || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("%s %s: %v, want %q", tt.name, tt.def, err, tt.want)
		}
		if _, ok := err.(*Errors); !ok {
			t.Errorf("%s: %T, want *Errors", tt.def, err)
		}
	}
	// A file data route's name is the data API's own: allowed.
	if _, err := ParseDataAPI(cfg, "orders-v1", cfg.DataDefinition("customers-v1")); err != nil {
		t.Errorf("redefining a file data route: %v", err)
	}
}

// TestRouteConflicts: names and overlapping matches, each naming both
// routes with the later one first.
func TestRouteConflicts(t *testing.T) {
	r := func(name, prefix string, methods ...string) Route {
		return Route{Name: name, Match: Match{PathPrefix: prefix, Methods: methods}}
	}
	got := RouteConflicts([]Route{r("a", "/a"), r("b", "/b", "GET"), r("c", "/b", "HEAD", "GET"), r("a", "/z"), r("d", "/a", "GET")})
	want := []RouteConflict{
		{3, 0, `route name "a" is used twice`},
		{2, 1, `route "c" duplicates route "b" (same host, path_prefix and method "GET")`},
	}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("got %+v\nwant %+v", got, want)
	}
}

// FuzzParseDataAPI: a definition the walker accepts as YAML is accepted
// again, as the same route, from its canonical JSON; nothing panics.
func FuzzParseDataAPI(f *testing.F) {
	cfg, err := Parse([]byte(dataYAML(f, lifecycleExtra)))
	if err != nil {
		f.Fatal(err)
	}
	for _, r := range cfg.Routes {
		f.Add(cfg.DataDefinition(r.Name))
	}
	f.Add([]byte("match: {path_prefix: /x}\ndata: {source: local, table: t, columns: [id], filters: {id: [eq, in]}}\n"))
	f.Add([]byte(`{"data": {"source": "sales", "sql": "SELECT :a::int", "params": {"a": {"type": "int64", "default": 1_000}}}}`))
	f.Fuzz(func(t *testing.T, def []byte) {
		canon, _, cerr := DefinitionJSON(def)
		r, err := ParseDataAPI(cfg, "fz", def)
		if err != nil {
			return
		}
		if cerr != nil {
			t.Fatalf("accepted, but no canonical form: %v", cerr)
		}
		back, err := ParseDataAPI(cfg, "fz", canon)
		if err != nil {
			t.Fatalf("%q accepted, its canonical form %s refused: %v", def, canon, err)
		}
		if !reflect.DeepEqual(*back, *r) {
			t.Fatalf("%q and its canonical form %s read differently", def, canon)
		}
	})
}
