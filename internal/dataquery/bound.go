package dataquery

import (
	"net/url"
	"strconv"
)

// Bound is one request's statement: SQL text holding only configuration
// and placeholders, and Args, one per placeholder, in placeholder order.
// Args hold only int64, float64, bool, string, time.Time and nil (SQL NULL).
type Bound struct {
	SQL  string
	Args []any
	// Limit is the page size when the answer is paged (0 otherwise). The
	// statement asks for Limit+1 rows: a row past Limit means there is a
	// next page, whose cursor NextCursor makes from the Limit-th row.
	Limit int
	// Params is the canonical form of the request's parameters, defaults
	// applied and the paging keys left out: "name=value" pairs joined by
	// "&", sorted by name (table mode: by column, then in request order),
	// each value in the one spelling its parser accepts, with %, &, = and ,
	// inside values percent-encoded. Equal parameter sets give equal
	// Params: it is what cursors are bound to, and the parameter part of a
	// cache key.
	Params string
	// cursor reports that a cursor was given (the page after another).
	cursor bool
	// Keyset, when not nil, are the columns whose values make the next
	// page's cursor (a client-chosen order's keyset); nil: the query's
	// Keyset. Shared: do not modify.
	Keyset []string
	// Hidden is the number of trailing result columns that are not part
	// of the answer: keyset columns a select= left out, fetched only for
	// the cursor.
	Hidden int
	// pg is the pager of a client-chosen order (nil: the query's).
	pg *pager
	// where is a table-mode statement's " WHERE ..." of the filters (""
	// without), whose arguments are the first nwhere (count.go).
	where  string
	nwhere int
}

// Query is what both compiled modes offer the caller.
type Query interface {
	// Bind turns a request's query string into a statement. paged is
	// true when the answer is a JSON page: limit= and cursor= are then
	// read and the statement fetches Limit+1 rows after the cursor's row.
	// When paged is false (NDJSON, CSV) limit= and cursor= are refused and
	// every row is selected; the caller caps rows itself. On a query
	// without a Page, paged changes nothing (limit= and cursor= are
	// unknown parameters, Bound.Limit is 0). Every refusal is an *Error.
	// Safe for concurrent use.
	Bind(q url.Values, paged bool) (Bound, error)
	// NextCursor returns the cursor of the page after the row whose
	// keyset values are last (in Keyset order), for the request b came
	// from.
	NextCursor(b Bound, last []any) (string, error)
	// Keyset returns the keyset columns, nil when the query has no Page.
	Keyset() []string
	// ArgParam returns what the i-th (0-based) argument of Bind(q, paged)
	// is the value of: a parameter's name (SQL mode), a filtered column's
	// (table mode), "cursor" for a cursor's keyset values, "limit" for
	// the page size; "" when Bind refuses q or i is out of range. It binds
	// again, so it is for error paths: naming the parameter whose value
	// the database refused.
	ArgParam(q url.Values, paged bool, i int) string
}

var (
	_ Query = (*SQLQuery)(nil)
	_ Query = (*TableQuery)(nil)
)

// pagingKey checks one limit= or cursor= key before any value is read.
func pagingKey(g *pager, k string, vs []string, paged bool) *Error {
	reason := ReasonInvalidLimit
	if k == "cursor" {
		reason = ReasonInvalidCursor
	}
	switch {
	case g == nil:
		return unknownKey(k)
	case !paged:
		return paramErr(k, reason, "parameter "+strconv.Quote(k)+" applies to paged (JSON) answers only")
	case len(vs) > 1:
		return paramErr(k, ReasonDuplicateParameter, "parameter "+strconv.Quote(k)+" given more than once")
	}
	return nil
}

func unknownKey(k string) *Error {
	return paramErr(clip(k), ReasonUnknownParameter, "unknown parameter "+quote(k))
}

// pageArgs reads limit= and cursor= of a paged request whose canonical
// parameters are params.
func pageArgs(g *pager, q url.Values, params string) (limit int, after []any, e *Error) {
	if limit, e = g.limit(q["limit"]); e != nil {
		return 0, nil, e
	}
	cs := q["cursor"]
	if len(cs) == 0 || cs[0] == "" {
		return limit, nil, nil
	}
	after, e = decodeCursor(g.signer, g.scope, params, true, cs[0])
	if e != nil {
		return 0, nil, e
	}
	if len(after) != len(g.keyset) {
		return 0, nil, cursorErr("cursor is malformed")
	}
	return limit, after, nil
}

// nextCursor is NextCursor for either mode.
func nextCursor(g *pager, b Bound, last []any) (string, error) {
	if b.pg != nil {
		g = b.pg
	}
	if g == nil {
		return "", errNotPaged
	}
	if len(last) != len(g.keyset) {
		return "", errKeysetLen
	}
	return encodeCursor(g.signer, g.scope, b.Params, true, last)
}

// Cursor reports whether the request gave a cursor (the page after
// another).
func (b Bound) Cursor() bool { return b.cursor }
