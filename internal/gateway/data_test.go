package gateway

import (
	"bufio"
	"database/sql"
	"encoding/csv"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"path/filepath"
	"strings"
	"testing"

	_ "modernc.org/sqlite"
)

// sqliteOrders writes a SQLite database of customers and orders (times as
// RFC 3339 text in UTC, as levee's SQLite sources expect) and returns its
// path and an open handle for the tests' own reading.
func sqliteOrders(t *testing.T) (string, *sql.DB) {
	t.Helper()
	path := filepath.Join(t.TempDir(), "sales.db")
	db, err := sql.Open("sqlite", path)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	stmts := []string{
		`CREATE TABLE customers (id INTEGER PRIMARY KEY, name TEXT NOT NULL, region TEXT NOT NULL, created_at TEXT NOT NULL)`,
		`CREATE TABLE orders (id INTEGER PRIMARY KEY, customer_id INTEGER NOT NULL, total REAL NOT NULL, note TEXT, created_at TEXT NOT NULL)`,
	}
	regions := []string{"north", "south", "east", "west"}
	for c := 1; c <= 8; c++ {
		stmts = append(stmts, fmt.Sprintf(`INSERT INTO customers VALUES (%d, 'Customer %d ✓', '%s', '2025-01-%02dT10:00:00Z')`, c, c, regions[c%4], c))
		for o := 1; o <= 7; o++ {
			id := c*100 + o
			note := "NULL"
			if o%3 == 0 {
				note = fmt.Sprintf("'note \"%d\", with comma'", id)
			}
			stmts = append(stmts, fmt.Sprintf(`INSERT INTO orders VALUES (%d, %d, %d.25, %s, '2025-02-%02dT%02d:00:00Z')`, id, c, id, note, o, c))
		}
	}
	for _, s := range stmts {
		if _, err := db.Exec(s); err != nil {
			t.Fatalf("%s: %v", s, err)
		}
	}
	return path, db
}

func dataGatewayYAML(dbPath, stateDir string) string {
	return fmt.Sprintf(`
listen: 127.0.0.1:0
admin: {listen: 127.0.0.1:0}
state_dir: %s
log: {access: false}
data_sources:
  sales:
    driver: sqlite
    path: %s
    max_conns: 4
routes:
  - name: orders
    match: {path_prefix: /v1/orders}
    data:
      source: sales
      sql: SELECT id, customer_id, total, note, created_at FROM orders WHERE customer_id = :customer_id ORDER BY created_at DESC, id DESC
      params:
        customer_id: {type: int64, required: true, min: 1}
      page: {keyset: [created_at, id], default: 3, max: 5}
      cache: {ttl: 1h}
  - name: customers
    match: {path_prefix: /v1/customers}
    data:
      source: sales
      table: customers
      columns: [id, name, region, created_at]
      filters: {region: [eq, in], created_at: [gte, lt], id: [eq, lt]}
      order: [id]
      page: {keyset: [id], default: 100, max: 100}
`, dataQuote(stateDir), dataQuote(dbPath))
}

func dataQuote(s string) string { b, _ := json.Marshal(s); return string(b) }

// dataGet sends GET path with an Accept header and returns the status, the
// headers and the body.
func dataGet(t *testing.T, h *harness, path, accept string) (int, http.Header, []byte) {
	t.Helper()
	req, _ := http.NewRequest(http.MethodGet, h.base+path, nil)
	if accept != "" {
		req.Header.Set("Accept", accept)
	}
	resp, err := h.client.Do(req)
	if err != nil {
		t.Fatalf("GET %s: %v", path, err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatalf("GET %s: reading the body: %v", path, err)
	}
	for k, v := range resp.Trailer {
		resp.Header[k] = v
	}
	return resp.StatusCode, resp.Header, body
}

type jsonPage struct {
	Rows       []map[string]any `json:"rows"`
	NextCursor *string          `json:"next_cursor"`
	Truncated  bool             `json:"truncated"`
}

// TestDataRouteOverSQLite (issue 16): a SQL-mode and a table-mode route
// over a real SQLite file, through a real levee: the rows the database
// itself returns, in JSON pages followed by their cursors, NDJSON and CSV;
// every refusal a 400 naming its parameter; a cursor that was tampered with
// refused; a cached answer served as a hit.
func TestDataRouteOverSQLite(t *testing.T) {
	dbPath, db := sqliteOrders(t)
	h := start(t, dataGatewayYAML(dbPath, t.TempDir()))

	// What the database says, for customer 3.
	var want []string
	rows, err := db.Query(`SELECT id FROM orders WHERE customer_id = 3 ORDER BY created_at DESC, id DESC`)
	if err != nil {
		t.Fatal(err)
	}
	for rows.Next() {
		var id int64
		rows.Scan(&id)
		want = append(want, fmt.Sprint(id))
	}
	rows.Close()

	// JSON, paged by 3 (the route's default), following next_cursor.
	var got []string
	path := "/v1/orders?customer_id=3"
	for pages := 0; ; pages++ {
		if pages > 5 {
			t.Fatal("more pages than rows")
		}
		status, hdr, body := dataGet(t, h, path, "")
		if status != 200 || hdr.Get("Content-Type") != "application/json" {
			t.Fatalf("GET %s: %d %s %s", path, status, hdr.Get("Content-Type"), body)
		}
		var page jsonPage
		if err := json.Unmarshal(body, &page); err != nil {
			t.Fatalf("GET %s: %v in %s", path, err, body)
		}
		for _, r := range page.Rows {
			got = append(got, fmt.Sprint(r["id"]))
			if r["customer_id"] != float64(3) || !strings.HasSuffix(fmt.Sprint(r["total"]), ".25") {
				t.Errorf("row %v", r)
			}
		}
		if page.NextCursor == nil {
			break
		}
		if len(page.Rows) != 3 {
			t.Errorf("a page before the last has %d rows, want 3", len(page.Rows))
		}
		path = "/v1/orders?customer_id=3&cursor=" + url.QueryEscape(*page.NextCursor)
	}
	if strings.Join(got, ",") != strings.Join(want, ",") {
		t.Errorf("paged JSON ids %v, the database's %v", got, want)
	}

	// NDJSON: every row, one object a line.
	status, hdr, body := dataGet(t, h, "/v1/orders?customer_id=3", "application/x-ndjson")
	if status != 200 || hdr.Get("Content-Type") != "application/x-ndjson" {
		t.Fatalf("NDJSON: %d %s", status, hdr.Get("Content-Type"))
	}
	sc := bufio.NewScanner(strings.NewReader(string(body)))
	var ndjsonIDs []string
	for sc.Scan() {
		var r map[string]any
		if err := json.Unmarshal(sc.Bytes(), &r); err != nil {
			t.Fatalf("NDJSON line %q: %v", sc.Text(), err)
		}
		ndjsonIDs = append(ndjsonIDs, fmt.Sprint(r["id"]))
	}
	if strings.Join(ndjsonIDs, ",") != strings.Join(want, ",") {
		t.Errorf("NDJSON ids %v, want %v", ndjsonIDs, want)
	}

	// CSV: a header line, then the rows; quoting and NULL as an empty field.
	status, hdr, body = dataGet(t, h, "/v1/orders?customer_id=3", "text/csv")
	if status != 200 || !strings.HasPrefix(hdr.Get("Content-Type"), "text/csv") {
		t.Fatalf("CSV: %d %s", status, hdr.Get("Content-Type"))
	}
	records, err := csv.NewReader(strings.NewReader(string(body))).ReadAll()
	if err != nil {
		t.Fatalf("CSV: %v in %q", err, body)
	}
	if strings.Join(records[0], ",") != "id,customer_id,total,note,created_at" || len(records) != len(want)+1 {
		t.Fatalf("CSV: header %v, %d records", records[0], len(records))
	}
	for _, r := range records[1:] {
		if r[0] == "303" && r[3] != `note "303", with comma` || r[0] == "301" && r[3] != "" {
			t.Errorf("CSV record %v", r)
		}
	}

	// The second identical request is answered from the cache.
	dataGet(t, h, "/v1/orders?customer_id=4", "")
	if _, hdr, _ := dataGet(t, h, "/v1/orders?customer_id=4", ""); hdr.Get("Levee-Cache") != "hit" {
		t.Errorf("repeated request: Levee-Cache %q, want hit", hdr.Get("Levee-Cache"))
	}

	// Table mode: filters as PostgREST writes them.
	for q, wantIDs := range map[string]string{
		"region=eq.north":                             "4,8",
		"region=in.(north,south)":                     "1,4,5,8",
		"created_at=gte.2025-01-03T00:00:00Z&id=lt.6": "3,4,5",
	} {
		status, _, body := dataGet(t, h, "/v1/customers?"+q, "")
		var page jsonPage
		if status != 200 || json.Unmarshal(body, &page) != nil {
			t.Fatalf("customers?%s: %d %s", q, status, body)
		}
		var ids []string
		for _, r := range page.Rows {
			ids = append(ids, fmt.Sprint(r["id"]))
		}
		if strings.Join(ids, ",") != wantIDs {
			t.Errorf("customers?%s: ids %v, want %s", q, ids, wantIDs)
		}
	}

	// Refusals: each a 400 (406) naming what was wrong; nothing reaches the
	// database as SQL.
	for _, c := range []struct{ path, accept, reason, param string }{
		{"/v1/orders?customer_id=abc", "", "invalid_parameter", "customer_id"},
		{"/v1/orders?customer_id=0", "", "invalid_parameter", "customer_id"},
		{"/v1/orders", "", "missing_parameter", "customer_id"},
		{"/v1/orders?customer_id=1&customer_id=2", "", "duplicate_parameter", "customer_id"},
		{"/v1/orders?customer_id=1&sort=id", "", "unknown_parameter", "sort"},
		{"/v1/orders?customer_id=" + url.QueryEscape("1; DROP TABLE orders"), "", "invalid_parameter", "customer_id"},
		{"/v1/orders?customer_id=" + url.QueryEscape("1 OR 1=1"), "", "invalid_parameter", "customer_id"},
		{"/v1/orders?customer_id=1&limit=6", "", "invalid_limit", "limit"},
		{"/v1/orders?customer_id=1&cursor=AAAA", "", "invalid_cursor", "cursor"},
		{"/v1/orders?customer_id=3", "application/xml", "not_acceptable", ""},
		{"/v1/customers?region=" + url.QueryEscape("eq.north' OR '1'='1"), "", "", ""}, // a value like any other: no match
		{"/v1/customers?name=eq.x", "", "unknown_parameter", "name"},
		{"/v1/customers?region=gt.north", "", "operator_not_allowed", "region"},
		{"/v1/customers?id=eq.one", "", "invalid_parameter", "id"},
	} {
		status, _, body := dataGet(t, h, c.path, c.accept)
		if c.reason == "" {
			var page jsonPage
			if status != 200 || json.Unmarshal(body, &page) != nil || len(page.Rows) != 0 {
				t.Errorf("GET %s: %d %s, want 200 and no rows", c.path, status, body)
			}
			continue
		}
		var doc map[string]string
		json.Unmarshal(body, &doc)
		wantStatus := 400
		if c.reason == "not_acceptable" {
			wantStatus = 406
		}
		if status != wantStatus || doc["reason"] != c.reason || doc["parameter"] != c.param {
			t.Errorf("GET %s: %d %s, want %d %s naming %q", c.path, status, body, wantStatus, c.reason, c.param)
		}
	}
	// A cursor of another customer's query is refused.
	_, _, body = dataGet(t, h, "/v1/orders?customer_id=3", "")
	var page jsonPage
	json.Unmarshal(body, &page)
	if status, _, _ := dataGet(t, h, "/v1/orders?customer_id=5&cursor="+url.QueryEscape(*page.NextCursor), ""); status != 400 {
		t.Errorf("customer 3's cursor on customer 5's query: %d, want 400", status)
	}
	var n int
	db.QueryRow(`SELECT count(*) FROM orders`).Scan(&n)
	if n != 56 {
		t.Errorf("orders has %d rows after the refusals, want 56", n)
	}
	if got := h.metric(`levee_data_rows_total{route="orders"}`); got < float64(3*len(want)) {
		t.Errorf("levee_data_rows_total{route=orders} = %v", got)
	}
}

// TestDataConnectionFollowsTheClient (issue 16): a database connection is
// held only while the client takes the answer. A client that stops reading
// a long NDJSON stream gets it back within the route's send_timeout; a
// client that goes away mid-stream gets it back at once.
func TestDataConnectionFollowsTheClient(t *testing.T) {
	dbPath, _ := sqliteOrders(t)
	h := start(t, fmt.Sprintf(`
listen: 127.0.0.1:0
admin: {listen: 127.0.0.1:0}
state_dir: %s
log: {access: false}
data_sources:
  sales: {driver: sqlite, path: %s, max_conns: 2, statement_timeout: 1m}
routes:
  - name: numbers
    match: {path_prefix: /v1/numbers}
    data:
      source: sales
      sql: WITH RECURSIVE g(x) AS (SELECT 1 UNION ALL SELECT x + 1 FROM g WHERE x < 5000000) SELECT x, hex(zeroblob(512)) AS pad FROM g
      formats: [ndjson]
      limits: {max_rows: 5000000, max_bytes: 1GiB}
      send_timeout: 200ms
`, dataQuote(t.TempDir()), dataQuote(dbPath)))
	inUse := func() float64 { return h.metric(`levee_data_pool_connections{source="sales",state="in_use"}`) }
	request := func() net.Conn {
		c, err := net.Dial("tcp", h.g.Addr().String())
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { c.Close() })
		fmt.Fprintf(c, "GET /v1/numbers HTTP/1.1\r\nHost: x\r\n\r\n")
		return c
	}

	// Rows of 1 KiB, so that the socket buffers (a few MiB on loopback)
	// fill within a moment even under the race detector.
	stuck := request() // reads nothing: the socket buffers fill, then the writes wait
	waitFor(t, "the stream to hold a connection", func() bool { return inUse() == 1 })
	waitFor(t, "the connection back after send_timeout", func() bool { return inUse() == 0 })
	stuck.Close()

	gone := request()
	buf := make([]byte, 64<<10)
	for read := 0; read < 256<<10; {
		n, err := gone.Read(buf)
		if err != nil {
			t.Fatalf("reading the stream: %v", err)
		}
		read += n
	}
	if inUse() != 1 {
		t.Fatalf("in_use %v while the stream is read, want 1", inUse())
	}
	gone.Close()
	waitFor(t, "the connection back after the client left", func() bool { return inUse() == 0 })
}
