package dataquery

import (
	"fmt"
	"strconv"
	"strings"
)

// Client-chosen columns and order in table mode (issue 29, item 2).
//
//	select=id,total              a subset of the route's columns, in the
//	                             order the answer gives them; select=* is
//	                             every column. Each name once.
//	order=created_at.desc,id     one of the route's allowed orders
//	                             (TableSpec.Orders), in PostgREST's syntax:
//	                             col, col.asc or col.desc per item.
//
// PostgREST's .nullsfirst / .nullslast are refused: an order is paged by
// its keyset, whose columns are never NULL, so the modifier could only
// ever say nothing or something levee does not do. Renames (alias:col),
// casts (col::text) and embedded resources are refused as unknown
// columns. Both choices are part of Bound.Params, so a cursor made under
// one select or order is refused as foreign under another, and an answer
// is cached per select and order.

// OrderSpec is one order a request may choose with order=. Order is what
// the client writes ("created_at.desc"); Keyset is the full order levee
// sorts by and pages with, in the same syntax, beginning with Order's
// items (created_at.desc,id.desc: a unique, NOT NULL column last). A
// paged route needs a Keyset for every order; on a route without a Page
// an empty Keyset means Order itself.
type OrderSpec struct {
	Order  string
	Keyset string
}

// Bounds of client-chosen columns and orders.
const (
	// MaxOrders bounds TableSpec.Orders.
	MaxOrders = 32
	// maxChoiceLen bounds the text of select= and order=.
	maxChoiceLen = 4096
)

// tableOrder is one compiled allowed order.
type tableOrder struct {
	canon  string // the client's order, canonical: "created_at.desc,id.asc"
	sql    string // " ORDER BY ..." of the keyset
	page   *pager // nil without a Page
	keyset []string
}

// ParseOrder reads an order in PostgREST's syntax: items separated by
// commas, each a column optionally followed by .asc or .desc. It returns
// the items and their canonical text (every item with its direction).
// .nullsfirst and .nullslast are refused (see above).
func ParseOrder(s string) (names []string, desc []bool, canon string, err error) {
	if s == "" {
		return nil, nil, "", fmt.Errorf("empty order")
	}
	if len(s) > maxChoiceLen {
		return nil, nil, "", fmt.Errorf("order longer than %d bytes", maxChoiceLen)
	}
	var b strings.Builder
	for i, item := range strings.Split(s, ",") {
		if i >= MaxKeyset {
			return nil, nil, "", fmt.Errorf("order has more than %d items", MaxKeyset)
		}
		name, dir := item, ""
		if j := strings.LastIndexByte(item, '.'); j >= 0 {
			switch mod := item[j+1:]; mod {
			case "asc", "desc":
				name, dir = item[:j], mod
			case "nullsfirst", "nullslast":
				return nil, nil, "", fmt.Errorf("order %q: %s is not supported (an order is paged by its keyset, whose columns are never NULL)", clip(item), mod)
			}
		}
		if strings.HasSuffix(name, ".nullsfirst") || strings.HasSuffix(name, ".nullslast") {
			return nil, nil, "", fmt.Errorf("order %q: nullsfirst and nullslast are not supported (an order is paged by its keyset, whose columns are never NULL)", clip(item))
		}
		if err := checkIdent(name); err != nil {
			return nil, nil, "", fmt.Errorf("order item %q: %w", clip(item), err)
		}
		for _, n := range names {
			if n == name {
				return nil, nil, "", fmt.Errorf("order names column %q twice", clip(name))
			}
		}
		names = append(names, name)
		desc = append(desc, dir == "desc")
		if i > 0 {
			b.WriteByte(',')
		}
		b.WriteString(name)
		if dir == "desc" {
			b.WriteString(".desc")
		} else {
			b.WriteString(".asc")
		}
	}
	return names, desc, b.String(), nil
}

// compileOrders compiles spec's allowed orders against t's columns; page
// (may be nil) is the route's paging.
func (t *TableQuery) compileOrders(spec TableSpec, page *Page) error {
	if len(spec.Orders) > MaxOrders {
		return fmt.Errorf("orders: %d, at most %d", len(spec.Orders), MaxOrders)
	}
	seen := map[string]int{}
	for i, o := range spec.Orders {
		what := "orders[" + strconv.Itoa(i) + "]"
		names, desc, canon, err := ParseOrder(o.Order)
		if err != nil {
			return fmt.Errorf("%s.order: %w", what, err)
		}
		for _, n := range names {
			if _, ok := t.columns[n]; !ok {
				return fmt.Errorf("%s.order: %q is not one of the columns", what, clip(n))
			}
		}
		if j, dup := seen[canon]; dup {
			return fmt.Errorf("%s.order: %q is orders[%d] again", what, canon, j)
		}
		seen[canon] = i
		keyset := o.Keyset
		if keyset == "" {
			if page != nil {
				return fmt.Errorf("%s: order %q has no keyset: a paged route's every order needs one (its items, then a unique NOT NULL column unless they are unique already: keyset: %q)", what, o.Order, canon+",<column>")
			}
			keyset = canon
		}
		knames, kdesc, _, err := ParseOrder(keyset)
		if err != nil {
			return fmt.Errorf("%s.keyset: %w", what, err)
		}
		if len(knames) < len(names) {
			return fmt.Errorf("%s.keyset: %q must begin with the order's items (%s, same directions)", what, keyset, canon)
		}
		for j := range names {
			if knames[j] != names[j] || kdesc[j] != desc[j] {
				return fmt.Errorf("%s.keyset: %q must begin with the order's items (%s, same directions)", what, keyset, canon)
			}
		}
		items := make([]orderItem, len(knames))
		for j, n := range knames {
			if _, ok := t.columns[n]; !ok {
				return fmt.Errorf("%s.keyset: %q is not one of the columns", what, clip(n))
			}
			items[j] = orderItem{name: n, desc: kdesc[j]}
		}
		to := tableOrder{canon: canon, keyset: knames}
		if page != nil {
			pg := *page
			pg.Keyset = knames
			g, err := newPager(&pg, t.d)
			if err != nil {
				return fmt.Errorf("%s.keyset: %w", what, err)
			}
			if err := g.matchOrder(items, Postgres); err != nil {
				return fmt.Errorf("%s.keyset: %w", what, err)
			}
			to.page = g
		}
		var b strings.Builder
		b.WriteString(" ORDER BY ")
		for j, it := range items {
			if j > 0 {
				b.WriteString(", ")
			}
			b.WriteString(t.d.QuoteIdent(it.name))
			if it.desc {
				b.WriteString(" DESC")
			}
		}
		to.sql = b.String()
		t.orders = append(t.orders, to)
	}
	return nil
}

// orderArg reads order=: -1 for the route's own order.
func (t *TableQuery) orderArg(vs []string) (int, *Error) {
	if len(vs) == 0 {
		return -1, nil
	}
	if len(t.orders) == 0 {
		return 0, paramErr("order", ReasonUnknownParameter, "this route's order is fixed: it allows no order=")
	}
	_, _, canon, err := ParseOrder(vs[0])
	if err != nil {
		return 0, invalid("order", err.Error())
	}
	for i := range t.orders {
		if t.orders[i].canon == canon {
			return i, nil
		}
	}
	allowed := make([]string, len(t.orders))
	for i := range t.orders {
		allowed[i] = t.orders[i].canon
	}
	return 0, invalid("order", quote(vs[0])+" is not an order this route allows (one of: "+strings.Join(allowed, "; ")+")")
}

// ParseSelect reads select=: distinct column names separated by commas,
// or * alone for every column (nil). known reports a column's index.
func ParseSelect(s string, known func(string) (int, bool)) ([]int, error) {
	if s == "*" {
		return nil, nil
	}
	if s == "" {
		return nil, fmt.Errorf("empty select: name at least one column, or *")
	}
	if len(s) > maxChoiceLen {
		return nil, fmt.Errorf("select longer than %d bytes", maxChoiceLen)
	}
	var out []int
	for i, name := range strings.Split(s, ",") {
		if i >= MaxColumns {
			return nil, fmt.Errorf("select names more than %d columns", MaxColumns)
		}
		c, ok := known(name)
		if !ok {
			return nil, fmt.Errorf("%s is not one of this route's columns (renames, casts and embedding are not supported)", quote(name))
		}
		for _, o := range out {
			if o == c {
				return nil, fmt.Errorf("select names %s twice", quote(name))
			}
		}
		out = append(out, c)
	}
	return out, nil
}

// selectArg reads select=.
func (t *TableQuery) selectArg(vs []string) ([]int, *Error) {
	if len(vs) == 0 {
		return nil, nil
	}
	sel, err := ParseSelect(vs[0], func(n string) (int, bool) { i, ok := t.columns[n]; return i, ok })
	if err != nil {
		return nil, invalid("select", err.Error())
	}
	return sel, nil
}

// selectPrefix is "SELECT <sel's columns, then the keyset's not among
// them> FROM <table>" and the number of keyset columns added.
func (t *TableQuery) selectPrefix(sel []int, keyset []string) (string, int) {
	var b strings.Builder
	b.WriteString("SELECT ")
	for i, c := range sel {
		if i > 0 {
			b.WriteString(", ")
		}
		b.WriteString(t.quoted[c])
	}
	hidden := 0
	for _, k := range keyset {
		ci := t.columns[k]
		found := false
		for _, c := range sel {
			found = found || c == ci
		}
		if !found {
			b.WriteString(", ")
			b.WriteString(t.quoted[ci])
			hidden++
		}
	}
	b.WriteString(" FROM ")
	b.WriteString(t.from)
	return b.String(), hidden
}

// canonSelect appends select's canonical text (the names in order).
func (t *TableQuery) canonSelect(canon []byte, sel []int) []byte {
	canon = append(canon, "select="...)
	for i, c := range sel {
		if i > 0 {
			canon = append(canon, ',')
		}
		canon = append(canon, t.names[c]...)
	}
	return canon
}
