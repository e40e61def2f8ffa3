package config

import (
	"fmt"
	"math"
	"os"
	"slices"
	"strings"

	"github.com/levee-gw/levee/internal/dataquery"
	"github.com/levee-gw/levee/internal/datasource"
	"gopkg.in/yaml.v3"
)

// This file reads data_sources and a route's data block (the types are in
// data.go, the fields in fields_data.go).

// dataSources reads `data_sources` into c and returns the names declared.
func (p *parser) dataSources(c *Config, n *yaml.Node) map[string]bool {
	const path = "data_sources"
	if n.Kind == yaml.AliasNode {
		return nil
	}
	if n.Kind != yaml.MappingNode {
		p.add(n, path, "must be a mapping of data source names to data sources, got %s", describe(n))
		return nil
	}
	declared := map[string]bool{}
	c.DataSources = map[string]*DataSource{}
	for _, e := range p.pairs(path, n) {
		sp := key(path, e.key)
		declared[e.key] = true
		if !validName(e.key) {
			p.add(e.k, sp, "name %s, got %s", nameRule, quote(e.key))
		}
		if _, clash := c.Upstreams[e.key]; clash {
			p.add(e.k, sp, "%s is also an upstream's name; a data source is an upstream to metrics and the admin API, so the names must differ", quote(e.key))
		}
		c.DataSources[e.key] = p.dataSource(sp, e.key, e.v)
		c.DataSourceOrder = append(c.DataSourceOrder, e.key)
	}
	return declared
}

// dataSource reads one `data_sources.<name>`.
func (p *parser) dataSource(path, name string, n *yaml.Node) *DataSource {
	d := defaultDataSource(name)
	f, ok := p.block(path, n, dataSourceBlock)
	if !ok {
		d.Limits = dataSourceLimits(d.MaxConns, nil, false)
		return d
	}
	bad := p.bind(f, n, path, dataSourceBlock, d)
	switch {
	case bad["driver"]:
	case d.Driver == DriverPostgres:
		for _, k := range []string{"path"} {
			if f[k] != nil {
				p.add(f[k], key(path, k), "only applies to driver sqlite (postgres takes dsn or dsn_file)")
			}
		}
		switch {
		case f["dsn"] != nil && f["dsn_file"] != nil:
			p.add(f["dsn_file"], key(path, "dsn_file"), "give dsn or dsn_file, not both")
		case f["dsn"] == nil && f["dsn_file"] == nil:
			p.add(n, key(path, "dsn"), "required for driver postgres (or dsn_file)")
		case f["dsn_file"] != nil && !bad["dsn_file"]:
			if dsn, err := readDSNFile(d.DSNFile); err != nil {
				p.add(f["dsn_file"], key(path, "dsn_file"), "%v", err)
			} else {
				d.DSN = dsn
			}
		}
	case d.Driver == DriverSQLite:
		for _, k := range []string{"dsn", "dsn_file"} {
			if f[k] != nil {
				p.add(f[k], key(path, k), "only applies to driver postgres (sqlite takes path)")
			}
		}
		if f["path"] == nil {
			p.add(n, key(path, "path"), "required for driver sqlite: the database file")
		}
	}
	if f["driver"] != nil && !bad["driver"] && d.Target() != "" {
		if err := datasource.Check(d.Driver, d.Target()); err != nil {
			field := "path"
			if d.Driver == DriverPostgres {
				field = "dsn"
				if d.DSNFile != "" {
					field = "dsn_file"
				}
			}
			p.add(f[field], key(path, field), "%v", err)
		}
	}
	var l *Limits
	explicitMax := false
	if v := f["limits"]; v != nil {
		l = p.limits(key(path, "limits"), v)
		explicitMax = firstKey(v, "max") != nil
		if firstKey(v, "queue_timeout") == nil {
			l.QueueTimeout = DefaultDataQueueTimeout
		}
		lp := key(path, "limits")
		switch {
		case !l.Adaptive && l.MaxConcurrency > d.MaxConns:
			p.add(firstKey(v, "max_concurrency"), key(lp, "max_concurrency"), "must be at most max_conns (%d): a query admitted must find a connection, got %d", d.MaxConns, l.MaxConcurrency)
		case l.Adaptive && explicitMax && l.Max > d.MaxConns:
			p.add(firstKey(v, "max"), key(lp, "max"), "must be at most max_conns (%d): a query admitted must find a connection, got %d", d.MaxConns, l.Max)
		}
	}
	d.Limits = dataSourceLimits(d.MaxConns, l, explicitMax)
	return d
}

// dataSourceLimits is a data source's admission limit: l as read (nil
// when the block is omitted: adaptive from min(4, max_conns) to
// max_conns, queue 4 x max_conns, queue_timeout DefaultDataQueueTimeout),
// its adaptive max brought down to max_conns when it was not given.
func dataSourceLimits(maxConns int, l *Limits, explicitMax bool) *Limits {
	if l == nil {
		l = defaultLimits(1, true)
		l.MaxQueue = DefaultDataQueuePerConn * maxConns
		l.QueueTimeout = DefaultDataQueueTimeout
	}
	if l.Adaptive && !explicitMax && l.Max > maxConns {
		l.Max = maxConns
	}
	if l.Adaptive && l.Min > l.Max {
		l.Min = l.Max
	}
	return l
}

// readDSNFile reads a DSN: the file's first line, trimmed.
func readDSNFile(path string) (string, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return "", err
	}
	if len(b) > maxDSNBytes {
		return "", fmt.Errorf("%s is %d bytes; a DSN file holds one line of at most %d", path, len(b), maxDSNBytes)
	}
	line, _, _ := strings.Cut(string(b), "\n")
	if line = strings.TrimSpace(line); line == "" {
		return "", fmt.Errorf("%s holds no DSN on its first line", path)
	}
	return line, nil
}

// routeData reads a route's `data` block. sources are the data sources
// declared (nil when data_sources is missing or not a mapping).
func (p *parser) routeData(c *Config, path string, n *yaml.Node) *RouteData {
	d := defaultRouteData()
	f, ok := p.block(path, n, dataBlock)
	if !ok {
		return d
	}
	bad := p.bind(f, n, path, dataBlock, d)
	var src *DataSource
	if !bad["source"] {
		if src = c.DataSources[d.Source]; src == nil {
			p.add(f["source"], key(path, "source"), "unknown data source %s%s", quote(d.Source), suggest(d.Source, c.DataSourceOrder))
		}
	}
	if v := f["params"]; v != nil {
		d.Params, d.ParamOrder = p.dataParams(key(path, "params"), v)
	}
	if v := f["columns"]; v != nil {
		d.Columns = p.identList(key(path, "columns"), v, dataquery.MaxColumns)
	}
	if v := f["order"]; v != nil {
		d.Order = p.stringList(key(path, "order"), v, dataquery.MaxColumns)
	}
	if v := f["filters"]; v != nil {
		d.Filters = p.dataFilters(key(path, "filters"), v)
	}
	if v := f["page"]; v != nil {
		d.Page = p.dataPage(key(path, "page"), v)
	}
	if v := f["column_types"]; v != nil {
		d.ColumnTypes, d.ColumnTypeOrder = p.dataColumnTypes(key(path, "column_types"), v)
	}
	if v := f["formats"]; v != nil {
		d.Formats = p.dataFormatList(key(path, "formats"), v)
	}
	sqlMode, tableMode := f["sql"] != nil, f["table"] != nil
	switch {
	case sqlMode && tableMode:
		p.add(f["table"], key(path, "table"), "give sql or table, not both")
		return d
	case !sqlMode && !tableMode:
		p.add(n, key(path, "sql"), "required (or table, for a table-mode route)")
		return d
	case sqlMode:
		for _, k := range []string{"columns", "filters", "order"} {
			if f[k] != nil {
				p.add(f[k], key(path, k), "only applies to a table-mode route (with table); a SQL-mode route selects its own columns")
			}
		}
	case tableMode:
		if f["params"] != nil {
			p.add(f["params"], key(path, "params"), "only applies to a SQL-mode route (with sql); a table-mode route is filtered with filters")
		}
		if f["columns"] == nil {
			p.add(n, key(path, "columns"), "required with table: the columns the route answers with")
		}
		if d.ColumnTypes != nil {
			ctp := key(path, "column_types")
			for _, c := range d.ColumnTypeOrder {
				if !slices.Contains(d.Columns, c) {
					p.add(f["column_types"], key(ctp, c), "declares a column the route does not answer with (columns: %s)", strings.Join(d.Columns, ", "))
				}
			}
			for _, c := range d.Columns {
				if _, ok := d.ColumnTypes[c]; !ok {
					p.add(f["column_types"], ctp, "must declare every column the route answers with, %s is missing", quote(c))
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

// validationCursorKey stands in for the cursor key when a route's query
// is compiled to be checked: the real key lives under state_dir.
var validationCursorKey = make([]byte, dataquery.MinCursorKeyLen)

// checkDataQuery compiles the route's statement as `levee run` will (with
// the source's dialect), so validate refuses what run would: placeholders
// and declared parameters that disagree, a bad default or bound, an
// ORDER BY that is not the page's keyset, filters on columns not listed.
func (p *parser) checkDataQuery(path string, f map[string]*yaml.Node, d *RouteData, src *DataSource) {
	dialect := dataquery.Postgres
	if src.Driver == DriverSQLite {
		dialect = dataquery.SQLite
	}
	var page *dataquery.Page
	if d.Page != nil {
		page = &dataquery.Page{Keyset: d.Page.Keyset, Default: d.Page.Default, Max: d.Page.Max, Key: validationCursorKey, Scope: "validate"}
	}
	if d.SQL != "" {
		params := make([]dataquery.Param, 0, len(d.ParamOrder))
		for _, name := range d.ParamOrder {
			dp := d.Params[name]
			kind, err := dataquery.ParseKind(dp.Type)
			if err != nil {
				return // reported by the params reader
			}
			params = append(params, dataquery.Param{Name: name, Type: kind, List: dp.List, Required: dp.Required, Default: dp.Default,
				Min: dp.Min, Max: dp.Max, MaxLen: dp.MaxLen, MaxItems: dp.MaxItems})
		}
		if _, err := dataquery.CompileSQL(d.SQL, params, page, dialect); err != nil {
			// The path already names sql: "routes[2].data.sql: COPY is not a query ...".
			p.add(f["sql"], key(path, "sql"), "%s", strings.TrimPrefix(err.Error(), "sql: "))
		}
		return
	}
	// Table mode: the column kinds come from the database at run time; the
	// declaration's shape is checked here with every column a string.
	spec := dataquery.TableSpec{Table: d.Table, Order: d.Order, Filters: map[string][]dataquery.Op{}}
	for _, c := range d.Columns {
		spec.Columns = append(spec.Columns, dataquery.Column{Name: c, Kind: dataquery.String})
	}
	for col, ops := range d.Filters {
		for _, name := range ops {
			op, err := dataquery.ParseOp(name)
			if err != nil {
				return // reported by the filters reader
			}
			spec.Filters[col] = append(spec.Filters[col], op)
		}
	}
	if _, err := dataquery.CompileTable(spec, page, dialect); err != nil {
		p.add(f["table"], key(path, "table"), "%v", err)
	}
}

// dataParams reads a SQL-mode route's `params`: a mapping of names to
// parameter blocks.
func (p *parser) dataParams(path string, n *yaml.Node) (map[string]*DataParam, []string) {
	if n.Kind == yaml.AliasNode {
		return nil, nil
	}
	if n.Kind != yaml.MappingNode {
		p.add(n, path, "must be a mapping of parameter names to their declarations, got %s", describe(n))
		return nil, nil
	}
	out := map[string]*DataParam{}
	var order []string
	for _, e := range p.pairs(path, n) {
		pp := key(path, e.key)
		if len(order) == dataquery.MaxParams {
			p.add(e.k, pp, "at most %d parameters", dataquery.MaxParams)
			break
		}
		dp := &DataParam{}
		if fs, ok := p.block(pp, e.v, dataParamBlock); ok {
			p.bind(fs, e.v, pp, dataParamBlock, dp)
			for _, k := range []string{"default", "min", "max"} {
				if v := fs[k]; v != nil {
					s, ok := p.scalarText(key(pp, k), v)
					if !ok {
						continue
					}
					switch k {
					case "default":
						dp.Default = s
					case "min":
						dp.Min = s
					default:
						dp.Max = s
					}
				}
			}
		}
		out[e.key] = dp
		order = append(order, e.key)
	}
	return out, order
}

// scalarText returns a number, boolean or string scalar as written: a
// parameter's default and bounds, parsed later by the parameter's type.
func (p *parser) scalarText(path string, n *yaml.Node) (string, bool) {
	if n.Kind == yaml.AliasNode {
		return "", false
	}
	switch {
	case n.Kind != yaml.ScalarNode:
	case n.ShortTag() == "!!str", n.ShortTag() == "!!int", n.ShortTag() == "!!bool":
		return n.Value, true
	case n.ShortTag() == "!!float":
		var f float64
		if n.Decode(&f) == nil && !math.IsInf(f, 0) && !math.IsNaN(f) {
			return n.Value, true
		}
	}
	p.add(n, path, "must be a number, a boolean or a string, got %s", describe(n))
	return "", false
}

// dataFilters reads a table-mode route's `filters`: column → operators.
func (p *parser) dataFilters(path string, n *yaml.Node) map[string][]string {
	if n.Kind == yaml.AliasNode {
		return nil
	}
	if n.Kind != yaml.MappingNode {
		p.add(n, path, "must be a mapping of columns to lists of operators, got %s", describe(n))
		return nil
	}
	out := map[string][]string{}
	for _, e := range p.pairs(path, n) {
		fp := key(path, e.key)
		items, ok := p.sequence(fp, e.v)
		if !ok {
			continue
		}
		if len(items) == 0 {
			p.add(e.v, fp, "must list at least one operator (%s); leave the column out to refuse filtering it", strings.Join(dataOps, ", "))
			continue
		}
		seen := map[string]int{}
		for i, item := range items {
			ip := index(fp, i)
			s, ok := p.str(ip, item)
			if !ok {
				continue
			}
			if !slices.Contains(dataOps, s) {
				p.add(item, ip, "must be one of %s, got %s", strings.Join(dataOps, ", "), quote(s))
				continue
			}
			if j, dup := seen[s]; dup {
				p.add(item, ip, "duplicate operator %s (first at [%d])", quote(s), j)
				continue
			}
			seen[s] = i
			out[e.key] = append(out[e.key], s)
		}
	}
	return out
}

// dataColumnTypes reads a route's `column_types`: column → kind, in file
// order.
func (p *parser) dataColumnTypes(path string, n *yaml.Node) (map[string]string, []string) {
	if n.Kind == yaml.AliasNode {
		return nil, nil
	}
	if n.Kind != yaml.MappingNode {
		p.add(n, path, "must be a mapping of columns to kinds (%s), got %s", strings.Join(dataColumnKinds, ", "), describe(n))
		return nil, nil
	}
	out := map[string]string{}
	var order []string
	for _, e := range p.pairs(path, n) {
		fp := key(path, e.key)
		if len(order) == dataquery.MaxColumns {
			p.add(e.k, fp, "at most %d columns", dataquery.MaxColumns)
			break
		}
		s, ok := p.str(fp, e.v)
		if !ok {
			continue
		}
		if !slices.Contains(dataColumnKinds, s) {
			p.add(e.v, fp, "must be one of %s, got %s", strings.Join(dataColumnKinds, ", "), quote(s))
			continue
		}
		out[e.key] = s
		order = append(order, e.key)
	}
	return out, order
}

// dataOps are the table-mode filter operators (dataquery.Op's names).
var dataOps = dataquery.OpNames()

// dataPage reads a route's `page`.
func (p *parser) dataPage(path string, n *yaml.Node) *DataPage {
	pg := &DataPage{Default: DefaultDataPageSize, Max: DefaultDataPageMax}
	f, ok := p.block(path, n, dataPageBlock)
	if !ok {
		return pg
	}
	bad := p.bind(f, n, path, dataPageBlock, pg)
	if v := f["keyset"]; v != nil {
		pg.Keyset = p.identList(key(path, "keyset"), v, dataquery.MaxKeyset)
	} else {
		p.add(n, key(path, "keyset"), "required: the columns that order the rows and make each row's place unique")
	}
	if !bad["default"] && !bad["max"] && pg.Default > pg.Max {
		p.add(f["default"], key(path, "default"), "must be at most max (%d), got %d", pg.Max, pg.Default)
	}
	return pg
}

// dataFormatList reads `formats`: distinct format names, the first the
// default.
func (p *parser) dataFormatList(path string, n *yaml.Node) []string {
	items, ok := p.sequence(path, n)
	if !ok {
		return DefaultDataFormats()
	}
	if len(items) == 0 {
		p.add(n, path, "must list at least one of %s; omit it for all three", strings.Join(dataFormats, ", "))
		return DefaultDataFormats()
	}
	var out []string
	for i, item := range items {
		ip := index(path, i)
		s, ok := p.str(ip, item)
		if !ok {
			continue
		}
		switch {
		case !slices.Contains(dataFormats, s):
			p.add(item, ip, "must be one of %s, got %s", strings.Join(dataFormats, ", "), quote(s))
		case slices.Contains(out, s):
			p.add(item, ip, "duplicate format %s", quote(s))
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
			p.add(n, index(path, i), "duplicate column %s (first at [%d])", quote(s), j)
		}
	}
	return out
}

// stringList reads a non-empty list of non-empty strings (at most max).
func (p *parser) stringList(path string, n *yaml.Node, max int) []string {
	items, ok := p.sequence(path, n)
	if !ok {
		return nil
	}
	if len(items) == 0 {
		p.add(n, path, "must not be empty")
		return nil
	}
	if len(items) > max {
		p.add(n, path, "at most %d items, got %d", max, len(items))
		return nil
	}
	var out []string
	for i, item := range items {
		ip := index(path, i)
		s, ok := p.str(ip, item)
		if !ok {
			continue
		}
		if s == "" {
			p.add(item, ip, "must not be empty")
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
			p.add(f[k], key(path, k), "does not apply to a data route (it reads no request body and upgrades nothing)")
		}
	}
	r.Upgrades = nil
	if len(r.Match.Methods) == 0 {
		r.Match.Methods = []string{"GET", "HEAD"}
		return
	}
	for i, m := range r.Match.Methods {
		if m != "GET" && m != "HEAD" {
			p.add(f["match"], index(key(key(path, "match"), "methods"), i), "a data route answers GET and HEAD only, got %s", quote(m))
		}
	}
}
