package config

import (
	"github.com/levee-gw/levee/internal/dataquery"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"
)

// dataYAML is a file of data routes only (no upstreams): the two
// routes, on a PostgreSQL source and a SQLite one.
func dataYAML(t testing.TB, extra string) string {
	t.Helper()
	dir := t.TempDir()
	db := filepath.Join(dir, "demo.db")
	dsn := filepath.Join(dir, "sales.dsn")
	os.WriteFile(db, nil, 0o600)
	os.WriteFile(dsn, []byte("postgres://levee@127.0.0.1:5432/sales?sslmode=disable\nignored\n"), 0o600)
	return `
listen: 127.0.0.1:8080
admin: {listen: 127.0.0.1:9901}
data_sources:
  sales:
    driver: postgres
    dsn_file: ` + dsn + `
    max_conns: 8
    statement_timeout: 2s
    limits: {max_concurrency: adaptive, max_queue: 16, queue_timeout: 50ms}
  local:
    driver: sqlite
    path: ` + db + `
routes:
  - name: orders-v1
    match: {path_prefix: /v1/orders, methods: [GET]}
    data:
      source: sales
      sql: SELECT id, customer_id, total, created_at FROM orders WHERE customer_id = :customer_id ORDER BY created_at DESC, id DESC
      params:
        customer_id: {type: int64, required: true, min: 1}
      page: {keyset: [created_at, id], default: 100, max: 1000}
      limits: {max_rows: 10000, max_bytes: 8MiB}
      formats: [json, ndjson, csv]
      cache: {ttl: 30s, stale_if_error: 10m}
  - name: customers-v1
    match: {path_prefix: /v1/customers}
    data:
      source: local
      table: customers
      columns: [id, name, region, created_at]
      filters: {region: [eq, in], created_at: [gte, lt], id: [eq]}
      order: [id]
      page: {keyset: [id], default: 100, max: 1000}
` + extra
}

// TestDataConfig: the configuration parses (no upstreams needed),
// with its defaults: the DSN read from its file, the data source's
// admission limit brought within max_conns, GET and HEAD for a data route
// without methods, every format.
func TestDataConfig(t *testing.T) {
	c, err := Parse([]byte(dataYAML(t, "")))
	if err != nil {
		t.Fatal(err)
	}
	sales, local := c.DataSources["sales"], c.DataSources["local"]
	if sales.DSN != "postgres://levee@127.0.0.1:5432/sales?sslmode=disable" || sales.MaxConns != 8 || sales.StatementTimeout != 2*time.Second {
		t.Errorf("sales = %+v", sales)
	}
	if l := sales.Limits; !l.Adaptive || l.Max != 8 || l.MaxQueue != 16 || l.QueueTimeout != 50*time.Millisecond {
		t.Errorf("sales limits = %+v, want adaptive up to max_conns 8, queue 16", l)
	}
	if l := local.Limits; !l.Adaptive || l.Min != 4 || l.Max != DefaultDataMaxConns || l.MaxQueue != 4*DefaultDataMaxConns ||
		l.QueueTimeout != DefaultDataQueueTimeout {
		t.Errorf("local's default limits = %+v, want adaptive 4..8, queue 32, queue_timeout 500ms", l)
	}
	// A limits block without queue_timeout keeps the data sources' default,
	// not the upstreams' 50ms.
	c2, err := Parse([]byte(strings.Replace(dataYAML(t, ""), "max_queue: 16, queue_timeout: 50ms", "max_queue: 16", 1)))
	if err != nil {
		t.Fatal(err)
	}
	if l := c2.DataSources["sales"].Limits; l.QueueTimeout != DefaultDataQueueTimeout || l.MaxQueue != 16 {
		t.Errorf("sales without queue_timeout: %+v, want queue_timeout 500ms", l)
	}
	if !slices.Equal(c.DataSourceOrder, []string{"sales", "local"}) || len(c.Upstreams) != 0 {
		t.Errorf("order %v, upstreams %v", c.DataSourceOrder, c.Upstreams)
	}
	orders, customers := c.Routes[0].Data, c.Routes[1].Data
	if orders.Params["customer_id"].Min != "1" || orders.Cache.TTL != 30*time.Second || orders.MaxBytes != 8<<20 || orders.SendTimeout != DefaultDataSendTimeout {
		t.Errorf("orders = %+v", orders)
	}
	if !slices.Equal(c.Routes[1].Match.Methods, []string{"GET", "HEAD"}) || !slices.Equal(customers.Formats, []string{"json", "ndjson", "csv"}) {
		t.Errorf("customers: methods %v, formats %v", c.Routes[1].Match.Methods, customers.Formats)
	}
	// column_types: kept in file order, for either mode.
	c3, err := Parse([]byte(strings.Replace(dataYAML(t, ""), "      formats: [json, ndjson, csv]\n",
		"      formats: [json, ndjson, csv]\n      column_types: {total: numeric, id: int64}\n", 1)))
	if err != nil {
		t.Fatal(err)
	}
	if d := c3.Routes[0].Data; !slices.Equal(d.ColumnTypeOrder, []string{"total", "id"}) || d.ColumnTypes["total"] != "numeric" {
		t.Errorf("column_types read as %v %v", d.ColumnTypeOrder, d.ColumnTypes)
	}
	if c.Routes[1].Upgrades != nil {
		t.Errorf("a data route upgrades %v", c.Routes[1].Upgrades)
	}
}

// TestDataConfigRejects: each mistake is named with its field path, and
// the route's SQL is compiled as levee run compiles it.
func TestDataConfigRejects(t *testing.T) {
	base := dataYAML(t, "")
	for _, c := range []struct {
		name, old, new, want string
	}{
		{"undeclared placeholder", "customer_id = :customer_id", "customer_id = :customer_id AND total > :min_total",
			"routes[0].data.sql: "},
		{"unused param", "customer_id: {type: int64, required: true, min: 1}", "customer_id: {type: int64, required: true, min: 1}\n        extra: {type: string}",
			"routes[0].data.sql: "},
		{"bad type", "{type: int64, required: true, min: 1}", "{type: integer, required: true}",
			`routes[0].data.params.customer_id.type: must be one of`},
		{"bad bound", "{type: int64, required: true, min: 1}", "{type: int64, required: true, min: one}",
			"routes[0].data.sql: "},
		{"keyset not the order", "keyset: [created_at, id], default: 100", "keyset: [id], default: 100",
			"routes[0].data.sql: "},
		{"not a query", "sql: SELECT id, customer_id", "sql: COPY t TO PROGRAM 'id' -- SELECT id, customer_id",
			"routes[0].data.sql: COPY is not a query (line 1 column 1)"},
		{"data-modifying WITH", "sql: SELECT id, customer_id", "sql: WITH d AS (DELETE FROM orders RETURNING *) SELECT id, customer_id",
			"routes[0].data.sql: WITH d AS (DELETE ...) at line 1 column 12: a data-modifying WITH is not a query"},
		{"unknown source", "source: sales", "source: sale", `routes[0].data.source: unknown data source "sale" (did you mean "sales"?)`},
		{"sql and table", "source: local\n      table: customers", "source: local\n      sql: SELECT 1\n      table: customers",
			"routes[1].data.table: give sql or table, not both"},
		{"neither", "source: local\n      table: customers", "source: local", "routes[1].data.sql: required (or table, for a table-mode route)"},
		{"filter op", "region: [eq, in]", "region: [eq, near]", `routes[1].data.filters.region[1]: must be one of eq, neq, lt, lte, gt, gte, in, is, like, ilike, got "near"`},
		{"filter on unlisted column", "id: [eq]}", "secret: [eq]}", "routes[1].data.table: "},
		{"columns missing", "      columns: [id, name, region, created_at]\n", "", "routes[1].data.columns: required with table"},
		{"params on table", "      order: [id]\n", "      order: [id]\n      params: {x: {type: int64}}\n", "routes[1].data.params: only applies to a SQL-mode route"},
		{"write method", "methods: [GET]", "methods: [GET, POST]", `routes[0].match.methods[1]: a data route answers GET and HEAD only, got "POST"`},
		{"body on data route", "    match: {path_prefix: /v1/customers}\n", "    match: {path_prefix: /v1/customers}\n    max_body_bytes: 1KiB\n",
			"routes[1].max_body_bytes: does not apply to a data route"},
		{"upstream and data", "    match: {path_prefix: /v1/customers}\n", "    match: {path_prefix: /v1/customers}\n    upstream: x\n",
			"routes[1].data: a route has upstream or data, not both"},
		{"limit over pool", "max_concurrency: adaptive, max_queue: 16", "max_concurrency: 20, max_queue: 16",
			"data_sources.sales.limits.max_concurrency: must be at most max_conns (8)"},
		{"adaptive max over pool", "max_concurrency: adaptive, max_queue: 16", "max_concurrency: adaptive, max: 9, max_queue: 16",
			"data_sources.sales.limits.max: must be at most max_conns (8)"},
		{"dsn and dsn_file", "    driver: postgres\n", "    driver: postgres\n    dsn: postgres://x\n", "data_sources.sales.dsn_file: give dsn or dsn_file, not both"},
		{"sqlite without path", "    driver: sqlite\n    path: ", "    driver: sqlite\n    dsn: ", "data_sources.local.dsn: only applies to driver postgres"},
		{"bad driver", "driver: sqlite", "driver: mysql", `data_sources.local.driver: must be one of "postgres", "sqlite"`},
		{"dsn that does not parse", "    driver: postgres\n    dsn_file: ", "    driver: postgres\n    dsn: \"postgres://u:secret@[::1\"\n    x_file: ",
			"data_sources.sales.dsn: postgres dsn: "},
		{"format", "formats: [json, ndjson, csv]", "formats: [json, xml]", `routes[0].data.formats[1]: must be one of json, ndjson, csv, got "xml"`},
		{"page default over max", "default: 100, max: 1000}\n      limits", "default: 100, max: 10}\n      limits", "routes[0].data.page.default: must be at most max (10), got 100"},
		{"cache without ttl", "cache: {ttl: 30s, stale_if_error: 10m}", "cache: {stale_if_error: 10m}", "routes[0].data.cache.ttl: required"},
		{"column kind", "      order: [id]\n", "      order: [id]\n      column_types: {id: int64, name: text, region: string, created_at: timestamp}\n",
			`routes[1].data.column_types.name: must be one of int64, float64, bool, string, date, timestamp, uuid, numeric, bytes, json, got "text"`},
		{"column typed but not answered", "      order: [id]\n", "      order: [id]\n      column_types: {id: int64, name: string, region: string, created_at: timestamp, secret: string}\n",
			"routes[1].data.column_types.secret: declares a column the route does not answer with (columns: id, name, region, created_at)"},
		{"order without keyset on a paged route", "      order: [id]\n", "      order: [id]\n      orders: [{order: created_at.desc}]\n",
			`routes[1].data.orders[0]: order "created_at.desc" has no keyset: a paged route's every order needs one (its items, then a unique NOT NULL column unless they are unique already: keyset: "created_at.desc,<column>")`},
		{"keyset not beginning with its order", "      order: [id]\n", "      order: [id]\n      orders: [{order: id.desc, keyset: id.desc}, {order: created_at.desc, keyset: \"created_at,id\"}]\n",
			`routes[1].data.orders[1].keyset: "created_at,id" must begin with the order's items (created_at.desc, same directions)`},
		{"order on an unlisted column", "      order: [id]\n", "      order: [id]\n      orders: [{order: secret, keyset: \"secret,id\"}]\n",
			`routes[1].data.orders[0].order: "secret" is not one of the columns`},
		{"nullslast", "      order: [id]\n", "      order: [id]\n      orders: [{order: id.desc.nullslast, keyset: id.desc}]\n",
			`routes[1].data.orders[0].order: order "id.desc.nullslast": nullslast is not supported`},
		{"orders on a SQL route", "      formats: [json, ndjson, csv]\n", "      formats: [json, ndjson, csv]\n      orders: [{order: id, keyset: id}]\n",
			"routes[0].data.orders: only applies to a table-mode route"},
		{"count_max zero", "      order: [id]\n", "      order: [id]\n      count_max: 0\n", "routes[1].data.count_max: "},
		{"filter named or", "columns: [id, name, region, created_at]\n      filters: {region: [eq, in], created_at: [gte, lt], id: [eq]}",
			"columns: [id, name, region, created_at, or]\n      filters: {region: [eq, in], created_at: [gte, lt], id: [eq], or: [eq]}",
			`routes[1].data.table: filters: "or" is a query key of its own (select, order, or, and) and cannot be a filter's name`},
		{"single with page", "formats: [json, ndjson, csv]", "formats: [json]\n      single: true",
			"routes[0].data.page: does not apply with single: true (one row is not paged)"},
		{"single with ndjson", "formats: [json, ndjson, csv]", "formats: [json, ndjson, csv]\n      single: true",
			`routes[0].data.formats[1]: a single: true route answers JSON only (one object), got "ndjson"`},
		{"single with csv", "formats: [json, ndjson, csv]", "formats: [json, ndjson, csv]\n      single: true",
			`routes[0].data.formats[2]: a single: true route answers JSON only (one object), got "csv"`},
		{"single not a bool", "formats: [json, ndjson, csv]", "formats: [json]\n      single: yes please",
			"routes[0].data.single: "},
		{"column answered but not typed", "      order: [id]\n", "      order: [id]\n      column_types: {id: int64, name: string, region: string}\n",
			`routes[1].data.column_types: must declare every column the route answers with, "created_at" is missing`},
	} {
		t.Run(c.name, func(t *testing.T) {
			if !strings.Contains(base, c.old) {
				t.Fatalf("the base file has no %q", c.old)
			}
			_, err := Parse([]byte(strings.Replace(base, c.old, c.new, 1)))
			if err == nil {
				t.Fatalf("accepted; want %q", c.want)
			}
			lines := errorLines(t, err)
			found := false
			for _, l := range lines {
				found = found || strings.Contains(l, c.want)
			}
			if !found {
				t.Errorf("errors %q, want one containing %q", lines, c.want)
			}
		})
	}
}

// TestDataSingleFormats: a single: true route without formats answers
// JSON only (its one object), and keeps what it declares.
func TestDataSingleFormats(t *testing.T) {
	base := dataYAML(t, "")
	y := strings.Replace(base, "      page: {keyset: [created_at, id], default: 100, max: 1000}\n", "", 1)
	y = strings.Replace(y, "      formats: [json, ndjson, csv]\n", "      single: true\n", 1)
	c, err := Parse([]byte(y))
	if err != nil {
		t.Fatal(err)
	}
	if d := c.Routes[0].Data; !d.Single || !slices.Equal(d.Formats, []string{"json"}) || d.Page != nil {
		t.Errorf("single %v formats %v page %v; want true [json] nil", d.Single, d.Formats, d.Page)
	}
}

// TestDataVersionCoversEveryField: every field of RouteData either goes
// into Version or is named here as left out on purpose, so a field added
// later cannot be forgotten (a changed route would keep serving its old
// cached answers and accepting old cursors).
func TestDataVersionCoversEveryField(t *testing.T) {
	// column_types only feeds the OpenAPI document: the answer is the same.
	leftOut := map[string]bool{"CountMax": true, "Cache": true, "StatementTimeout": true, "SendTimeout": true, "ColumnTypes": true, "ColumnTypeOrder": true}
	c, err := Parse([]byte(dataYAML(t, "")))
	if err != nil {
		t.Fatal(err)
	}
	base := *c.Routes[0].Data
	changed := map[string]func(d *RouteData){
		"Source": func(d *RouteData) { d.Source = "other" },
		"SQL":    func(d *RouteData) { d.SQL += " " },
		"Params": func(d *RouteData) {
			d.Params = map[string]*dataquery.Param{"customer_id": {Name: "customer_id", Type: dataquery.Int64, Min: "2"}}
		},
		"ParamOrder": func(d *RouteData) { d.ParamOrder = append(slices.Clone(d.ParamOrder), "x") },
		"Table":      func(d *RouteData) { d.Table = "t" },
		"Columns":    func(d *RouteData) { d.Columns = []string{"a"} },
		"Filters":    func(d *RouteData) { d.Filters = map[string][]string{"a": {"eq"}} },
		"Order":      func(d *RouteData) { d.Order = []string{"a"} },
		"Orders":     func(d *RouteData) { d.Orders = []DataOrder{{Order: "a", Keyset: "a,id"}} },
		"Page":       func(d *RouteData) { d.Page = &DataPage{Keyset: []string{"id"}, Default: 5, Max: 10} },
		"MaxRows":    func(d *RouteData) { d.MaxRows++ },
		"MaxBytes":   func(d *RouteData) { d.MaxBytes++ },
		"Formats":    func(d *RouteData) { d.Formats = []string{"csv"} },
		"Single":     func(d *RouteData) { d.Single = true },
		"RowFilter":  func(d *RouteData) { d.RowFilter = []DataRowFilter{{Column: "a", From: "app.id"}} },
	}
	rt := reflect.TypeOf(RouteData{})
	for i := range rt.NumField() {
		name := rt.Field(i).Name
		if leftOut[name] {
			continue
		}
		change, ok := changed[name]
		if !ok {
			t.Errorf("RouteData.%s is neither in Version nor left out on purpose", name)
			continue
		}
		d := base
		change(&d)
		if d.Version() == base.Version() {
			t.Errorf("changing RouteData.%s keeps the Version", name)
		}
	}
}
