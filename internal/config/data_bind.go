package config

import (
	"slices"
	"strings"

	"github.com/levee-gw/levee/internal/config/engine"
	"github.com/levee-gw/levee/internal/dataquery"
	"gopkg.in/yaml.v3"
)

// Identity-bound data values (`from:`): a SQL-mode parameter
// (`params.<name>.from`) or a table-mode row filter (`row_filter`) whose
// value is the caller's verified identity instead of the client's: the
// app's id (`app.id`, any app-authenticating auth), the JWT's subject
// (`subject`) or one of its claims (`claim.<name>`, both auth: jwt only).

// DataRowFilter is one of a table-mode route's `row_filter` entries: every
// statement's WHERE gets Column = the identity's From value, as a bind
// argument.
type DataRowFilter struct {
	// Column is one of the route's columns, not one of its filters.
	Column string
	// From is "app.id", "subject" or "claim.<name>".
	From string
}

var dataRowFilterBlock = engine.NewBlock(
	engine.Field{Name: "column", Kind: engine.KindString, Required: true, NonEmpty: true, Doc: "the column every answer is filtered on (one of columns, not one of filters)",
		Bind: engine.At(func(d *DataRowFilter) *string { return &d.Column })},
	engine.Field{Name: "from", Kind: engine.KindString, Required: true, Doc: "the column's value: app.id, subject or claim.<name> of the caller's verified identity",
		Bind: engine.At(func(d *DataRowFilter) *string { return &d.From })},
)

// dataRowFilterForms are row_filter's forms: one filter, or a list.
var dataRowFilterForms = []engine.Field{
	{Kind: engine.KindBlock, Sub: dataRowFilterBlock},
	{Kind: engine.KindList, MinItems: 1, MaxItems: dataquery.MaxRowFilters, Item: &engine.Field{Kind: engine.KindBlock, Sub: dataRowFilterBlock}},
}

// dataRowFilters reads `row_filter`: one {column, from} or a list of them.
func (p *parser) dataRowFilters(path string, n *yaml.Node) []DataRowFilter {
	if n.Kind == yaml.MappingNode {
		if rf, ok := p.dataRowFilter(path, n); ok {
			return []DataRowFilter{rf}
		}
		return nil
	}
	items, ok := p.Sequence(path, n)
	if !ok {
		return nil
	}
	if len(items) == 0 || len(items) > dataquery.MaxRowFilters {
		p.Add(n, path, "must list 1 to %d filters, got %d", dataquery.MaxRowFilters, len(items))
		return nil
	}
	var out []DataRowFilter
	for i, item := range items {
		ip := engine.Index(path, i)
		rf, ok := p.dataRowFilter(ip, item)
		if !ok {
			continue
		}
		if j := slices.IndexFunc(out, func(o DataRowFilter) bool { return o.Column == rf.Column }); j >= 0 {
			p.Add(item, engine.Key(ip, "column"), "column %s filtered twice", engine.Quote(rf.Column))
			continue
		}
		out = append(out, rf)
	}
	return out
}

func (p *parser) dataRowFilter(path string, n *yaml.Node) (DataRowFilter, bool) {
	var rf DataRowFilter
	f, ok := p.Block(path, n, dataRowFilterBlock)
	if !ok {
		return rf, false
	}
	if bad := p.Bind(f, n, path, dataRowFilterBlock, &rf); bad != nil {
		return rf, false
	}
	if _, err := dataquery.ParseFrom(rf.From); err != nil {
		p.Add(f["from"], engine.Key(path, "from"), "%v", err)
		return rf, false
	}
	return rf, true
}

// dataParamFrom checks a parameter's `from`: a valid source, and none of
// what only a client's value has (required, default, list).
func (p *parser) dataParamFrom(path string, f map[string]*yaml.Node, dp *dataquery.Param) {
	if f["from"] == nil || dp.From == "" {
		return
	}
	if _, err := dataquery.ParseFrom(dp.From); err != nil {
		p.Add(f["from"], engine.Key(path, "from"), "%v", err)
		dp.From = ""
		return
	}
	for _, k := range []string{"required", "default", "list"} {
		if f[k] != nil {
			p.Add(f[k], engine.Key(path, k), "does not apply with from (the value is always the caller's, one value)")
		}
	}
}

// dataRowFilterRules holds a table-mode route's row filters to its
// columns: each is one of columns and none of filters.
func (p *parser) dataRowFilterRules(path string, n *yaml.Node, d *RouteData) {
	for i, rf := range d.RowFilter {
		at := engine.Key(path, "row_filter")
		if len(d.RowFilter) > 1 || n.Kind == yaml.SequenceNode {
			at = engine.Index(at, i)
		}
		at = engine.Key(at, "column")
		switch {
		case !slices.Contains(d.Columns, rf.Column):
			p.Add(n, at, "must be one of the route's columns (%s), got %s", strings.Join(d.Columns, ", "), engine.Quote(rf.Column))
		case d.Filters[rf.Column] != nil:
			p.Add(n, at, "%s is also in filters: a bound column cannot be filtered by the request", engine.Quote(rf.Column))
		}
	}
}

// dataBindRules holds a data route's bound values to its auth: claim.* and
// subject need auth: jwt, app.id an app-authenticating auth (api_key,
// hmac or jwt); and a bound parameter is not a path capture.
func (p *parser) dataBindRules(r *Route, path string, n *yaml.Node) {
	d := r.Data
	if d == nil {
		return
	}
	captures, _ := r.Match.PathCaptures()
	check := func(at, from string) {
		fr, err := dataquery.ParseFrom(from)
		if err != nil {
			return // reported by the reader
		}
		switch {
		case fr.NeedsJWT() && r.Auth != AuthJWT:
			p.Add(n, at, "%s needs auth: jwt on the route (a verified token carries it), got auth %s", from, engine.Quote(r.Auth))
		case r.Auth == AuthNone || r.Auth == AuthForward:
			p.Add(n, at, "%s needs an auth that identifies an app (api_key, hmac, jwt, basic or client_cert), got auth %s", from, engine.Quote(r.Auth))
		}
	}
	for _, name := range d.ParamOrder {
		prm := d.Params[name]
		if prm == nil || prm.From == "" {
			continue
		}
		at := engine.Key(engine.Key(engine.Key(path, "params"), name), "from")
		check(at, prm.From)
		if slices.Contains(captures, name) {
			p.Add(n, at, "parameter %s is bound to the caller, so it cannot be a path capture", engine.Quote(name))
		}
	}
	for i, rf := range d.RowFilter {
		at := engine.Index(engine.Key(path, "row_filter"), i)
		if len(d.RowFilter) == 1 {
			at = engine.Key(path, "row_filter")
		}
		check(engine.Key(at, "from"), rf.From)
	}
}

// BoundClaims are the JWT claims the route binds (`from: claim.<name>`),
// each once: what the route's issuers keep of a verified token.
func (d *RouteData) BoundClaims() []string {
	var out []string
	add := func(from string) {
		if fr, err := dataquery.ParseFrom(from); err == nil && fr.Kind == dataquery.FromClaim && !slices.Contains(out, fr.Claim) {
			out = append(out, fr.Claim)
		}
	}
	for _, name := range d.ParamOrder {
		if prm := d.Params[name]; prm != nil {
			add(prm.From)
		}
	}
	for _, rf := range d.RowFilter {
		add(rf.From)
	}
	return out
}

// Bound reports whether the route binds a value to the caller's identity.
func (d *RouteData) Bound() bool {
	if len(d.RowFilter) > 0 {
		return true
	}
	for _, name := range d.ParamOrder {
		if prm := d.Params[name]; prm != nil && prm.From != "" {
			return true
		}
	}
	return false
}

// RowFilterColumns are the row filters' columns, in order: those that
// are among the route's columns and not among its filters (the others are
// refused by dataRowFilterRules).
func (d *RouteData) RowFilterColumns() []string {
	var out []string
	for _, rf := range d.RowFilter {
		if slices.Contains(d.Columns, rf.Column) && d.Filters[rf.Column] == nil {
			out = append(out, rf.Column)
		}
	}
	return out
}
