package config

import (
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/levee-gw/levee/internal/config/engine"
	"github.com/levee-gw/levee/internal/dataquery"
	"gopkg.in/yaml.v3"
)

// A route's data block (`routes[].data`): its type, field tables,
// defaults and reader with the checks of its query against its source.
// The data sources are data_sources.go's; the value kinds of parameters
// and columns data.go's.

// routeData reads a route's `data` block. sources are the data sources
// declared (nil when data_sources is missing or not a mapping).
func (p *parser) routeData(c *Config, path string, n *yaml.Node) *RouteData {
	d := defaultRouteData()
	f, ok := p.Block(path, n, dataBlock)
	if !ok {
		return d
	}
	bad := p.Bind(f, n, path, dataBlock, d)
	var src *DataSource
	if !bad["source"] {
		if src = c.DataSources[d.Source]; src == nil {
			p.Add(f["source"], engine.Key(path, "source"), "unknown data source %s%s", engine.Quote(d.Source), engine.Suggest(d.Source, c.DataSourceOrder))
		}
	}
	if v := f["params"]; v != nil {
		d.Params, d.ParamOrder = p.dataParams(engine.Key(path, "params"), v)
	}
	if v := f["columns"]; v != nil {
		d.Columns = p.identList(engine.Key(path, "columns"), v, dataquery.MaxColumns)
	}
	if v := f["order"]; v != nil {
		d.Order = p.stringList(engine.Key(path, "order"), v, dataquery.MaxColumns)
	}
	if v := f["filters"]; v != nil {
		d.Filters = p.dataFilters(engine.Key(path, "filters"), v)
	}
	if v := f["orders"]; v != nil {
		d.Orders = p.dataOrders(engine.Key(path, "orders"), v)
	}
	if v := f["page"]; v != nil {
		d.Page = p.dataPage(engine.Key(path, "page"), v)
	}
	if v := f["column_types"]; v != nil {
		d.ColumnTypes, d.ColumnTypeOrder = p.dataColumnTypes(engine.Key(path, "column_types"), v)
	}
	if v := f["formats"]; v != nil {
		d.Formats = p.dataFormatList(engine.Key(path, "formats"), v)
	}
	if v := f["row_filter"]; v != nil {
		d.RowFilter = p.dataRowFilters(engine.Key(path, "row_filter"), v)
	}
	if d.Single {
		p.singleRules(path, f, d)
	}
	sqlMode, tableMode := f["sql"] != nil, f["table"] != nil
	switch {
	case sqlMode && tableMode:
		p.Add(f["table"], engine.Key(path, "table"), "give sql or table, not both")
		return d
	case !sqlMode && !tableMode:
		p.Add(n, engine.Key(path, "sql"), "required (or table, for a table-mode route)")
		return d
	case sqlMode:
		for _, k := range []string{"columns", "filters", "order", "orders", "row_filter"} {
			if f[k] != nil {
				p.Add(f[k], engine.Key(path, k), "only applies to a table-mode route (with table); a SQL-mode route selects its own columns")
			}
		}
	case tableMode:
		if f["params"] != nil {
			p.Add(f["params"], engine.Key(path, "params"), "only applies to a SQL-mode route (with sql); a table-mode route is filtered with filters")
		}
		if f["row_filter"] != nil {
			p.dataRowFilterRules(path, f["row_filter"], d)
		}
		if f["columns"] == nil {
			p.Add(n, engine.Key(path, "columns"), "required with table: the columns the route answers with")
		}
		if d.ColumnTypes != nil {
			ctp := engine.Key(path, "column_types")
			for _, c := range d.ColumnTypeOrder {
				if !slices.Contains(d.Columns, c) {
					p.Add(f["column_types"], engine.Key(ctp, c), "declares a column the route does not answer with (columns: %s)", strings.Join(d.Columns, ", "))
				}
			}
			for _, c := range d.Columns {
				if _, ok := d.ColumnTypes[c]; !ok {
					p.Add(f["column_types"], ctp, "must declare every column the route answers with, %s is missing", engine.Quote(c))
				}
			}
		}
	}
	if src == nil || bad["sql"] || bad["table"] {
		return d
	}
	p.checkDataQuery(path, f, d, src)
	return d
}

// dataPage reads a route's `page`.
func (p *parser) dataPage(path string, n *yaml.Node) *DataPage {
	pg := &DataPage{Default: DefaultDataPageSize, Max: DefaultDataPageMax}
	f, ok := p.Block(path, n, dataPageBlock)
	if !ok {
		return pg
	}
	bad := p.Bind(f, n, path, dataPageBlock, pg)
	if v := f["keyset"]; v != nil {
		pg.Keyset = p.identList(engine.Key(path, "keyset"), v, dataquery.MaxKeyset)
	} else {
		p.Add(n, engine.Key(path, "keyset"), "required: the columns that order the rows and make each row's place unique")
	}
	if !bad["default"] && !bad["max"] && pg.Default > pg.Max {
		p.Add(f["default"], engine.Key(path, "default"), "must be at most max (%d), got %d", pg.Max, pg.Default)
	}
	return pg
}

// singleRules holds a `single: true` route to one JSON object: no page,
// JSON only (the default formats become [json]).
func (p *parser) singleRules(path string, f map[string]*yaml.Node, d *RouteData) {
	if f["page"] != nil {
		p.Add(f["page"], engine.Key(path, "page"), "does not apply with single: true (one row is not paged)")
	}
	if f["formats"] == nil {
		d.Formats = []string{"json"}
		return
	}
	fp := engine.Key(path, "formats")
	for i, fm := range d.Formats {
		if fm != "json" {
			p.Add(f["formats"], engine.Index(fp, i), "a single: true route answers JSON only (one object), got %s", engine.Quote(fm))
		}
	}
}

// dataFormatList reads `formats`: distinct format names, the first the
// default.
func (p *parser) dataFormatList(path string, n *yaml.Node) []string {
	items, ok := p.Sequence(path, n)
	if !ok {
		return DefaultDataFormats()
	}
	if len(items) == 0 {
		p.Add(n, path, "must list at least one of %s; omit it for all three", strings.Join(dataFormats, ", "))
		return DefaultDataFormats()
	}
	var out []string
	for i, item := range items {
		ip := engine.Index(path, i)
		s, ok := p.Str(ip, item)
		if !ok {
			continue
		}
		switch {
		case !slices.Contains(dataFormats, s):
			p.Add(item, ip, "must be one of %s, got %s", strings.Join(dataFormats, ", "), engine.Quote(s))
		case slices.Contains(out, s):
			p.Add(item, ip, "duplicate format %s", engine.Quote(s))
		default:
			out = append(out, s)
		}
	}
	return out
}

// identList reads a list of distinct column names (at most max).
func (p *parser) identList(path string, n *yaml.Node, max int) []string {
	out := p.stringList(path, n, max)
	for i, s := range out {
		if j := slices.Index(out, s); j < i {
			p.Add(n, engine.Index(path, i), "duplicate column %s (first at [%d])", engine.Quote(s), j)
		}
	}
	return out
}

// stringList reads a non-empty list of non-empty strings (at most max).
func (p *parser) stringList(path string, n *yaml.Node, max int) []string {
	items, ok := p.Sequence(path, n)
	if !ok {
		return nil
	}
	if len(items) == 0 {
		p.Add(n, path, "must not be empty")
		return nil
	}
	if len(items) > max {
		p.Add(n, path, "at most %d items, got %d", max, len(items))
		return nil
	}
	var out []string
	for i, item := range items {
		ip := engine.Index(path, i)
		s, ok := p.Str(ip, item)
		if !ok {
			continue
		}
		if s == "" {
			p.Add(item, ip, "must not be empty")
			continue
		}
		out = append(out, s)
	}
	return out
}

// dataRouteOmits are the route fields a data route refuses (the effective
// config leaves them out of data routes too).
var dataRouteOmits = []string{"max_body_bytes", "forward_trailers", "upgrades"}

// dataRouteRules holds a data route to what a data route can be: read-only
// (GET and HEAD, the default), with no request body, trailers or upgrades.
func (p *parser) dataRouteRules(r *Route, path string, f map[string]*yaml.Node) {
	for _, k := range dataRouteOmits {
		if f[k] != nil {
			p.Add(f[k], engine.Key(path, k), "does not apply to a data route (it reads no request body and upgrades nothing)")
		}
	}
	r.Upgrades = nil
	if len(r.Match.Methods) == 0 {
		r.Match.Methods = []string{"GET", "HEAD"}
		return
	}
	for i, m := range r.Match.Methods {
		if m != "GET" && m != "HEAD" {
			p.Add(f["match"], engine.Index(engine.Key(engine.Key(path, "match"), "methods"), i), "a data route answers GET and HEAD only, got %s", engine.Quote(m))
		}
	}
}

var (
	dataParamBlock = engine.NewBlock(
		engine.Field{Name: "type", Kind: engine.KindEnum, Enum: dataParamTypes, Required: true, Doc: "the parameter's type",
			Bind: engine.At(func(d *dataquery.Param) *dataquery.Kind { return &d.Type })},
		engine.Field{Name: "list", Kind: engine.KindBool, Def: false, Doc: "a comma-separated list of the type (written IN (:name))",
			Bind: engine.At(func(d *dataquery.Param) *bool { return &d.List })},
		engine.Field{Name: "required", Kind: engine.KindBool, Def: false, Doc: "the request must give it",
			Bind: engine.At(func(d *dataquery.Param) *bool { return &d.Required })},
		engine.Field{Name: "default", Kind: engine.KindEither, Either: dataScalarForms, Doc: "the value when the request gives none; NULL when omitted"},
		engine.Field{Name: "min", Kind: engine.KindEither, Either: dataScalarForms, Doc: "lowest value (numbers, dates, timestamps)"},
		engine.Field{Name: "max", Kind: engine.KindEither, Either: dataScalarForms, Doc: "highest value (numbers, dates, timestamps)"},
		engine.Field{Name: "max_len", Kind: engine.KindInt, Lo: 1, Hi: dataquery.MaxMaxLen, Doc: "longest string, in bytes; 1024 when omitted",
			Bind: engine.At(func(d *dataquery.Param) *int { return &d.MaxLen })},
		engine.Field{Name: "max_items", Kind: engine.KindInt, Lo: 1, Hi: dataquery.MaxMaxItems, Doc: "most items of a list; 100 when omitted",
			Bind: engine.At(func(d *dataquery.Param) *int { return &d.MaxItems })},
		engine.Field{Name: "from", Kind: engine.KindString, NonEmpty: true, Doc: "bind the parameter to the caller's verified identity (app.id, subject or claim.<name>): the client cannot send it",
			Bind: engine.At(func(d *dataquery.Param) *string { return &d.From })},
	)
	dataPageBlock = engine.NewBlock(
		engine.Field{Name: "keyset", Kind: engine.KindList, MinItems: 1, MaxItems: dataquery.MaxKeyset, Item: &engine.Field{Kind: engine.KindString},
			Doc: "columns that order the rows and make each row's place unique", Required: true, NotSecret: "column names"},
		engine.Field{Name: "default", Kind: engine.KindInt, Lo: 1, Hi: dataquery.MaxPageSize, Def: DefaultDataPageSize, Doc: "page size without limit=",
			Bind: engine.At(func(d *DataPage) *int { return &d.Default })},
		engine.Field{Name: "max", Kind: engine.KindInt, Lo: 1, Hi: dataquery.MaxPageSize, Def: DefaultDataPageMax, Doc: "largest limit= accepted",
			Bind: engine.At(func(d *DataPage) *int { return &d.Max })},
	)
	dataLimitsBlock = engine.NewBlock(
		engine.Field{Name: "max_rows", Kind: engine.KindInt, Lo: 1, Hi: maxDataRows, Def: DefaultDataMaxRows, Doc: "most rows in one answer",
			Bind: engine.At(func(d *RouteData) *int { return &d.MaxRows })},
		engine.Field{Name: "max_bytes", Kind: engine.KindSize, Lo: 1, Hi: maxDataBytes, Def: int64(DefaultDataMaxBytes), Doc: "most bytes of rows in one answer",
			Bind: engine.At(func(d *RouteData) *int64 { return &d.MaxBytes })},
	)
	dataCacheBlock = engine.NewBlock(
		engine.Field{Name: "ttl", Kind: engine.KindDuration, Required: true, Doc: "how long an answer is served from the cache",
			Bind: engine.At(func(d *DataCache) *time.Duration { return &d.TTL })},
		engine.Field{Name: "stale_if_error", Kind: engine.KindDuration, Doc: "how long past ttl an answer is served while the source fails; never when omitted",
			Bind: engine.At(func(d *DataCache) *time.Duration { return &d.StaleIfError })},
	)
	dataBlock = engine.NewBlock(
		engine.Field{Name: "source", Kind: engine.KindString, Required: true, Pattern: namePattern, Doc: "the data source",
			Bind: engine.At(func(d *RouteData) *string { return &d.Source })},
		engine.Field{Name: "sql", Kind: engine.KindString, NonEmpty: true, Doc: "SQL mode: one SELECT with :name parameters",
			Bind: engine.At(func(d *RouteData) *string { return &d.SQL })},
		engine.Field{Name: "params", Kind: engine.KindMap, Sub: dataParamBlock, Pattern: dataIdentPattern, MaxItems: dataquery.MaxParams, Doc: "SQL mode: the parameters by name"},
		engine.Field{Name: "table", Kind: engine.KindString, NonEmpty: true, Doc: "table mode: the table or view (schema.table allowed)",
			Bind: engine.At(func(d *RouteData) *string { return &d.Table })},
		engine.Field{Name: "columns", Kind: engine.KindList, MinItems: 1, MaxItems: dataquery.MaxColumns, Item: &engine.Field{Kind: engine.KindString}, Doc: "table mode: the columns answered"},
		engine.Field{Name: "filters", Kind: engine.KindMap, Pattern: "^.+$", Item: &engine.Field{Kind: engine.KindList, MinItems: 1, Item: &engine.Field{Kind: engine.KindEnum, Enum: dataOps}},
			Doc: "table mode: per column, the operators a request may filter it with"},
		engine.Field{Name: "order", Kind: engine.KindList, MinItems: 1, MaxItems: dataquery.MaxColumns, Item: &engine.Field{Kind: engine.KindString}, Doc: `table mode: the order, each column optionally followed by " desc"`},
		engine.Field{Name: "orders", Kind: engine.KindList, MaxItems: dataquery.MaxOrders, Item: &engine.Field{Kind: engine.KindBlock, Sub: dataOrderBlock},
			Doc: "table mode: the orders a request may choose with order=, each with its keyset", NotSecret: "column names"},
		engine.Field{Name: "row_filter", Kind: engine.KindEither, Either: dataRowFilterForms,
			Doc: "table mode: every answer is filtered on a column equal to the caller's identity ({column, from}, or a list)", NotSecret: "column names and identity sources"},
		engine.Field{Name: "count_max", Kind: engine.KindInt, Lo: 1, Hi: maxDataCountMax, Def: DefaultDataCountMax, Doc: "most rows Prefer: count=exact counts; a count above it is refused",
			Bind: engine.At(func(d *RouteData) *int { return &d.CountMax })},
		engine.Field{Name: "column_types", Kind: engine.KindMap, Pattern: "^.+$", MaxItems: dataquery.MaxColumns, Item: &engine.Field{Kind: engine.KindEnum, Enum: dataColumnKinds},
			Doc: "the answer's columns and their kinds, shown in the OpenAPI document instead of asking the database"},
		engine.Field{Name: "page", Kind: engine.KindBlock, Sub: dataPageBlock, Doc: "keyset pages of JSON answers; not paged when omitted"},
		engine.Field{Name: "single", Kind: engine.KindBool, Def: false, Doc: "the answer is the one row as a JSON object: 404 not_found when none, 502 query_failed when more than one",
			Bind: engine.At(func(d *RouteData) *bool { return &d.Single })},
		engine.Field{Name: "limits", Kind: engine.KindBlock, Sub: dataLimitsBlock, Doc: "caps of every answer",
			Bind: engine.At(func(d *RouteData) *RouteData { return d })},
		engine.Field{Name: "formats", Kind: engine.KindList, MinItems: 1, MaxItems: len(dataFormats), Item: &engine.Field{Kind: engine.KindEnum, Enum: dataFormats},
			Doc: "answer formats by Accept, the first the default; all three when omitted"},
		engine.Field{Name: "cache", Kind: engine.KindBlock, Sub: dataCacheBlock, Doc: "answer cache; none when omitted",
			Bind: engine.Opt(func(d *RouteData) **DataCache { return &d.Cache }, func() *DataCache { return &DataCache{} })},
		engine.Field{Name: "statement_timeout", Kind: engine.KindDuration, Doc: "this route's statement timeout; the source's when omitted",
			Bind: engine.At(func(d *RouteData) *time.Duration { return &d.StatementTimeout })},
		engine.Field{Name: "send_timeout", Kind: engine.KindDuration, Def: DefaultDataSendTimeout, Doc: "bound on each write of the answer to the client",
			Bind: engine.At(func(d *RouteData) *time.Duration { return &d.SendTimeout })},
	)
)

const (
	// DefaultDataMaxRows is RouteData.MaxRows when omitted.
	DefaultDataMaxRows = 10000
	// DefaultDataMaxBytes is RouteData.MaxBytes when omitted (8 MiB).
	DefaultDataMaxBytes = 8 << 20
	// DefaultDataSendTimeout is RouteData.SendTimeout when omitted.
	DefaultDataSendTimeout = 10 * time.Second
	// DefaultDataPageSize is DataPage.Default when omitted.
	DefaultDataPageSize = 100
	// DefaultDataPageMax is DataPage.Max when omitted.
	DefaultDataPageMax = 1000
)

// RouteData is a route's `data` block: the route answers from a data
// source instead of an upstream.
type RouteData struct {
	// Source names the data source (`source`, required).
	Source string
	// SQL is the statement of a SQL-mode route (`sql`): one SELECT whose
	// :name placeholders are exactly the declared Params. Exactly one of
	// SQL and Table.
	SQL string
	// Params are the SQL-mode parameters by name (`params`), in file order
	// in ParamOrder.
	Params     map[string]*dataquery.Param
	ParamOrder []string
	// Table is a table-mode route's table or view (`table`, may be
	// schema.table); Columns the allow-listed columns it answers with
	// (`columns`, required with table); Filters, per column, the
	// operators a request may filter it with (`filters`); Order the
	// columns it is ordered by (`order`, each may end in " desc").
	Table   string
	Columns []string
	Filters map[string][]string
	Order   []string
	// Orders are the orders a request may choose with order= (`orders`,
	// table mode), each with the keyset it is paged by.
	Orders []DataOrder
	// CountMax caps Prefer: count=exact (`count_max`, default
	// DefaultDataCountMax): the count reads at most CountMax+1 rows.
	CountMax int
	// ColumnTypes declares the answer's columns and their kinds
	// (`column_types`, column -> one of datasource's column kinds), in
	// file order in ColumnTypeOrder: the OpenAPI document then shows them
	// instead of asking the database. A table-mode route must declare
	// every one of its columns and only those; a SQL-mode route declares
	// its statement's columns in order (not checked against the database).
	// nil: the document asks the database.
	ColumnTypes     map[string]string
	ColumnTypeOrder []string
	// RowFilter filters every answer of a table-mode route on columns
	// equal to the caller's identity (`row_filter`, data_bind.go).
	RowFilter []DataRowFilter
	// Page pages JSON answers by keyset (`page`); nil: not paged.
	Page *DataPage
	// Single: the answer is the query's one row as a JSON object
	// (`single`, default false): 404 not_found when the query returns no
	// row, 502 query_failed (detail more_than_one_row) when it returns
	// more. JSON only (formats defaults to [json], ndjson and csv are
	// refused) and never paged (page is refused).
	Single bool
	// MaxRows and MaxBytes cap every answer (`limits.max_rows`, default
	// DefaultDataMaxRows 10000; `limits.max_bytes`, default
	// DefaultDataMaxBytes 8MiB).
	MaxRows  int
	MaxBytes int64
	// Formats are the answer formats offered, the first the default
	// (`formats`, default [json, ndjson, csv]).
	Formats []string
	// Cache caches answers per parameter set (`cache`); nil: no cache.
	Cache *DataCache
	// StatementTimeout overrides the source's (`statement_timeout`), e.g.
	// for a long export; 0: the source's.
	StatementTimeout time.Duration
	// SendTimeout bounds each write of the answer to the client
	// (`send_timeout`), so a client that stops reading cannot hold a
	// database connection. Default DefaultDataSendTimeout (10s).
	SendTimeout time.Duration
}

// QueryParams returns the route's declared parameters in declaration
// order: dataquery.Param, the one parameter type the file's reader, the
// compiler, the data route and the OpenAPI document share.
func (d *RouteData) QueryParams() []dataquery.Param {
	out := make([]dataquery.Param, 0, len(d.ParamOrder))
	for _, name := range d.ParamOrder {
		out = append(out, *d.Params[name])
	}
	return out
}

// DataPage is a data route's `page`: keyset pagination of JSON answers.
type DataPage struct {
	// Keyset are the columns that order the rows and make each row's
	// place unique (`keyset`, required; none may be NULL in any row).
	Keyset []string
	// Default is the page size without limit= (`default`, default 100);
	// Max the largest limit= accepted (`max`, default 1000).
	Default int
	Max     int
}

// DataCache is a data route's `cache`.
type DataCache struct {
	// TTL is how long an answer is served from the cache (`ttl`,
	// required).
	TTL time.Duration
	// StaleIfError is how long past TTL an answer is still served while
	// the source fails (`stale_if_error`, default 0: never).
	StaleIfError time.Duration
}

// Version identifies the route's data definition: every field that
// changes what the route answers goes into it. Cursors and cache keys are
// bound to it, so a changed route refuses old cursors and never serves an
// old answer. TestDataVersionCoversEveryField holds it to the struct.
func (d *RouteData) Version() string {
	h := sha256.New()
	str := func(s string) {
		var n [8]byte
		binary.LittleEndian.PutUint64(n[:], uint64(len(s)))
		h.Write(n[:])
		h.Write([]byte(s))
	}
	num := func(v int64) {
		var n [8]byte
		binary.LittleEndian.PutUint64(n[:], uint64(v))
		h.Write(n[:])
	}
	strs := func(ss []string) {
		num(int64(len(ss)))
		for _, s := range ss {
			str(s)
		}
	}
	str(d.Source)
	str(d.SQL)
	strs(d.ParamOrder)
	for _, name := range d.ParamOrder {
		p := d.Params[name]
		if p == nil {
			str("")
			continue
		}
		str(p.Type.String()) // the name: versions are the same as when Type was a string
		str(fmt.Sprint(p.List, p.Required))
		str(p.Default)
		str(p.Min)
		str(p.Max)
		num(int64(p.MaxLen))
		num(int64(p.MaxItems))
		if p.From != "" { // only when set: the versions of routes without it stay as they were
			str("from " + p.From)
		}
	}
	str(d.Table)
	strs(d.Columns)
	cols := make([]string, 0, len(d.Filters))
	for c := range d.Filters {
		cols = append(cols, c)
	}
	slices.Sort(cols)
	for _, c := range cols {
		str(c)
		strs(d.Filters[c])
	}
	strs(d.Order)
	num(int64(len(d.Orders)))
	for _, o := range d.Orders {
		str(o.Order)
		str(o.Keyset)
	}
	if d.Page != nil {
		strs(d.Page.Keyset)
		num(int64(d.Page.Default))
		num(int64(d.Page.Max))
	}
	num(int64(d.MaxRows))
	num(d.MaxBytes)
	strs(d.Formats)
	if d.Single { // only when set: the versions of routes without it stay as they were
		str("single")
	}
	for _, rf := range d.RowFilter { // likewise
		str("row_filter " + rf.Column + " " + rf.From)
	}
	// CountMax, Cache, StatementTimeout and SendTimeout change how the route
	// answers, not what: they are left out, so changing them keeps the
	// cursors clients hold.
	return hex.EncodeToString(h.Sum(nil)[:8])
}

func defaultRouteData() *RouteData {
	return engine.WithDefaults(dataLimitsBlock, engine.WithDefaults(dataBlock, &RouteData{Formats: DefaultDataFormats()})) // limits binds fields of RouteData itself
}

// DefaultDataFormats is RouteData.Formats when omitted. A new slice each
// call.
func DefaultDataFormats() []string { return slices.Clone(dataFormats) }
