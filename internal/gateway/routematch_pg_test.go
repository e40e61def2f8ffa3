package gateway

import (
	"encoding/json"
	"fmt"
	"testing"

	"github.com/levee-gw/levee/internal/testsvc"
)

// TestDataRoutePathsOverPostgres (issue 25 item 9): a data route answers
// only its own path, never a path below it (404 no_route), and a path
// template's capture is a typed parameter of its query, over a real
// PostgreSQL through a real levee.
func TestDataRoutePathsOverPostgres(t *testing.T) {
	pg := testsvc.StartPostgres(t)
	pg.Exec(t, pgTypesSQL)
	h := start(t, fmt.Sprintf(`
listen: 127.0.0.1:0
admin: {listen: 127.0.0.1:0}
state_dir: %s
log: {access: false}
data_sources:
  sales: {driver: postgres, dsn: %s, max_conns: 2, statement_timeout: 2s, connect_timeout: 500ms}
routes:
  - name: items
    match: {path_prefix: /v1/items}
    data: {source: sales, sql: SELECT id FROM items ORDER BY id}
  - name: item
    match: {path_template: "/v1/items/{id:int}"}
    data:
      source: sales
      sql: SELECT id, name FROM items WHERE id = :id
      params: {id: {type: int64, required: true}}
`, dataQuote(t.TempDir()), dataQuote(pg.DSN)))
	tests := []struct {
		path   string
		status int
		ids    []float64 // the rows' ids, for a 200
		reason string
	}{
		{"/v1/items", 200, []float64{1, 2, 3}, ""},
		{"/v1/items/1", 200, []float64{1}, ""},
		{"/v1/items/3", 200, []float64{3}, ""},
		{"/v1/items/999", 200, []float64{}, ""},
		{"/v1/items/x", 404, nil, "no_route"},               // not an int: no template; the prefix route is exact
		{"/v1/items/1/more", 404, nil, "no_route"},          // below the template
		{"/v1/items/", 404, nil, "no_route"},                // below the data route's own path
		{"/v1/itemsX", 404, nil, "no_route"},                // never a string prefix
		{"/v1/items/1?id=2", 400, nil, "invalid_parameter"}, // one value, from the path
		{"/v1/items/99999999999999999999", 404, nil, "no_route"},
	}
	for _, tc := range tests {
		status, _, body := dataGet(t, h, tc.path, "")
		if status != tc.status {
			t.Errorf("%s: %d %s, want %d", tc.path, status, body, tc.status)
			continue
		}
		if status != 200 {
			var r refusal
			if json.Unmarshal(body, &r) != nil || r.Reason != tc.reason {
				t.Errorf("%s: %s, want reason %s", tc.path, body, tc.reason)
			}
			continue
		}
		var page jsonPage
		if err := json.Unmarshal(body, &page); err != nil {
			t.Fatalf("%s: %v: %s", tc.path, err, body)
		}
		got := []float64{}
		for _, r := range page.Rows {
			got = append(got, r["id"].(float64))
		}
		if fmt.Sprint(got) != fmt.Sprint(tc.ids) {
			t.Errorf("%s: ids %v, want %v", tc.path, got, tc.ids)
		}
	}
}
