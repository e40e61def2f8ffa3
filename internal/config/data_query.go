package config

import (
	"math"
	"slices"
	"strings"

	"github.com/levee-gw/levee/internal/config/engine"
	"github.com/levee-gw/levee/internal/dataquery"
	"gopkg.in/yaml.v3"
)

// A data route's query and table parts (`params`, `filters`,
// `column_types`): read, and checked against the source exactly as
// dataquery will compile them for `levee run`.

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
		params := d.QueryParams()
		for _, prm := range params {
			if prm.Type == 0 {
				return // reported by the params reader
			}
		}
		if _, err := dataquery.CompileSQL(d.SQL, params, page, dialect); err != nil {
			// The path already names sql: "routes[2].data.sql: COPY is not a query ...".
			p.Add(f["sql"], engine.Key(path, "sql"), "%s", strings.TrimPrefix(err.Error(), "sql: "))
		}
		return
	}
	// Table mode: the column kinds come from the database at run time; the
	// declaration's shape is checked here with every column a string.
	spec := dataquery.TableSpec{Table: d.Table, Order: d.Order, Orders: d.QueryOrders(), Filters: map[string][]dataquery.Op{}, RowFilters: d.RowFilterColumns()}
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
		if at, msg, ok := strings.Cut(err.Error(), ": "); ok && strings.HasPrefix(at, "orders[") && f["orders"] != nil {
			// "orders[1].keyset: ..." is said of the route's data.orders[1].keyset.
			p.Add(f["orders"], path+"."+at, "%s", msg)
			return
		}
		p.Add(f["table"], engine.Key(path, "table"), "%v", err)
	}
}

// dataParams reads a SQL-mode route's `params`: a mapping of names to
// parameter blocks.
func (p *parser) dataParams(path string, n *yaml.Node) (map[string]*dataquery.Param, []string) {
	if n.Kind == yaml.AliasNode {
		return nil, nil
	}
	if n.Kind != yaml.MappingNode {
		p.Add(n, path, "must be a mapping of parameter names to their declarations, got %s", engine.Describe(n))
		return nil, nil
	}
	out := map[string]*dataquery.Param{}
	var order []string
	for _, e := range p.Pairs(path, n) {
		pp := engine.Key(path, e.Key)
		if len(order) == dataquery.MaxParams {
			p.Add(e.K, pp, "at most %d parameters", dataquery.MaxParams)
			break
		}
		dp := &dataquery.Param{Name: e.Key}
		if fs, ok := p.Block(pp, e.V, dataParamBlock); ok {
			p.Bind(fs, e.V, pp, dataParamBlock, dp)
			p.dataParamFrom(pp, fs, dp)
			for _, k := range []string{"default", "min", "max"} {
				if v := fs[k]; v != nil {
					s, ok := p.scalarText(engine.Key(pp, k), v)
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
		out[e.Key] = dp
		order = append(order, e.Key)
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
	p.Add(n, path, "must be a number, a boolean or a string, got %s", engine.Describe(n))
	return "", false
}

// dataFilters reads a table-mode route's `filters`: column → operators.
func (p *parser) dataFilters(path string, n *yaml.Node) map[string][]string {
	if n.Kind == yaml.AliasNode {
		return nil
	}
	if n.Kind != yaml.MappingNode {
		p.Add(n, path, "must be a mapping of columns to lists of operators, got %s", engine.Describe(n))
		return nil
	}
	out := map[string][]string{}
	for _, e := range p.Pairs(path, n) {
		fp := engine.Key(path, e.Key)
		items, ok := p.Sequence(fp, e.V)
		if !ok {
			continue
		}
		if len(items) == 0 {
			p.Add(e.V, fp, "must list at least one operator (%s); leave the column out to refuse filtering it", strings.Join(dataOps, ", "))
			continue
		}
		seen := map[string]int{}
		for i, item := range items {
			ip := engine.Index(fp, i)
			s, ok := p.Str(ip, item)
			if !ok {
				continue
			}
			if !slices.Contains(dataOps, s) {
				p.Add(item, ip, "must be one of %s, got %s", strings.Join(dataOps, ", "), engine.Quote(s))
				continue
			}
			if j, dup := seen[s]; dup {
				p.Add(item, ip, "duplicate operator %s (first at [%d])", engine.Quote(s), j)
				continue
			}
			seen[s] = i
			out[e.Key] = append(out[e.Key], s)
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
		p.Add(n, path, "must be a mapping of columns to kinds (%s), got %s", strings.Join(dataColumnKinds, ", "), engine.Describe(n))
		return nil, nil
	}
	out := map[string]string{}
	var order []string
	for _, e := range p.Pairs(path, n) {
		fp := engine.Key(path, e.Key)
		if len(order) == dataquery.MaxColumns {
			p.Add(e.K, fp, "at most %d columns", dataquery.MaxColumns)
			break
		}
		s, ok := p.Str(fp, e.V)
		if !ok {
			continue
		}
		if !slices.Contains(dataColumnKinds, s) {
			p.Add(e.V, fp, "must be one of %s, got %s", strings.Join(dataColumnKinds, ", "), engine.Quote(s))
			continue
		}
		out[e.Key] = s
		order = append(order, e.Key)
	}
	return out, order
}

// dataOps are the table-mode filter operators (dataquery.Op's names).
var dataOps = dataquery.OpNames()
