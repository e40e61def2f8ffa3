package gateway

import (
	"context"

	"github.com/levee-gw/levee/internal/config"
	"github.com/levee-gw/levee/internal/dataapi"
	"github.com/levee-gw/levee/internal/dataformat"
	"github.com/levee-gw/levee/internal/dataquery"
	"github.com/levee-gw/levee/internal/openapi"
	"github.com/levee-gw/levee/internal/proxy"
)

// This file serves GET /api/v1/openapi.json: the serving configuration's
// routes as openapi.Routes, their refusals as the proxy lists them for the
// route's shape, and each data route's columns read by its serving
// dataapi.Route (which asks its database once, see dataapi/columns.go) or
// declared by column_types; openapi.Build reads and renders.

// openAPIView is the gateway as admin.APIDocs.
type openAPIView struct{ g *Gateway }

func (v openAPIView) OpenAPI(ctx context.Context) ([]byte, error) { return v.g.openAPI(ctx) }

// openAPI renders the serving configuration's document.
func (g *Gateway) openAPI(ctx context.Context) ([]byte, error) {
	g.mu.Lock()
	cfg, table := g.cfg, g.handler.Table()
	g.mu.Unlock()
	serving := map[string]*dataapi.Route{}
	for _, rt := range table.Routes() {
		if dr, ok := rt.Forwarder.(*dataapi.Route); ok {
			serving[rt.Name] = dr
		}
	}
	doc := openapi.Document{Title: "levee",
		Description: "The routes levee serves on its data listener, from its configuration; data APIs with their parameters and " +
			"the columns their databases report. A path is a route's path prefix (x-levee-path-prefix): the route takes every path below it."}
	readers := map[string]openapi.ColumnsReader{}
	for i := range cfg.Routes {
		rc := &cfg.Routes[i]
		doc.Routes = append(doc.Routes, describeRoute(cfg, rc))
		if rc.Data != nil {
			readers[rc.Name] = columnsReader(rc.Data, serving[rc.Name])
		}
	}
	return openapi.Build(ctx, doc, readers)
}

// columnsReader reads data route d's columns: as declared (column_types),
// else from its serving route's database.
func columnsReader(d *config.RouteData, dr *dataapi.Route) openapi.ColumnsReader {
	if d.ColumnTypes != nil {
		c := openapi.Columns{Known: true, Note: "as declared in the configuration (column_types)"}
		names := d.ColumnTypeOrder // a SQL-mode statement's columns, in order
		if d.Table != "" {
			names = d.Columns // the answer's order; config checked they are the same set
		}
		for _, name := range names {
			c.Columns = append(c.Columns, openapi.Column{Name: name, Kind: d.ColumnTypes[name]})
		}
		return func(context.Context) openapi.Columns { return c }
	}
	return func(ctx context.Context) openapi.Columns {
		if dr == nil {
			return openapi.Columns{Note: "the data source " + d.Source + " is not open"}
		}
		dc := dr.Columns(ctx)
		c := openapi.Columns{Known: dc.Known, Note: dc.Note}
		for _, col := range dc.Columns {
			c.Columns = append(c.Columns, openapi.Column{Name: col.Name, Type: col.Type, Kind: col.Kind, NotNull: col.NotNull})
		}
		return c
	}
}

// describeRoute is route rc as the document shows it, its columns not yet
// filled in.
func describeRoute(cfg *config.Config, rc *config.Route) openapi.Route {
	rt := openapi.Route{Name: rc.Name, Host: rc.Match.Host, PathPrefix: rc.Match.Prefix(), Methods: rc.Match.Methods,
		Auth: openapi.Auth(rc.Auth), Upstream: rc.Upstream}
	if rc.Auth == config.AuthNone {
		rt.Auth = openapi.AuthNone
	}
	switch m := &rc.Match; {
	case rc.DataPath(): // a data route answers only its own path
		rt.PathKind, rt.PathPrefix = "path", m.PathPrefix
	case m.PathKind() == "path":
		rt.PathKind, rt.PathPrefix = "path", m.Path
	case m.PathKind() == "path_template":
		rt.PathKind, rt.PathPrefix = "path_template", m.PathTemplate
	case m.PathKind() == "path_regex":
		rt.PathKind, rt.PathPrefix = "path_regex", m.PathRegex
	case rt.PathPrefix == "":
		rt.PathPrefix = "/"
	}
	for _, r := range proxy.RouteRefusals(routeShape(cfg, rc)) {
		rt.Refusals = append(rt.Refusals, openapi.Refusal{Reason: string(r.Reason), Status: r.Status, Sentence: r.Sentence, RetryAfter: r.RetryAfter})
	}
	d := rc.Data
	if d == nil {
		return rt
	}
	od := &openapi.Data{Source: d.Source, Table: d.Table, MaxRows: d.MaxRows, MaxBytes: d.MaxBytes,
		Cached: d.Cache != nil && d.Cache.TTL > 0, MaxFilters: dataquery.MaxFiltersPerColumn, Single: d.Single}
	for _, p := range d.QueryParams() { // the one parameter type, dataquery.Param
		if p.From == "" { // a bound parameter is the caller's identity, not the client's to send
			od.Params = append(od.Params, p)
		}
	}
	for _, col := range d.Columns { // the allow-list's order, filtered ones only
		if ops, ok := d.Filters[col]; ok {
			od.Filters = append(od.Filters, openapi.Filter{Column: col, Ops: ops})
		}
	}
	if d.Table != "" {
		od.Select = d.Columns
		for _, o := range d.Orders {
			if _, _, canon, err := dataquery.ParseOrder(o.Order); err == nil {
				od.Orders = append(od.Orders, canon)
			}
		}
	}
	if p := d.Page; p != nil {
		od.Page = &openapi.Page{Keyset: p.Keyset, Default: p.Default, Max: p.Max}
	}
	for _, f := range d.Formats {
		if format, err := dataformat.ParseFormat(f); err == nil {
			od.Formats = append(od.Formats, format.MediaType())
		}
	}
	rt.Data = od
	return rt
}

// routeShape is what of rc's configuration decides its refusals.
func routeShape(cfg *config.Config, rc *config.Route) proxy.RouteShape {
	s := proxy.RouteShape{
		RejectUnderscores: cfg.Server.UnderscoresInHeaders == config.UnderscoresReject,
		Methods:           rc.Match.Methods != nil,
		MaxBody:           rc.MaxBodyBytes > 0,
		Consumers:         rc.Auth == config.AuthAPIKey || rc.Auth == config.AuthHMAC,
		ForwardAuth:       rc.Auth == config.AuthForward,
		AnonymousLimits:   rc.AnonymousLimits != nil,
		Memory:            cfg.Memory == nil || !cfg.Memory.Off, // the guard is on by default
	}
	var limits *config.Limits
	if d := rc.Data; d != nil {
		if ds := cfg.DataSources[d.Source]; ds != nil {
			limits = ds.Limits
		}
		required := false
		for _, n := range d.ParamOrder {
			required = required || d.Params[n].Required
		}
		s.Data = &dataquery.RouteShape{SQL: d.SQL != "", Required: required, Filters: len(d.Filters) > 0, Paged: d.Page != nil, Single: d.Single, Bound: d.Bound()}
	} else if u := cfg.Upstreams[rc.Upstream]; u != nil {
		limits = u.Limits
	}
	for _, side := range rc.Split { // a split refuses as any of its sides does
		if u := cfg.Upstreams[side.Upstream]; u != nil && u.Limits != nil && (limits == nil || u.Limits.MaxQueue > 0) {
			limits = u.Limits
		}
	}
	if limits != nil {
		s.Admission = &proxy.AdmissionShape{Queue: limits.MaxQueue > 0}
	}
	return s
}
