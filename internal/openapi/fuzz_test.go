package openapi

import (
	"encoding/json"
	"testing"

	"github.com/levee-gw/levee/internal/dataquery"
	"github.com/levee-gw/levee/internal/openapi/openapitest"
	"github.com/levee-gw/levee/internal/valuekind"
)

// FuzzRender feeds arbitrary names, prefixes, kinds, bounds and defaults
// into a description: Render either refuses it or writes valid JSON that
// Check accepts (every string is escaped, no input can add members or
// break the structure).
func FuzzRender(f *testing.F) {
	f.Add("orders", "/v1/orders", "GET", "id", "int64", "1", "9", "5", "id", "int8", "eq")
	f.Add("a\"b", "/\u2028", "PROPFIND", "limit", "x", "", "", `a\,b`, "", "", "in")
	f.Add("p", "/v1/products/{id:int}", "GET", "id", "int64", "1", "", "", "name", "text", "eq")
	f.Add("q", "/u/{user}/{n:int}/{user}", "GET", "user", "string", "", "", "a,b", "x", "", "eq")
	f.Fuzz(func(t *testing.T, name, prefix, method, param, kind, min, max, def, col, dbType, op string) {
		k, err := dataquery.ParseKind(kind)
		if err != nil {
			k = dataquery.Kind(len(kind)) // valid or not: either renders
		}
		d := Document{Routes: []Route{
			{Name: name, PathPrefix: prefix, Methods: []string{method}, Auth: AuthAPIKey, Upstream: name,
				Refusals: []Refusal{{Reason: param, Status: 400, Sentence: def}}},
			{Name: "d" + name, PathPrefix: prefix, Methods: []string{"GET"}, Data: &Data{
				Source: col, Formats: []string{MediaJSON, def}, Params: []dataquery.Param{{Name: param, Type: k, Min: min, Max: max, Default: def, List: len(def)%2 == 1, MaxItems: 3}},
				Filters: []Filter{{Column: col, Kind: kind, Ops: []string{op}}}, ColumnsKnown: true,
				Columns: []Column{{Name: col, Type: dbType, Kind: kind}, {Name: param, Kind: valuekind.JSON}}, Page: &Page{Keyset: []string{col}, Default: 1, Max: 2}}},
			// The prefix read as a path template (its captures path
			// parameters when it is one), on a single-row data route and a
			// proxied one of the same text.
			{Name: "t" + name, PathPrefix: prefix, PathKind: "path_template", Methods: []string{"GET"}, Data: &Data{
				Source: col, Formats: []string{MediaJSON}, Single: true, Params: []dataquery.Param{{Name: param, Type: k, Min: min, Max: max, Default: def, List: len(def)%2 == 1, MaxItems: 3}},
				ColumnsKnown: true, Columns: []Column{{Name: col, Type: dbType, Kind: kind}}}},
			{Name: "p" + name, PathPrefix: prefix, PathKind: "path_template", Methods: []string{"POST"}, Upstream: name},
		}}
		doc, err := Render(d)
		if err != nil {
			return
		}
		if !json.Valid(doc) {
			t.Fatalf("invalid JSON:\n%s", doc)
		}
		if err := openapitest.Check(doc); err != nil {
			// A kind or format the package does not know still renders,
			// and so do duplicate column names (the database's problem):
			// only structural breaks are failures.
			t.Fatalf("Check: %v\n%s", err, doc)
		}
	})
}
