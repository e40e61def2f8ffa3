package config

import (
	"github.com/levee-gw/levee/internal/config/engine"
	"github.com/levee-gw/levee/internal/dataquery"
	"gopkg.in/yaml.v3"
)

// A table-mode data route's client choices (issue 29): the orders a
// request may ask for with order= (`orders`, each with its keyset), and
// the cap of Prefer: count=exact (`count_max`). The orders are compiled
// with the route's query by checkDataQuery, so validate refuses what run
// refuses (an order without a keyset on a paged route, a keyset that does
// not begin with its order, a column not listed).

// DataOrder is one entry of a data route's `orders`.
type DataOrder struct {
	// Order is what a client writes in order= (`order`, PostgREST's
	// syntax: col, col.asc, col.desc, comma-separated).
	Order string
	// Keyset is the full order levee sorts and pages by (`keyset`, same
	// syntax), beginning with Order's items; required on a paged route.
	Keyset string
}

const (
	// DefaultDataCountMax is RouteData.CountMax when omitted.
	DefaultDataCountMax = 100000
	// maxDataCountMax bounds count_max.
	maxDataCountMax = 100000000
)

var dataOrderBlock = engine.NewBlock(
	engine.Field{Name: "order", Kind: engine.KindString, NonEmpty: true, Required: true, Doc: "the order a client writes in order= (col, col.asc, col.desc, comma-separated)",
		Bind: engine.At(func(d *DataOrder) *string { return &d.Order })},
	engine.Field{Name: "keyset", Kind: engine.KindString, NonEmpty: true, Doc: "the full order levee sorts and pages by, beginning with order's items; required with page", NotSecret: "column names",
		Bind: engine.At(func(d *DataOrder) *string { return &d.Keyset })},
)

// dataOrders reads a route's `orders`.
func (p *parser) dataOrders(path string, n *yaml.Node) []DataOrder {
	items, ok := p.Sequence(path, n)
	if !ok {
		return nil
	}
	if len(items) > dataquery.MaxOrders {
		p.Add(n, path, "at most %d orders, got %d", dataquery.MaxOrders, len(items))
		return nil
	}
	var out []DataOrder
	for i, item := range items {
		ip := engine.Index(path, i)
		f, ok := p.Block(ip, item, dataOrderBlock)
		if !ok {
			continue
		}
		var o DataOrder
		p.Bind(f, item, ip, dataOrderBlock, &o)
		out = append(out, o)
	}
	return out
}

// QueryOrders returns the route's allowed orders as dataquery compiles
// them.
func (d *RouteData) QueryOrders() []dataquery.OrderSpec {
	out := make([]dataquery.OrderSpec, 0, len(d.Orders))
	for _, o := range d.Orders {
		out = append(out, dataquery.OrderSpec{Order: o.Order, Keyset: o.Keyset})
	}
	return out
}
