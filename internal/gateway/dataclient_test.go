package gateway

import (
	"encoding/json"
	"fmt"
	"net/url"
	"strings"
	"testing"
)

// TestDataClientChoicesOverSQLite (issue 29): select=, order=, not.,
// ilike, or= groups, counts and limit= over a real SQLite file, each
// compared row by row with SQLite's own answer to the equivalent SQL;
// count=planned refused (SQLite has no planner estimate) naming Prefer.
func TestDataClientChoicesOverSQLite(t *testing.T) {
	dbPath, db := sqliteOrders(t)
	h := start(t, fmt.Sprintf(`
listen: 127.0.0.1:0
admin: {listen: 127.0.0.1:0}
state_dir: %s
log: {access: false}
data_sources:
  sales: {driver: sqlite, path: %s, max_conns: 2}
routes:
  - name: orders
    match: {path_prefix: /v1/orders}
    data:
      source: sales
      table: orders
      columns: [id, customer_id, total, note, created_at]
      filters: {customer_id: [eq, in, lt], total: [gt, lt], note: [is, like, ilike], created_at: [gte, lt]}
      order: [id]
      orders:
        - {order: total.desc, keyset: "total.desc,id"}
        - {order: "created_at.desc", keyset: "created_at.desc,id.desc"}
      page: {keyset: [id], default: 10, max: 20}
      limits: {max_rows: 100}
      count_max: 30
  - name: cached
    match: {path_prefix: /v1/cached}
    data:
      source: sales
      table: orders
      columns: [id, customer_id, total]
      filters: {customer_id: [eq]}
      orders: [{order: total.desc, keyset: "total.desc,id"}]
      page: {keyset: [id], default: 3, max: 20}
      cache: {ttl: 1h}
`, dataQuote(t.TempDir()), dataQuote(dbPath)))

	cases := []struct {
		query, cols, where, order string
	}{
		{"select=id,total", "id, total", "1", "id"},
		{"order=total.desc&select=id", "id", "1", "total DESC, id"},
		{"order=created_at.desc&select=id,created_at&customer_id=eq.3", "id, created_at", "customer_id = 3", "created_at DESC, id DESC"},
		{"note=not.is.null&select=id,note", "id, note", "note IS NOT NULL", "id"},
		{"note=ilike.*NOTE*&select=id", "id", "note LIKE '%note%'", "id"},
		{"or=(customer_id.eq.1,and(total.gt.700,customer_id.lt.8))&select=id,customer_id", "id, customer_id", "customer_id = 1 OR (total > 700 AND customer_id < 8)", "id"},
		{"customer_id=not.in.(1,2,3,4,5,6)&order=total.desc&select=total,id", "total, id", "NOT (customer_id IN (1,2,3,4,5,6))", "total DESC, id"},
	}
	for _, c := range cases {
		rows, err := db.Query("SELECT " + c.cols + " FROM orders WHERE " + c.where + " ORDER BY " + c.order)
		if err != nil {
			t.Fatal(err)
		}
		var want []string
		ncols := len(strings.Split(c.cols, ","))
		for rows.Next() {
			vals := make([]any, ncols)
			ptrs := make([]any, ncols)
			for i := range vals {
				ptrs[i] = &vals[i]
			}
			if err := rows.Scan(ptrs...); err != nil {
				t.Fatal(err)
			}
			parts := make([]string, ncols)
			for i, v := range vals {
				switch x := v.(type) {
				case nil:
					parts[i] = "NULL"
				case []byte:
					parts[i] = string(x)
				case float64:
					parts[i] = *jsonText(x)
				default:
					parts[i] = fmt.Sprint(x)
				}
			}
			want = append(want, strings.Join(parts, "|"))
		}
		rows.Close()
		names := strings.Split(strings.ReplaceAll(c.cols, " ", ""), ",")
		var got []string
		cursor := ""
		for page := 0; page < 20; page++ {
			q, _ := url.ParseQuery(c.query)
			q.Set("limit", "4")
			if cursor != "" {
				q.Set("cursor", cursor)
			}
			status, _, body := clientGet(t, h, "/v1/orders?"+q.Encode(), nil)
			var p struct {
				Rows       []json.RawMessage `json:"rows"`
				NextCursor *string           `json:"next_cursor"`
			}
			if status != 200 || json.Unmarshal(body, &p) != nil {
				t.Fatalf("%s: %d %s", c.query, status, body)
			}
			for _, raw := range p.Rows {
				got = append(got, orderedRow(t, raw, names))
			}
			if p.NextCursor == nil {
				break
			}
			cursor = *p.NextCursor
		}
		if len(want) == 0 {
			t.Errorf("%s: SQLite selects no row: the case proves nothing", c.query)
		}
		compareRows(t, c.query+" (SQLite, JSON pages)", got, want)
	}

	// Counts: exact within count_max, refused above it; planned refused.
	status, hdr, body := clientGet(t, h, "/v1/orders?customer_id=eq.2&limit=3", map[string]string{"Prefer": "count=exact"})
	if status != 200 || hdr.Get("Content-Range") != "0-2/7" {
		t.Errorf("count=exact: %d %q %s", status, hdr.Get("Content-Range"), body)
	}
	for _, pref := range []string{"count=exact", "count=planned", "count=estimated"} {
		status, _, body = clientGet(t, h, "/v1/orders", map[string]string{"Prefer": pref})
		if status != 400 || !strings.Contains(string(body), `"parameter":"Prefer"`) {
			t.Errorf("56 rows, count_max 30, %s: %d %s, want 400 naming Prefer", pref, status, body)
		}
	}
	// limit= in NDJSON and CSV.
	status, _, body = clientGet(t, h, "/v1/orders?limit=3&select=id", map[string]string{"Accept": "application/x-ndjson"})
	if status != 200 || strings.TrimSpace(string(body)) != "{\"id\":101}\n{\"id\":102}\n{\"id\":103}" {
		t.Errorf("NDJSON limit=3: %d %q", status, body)
	}
	status, _, body = clientGet(t, h, "/v1/orders?limit=2&select=id&order=total.desc", map[string]string{"Accept": "text/csv"})
	if status != 200 || string(body) != "id\r\n807\r\n806\r\n" {
		t.Errorf("CSV limit=2: %d %q", status, body)
	}
	// The cache keeps an answer per select and order.
	first := map[string]string{}
	for _, q := range []string{"select=id", "select=id,total", "select=id&order=total.desc", "select=total&order=total.desc", ""} {
		status, hdr, body := clientGet(t, h, "/v1/cached?customer_id=eq.4&"+q, nil)
		if status != 200 || hdr.Get("Levee-Cache") != "miss" {
			t.Errorf("%s: first request %d %q %s, want a miss", q, status, hdr.Get("Levee-Cache"), body)
		}
		first[q] = string(body)
	}
	for q, want := range first {
		status, hdr, body := clientGet(t, h, "/v1/cached?customer_id=eq.4&"+q, nil)
		if status != 200 || hdr.Get("Levee-Cache") != "hit" || string(body) != want {
			t.Errorf("%s: again %d %q %s, want the hit %s", q, status, hdr.Get("Levee-Cache"), body, want)
		}
	}
	if first["select=id"] == first["select=id,total"] || first["select=id"] == first["select=id&order=total.desc"] {
		t.Errorf("answers of different selects or orders are the same: %v", first)
	}
	// A counted answer bypasses the cache.
	if _, hdr, _ := clientGet(t, h, "/v1/cached?customer_id=eq.4&select=id", map[string]string{"Prefer": "count=exact"}); hdr.Get("Levee-Cache") != "" || hdr.Get("Content-Range") != "0-2/7" {
		t.Errorf("counted: Levee-Cache %q, Content-Range %q", hdr.Get("Levee-Cache"), hdr.Get("Content-Range"))
	}

	// A cursor is foreign across select and order.
	_, _, body = clientGet(t, h, "/v1/orders?order=total.desc&limit=2", nil)
	var p jsonPage
	if json.Unmarshal(body, &p) != nil || p.NextCursor == nil {
		t.Fatalf("%s", body)
	}
	for _, other := range []string{"order=created_at.desc", "order=total.desc&select=id", ""} {
		status, _, body = clientGet(t, h, "/v1/orders?"+other+"&limit=2&cursor="+url.QueryEscape(*p.NextCursor), nil)
		if status != 400 || !strings.Contains(string(body), "invalid_cursor") {
			t.Errorf("cursor under %q: %d %s", other, status, body)
		}
	}
}
