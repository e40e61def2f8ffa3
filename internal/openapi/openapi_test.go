package openapi

import (
	"bytes"
	"encoding/json"
	"flag"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/levee-gw/levee/internal/dataquery"
	"github.com/levee-gw/levee/internal/openapi/openapitest"
	"github.com/levee-gw/levee/internal/valuekind"
)

var update = flag.Bool("update", false, "rewrite the golden files under testdata/golden")

// sample describes one route of every shape: proxied (any method, a
// host, api_key), a second route on the same prefix and method (another
// host), an HMAC route with a method OpenAPI cannot hold, a SQL data route
// with every parameter type, a table route with every column kind, and a
// data route whose columns are unknown.
func sample() Document {
	bad400 := []Refusal{
		{Reason: "bad_path", Status: 400, Sentence: "the request path is malformed"},
		{Reason: "unauthenticated", Status: 401, Sentence: "no valid credentials"},
		{Reason: "forbidden", Status: 403, Sentence: "not granted"},
		{Reason: "rate_limited", Status: 429, Sentence: "over its rate limit", RetryAfter: true},
		{Reason: "consumer_limit", Status: 429, Sentence: "too many in flight", RetryAfter: true},
		{Reason: "queue_full", Status: 503, Sentence: "queue full", RetryAfter: true},
		{Reason: "upstream_unavailable", Status: 502, Sentence: "unreachable"},
	}
	data := []Refusal{
		{Reason: "missing_parameter", Status: 400, Sentence: "a required query parameter is missing"},
		{Reason: "invalid_parameter", Status: 400, Sentence: "malformed or out of bounds"},
		{Reason: "not_acceptable", Status: 406, Sentence: "no acceptable format"},
		{Reason: "consumer_limit", Status: 429, Sentence: "too many in flight", RetryAfter: true},
		{Reason: "data_source_unavailable", Status: 503, Sentence: "down", RetryAfter: true},
		{Reason: "statement_timeout", Status: 504, Sentence: "too slow"},
	}
	all := []string{MediaJSON, MediaNDJSON, MediaCSV}
	return Document{Description: "test", Routes: []Route{
		{Name: "shop", Host: "api.example.com", PathPrefix: "/shop", Auth: AuthAPIKey, Upstream: "shop", Refusals: bad400},
		{Name: "shop-eu", Host: "eu.example.com", PathPrefix: "/shop", Methods: []string{"GET"}, Upstream: "shop-eu"},
		{Name: "braces", PathPrefix: "/t/{id}", Methods: []string{"GET"}, Upstream: "dav"},
		{Name: "dav", PathPrefix: "/dav", Methods: []string{"PROPFIND"}, Auth: AuthHMAC, Upstream: "dav"},
		{Name: "signed", PathPrefix: "/", Methods: []string{"POST", "GET"}, Auth: AuthHMAC, Upstream: "dav"},
		{Name: "orders-v1", PathPrefix: "/v1/orders", Methods: []string{"GET", "HEAD"}, Auth: AuthAPIKey, Refusals: data, Data: &Data{
			Source: "sales", Formats: all, MaxRows: 10000, MaxBytes: 8 << 20, Cached: true,
			Params: []dataquery.Param{
				{Name: "customer_id", Type: dataquery.Int64, Required: true, Min: "1", MaxItems: 0},
				{Name: "big", Type: dataquery.Int64, Default: "9007199254740993", Max: "9223372036854775807"},
				{Name: "ratio", Type: dataquery.Float64, Min: "-0.5", Max: "1e3"},
				{Name: "open", Type: dataquery.Bool, Default: "true"},
				{Name: "q", Type: dataquery.String, MaxLen: 64},
				{Name: "day", Type: dataquery.Date, Min: "2020-01-01"},
				{Name: "since", Type: dataquery.Timestamp, Max: "2030-01-01T00:00:00Z"},
				{Name: "id", Type: dataquery.UUID},
				{Name: "ids", Type: dataquery.Int64, List: true, Required: true, MaxItems: 100},
				{Name: "tags", Type: dataquery.String, List: true, Default: `a\,b,c`, MaxLen: 1024, MaxItems: 5},
			},
			Page:         &Page{Keyset: []string{"created_at", "id"}, Default: 100, Max: 1000},
			ColumnsKnown: true, ColumnsNote: "from the database (PostgreSQL) at 2025-01-01T00:00:00Z",
			Columns: []Column{{"id", "int8", valuekind.Int64, false}, {"total", "numeric", valuekind.Numeric, false}, {"created_at", "timestamptz", valuekind.Timestamp, false}},
		}},
		{Name: "customers-v1", PathPrefix: "/v1/customers", Methods: []string{"GET"}, Refusals: data, Data: &Data{
			Source: "sales", Table: "customers", Formats: []string{MediaCSV, MediaJSON}, MaxRows: 5, MaxBytes: 1024, MaxFilters: 8,
			Select: []string{"id", "score", "name", "created_at"}, Orders: []string{"id.desc", "created_at.desc,id.asc"},
			Filters:      []Filter{{Column: "region", Kind: valuekind.String, Ops: []string{"eq", "in"}}, {Column: "created_at", Kind: valuekind.Timestamp, Ops: []string{"gte", "lt", "is"}}},
			ColumnsKnown: true,
			Columns: []Column{{"id", "INTEGER", valuekind.Int64, false}, {"score", "REAL", valuekind.Float64, false}, {"vip", "BOOLEAN", valuekind.Bool, false}, {"name", "TEXT", valuekind.String, false},
				{"born", "DATE", valuekind.Date, false}, {"created_at", "TIMESTAMP", valuekind.Timestamp, false}, {"uid", "UUID", valuekind.UUID, false}, {"price", "NUMERIC", valuekind.Numeric, false},
				{"photo", "BLOB", valuekind.Bytes, false}, {"attrs", "JSON", valuekind.JSON, false}, {"odd", "", "other", false}},
		}},
		{Name: "product", PathPrefix: "/v1/products/{id:int}", PathKind: "path_template", Methods: []string{"GET", "HEAD"},
			Refusals: append(slices.Clone(data), Refusal{Reason: "not_found", Status: 404, Sentence: "no row matches the request"}), Data: &Data{
				Source: "sales", Formats: []string{MediaJSON}, MaxRows: 10000, MaxBytes: 8 << 20, Cached: true, Single: true,
				Params:       []dataquery.Param{{Name: "id", Type: dataquery.Int64, Required: true, Min: "1"}, {Name: "lang", Type: dataquery.String, Default: "en"}},
				ColumnsKnown: true, Columns: []Column{{"id", "int8", valuekind.Int64, false}, {"name", "text", valuekind.String, false}},
			}},
		{Name: "repo", PathPrefix: "/u/{user}/repos/{n:int}", PathKind: "path_template", Methods: []string{"GET"}, Upstream: "dav"},
		{Name: "repo-post", PathPrefix: "/u/{owner}/repos/{m:int}", PathKind: "path_template", Methods: []string{"POST"}, Upstream: "dav"},
		{Name: "down-v1", PathPrefix: "/v1/down", Methods: []string{"GET"}, Data: &Data{
			Source: "gone", Table: "t", Formats: []string{MediaNDJSON}, MaxRows: 1, MaxBytes: 1,
			Filters:     []Filter{{Column: "x", Ops: []string{"like"}}},
			ColumnsNote: "the data source gone did not answer (data_source_unavailable)",
		}},
	}}
}

func TestRenderGolden(t *testing.T) {
	doc, err := Render(sample())
	if err != nil {
		t.Fatal(err)
	}
	if err := openapitest.Check(doc); err != nil {
		t.Fatalf("the rendered document breaks OpenAPI 3.1:\n%v", err)
	}
	again, _ := Render(sample())
	if !bytes.Equal(doc, again) {
		t.Fatal("two renderings of one description differ")
	}
	path := filepath.Join("testdata", "golden", "document.json")
	if *update {
		if err := os.WriteFile(path, doc, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v (run go test -update to write it)", err)
	}
	if !bytes.Equal(doc, want) {
		t.Fatalf("the document differs from %s (go test -update rewrites it after a deliberate change); got:\n%s", path, doc)
	}
	if !json.Valid(doc) {
		t.Fatal("not valid JSON")
	}
}

// at walks a decoded document by keys and array indexes.
func at(t *testing.T, v any, path ...any) any {
	t.Helper()
	for _, p := range path {
		switch k := p.(type) {
		case string:
			m, ok := v.(map[string]any)
			if !ok {
				t.Fatalf("at %v: %q on a %T", path, k, v)
			}
			if v, ok = m[k]; !ok {
				t.Fatalf("at %v: no %q", path, k)
			}
		case int:
			a, ok := v.([]any)
			if !ok || k >= len(a) {
				t.Fatalf("at %v: [%d] on %T", path, k, v)
			}
			v = a[k]
		}
	}
	return v
}

func decode(t *testing.T, doc []byte) map[string]any {
	t.Helper()
	var m map[string]any
	d := json.NewDecoder(bytes.NewReader(doc))
	d.UseNumber()
	if err := d.Decode(&m); err != nil {
		t.Fatal(err)
	}
	return m
}

func mustJSON(v any) string {
	b, _ := json.Marshal(v)
	return string(b)
}

func TestRenderShapes(t *testing.T) {
	doc, err := Render(sample())
	if err != nil {
		t.Fatal(err)
	}
	m := decode(t, doc)
	param := func(route, path string, i int) any { return at(t, m, "paths", path, "get", "parameters", i) }
	cases := []struct {
		name string
		got  any
		want string
	}{
		{"version", at(t, m, "openapi"), `"3.1.0"`},
		{"prefix flag", at(t, m, "paths", "/shop", "x-levee-path-prefix"), `true`},
		{"any method", at(t, m, "paths", "/shop", "trace", "operationId"), `"shop.trace"`},
		{"first method plain id", at(t, m, "paths", "/shop", "get", "operationId"), `"shop"`},
		{"no connect", at(t, m, "paths", "/shop", "x-levee-path-prefix"), `true`},
		{"collision key", at(t, m, "paths", "/shop#shop-eu", "x-levee-path"), `"/shop"`},
		{"collision id", at(t, m, "paths", "/shop#shop-eu", "get", "operationId"), `"shop-eu"`},
		{"host", at(t, m, "paths", "/shop", "get", "x-levee-host"), `"api.example.com"`},
		{"braces escaped", at(t, m, "paths", "/t/%7Bid%7D", "x-levee-path"), `"/t/{id}"`},
		{"api key security", at(t, m, "paths", "/shop", "get", "security"), `[{"api_key":[]},{"api_key_bearer":[]}]`},
		{"api key header", at(t, m, "components", "securitySchemes", "api_key", "name"), `"X-Api-Key"`},
		{"hmac scheme", at(t, m, "components", "securitySchemes", "hmac", "scheme"), `"LEVEE-HMAC-SHA256"`},
		{"unlisted method", at(t, m, "paths", "/dav", "x-levee-unlisted-methods", "dav"), `["PROPFIND"]`},
		{"proxied default", at(t, m, "paths", "/shop", "get", "responses", "default", "description") != nil, `true`},
		{"429 reasons", at(t, m, "paths", "/shop", "get", "responses", "429", "content", "application/json", "schema", "properties", "reason", "enum"), `["rate_limited","consumer_limit"]`},
		{"429 retry-after", at(t, m, "paths", "/shop", "get", "responses", "429", "headers", "Retry-After", "schema", "type"), `"integer"`},
		{"401 challenge", at(t, m, "paths", "/shop", "get", "responses", "401", "headers", "WWW-Authenticate", "schema", "type"), `"string"`},
		{"int param", param("orders-v1", "/v1/orders", 0), `{"description":"Type int64 in [1, +inf].","in":"query","name":"customer_id","required":true,"schema":{"format":"int64","minimum":1,"type":"integer"}}`},
		{"big int exact", at(t, param("", "/v1/orders", 1), "schema"), `{"default":9007199254740993,"format":"int64","maximum":9223372036854775807,"type":"integer"}`},
		{"float bounds", at(t, param("", "/v1/orders", 2), "schema"), `{"format":"double","maximum":1e3,"minimum":-0.5,"type":"number"}`},
		{"bool default", at(t, param("", "/v1/orders", 3), "schema"), `{"default":true,"type":"boolean"}`},
		{"string maxLength", at(t, param("", "/v1/orders", 4), "schema"), `{"maxLength":64,"type":"string"}`},
		{"date bound", at(t, param("", "/v1/orders", 5), "schema"), `{"format":"date","type":"string","x-levee-minimum":"2020-01-01"}`},
		{"timestamp", at(t, param("", "/v1/orders", 6), "schema", "format"), `"date-time"`},
		{"uuid", at(t, param("", "/v1/orders", 7), "schema", "format"), `"uuid"`},
		{"list", param("", "/v1/orders", 8), `{"description":"Type int64; a comma-separated list of 1 to 100 items (a comma or backslash inside an item is escaped with a backslash).","explode":false,"in":"query","name":"ids","required":true,"schema":{"items":{"format":"int64","type":"integer"},"maxItems":100,"minItems":1,"type":"array"},"style":"form"}`},
		{"list default", at(t, param("", "/v1/orders", 9), "schema", "default"), `["a,b","c"]`},
		{"prefer", at(t, param("", "/v1/orders", 10), "in"), `"header"`},
		{"limit", at(t, param("", "/v1/orders", 11), "schema"), `{"default":100,"format":"int64","maximum":10000,"minimum":1,"type":"integer"}`},
		{"cursor", at(t, param("", "/v1/orders", 12), "name"), `"cursor"`},
	}
	for _, c := range cases {
		if got := mustJSON(c.got); got != c.want {
			t.Errorf("%s: got %s, want %s", c.name, got, c.want)
		}
	}
}

func TestRenderDataAnswers(t *testing.T) {
	doc, err := Render(sample())
	if err != nil {
		t.Fatal(err)
	}
	m := decode(t, doc)
	ok200 := func(path, method string) map[string]any {
		return at(t, m, "paths", path, method, "responses", "200").(map[string]any)
	}
	if _, has := ok200("/v1/orders", "head")["content"]; has {
		t.Error("HEAD's 200 describes a body")
	}
	content := ok200("/v1/orders", "get")["content"].(map[string]any)
	if len(content) != 3 || content[MediaJSON] == nil || content[MediaNDJSON] == nil || content[MediaCSV] == nil {
		t.Errorf("orders' 200 content: %v", mustJSON(content))
	}
	if got := ok200("/v1/customers", "get")["content"].(map[string]any); len(got) != 2 || got[MediaNDJSON] != nil {
		t.Errorf("customers' 200 content has other formats than csv and json: %v", mustJSON(got))
	}
	cases := []struct {
		name string
		got  any
		want string
	}{
		{"page", at(t, m, "components", "schemas", "orders-v1.page", "properties", "next_cursor", "type"), `["string","null"]`},
		{"page rows", at(t, m, "components", "schemas", "orders-v1.page", "properties", "rows", "items", "$ref"), `"#/components/schemas/orders-v1.row"`},
		{"page required", at(t, m, "components", "schemas", "orders-v1.page", "required"), `["rows","next_cursor","truncated"]`},
		{"row order", at(t, m, "components", "schemas", "orders-v1.row", "required"), `["id","total","created_at"]`},
		{"int64 column", at(t, m, "components", "schemas", "customers-v1.row", "properties", "id", "type"), `["integer","string","null"]`},
		{"float column", at(t, m, "components", "schemas", "customers-v1.row", "properties", "score", "anyOf", 1, "enum"), `["NaN","Infinity","-Infinity"]`},
		{"bool column", at(t, m, "components", "schemas", "customers-v1.row", "properties", "vip", "type"), `["boolean","null"]`},
		{"date column", at(t, m, "components", "schemas", "customers-v1.row", "properties", "born", "format"), `"date"`},
		{"timestamp column", at(t, m, "components", "schemas", "customers-v1.row", "properties", "created_at", "format"), `"date-time"`},
		{"uuid column", at(t, m, "components", "schemas", "customers-v1.row", "properties", "uid", "format"), `"uuid"`},
		{"numeric column", at(t, m, "components", "schemas", "customers-v1.row", "properties", "price", "type"), `["string","null"]`},
		{"bytes column", at(t, m, "components", "schemas", "customers-v1.row", "properties", "photo", "contentEncoding"), `"base64"`},
		{"db type", at(t, m, "components", "schemas", "customers-v1.row", "properties", "photo", "x-levee-db-type"), `"BLOB"`},
		{"closed row", at(t, m, "components", "schemas", "customers-v1.row", "additionalProperties"), `false`},
		{"unknown columns", at(t, m, "components", "schemas", "down-v1.row", "x-levee-columns"), `"unknown"`},
		{"filter", at(t, m, "paths", "/v1/customers", "get", "parameters", 1, "schema"), `{"items":{"pattern":"^(not\\.)?(gte\\..*|lt\\..*|is\\.(null|true|false))$","type":"string"},"maxItems":8,"minItems":1,"type":"array"}`},
		{"select", at(t, m, "paths", "/v1/customers", "get", "parameters", 2, "schema", "pattern"), `"^(\\*|(id|score|name|created_at)(,(id|score|name|created_at))*)$"`},
		{"order", at(t, m, "paths", "/v1/customers", "get", "parameters", 3, "x-levee-orders"), `["id.desc","created_at.desc,id.asc"]`},
		{"or", at(t, m, "paths", "/v1/customers", "get", "parameters", 4, "name"), `"or"`},
		{"prefer", at(t, m, "paths", "/v1/customers", "get", "parameters", 6, "in"), `"header"`},
		{"content-range", at(t, m, "paths", "/v1/customers", "get", "responses", "200", "headers", "Content-Range", "schema", "type"), `"string"`},
		{"filter explode", at(t, m, "paths", "/v1/customers", "get", "parameters", 1, "explode"), `true`},
		{"data 503 retry", at(t, m, "paths", "/v1/orders", "get", "responses", "503", "headers", "Retry-After", "description"), `"Seconds to wait before retrying."`},
		{"data 504 no retry", at(t, m, "paths", "/v1/orders", "get", "responses", "504", "content", "application/json", "schema", "properties", "reason", "enum"), `["statement_timeout"]`},
		{"cache header", at(t, m, "paths", "/v1/orders", "get", "responses", "200", "headers", "Levee-Cache", "schema", "enum"), `["hit","stale","miss"]`},
	}
	for _, c := range cases {
		if got := mustJSON(c.got); got != c.want {
			t.Errorf("%s: got %s, want %s", c.name, got, c.want)
		}
	}
	// A paged route without JSON pages nothing: no cursor; limit= is up
	// to max_rows.
	d := sample()
	d.Routes[5].Data.Formats = []string{MediaNDJSON, MediaCSV}
	nd, err := Render(d)
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range at(t, decode(t, nd), "paths", "/v1/orders", "get", "parameters").([]any) {
		if name := p.(map[string]any)["name"]; name == "cursor" {
			t.Errorf("NDJSON and CSV only, yet parameter %v is documented", name)
		}
		if p.(map[string]any)["name"] == "limit" && mustJSON(p.(map[string]any)["schema"].(map[string]any)["maximum"]) != strconv.Itoa(d.Routes[5].Data.MaxRows) {
			t.Errorf("NDJSON and CSV only: limit %s, want up to max_rows", mustJSON(p))
		}
	}
	if _, has := at(t, m, "paths", "/v1/orders", "get", "responses", "504").(map[string]any)["headers"]; has {
		t.Error("504 statement_timeout describes a Retry-After it never carries")
	}
}

func TestJSONNumber(t *testing.T) {
	for s, want := range map[string]bool{"0": true, "-1": true, "1.5": true, "1e3": true, "-0.5E-7": true, "9223372036854775807": true,
		"": false, "-": false, "01": false, "+1": false, ".5": false, "1.": false, "1e": false, "NaN": false, "0x10": false, "1_000": false, " 1": false} {
		if jsonNumber(s) != want {
			t.Errorf("jsonNumber(%q) = %v", s, !want)
		}
	}
}

func TestRenderRefusesMalformed(t *testing.T) {
	for name, mut := range map[string]func(d *Document){
		"empty name":        func(d *Document) { d.Routes[0].Name = "" },
		"name with slash":   func(d *Document) { d.Routes[0].Name = "a/b" },
		"relative prefix":   func(d *Document) { d.Routes[0].PathPrefix = "shop" },
		"fragment prefix":   func(d *Document) { d.Routes[0].PathPrefix = "/a#b" },
		"empty methods":     func(d *Document) { d.Routes[0].Methods = []string{} },
		"refusal 200":       func(d *Document) { d.Routes[0].Refusals = []Refusal{{Reason: "x", Status: 200}} },
		"no formats":        func(d *Document) { d.Routes[5].Data.Formats = nil },
		"param twice":       func(d *Document) { d.Routes[5].Data.Params[1].Name = "customer_id" },
		"param named limit": func(d *Document) { d.Routes[5].Data.Params[1].Name = "limit" },
		"filter no ops":     func(d *Document) { d.Routes[6].Data.Filters[0].Ops = nil },
	} {
		d := sample()
		mut(&d)
		if _, err := Render(d); err == nil {
			t.Errorf("%s: rendered", name)
		}
	}
}

// TestCheckCatches makes sure openapitest.Check is not a rubber stamp: each mutation
// of a valid document breaks one rule and must be reported.
func TestCheckCatches(t *testing.T) {
	good, err := Render(sample())
	if err != nil {
		t.Fatal(err)
	}
	for name, c := range map[string]struct{ from, to, want string }{
		"version":         {`"openapi": "3.1.0"`, `"openapi": "3.0.3"`, "want 3.1.0"},
		"unknown field":   {`"operationId": "shop"`, `"operationID": "shop"`, `field "operationID"`},
		"duplicate id":    {`"operationId": "shop-eu"`, `"operationId": "shop"`, "already used"},
		"bad ref":         {`"#/components/schemas/orders-v1.row"`, `"#/components/schemas/nope"`, "does not resolve"},
		"bad code":        {`"406": {`, `"46": {`, `not default`},
		"bad scheme ref":  {`"api_key_bearer": []`, `"bearer2": []`, "not declared"},
		"bad style":       {`"style": "form"`, `"style": "simple"`, `style "simple"`},
		"relative path":   {`"/v1/orders": {`, `"v1/orders": {`, "does not start with /"},
		"no description":  {`"description": "The rows, streamed`, `"summary": "The rows, streamed`, `field "summary"`},
		"bad type":        {`"type": "integer"`, `"type": "int"`, `type "int"`},
		"bound as string": {`"minimum": 1,`, `"minimum": "1",`, "must be a number"},
	} {
		if !bytes.Contains(good, []byte(c.from)) {
			t.Fatalf("%s: %q not in the document", name, c.from)
		}
		bad := bytes.Replace(good, []byte(c.from), []byte(c.to), 1)
		err := openapitest.Check(bad)
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: Check says %v, want an error with %q", name, err, c.want)
		}
	}
	if err := openapitest.Check([]byte(`{"openapi":"3.1.0"`)); err == nil {
		t.Error("truncated JSON passed")
	}
}

// TestTemplatePathParams (issue 25 item 9): a template is keyed in
// OpenAPI's form, each capture a required path parameter typed by its
// declaration (and no longer a query parameter); a single-row route's 200
// is the row itself; a second template of the same shape keeps its
// escaped braces; and the oracle refuses a template without its parameter.
func TestTemplatePathParams(t *testing.T) {
	doc, err := Render(sample())
	if err != nil {
		t.Fatal(err)
	}
	var v any
	if err := json.Unmarshal(doc, &v); err != nil {
		t.Fatal(err)
	}
	get := at(t, v, "paths", "/v1/products/{id}", "get").(map[string]any)
	params := get["parameters"].([]any)
	if len(params) != 2 {
		t.Fatalf("parameters %v, want id in path and lang in query", params)
	}
	id := params[0].(map[string]any)
	if id["name"] != "id" || id["in"] != "path" || id["required"] != true || at(t, id, "schema", "type") != "integer" || at(t, id, "schema", "minimum") != 1.0 {
		t.Errorf("path parameter %v", id)
	}
	if lang := params[1].(map[string]any); lang["name"] != "lang" || lang["in"] != "query" {
		t.Errorf("second parameter %v, want lang in query (no limit, cursor or Prefer on a single route)", lang)
	}
	if ref := at(t, get, "responses", "200", "content", MediaJSON, "schema", "$ref"); ref != "#/components/schemas/product.row" {
		t.Errorf("single 200 schema %v, want the row", ref)
	}
	if reasons := at(t, get, "responses", "404", "content", MediaJSON, "schema", "properties", "reason", "enum"); len(reasons.([]any)) != 1 {
		t.Errorf("404 reasons %v", reasons)
	}
	if p := at(t, v, "paths", "/u/{user}/repos/{n}", "get", "parameters").([]any); len(p) != 2 ||
		at(t, p[0], "name") != "user" || at(t, p[0], "schema", "type") != "string" || at(t, p[1], "schema", "format") != "int64" {
		t.Errorf("proxied template parameters %v", p)
	}
	if _, ok := at(t, v, "paths").(map[string]any)["/u/%7Bowner%7D/repos/%7Bm:int%7D"]; !ok {
		t.Errorf("the same-shape template is not keyed with escaped braces: %v", at(t, v, "paths"))
	}
	at(t, v, "paths", "/u/{user}/repos/{n}", "get", "parameters", 0).(map[string]any)["name"] = "usr"
	bad, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	if err := openapitest.Check(bad); err == nil || !strings.Contains(err.Error(), `template name "user" has no in: path parameter`) {
		t.Errorf("the oracle accepted a template without its parameter: %v", err)
	}
}

// TestRenderNotNullColumns: a column the database's catalogue says is NOT
// NULL is rendered without "null" among its types (its own type list and
// its anyOf branches'); the others stay nullable.
func TestRenderNotNullColumns(t *testing.T) {
	d := sample()
	cols := d.Routes[6].Data.Columns // customers-v1
	if d.Routes[6].Name != "customers-v1" {
		t.Fatalf("sample's route 6 is %s", d.Routes[6].Name)
	}
	for i := range cols {
		cols[i].NotNull = cols[i].Name != "score" && cols[i].Name != "born"
	}
	cols[1].NotNull = true // score: float, an anyOf
	doc, err := Render(d)
	if err != nil {
		t.Fatal(err)
	}
	m := decode(t, doc)
	row := func(col string, path ...any) any {
		return at(t, m, append([]any{"components", "schemas", "customers-v1.row", "properties", col}, path...)...)
	}
	for _, c := range []struct {
		name string
		got  any
		want string
	}{
		{"int64 NOT NULL", row("id", "type"), `["integer","string"]`},
		{"string NOT NULL", row("name", "type"), `"string"`},
		{"bool NOT NULL", row("vip", "type"), `"boolean"`},
		{"float NOT NULL", row("score", "anyOf", 0, "type"), `"number"`},
		{"date nullable", row("born", "type"), `["string","null"]`},
		{"description", row("id", "description"), `"int64 (database type INTEGER): a JSON number within ±2^53, a decimal string beyond; never null (NOT NULL in the database)."`},
	} {
		if got := mustJSON(c.got); got != c.want {
			t.Errorf("%s: got %s, want %s", c.name, got, c.want)
		}
	}
}
