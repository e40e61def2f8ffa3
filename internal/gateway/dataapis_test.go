package gateway

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/levee-gw/levee/internal/config"
	"github.com/levee-gw/levee/internal/testsvc"
)

// This file tests the data-API lifecycle (docs/data-apis.md, "Lifecycle")
// through a real levee over real sockets and a real SQLite database:
// the admin API's calls change what the data listener serves as soon as
// they return, and what survives a restart is the published version.

// lifecycleYAML is a configuration with the sales SQLite source, an HTTP
// route named web, and fileRoutes (YAML route items) appended to routes.
func lifecycleYAML(dbPath, stateDir, backendAddr, fileRoutes string) string {
	return fmt.Sprintf(`
listen: 127.0.0.1:0
admin: {listen: 127.0.0.1:0}
state_dir: %s
log: {access: false}
upstreams:
  web: {endpoints: [{address: %s}]}
data_sources:
  sales: {driver: sqlite, path: %s, max_conns: 2}
routes:
  - {name: web, match: {path_prefix: /web}, upstream: web}
%s`, dataQuote(stateDir), backendAddr, dataQuote(dbPath), fileRoutes)
}

// versionDef is a data-API definition at prefix whose rows carry v, so an
// answer tells which version served.
func versionDef(prefix string, v int) string {
	return fmt.Sprintf(`{"match": {"path_prefix": %q}, "data": {"source": "sales",
		"sql": "SELECT id, %d AS v FROM orders WHERE customer_id = :customer_id ORDER BY id",
		"params": {"customer_id": {"type": "int64", "required": true, "min": 1}}}}`, prefix, v)
}

// fileVersionRoute is versionDef as a file route item named name.
func fileVersionRoute(name, prefix string, v int) string {
	return fmt.Sprintf(`  - name: %s
    match: {path_prefix: %s}
    data:
      source: sales
      sql: SELECT id, %d AS v FROM orders WHERE customer_id = :customer_id ORDER BY id
      params: {customer_id: {type: int64, required: true, min: 1}}
`, name, prefix, v)
}

// served asks the data listener for path?customer_id=1 and returns the
// version that answered (the rows' v), or 0 with the refusal's reason.
func (in *instance) served(path string) (int, string) {
	in.t.Helper()
	return in.servedRows(path, 7)
}

// servedRows is served for a database where customer 1 has rows orders.
func (in *instance) servedRows(path string, rows int) (int, string) {
	in.t.Helper()
	resp, err := http.Get("http://" + in.g.Addr().String() + path + "?customer_id=1")
	if err != nil {
		in.t.Fatal(err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != http.StatusOK {
		var r refusal
		_ = json.Unmarshal(body, &r)
		if resp.StatusCode != http.StatusNotFound || r.Reason != "no_route" {
			in.t.Fatalf("GET %s: %d %s", path, resp.StatusCode, body)
		}
		return 0, r.Reason
	}
	var page jsonPage
	if err := json.Unmarshal(body, &page); err != nil || len(page.Rows) != rows {
		in.t.Fatalf("GET %s: %s (%v), want the %d orders of customer 1", path, body, err, rows)
	}
	return int(page.Rows[0]["v"].(float64)), ""
}

// expectAPI calls the admin API and checks the status and, for an error,
// the reason.
func (in *instance) expectAPI(method, path, body string, status int, reason string) map[string]any {
	in.t.Helper()
	got, doc := in.api(method, path, body)
	if got != status || (reason != "" && doc["reason"] != reason) {
		in.t.Fatalf("%s %s: %d %v, want %d %s", method, path, got, doc, status, reason)
	}
	return doc
}

// TestDataAPILifecycle (issue 16 item 10): create (a draft does not
// serve), publish (serves), a new version (the published one keeps
// serving until a publish), rollback, offline (404 no_route), publish
// again; bad definitions are 422 naming the field; a route conflict is
// 409; levee_data_apis counts the states; and after a restart on the same
// state_dir exactly the published versions serve.
func TestDataAPILifecycle(t *testing.T) {
	dbPath, _ := sqliteOrders(t)
	web, _ := backend(t, "web")
	dir := t.TempDir()
	cfgPath := filepath.Join(dir, "levee.yaml")
	yaml := lifecycleYAML(dbPath, filepath.Join(dir, "state"), hostPort(web), "")
	if err := os.WriteFile(cfgPath, []byte(yaml), 0o600); err != nil {
		t.Fatal(err)
	}
	in := launch(t, cfgPath, "")
	defer func() { in.stop() }()

	a := in.expectAPI("POST", "/api/v1/data-apis", `{"name": "orders-rt", `+versionDef("/v1/rt", 1)[1:], 201, "")
	if a["state"] != "draft" || a["latest_version"] != 1.0 || a["source"] != "api" {
		t.Fatalf("created: %v", a)
	}
	if v, reason := in.served("/v1/rt"); v != 0 || reason != "no_route" {
		t.Fatalf("a draft serves version %d", v)
	}
	in.expectAPI("POST", "/api/v1/data-apis/orders-rt/publish", "", 200, "")
	if v, _ := in.served("/v1/rt"); v != 1 {
		t.Fatalf("after publish: version %d serves, want 1", v)
	}
	a = in.expectAPI("POST", "/api/v1/data-apis/orders-rt/versions", versionDef("/v1/rt", 2), 201, "")
	if a["latest_version"] != 2.0 || a["published_version"] != 1.0 || len(a["versions"].([]any)) != 2 {
		t.Fatalf("after an update: %v", a)
	}
	if v, _ := in.served("/v1/rt"); v != 1 {
		t.Fatalf("after an update: version %d serves, want 1 until a publish", v)
	}
	in.expectAPI("POST", "/api/v1/data-apis/orders-rt/publish", `{"version": 2}`, 200, "")
	if v, _ := in.served("/v1/rt"); v != 2 {
		t.Fatalf("after publishing 2: version %d serves", v)
	}
	a = in.expectAPI("POST", "/api/v1/data-apis/orders-rt/rollback", "", 200, "")
	if v, _ := in.served("/v1/rt"); v != 1 || a["published_version"] != 1.0 {
		t.Fatalf("after rollback: version %d serves, API %v", v, a)
	}
	in.expectAPI("POST", "/api/v1/data-apis/orders-rt/rollback", `{"version": 1}`, 409, "conflict")
	a = in.expectAPI("POST", "/api/v1/data-apis/orders-rt/offline", "", 200, "")
	if v, reason := in.served("/v1/rt"); v != 0 || reason != "no_route" || a["state"] != "offline" || a["published_version"] != 1.0 {
		t.Fatalf("offline: version %d serves, API %v", v, a)
	}
	in.expectAPI("POST", "/api/v1/data-apis/orders-rt/offline", "", 409, "conflict")
	in.expectAPI("POST", "/api/v1/data-apis/orders-rt/publish", `{"version": 2}`, 200, "")
	if v, _ := in.served("/v1/rt"); v != 2 {
		t.Fatalf("published again: version %d serves", v)
	}

	// Bad definitions: 422 with the field's path, as levee validate says it.
	bad := []struct{ body, field, says string }{
		{`{"name": "x", "match": {"path_prefix": "/x"}, "data": {"source": "nope", "table": "orders", "columns": ["id"]}}`, "data.source", `unknown data source "nope"`},
		{`{"name": "x", "match": {"path_prefix": "/x"}, "data": {"source": "sales", "sql": "SELECT id FROM orders WHERE id = :id"}}`, "data.sql", "id"},
		{`{"name": "x", "match": {"path_prefix": "/x", "methods": ["POST"]}, "data": {"source": "sales", "table": "orders", "columns": ["id"]}}`, "match.methods[0]", `"POST"`},
		{`{"name": "x", "match": {"path_prefix": "/x"}, "data": {"source": "sales", "table": "orders", "columns": ["id"]}, "colour": 1}`, "colour", "unknown"},
		{`{"name": "web", "match": {"path_prefix": "/x"}, "data": {"source": "sales", "table": "orders", "columns": ["id"]}}`, "name", "not a data route"},
		{`{"match": {"path_prefix": "/x"}, "data": {"source": "sales", "table": "orders", "columns": ["id"]}}`, "name", "required"},
	}
	for _, b := range bad {
		doc := in.expectAPI("POST", "/api/v1/data-apis", b.body, 422, "invalid_data_api")
		if doc["field"] != b.field || !strings.Contains(doc["error"].(string), b.says) {
			t.Errorf("%s: field %v, error %v; want %s and %q", b.body, doc["field"], doc["error"], b.field, b.says)
		}
	}
	in.expectAPI("POST", "/api/v1/data-apis/orders-rt/versions", `{"name": "other", `+versionDef("/v1/rt", 3)[1:], 422, "invalid_data_api")
	in.expectAPI("POST", "/api/v1/data-apis", `{"name": "x"`, 400, "bad_request")
	in.expectAPI("POST", "/api/v1/data-apis", `{"name": "orders-rt", `+versionDef("/v1/rt", 1)[1:], 409, "data_api_exists")
	in.expectAPI("POST", "/api/v1/data-apis/nope/publish", "", 404, "not_found")
	in.expectAPI("POST", "/api/v1/data-apis/orders-rt/publish", `{"version": 0}`, 400, "bad_request")

	// A second API on the same path is a draft freely, but cannot serve.
	in.expectAPI("POST", "/api/v1/data-apis", `{"name": "clash", `+versionDef("/v1/rt", 9)[1:], 201, "")
	in.expectAPI("POST", "/api/v1/data-apis/clash/publish", "", 409, "route_conflict")
	in.expectAPI("POST", "/api/v1/data-apis", `{"name": "later", `+versionDef("/v1/later", 5)[1:], 201, "")
	in.expectAPI("POST", "/api/v1/data-apis/later/publish", "", 200, "")
	in.expectAPI("POST", "/api/v1/data-apis", `{"name": "gone", `+versionDef("/v1/gone", 6)[1:], 201, "")
	in.expectAPI("POST", "/api/v1/data-apis/gone/publish", "", 200, "")
	if v, _ := in.served("/v1/gone"); v != 6 {
		t.Fatalf("gone serves version %d, want 6", v)
	}
	// Its series go with it: names created and deleted at runtime must not
	// add series for the life of the process.
	series := func() (n int) {
		for _, line := range strings.Split(metricsText(t, in.admin), "\n") {
			if strings.Contains(line, `route="gone"`) {
				n++
			}
		}
		return n
	}
	if n := series(); n < 5 {
		t.Fatalf("%d series of the published route gone, want its requests, durations, bytes and data series", n)
	}
	in.expectAPI("DELETE", "/api/v1/data-apis/gone", "", 204, "")
	if v, reason := in.served("/v1/gone"); v != 0 || reason != "no_route" {
		t.Fatalf("a deleted API serves version %d", v)
	}
	if n := series(); n != 0 {
		t.Errorf("%d series still name the deleted route gone", n)
	}
	if metricOf(t, in.admin, `levee_request_bytes_total{route="later"}`) != 0 || !strings.Contains(metricsText(t, in.admin), `levee_request_bytes_total{route="later"}`) {
		t.Error("the series of the routes still served went too")
	}
	list := in.expectAPI("GET", "/api/v1/data-apis?limit=2", "", 200, "")
	if apis := list["data_apis"].([]any); len(apis) != 2 || list["next"] != "later" {
		t.Fatalf("list: %v", list)
	}
	for state, want := range map[string]float64{"draft": 1, "published": 2, "offline": 0} {
		if got := metricOf(t, in.admin, `levee_data_apis{state="`+state+`"}`); got != want {
			t.Errorf("levee_data_apis{state=%q} = %v, want %v", state, got, want)
		}
	}
	if _, doc := in.api("GET", "/api/v1/openapi.json", ""); !strings.Contains(fmt.Sprint(doc["paths"]), "/v1/rt") {
		t.Errorf("the OpenAPI document does not show the published data API: %v", doc["paths"])
	}

	// A restart on the same state_dir serves exactly the published versions.
	in.stop()
	in = launch(t, cfgPath, "")
	if v, _ := in.served("/v1/rt"); v != 2 {
		t.Fatalf("after a restart: version %d serves, want 2", v)
	}
	if v, _ := in.served("/v1/later"); v != 5 {
		t.Fatalf("after a restart: later serves version %d, want 5", v)
	}
	a = in.expectAPI("GET", "/api/v1/data-apis/clash", "", 200, "")
	if a["state"] != "draft" {
		t.Fatalf("clash after a restart: %v", a)
	}
}

// metricsText returns admin's /metrics page.
func metricsText(t *testing.T, admin string) string {
	t.Helper()
	resp, err := http.Get(admin + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	return string(body)
}

// metricOf returns the value of the sample line starting with prefix on
// admin's /metrics page (0 when absent).
func metricOf(t *testing.T, admin, prefix string) float64 {
	t.Helper()
	for _, line := range strings.Split(metricsText(t, admin), "\n") {
		if rest, ok := strings.CutPrefix(line, prefix+" "); ok {
			var v float64
			fmt.Sscanf(rest, "%g", &v)
			return v
		}
	}
	return 0
}

// TestDataAPIPrecedence (issue 16 item 10): the file's data routes seed the
// store and serve; a runtime change is kept across reloads; a changed file
// definition then becomes pending_file_change (warned); a deletion at
// runtime leaves a tombstone until the file's definition changes; a route
// dropped from the file goes unless changed at runtime; and a reload that
// would take away what a runtime API needs is refused.
func TestDataAPIPrecedence(t *testing.T) {
	dbPath, _ := sqliteOrders(t)
	web, _ := backend(t, "web")
	dir := t.TempDir()
	cfgPath := filepath.Join(dir, "levee.yaml")
	state := filepath.Join(dir, "state")
	write := func(routes string) {
		t.Helper()
		if err := os.WriteFile(cfgPath, []byte(lifecycleYAML(dbPath, state, hostPort(web), routes)), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	write(fileVersionRoute("orders", "/v1/orders", 1) + fileVersionRoute("plain", "/v1/plain", 1))
	logs := &lockedBuffer{}
	g, err := New(Options{Load: func() (*config.Config, error) { return config.Load(cfgPath) }, LogOutput: logs})
	if err != nil {
		t.Fatal(err)
	}
	if err := g.Start(); err != nil {
		t.Fatal(err)
	}
	in := &instance{t: t, g: g, admin: "http://" + g.AdminAddr().String()}
	defer func() { in.stop() }()
	reload := func() {
		t.Helper()
		in.expectAPI("POST", "/api/v1/reload", "", 200, "")
	}
	if v, _ := in.served("/v1/orders"); v != 1 {
		t.Fatalf("the file's data route serves version %d", v)
	}
	a := in.expectAPI("GET", "/api/v1/data-apis/orders", "", 200, "")
	if a["source"] != "file" || a["state"] != "published" || a["overridden"] != false {
		t.Fatalf("seeded: %v", a)
	}

	// A runtime change wins over an unchanged file, across reloads.
	in.expectAPI("POST", "/api/v1/data-apis/orders/versions", versionDef("/v1/orders", 2), 201, "")
	in.expectAPI("POST", "/api/v1/data-apis/orders/publish", "", 200, "")
	reload()
	if v, _ := in.served("/v1/orders"); v != 2 {
		t.Fatalf("after a reload: version %d serves, want the runtime 2", v)
	}
	// The file changes it: the runtime version stays, pending_file_change.
	write(fileVersionRoute("orders", "/v1/orders", 3) + fileVersionRoute("plain", "/v1/plain", 1))
	reload()
	if v, _ := in.served("/v1/orders"); v != 2 {
		t.Fatalf("after a file change: version %d serves, want the runtime 2", v)
	}
	a = in.expectAPI("GET", "/api/v1/data-apis/orders", "", 200, "")
	if a["overridden"] != true || a["pending_file_change"] != true {
		t.Fatalf("after a file change: %v", a)
	}
	if !strings.Contains(logs.String(), `the file's definition of this data route changed but was not applied`) {
		t.Errorf("no warning for the pending file change in the log:\n%s", logs.String())
	}
	// A file route not changed at runtime takes the file's new definition.
	write(fileVersionRoute("orders", "/v1/orders", 3) + fileVersionRoute("plain", "/v1/plain", 4))
	reload()
	if v, _ := in.served("/v1/plain"); v != 4 {
		t.Fatalf("plain: version %d serves, want the file's 4", v)
	}
	// Deleting the overridden API takes the file's pending version: the
	// tombstone holds the definition last seeded (1), the file's is 3.
	in.expectAPI("DELETE", "/api/v1/data-apis/orders", "", 204, "")
	reload()
	if v, _ := in.served("/v1/orders"); v != 3 {
		t.Fatalf("deleted while pending: version %d serves, want the file's 3", v)
	}
	// Deleted at runtime now: a tombstone keeps it deleted...
	in.expectAPI("DELETE", "/api/v1/data-apis/orders", "", 204, "")
	reload()
	if v, reason := in.served("/v1/orders"); reason != "no_route" {
		t.Fatalf("tombstoned: version %d serves", v)
	}
	// ...until the file's definition changes.
	write(fileVersionRoute("orders", "/v1/orders", 5) + fileVersionRoute("plain", "/v1/plain", 4))
	reload()
	if v, _ := in.served("/v1/orders"); v != 5 {
		t.Fatalf("after the file changed a tombstoned route: version %d serves, want 5", v)
	}
	// Dropped from the file: gone, since not changed at runtime.
	write(fileVersionRoute("orders", "/v1/orders", 5))
	reload()
	if v, reason := in.served("/v1/plain"); reason != "no_route" {
		t.Fatalf("dropped from the file: version %d serves", v)
	}
	in.expectAPI("GET", "/api/v1/data-apis/plain", "", 404, "not_found")

	// A reload that would leave a runtime API without its data source, or
	// put a file route on its path, is refused; the old one keeps serving.
	in.expectAPI("POST", "/api/v1/data-apis", `{"name": "rt", `+versionDef("/v1/rt", 7)[1:], 201, "")
	in.expectAPI("POST", "/api/v1/data-apis/rt/publish", "", 200, "")
	noSources := lifecycleYAML(dbPath, state, hostPort(web), "")
	noSources = noSources[:strings.Index(noSources, "data_sources:")] + noSources[strings.Index(noSources, "routes:"):]
	if err := os.WriteFile(cfgPath, []byte(noSources), 0o600); err != nil {
		t.Fatal(err)
	}
	doc := in.expectAPI("POST", "/api/v1/reload", "", 422, "invalid_config")
	if !strings.Contains(fmt.Sprint(doc["problems"]), "data API rt") {
		t.Fatalf("refusal does not name the data API: %v", doc)
	}
	// A data route answers only its own path (issue 25), so the file
	// route that collides with it is one on that exact path; a prefix
	// route /v1/rt would take only the paths below it.
	write(fileVersionRoute("orders", "/v1/orders", 5) + "  - {name: web2, match: {path: /v1/rt, methods: [GET]}, upstream: web}\n")
	doc = in.expectAPI("POST", "/api/v1/reload", "", 422, "invalid_config")
	if !strings.Contains(fmt.Sprint(doc["problems"]), `route "rt" duplicates route "web2"`) {
		t.Fatalf("refusal does not name the collision: %v", doc)
	}
	if v, _ := in.served("/v1/rt"); v != 7 {
		t.Fatalf("after refused reloads: rt serves version %d", v)
	}
}

// TestDataAPILifecycleOverPostgres (issue 16 item 10): the lifecycle over
// a real PostgreSQL: a runtime data API published, updated and published
// again serves each version's answers, and after a restart the published
// version serves; offline is 404.
func TestDataAPILifecycleOverPostgres(t *testing.T) {
	pg := testsvc.StartPostgres(t)
	pg.Exec(t, pgTypesSQL)
	dir := t.TempDir()
	cfgPath := filepath.Join(dir, "levee.yaml")
	yaml := fmt.Sprintf(`
listen: 127.0.0.1:0
admin: {listen: 127.0.0.1:0}
state_dir: %s
log: {access: false}
data_sources:
  sales: {driver: postgres, dsn: %s, max_conns: 2}
routes:
  - {name: items, match: {path_prefix: /v1/items}, data: {source: sales, table: items, columns: [id], order: [id]}}
`, dataQuote(filepath.Join(dir, "state")), dataQuote(pg.DSN))
	if err := os.WriteFile(cfgPath, []byte(yaml), 0o600); err != nil {
		t.Fatal(err)
	}
	in := launch(t, cfgPath, "")
	defer func() { in.stop() }()
	const rows = 40 // customer 1's orders in pgTypesSQL
	in.expectAPI("POST", "/api/v1/data-apis", `{"name": "orders-pg", `+versionDef("/v1/pg", 1)[1:], 201, "")
	in.expectAPI("POST", "/api/v1/data-apis/orders-pg/publish", "", 200, "")
	if v, _ := in.servedRows("/v1/pg", rows); v != 1 {
		t.Fatalf("published: version %d serves", v)
	}
	in.expectAPI("POST", "/api/v1/data-apis/orders-pg/versions", versionDef("/v1/pg", 2), 201, "")
	if v, _ := in.servedRows("/v1/pg", rows); v != 1 {
		t.Fatalf("after an update: version %d serves, want 1", v)
	}
	in.expectAPI("POST", "/api/v1/data-apis/orders-pg/publish", "", 200, "")
	if v, _ := in.servedRows("/v1/pg", rows); v != 2 {
		t.Fatalf("published 2: version %d serves", v)
	}
	in.stop()
	in = launch(t, cfgPath, "")
	if v, _ := in.servedRows("/v1/pg", rows); v != 2 {
		t.Fatalf("after a restart: version %d serves, want 2", v)
	}
	in.expectAPI("POST", "/api/v1/data-apis/orders-pg/offline", "", 200, "")
	if v, reason := in.servedRows("/v1/pg", rows); reason != "no_route" {
		t.Fatalf("offline: version %d serves", v)
	}
}
