package gateway

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/levee-gw/levee/internal/dataapi"
	"github.com/levee-gw/levee/internal/dataquery"
	"github.com/levee-gw/levee/internal/openapi/openapitest"
	"github.com/levee-gw/levee/internal/proxy"
	"github.com/levee-gw/levee/internal/testsvc"
)

// blackHole returns a loopback address that accepts connections and
// never answers on them (a database that hangs), until the test ends, and
// a count of the connections it accepted: how often levee asked it.
func blackHole(t *testing.T) (string, func() int) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	var conns []net.Conn
	done := make(chan struct{})
	go func() {
		defer close(done)
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			mu.Lock()
			conns = append(conns, c)
			mu.Unlock()
		}
	}()
	accepted := func() int {
		mu.Lock()
		defer mu.Unlock()
		return len(conns)
	}
	t.Cleanup(func() {
		ln.Close()
		<-done
		mu.Lock()
		defer mu.Unlock()
		for _, c := range conns {
			c.Close()
		}
	})
	return ln.Addr().String(), accepted
}

// fetchOpenAPI GETs the admin listener's OpenAPI document with token
// (none when empty), checks it is served as JSON that passes
// openapitest.Check, and returns it decoded (numbers as json.Number) with the
// time the request took.
func fetchOpenAPI(t *testing.T, h *harness, token string) (map[string]any, time.Duration) {
	t.Helper()
	req, _ := http.NewRequest(http.MethodGet, h.admin+"/api/v1/openapi.json", nil)
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	began := time.Now()
	resp, err := h.client.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	took := time.Since(began)
	if err != nil || resp.StatusCode != 200 {
		t.Fatalf("GET /api/v1/openapi.json: %d %v %s", resp.StatusCode, err, body)
	}
	if ct := resp.Header.Get("Content-Type"); ct != "application/json" {
		t.Errorf("Content-Type %q", ct)
	}
	if err := openapitest.Check(body); err != nil {
		t.Fatalf("the document breaks OpenAPI 3.1:\n%v", err)
	}
	var doc map[string]any
	d := json.NewDecoder(bytes.NewReader(body))
	d.UseNumber()
	if err := d.Decode(&doc); err != nil {
		t.Fatal(err)
	}
	return doc, took
}

// dig walks a decoded document by keys and array indexes; nil when a
// step is missing.
func dig(v any, path ...any) any {
	for _, p := range path {
		switch k := p.(type) {
		case string:
			m, _ := v.(map[string]any)
			v = m[k]
		case int:
			a, _ := v.([]any)
			if k >= len(a) {
				return nil
			}
			v = a[k]
		}
	}
	return v
}

func asJSON(v any) string { b, _ := json.Marshal(v); return string(b) }

// params returns an operation's parameters by name.
func params(t *testing.T, doc map[string]any, path string) map[string]map[string]any {
	t.Helper()
	ps, _ := dig(doc, "paths", path, "get", "parameters").([]any)
	out := map[string]map[string]any{}
	for _, p := range ps {
		m := p.(map[string]any)
		out[m["name"].(string)] = m
	}
	return out
}

// expectJSON compares a part of the document with its JSON text.
func expectJSON(t *testing.T, what string, got any, want string) {
	t.Helper()
	if g := asJSON(got); g != want {
		t.Errorf("%s: got %s, want %s", what, g, want)
	}
}

// TestOpenAPIDocument (issue 16, item 9): a real levee with a real
// SQLite data source (a SQL route and a table route), a proxied route
// with API keys and a data source that is down, asked over HTTP with a
// read-scope admin token. The document is valid OpenAPI 3.1 with every
// route; the data routes' parameters carry their types and bounds; the
// row schemas carry the column types SQLite reports, and the rows the
// route serves have exactly those columns; the route on the down source
// is described with its columns unknown, still 200 and within the
// deadline; a reload that changes a route's SQL changes its columns.
func TestOpenAPIDocument(t *testing.T) {
	dbPath, _ := sqliteOrders(t)
	up, _ := backend(t, "api")
	dir := t.TempDir()
	tokFile := filepath.Join(dir, "read.token")
	const readTok = "read-token-0123456789"
	if err := os.WriteFile(tokFile, []byte(readTok+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	goneAddr, goneAsked := blackHole(t)
	yaml := func(ordersSQL string) string {
		y := dataGatewayYAML(dbPath, filepath.Join(dir, "state"))
		y = strings.Replace(y, "admin: {listen: 127.0.0.1:0}", "admin: {listen: 127.0.0.1:0, tokens: [{file: "+dataQuote(tokFile)+", scope: read}]}", 1)
		y = strings.Replace(y, "SELECT id, customer_id, total, note, created_at FROM orders", ordersSQL, 1)
		return y + fmt.Sprintf(`  - name: api
    match: {host: api.example.com, path_prefix: /api, methods: [GET, POST]}
    upstream: api
    auth: api_key
  - name: gone
    match: {path_prefix: /v1/gone}
    data:
      source: gone
      table: things
      columns: [a, b]
      filters: {a: [eq, like]}
upstreams:
  api: {endpoints: [{address: %s}]}
`, hostPort(up)) + strings.Replace(`data_sources:
  gone:
    driver: postgres
    dsn: postgres://levee@ADDR/none?sslmode=disable
    connect_timeout: 5s
`, "ADDR", goneAddr, 1)
	}
	// The file has one data_sources block: fold gone's into it.
	fold := func(y string) string {
		i := strings.LastIndex(y, "data_sources:\n")
		extra := y[i+len("data_sources:\n"):]
		y = y[:i]
		return strings.Replace(y, "data_sources:\n", "data_sources:\n"+extra, 1)
	}
	h := start(t, fold(yaml("SELECT id, customer_id, total, note, created_at FROM orders")))

	doc, took := fetchOpenAPI(t, h, readTok)
	if goneAsked() == 0 {
		t.Error("the first document did not ask the unanswering source for its columns")
	}
	// A second document right away: the first document's attempt on the
	// down source ended as that document was answered (at its deadline),
	// so this one comes within dataapi.ColumnsRetry of it and must not ask
	// the source again (checked in "a source that is down").
	// The spacing can be judged only when the second document began well
	// within dataapi.ColumnsRetry of the first one's answer; on a loaded
	// machine the gap can exceed that, so the pair is measured again (at
	// most 5 times), each time after the spacing has passed, which makes
	// the next document's attempt a first one again.
	var (
		firstDone, againDone      time.Time
		again                     map[string]any
		quick, secondStartedAfter time.Duration
		askedAgain                int
	)
	for try := 0; try < 5; try++ {
		if try > 0 {
			time.Sleep(time.Until(againDone.Add(dataapi.ColumnsRetry))) // wall time, as dataapi.ColumnsRetry is
			doc, took = fetchOpenAPI(t, h, readTok)
		}
		var beforeSecond int
		firstDone, beforeSecond = time.Now(), goneAsked()
		again, quick = fetchOpenAPI(t, h, readTok)
		againDone = time.Now()
		askedAgain, secondStartedAfter = goneAsked()-beforeSecond, time.Since(firstDone)-quick
		if secondStartedAfter <= dataapi.ColumnsRetry/4 {
			break
		}
	}
	t.Logf("first document (SQLite read, one source down) in %v", took)
	expectJSON(t, "openapi", doc["openapi"], `"3.1.0"`)
	for path, id := range map[string]string{"/v1/orders": "orders", "/v1/customers": "customers", "/api": "api", "/v1/gone": "gone"} {
		expectJSON(t, path+" operationId", dig(doc, "paths", path, "get", "operationId"), `"`+id+`"`)
		// A data route answers only its own path (issue 25): not a prefix.
		prefix := path == "/api"
		expectJSON(t, path+" prefix", dig(doc, "paths", path, "x-levee-path-prefix"), strconv.FormatBool(prefix))
		if !prefix {
			expectJSON(t, path+" match", dig(doc, "paths", path, "x-levee-match"), `"path"`)
		}
	}

	t.Run("proxied route", func(t *testing.T) {
		expectJSON(t, "host", dig(doc, "paths", "/api", "get", "x-levee-host"), `"api.example.com"`)
		expectJSON(t, "post", dig(doc, "paths", "/api", "post", "operationId"), `"api.post"`)
		expectJSON(t, "no put", dig(doc, "paths", "/api", "put"), `null`)
		expectJSON(t, "security", dig(doc, "paths", "/api", "get", "security"), `[{"api_key":[]},{"api_key_bearer":[]}]`)
		expectJSON(t, "X-Api-Key", dig(doc, "components", "securitySchemes", "api_key", "name"), `"X-Api-Key"`)
		expectJSON(t, "401", dig(doc, "paths", "/api", "get", "responses", "401", "content", "application/json", "schema", "properties", "reason", "enum"), `["unauthenticated"]`)
		expectJSON(t, "502", dig(doc, "paths", "/api", "get", "responses", "502", "content", "application/json", "schema", "properties", "reason", "enum"), `["upstream_unavailable"]`)
		expectJSON(t, "405", dig(doc, "paths", "/api", "get", "responses", "405", "content", "application/json", "schema", "properties", "reason", "enum"), `["method_not_allowed"]`)
	})

	t.Run("data parameters", func(t *testing.T) {
		orders := params(t, doc, "/v1/orders")
		expectJSON(t, "customer_id", orders["customer_id"]["schema"], `{"format":"int64","minimum":1,"type":"integer"}`)
		expectJSON(t, "customer_id required", orders["customer_id"]["required"], `true`)
		expectJSON(t, "limit", orders["limit"]["schema"], `{"default":3,"format":"int64","maximum":10000,"minimum":1,"type":"integer"}`) // JSON pages up to 5, NDJSON and CSV up to max_rows
		expectJSON(t, "cursor", orders["cursor"]["schema"].(map[string]any)["type"], `"string"`)
		customers := params(t, doc, "/v1/customers")
		if len(customers) != 9 {
			t.Errorf("customers' parameters: %v, want region, created_at, id, select, or, and, Prefer, limit, cursor", asJSON(customers))
		}
		expectJSON(t, "select", customers["select"]["x-levee-columns"], `["id","name","region","created_at"]`)
		expectJSON(t, "region filter", customers["region"]["schema"], `{"items":{"pattern":"^(not\\.)?(eq\\..*|in\\.\\(.*\\))$","type":"string"},"maxItems":8,"minItems":1,"type":"array"}`)
		if d, _ := customers["created_at"]["description"].(string); !strings.Contains(d, "parsed as string") || !strings.Contains(d, "gte, lt") {
			t.Errorf("created_at filter: %q (TEXT column: parsed as string; gte, lt)", d)
		}
		// The refusals a data route can give, with their statuses
		// (memory_pressure: the memory guard is on by default).
		for status, want := range map[string]string{
			"400": `["bad_path","invalid_parameter","unknown_parameter","duplicate_parameter","operator_not_allowed","invalid_cursor","invalid_limit"]`,
			"406": `["not_acceptable"]`, "429": `["consumer_limit"]`,
			"503": `["memory_pressure","queue_full","queue_timeout","shed_priority","data_source_unavailable","db_pool_exhausted"]`,
			"504": `["statement_timeout"]`,
		} {
			expectJSON(t, "customers "+status, dig(doc, "paths", "/v1/customers", "get", "responses", status, "content", "application/json", "schema", "properties", "reason", "enum"), want)
		}
		expectJSON(t, "orders 400 names missing_parameter", slices.Contains(strings.Split(asJSON(dig(doc, "paths", "/v1/orders", "get", "responses", "400", "content", "application/json", "schema", "properties", "reason", "enum")), ","), `"missing_parameter"`), `true`)
		expectJSON(t, "503 Retry-After", dig(doc, "paths", "/v1/orders", "get", "responses", "503", "headers", "Retry-After", "schema"), `{"minimum":0,"type":"integer"}`)
		expectJSON(t, "504 no Retry-After", dig(doc, "paths", "/v1/orders", "get", "responses", "504", "headers"), `null`)
	})

	t.Run("row schemas from the database", func(t *testing.T) {
		row := dig(doc, "components", "schemas", "orders.row")
		expectJSON(t, "orders columns", dig(row, "required"), `["id","customer_id","total","note","created_at"]`)
		for col, want := range map[string]string{"id": "INTEGER", "customer_id": "INTEGER", "total": "REAL", "note": "TEXT", "created_at": "TEXT"} {
			expectJSON(t, col+" db type", dig(row, "properties", col, "x-levee-db-type"), `"`+want+`"`)
		}
		expectJSON(t, "id", dig(row, "properties", "id", "type"), `["integer","string","null"]`)
		expectJSON(t, "total", dig(row, "properties", "total", "anyOf", 0, "type"), `["number","null"]`)
		expectJSON(t, "note", dig(row, "properties", "note", "type"), `["string","null"]`)
		expectJSON(t, "customers columns", dig(doc, "components", "schemas", "customers.row", "required"), `["id","name","region","created_at"]`)
		expectJSON(t, "page", dig(doc, "paths", "/v1/orders", "get", "responses", "200", "content", "application/json", "schema", "$ref"), `"#/components/schemas/orders.page"`)
		expectJSON(t, "formats", len(dig(doc, "paths", "/v1/orders", "get", "responses", "200", "content").(map[string]any)), `3`)

		// The rows the route serves have exactly the documented columns.
		status, _, body := dataGet(t, h, "/v1/orders?customer_id=1", "application/json")
		var page struct {
			Rows []json.RawMessage `json:"rows"`
		}
		if status != 200 || json.Unmarshal(body, &page) != nil || len(page.Rows) == 0 {
			t.Fatalf("GET /v1/orders: %d %s", status, body)
		}
		var keys []string
		d := json.NewDecoder(bytes.NewReader(page.Rows[0]))
		d.Token()
		for d.More() {
			k, _ := d.Token()
			keys = append(keys, k.(string))
			var skip json.RawMessage
			d.Decode(&skip)
		}
		expectJSON(t, "served row's columns", keys, asJSON(dig(row, "required")))
	})

	t.Run("a source that is down", func(t *testing.T) {
		expectJSON(t, "gone row", dig(doc, "components", "schemas", "gone.row", "x-levee-columns"), `"unknown"`)
		if d, _ := dig(doc, "paths", "/v1/gone", "get", "description").(string); !strings.Contains(d, "did not answer") {
			t.Errorf("gone's description does not say why its columns are unknown: %q", d)
		}
		expectJSON(t, "gone filter still typed by its operators", dig(params(t, doc, "/v1/gone")["a"], "schema", "items", "pattern"), `"^(not\\.)?(eq\\..*|like\\..*)$"`)
		// The source accepts connections and never answers, and its
		// connect timeout (5 s) is past the document's deadline: asking it
		// costs the deadline (2 s). Within dataapi.ColumnsRetry of that
		// attempt it is not asked again (no new connection to it); after
		// it, it is. Counted in connections. (This half used to measure
		// "within" from the second document's start to its end: asking
		// again costs the 2 s deadline, past the 1 s spacing, so it could
		// not fail. The second document is now fetched as soon as the
		// first is answered, and the gap is checked to leave the margin.)
		if secondStartedAfter > dataapi.ColumnsRetry/4 {
			t.Fatalf("cannot judge the retry spacing: the second document began %v after the first was answered (want well within %v)", secondStartedAfter, dataapi.ColumnsRetry)
		}
		if askedAgain != 0 {
			t.Errorf("a second document %v after the first opened %d more connections to the down source: it was asked again within %v", secondStartedAfter, askedAgain, dataapi.ColumnsRetry)
		}
		expectJSON(t, "gone row again", dig(again, "components", "schemas", "gone.row", "x-levee-columns"), `"unknown"`)
		expectJSON(t, "orders row kept", dig(again, "components", "schemas", "orders.row", "required"), `["id","customer_id","total","note","created_at"]`)
		time.Sleep(time.Until(firstDone.Add(dataapi.ColumnsRetry))) // dataapi.ColumnsRetry is wall time: let it pass
		before := goneAsked()
		_, took := fetchOpenAPI(t, h, readTok)
		if goneAsked() == before {
			t.Errorf("a document %v later did not ask the down source again", dataapi.ColumnsRetry)
		}
		t.Logf("documents with the source down: %v (not asked again), then %v (asked again)", quick, took)
	})

	t.Run("a reload changes the columns", func(t *testing.T) {
		h.writeConfig(fold(yaml("SELECT id, total, created_at FROM orders")))
		if err := h.g.Reload(); err != nil {
			t.Fatal(err)
		}
		doc, _ := fetchOpenAPI(t, h, readTok)
		expectJSON(t, "orders columns after reload", dig(doc, "components", "schemas", "orders.row", "required"), `["id","total","created_at"]`)
	})

	t.Run("declared column types", func(t *testing.T) {
		// With column_types the route on the down source is described
		// from the declaration, in its columns' order, and the source is
		// not asked at all.
		declared := strings.Replace(yaml("SELECT id, total, created_at FROM orders"), "      filters: {a: [eq, like]}\n",
			"      filters: {a: [eq, like]}\n      column_types: {b: timestamp, a: int64}\n", 1)
		h.writeConfig(fold(declared))
		if err := h.g.Reload(); err != nil {
			t.Fatal(err)
		}
		before := goneAsked()
		doc, _ := fetchOpenAPI(t, h, readTok)
		if n := goneAsked(); n != before {
			t.Errorf("the document opened %d connections to a source whose route declares its columns", n-before)
		}
		row := dig(doc, "components", "schemas", "gone.row")
		expectJSON(t, "gone columns", dig(row, "required"), `["a","b"]`)
		expectJSON(t, "a", dig(row, "properties", "a", "format"), `"int64"`)
		expectJSON(t, "b", dig(row, "properties", "b", "format"), `"date-time"`)
		expectJSON(t, "no database type", dig(row, "properties", "a", "x-levee-db-type"), `null`)
		if d, _ := dig(row, "description").(string); !strings.Contains(d, "as declared in the configuration") {
			t.Errorf("gone row's description does not say the columns are declared: %q", d)
		}
	})

	t.Run("scope", func(t *testing.T) {
		resp, err := h.client.Get(h.admin + "/api/v1/openapi.json")
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != 401 {
			t.Errorf("without a token: %d, want 401", resp.StatusCode)
		}
	})
}

// TestOpenAPIKindsAgree holds every data reason to a row of the request
// path's refusal table (the kinds are one table: package valuekind).
func TestOpenAPIKindsAgree(t *testing.T) {
	for _, d := range dataquery.Reasons() {
		if rf, ok := proxy.LookupRefusal(proxy.Reason(d.Reason)); !ok || rf.Sentence == "" || rf.Status < 400 {
			t.Errorf("data reason %s: %+v", d.Reason, rf)
		}
	}
}

// TestOpenAPIOverPostgres: with PostgreSQL stopped, the document is served
// with the data routes' columns unknown; once it is back, a later request
// learns them (within seconds, without a restart), with PostgreSQL's own
// types: every column kind levee renders.
func TestOpenAPIOverPostgres(t *testing.T) {
	pg := testsvc.StartPostgres(t)
	pg.Exec(t, pgTypesSQL)
	pg.Stop()
	h := start(t, pgGatewayYAML(pg.DSN, t.TempDir()))

	doc, took := fetchOpenAPI(t, h, "")
	expectJSON(t, "items row while down", dig(doc, "components", "schemas", "items.row", "x-levee-columns"), `"unknown"`)

	t.Logf("document with PostgreSQL stopped: %v", took)
	if err := pg.Start(); err != nil {
		t.Fatal(err)
	}
	restarted := time.Now()
	deadline := restarted.Add(15 * time.Second)
	for dig(doc, "components", "schemas", "items.row", "x-levee-columns") != nil {
		if time.Now().After(deadline) {
			t.Fatalf("the columns are still unknown 15 s after PostgreSQL came back: %s", asJSON(dig(doc, "components", "schemas", "items.row")))
		}
		time.Sleep(200 * time.Millisecond) // poll: a source is asked again at most once a second
		doc, _ = fetchOpenAPI(t, h, "")
	}
	t.Logf("columns known %v after PostgreSQL started again", time.Since(restarted).Round(time.Millisecond))
	row := dig(doc, "components", "schemas", "items.row")
	expectJSON(t, "items columns", dig(row, "required"), `["id","small","big","price","ratio","name","active","day","at","ref","meta","blob"]`)
	for col, want := range map[string]string{
		"id":    `{"description":"int64 (database type int8): a JSON number within ±2^53, a decimal string beyond; null for NULL.","format":"int64","pattern":"^-?[0-9]+$","type":["integer","string","null"],"x-levee-db-type":"int8"}`,
		"small": `"int2"`, "price": `"numeric"`, "ratio": `"float8"`, "day": `"date"`, "at": `"timestamptz"`, "ref": `"uuid"`, "meta": `"jsonb"`, "blob": `"bytea"`,
	} {
		got := dig(row, "properties", col)
		if !strings.HasPrefix(want, "{") {
			got = dig(got, "x-levee-db-type")
		}
		expectJSON(t, col, got, want)
	}
	expectJSON(t, "price is exact text", dig(row, "properties", "price", "type"), `["string","null"]`)
	expectJSON(t, "at", dig(row, "properties", "at", "format"), `"date-time"`)
	expectJSON(t, "ref", dig(row, "properties", "ref", "format"), `"uuid"`)
	expectJSON(t, "blob", dig(row, "properties", "blob", "contentEncoding"), `"base64"`)
	expectJSON(t, "meta is any JSON", dig(row, "properties", "meta", "type"), `null`)
	expectJSON(t, "slept", dig(doc, "components", "schemas", "slow.row", "properties", "slept", "x-levee-db-type"), `"text"`)

	typed := params(t, doc, "/v1/typed")
	for name, want := range map[string]string{
		"day": `{"format":"date","type":"string"}`, "at": `{"description":"RFC 3339 with a zone (Z or ±hh:mm)","format":"date-time","type":"string"}`,
		"price": `{"format":"double","type":"number"}`, "active": `{"type":"boolean"}`, "name": `{"maxLength":16,"type":"string"}`,
	} {
		expectJSON(t, "typed "+name, typed[name]["schema"], want)
	}
	expectJSON(t, "ref format", typed["ref"]["schema"].(map[string]any)["format"], `"uuid"`)
	ids := params(t, doc, "/v1/items")["ids"]
	expectJSON(t, "ids list", []any{ids["style"], ids["explode"], ids["schema"]}, `["form",false,{"items":{"format":"int64","type":"integer"},"maxItems":100,"minItems":1,"type":"array"}]`)
	expectJSON(t, "seconds bounds", params(t, doc, "/v1/slow")["seconds"]["schema"], `{"format":"double","maximum":5,"minimum":0,"type":"number"}`)
}

// TestOpenAPIOfTheDemo: the configuration `levee demo` serves (its real
// backends and SQLite database) gives a valid document with each of its
// routes and both data routes' columns.
func TestOpenAPIOfTheDemo(t *testing.T) {
	h, _ := startDemo(t)
	doc, took := fetchOpenAPI(t, h, "")
	raw, _ := json.Marshal(doc)
	t.Logf("the demo's document: %d bytes (compact), %v", len(raw), took)
	ops := map[string]bool{}
	for _, item := range dig(doc, "paths").(map[string]any) {
		for _, op := range item.(map[string]any) {
			if id, ok := dig(op, "operationId").(string); ok {
				ops[id] = true
			}
		}
	}
	for _, name := range []string{"orders-v1", "customers-v1", "slow", "flaky", "upload", "keyed", "fast"} {
		if !ops[name] {
			t.Errorf("route %s has no operation (operationIds: %v)", name, ops)
		}
	}
	expectJSON(t, "upload", []any{dig(doc, "paths", "/upload/", "post", "operationId"), dig(doc, "paths", "/upload/", "put", "operationId")}, `["upload.post","upload"]`)
	expectJSON(t, "upload 413", dig(doc, "paths", "/upload/", "post", "responses", "413", "content", "application/json", "schema", "properties", "reason", "enum"), `["body_too_large"]`)
	expectJSON(t, "keyed 429", dig(doc, "paths", "/keyed/", "get", "responses", "429", "headers", "Retry-After", "schema", "type"), `"integer"`)
	expectJSON(t, "orders-v1 columns", dig(doc, "components", "schemas", "orders-v1.row", "required"), `["id","customer_id","total","created_at"]`)
	expectJSON(t, "customers-v1 columns", dig(doc, "components", "schemas", "customers-v1.row", "required"), `["id","name","region","created_at"]`)
}
