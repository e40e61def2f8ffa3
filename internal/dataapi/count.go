package dataapi

import (
	"context"
	"encoding/json"
	"errors"
	"net/url"
	"strconv"

	"github.com/levee-gw/levee/internal/dataquery"
	"github.com/levee-gw/levee/internal/datasource"
)

// Client limits and counts of an answer (issue 29): limit= in every
// format, and Prefer: count=exact | planned | estimated with the total in
// Content-Range as PostgREST sends it.

// DefaultCountMax is Options.CountMax when 0.
const DefaultCountMax = 100000

// streamLimit reads limit= of an answer that is not a page (NDJSON, CSV,
// the JSON of a route without page): 1 to max_rows, taken out of vals so
// the query does not see it. 0 when absent, or when the answer is a page
// (the query reads it: 1 to page.max).
func (rt *Route) streamLimit(vals url.Values, paged bool) (int, error) {
	vs, ok := vals["limit"]
	if paged || !ok {
		return 0, nil
	}
	if len(vs) > 1 {
		return 0, &dataquery.Error{Param: "limit", Reason: dataquery.ReasonDuplicateParameter, Message: `parameter "limit" given more than once`}
	}
	max := rt.o.Limits.MaxRows
	n, err := strconv.Atoi(vs[0])
	if err != nil || n < 1 || n > max || vs[0] != strconv.Itoa(n) {
		return 0, &dataquery.Error{Param: "limit", Reason: dataquery.ReasonInvalidLimit,
			Message: "limit must be an integer from 1 to " + strconv.Itoa(max) + " (max_rows), not " + strconv.Quote(clipped(vs[0]))}
	}
	delete(vals, "limit")
	return n, nil
}

func clipped(s string) string {
	if len(s) > 64 {
		return s[:64] + "..."
	}
	return s
}

// count answers a request's count preference: the number of rows its
// filters select (without cursor or limit). exact refuses a count above
// CountMax (400 naming Prefer); estimated answers the planner's estimate
// above it; planned always the planner's (PostgreSQL only).
func (rt *Route) count(ctx context.Context, q dataquery.Query, vals url.Values, mode string) (int64, error) {
	uv := make(url.Values, len(vals))
	for k, v := range vals {
		if k != "limit" && k != "cursor" {
			uv[k] = v
		}
	}
	ub, err := q.Bind(uv, false)
	if err != nil {
		return 0, err
	}
	max := rt.o.CountMax
	if max == 0 {
		max = DefaultCountMax
	}
	postgres := rt.o.Driver != "sqlite"
	if mode == dataquery.CountPlanned && !postgres {
		return 0, &dataquery.Error{Param: "Prefer", Reason: dataquery.ReasonInvalidParameter,
			Message: "count=planned needs PostgreSQL's planner; this route's source is SQLite: ask count=exact"}
	}
	if mode != dataquery.CountPlanned {
		cb, err := dataquery.CountStatement(q, ub, max)
		if err != nil {
			return 0, err
		}
		n, err := rt.scalar(ctx, cb, q, uv)
		if err != nil {
			return 0, err
		}
		if n <= int64(max) {
			return n, nil
		}
		if mode == dataquery.CountExact || !postgres {
			return 0, &dataquery.Error{Param: "Prefer", Reason: dataquery.ReasonInvalidParameter,
				Message: "more than " + strconv.Itoa(max) + " rows match (the route's count_max): ask Prefer: count=planned or count=estimated, or narrow the filters"}
		}
	}
	pb, err := dataquery.PlanStatement(q, ub)
	if err != nil {
		return 0, err
	}
	return rt.scalar(ctx, pb, q, uv)
}

// scalar runs b and reads its one value as a count: an integer, or an
// EXPLAIN (FORMAT JSON) plan's row estimate.
func (rt *Route) scalar(ctx context.Context, b dataquery.Bound, q dataquery.Query, uv url.Values) (int64, error) {
	rows, err := rt.o.Source.Query(ctx, datasource.Query{SQL: b.SQL, Args: b.Args, Timeout: rt.o.StatementTimeout})
	if err != nil {
		return 0, queryRefusal(ctx, err, q, uv, false)
	}
	defer rows.Close()
	if !rows.Next() {
		if err := rows.Err(); err != nil {
			return 0, queryRefusal(ctx, err, q, uv, false)
		}
		return 0, errors.New("dataapi: the count returned no row")
	}
	vals := rows.Values()
	if len(vals) != 1 {
		return 0, errors.New("dataapi: the count returned " + strconv.Itoa(len(vals)) + " columns")
	}
	switch v := vals[0].(type) {
	case int64:
		return v, nil
	case float64:
		return int64(v), nil
	case json.RawMessage:
		return dataquery.ParsePlanRows(v)
	case []byte:
		return dataquery.ParsePlanRows(v)
	case string:
		if n, err := strconv.ParseInt(v, 10, 64); err == nil {
			return n, nil
		}
		return dataquery.ParsePlanRows([]byte(v))
	}
	return 0, errors.New("dataapi: the count is not a number")
}

// contentRange is the answer's Content-Range: rows 0 to n-1 of total on
// a first page or a stream; "*/total" after a cursor (the page's place is
// not known) or with no rows. When the answer did not fit its first chunk
// the rows are not counted yet: n is what the limit lets through (the
// truncation marker says when a cap cut it shorter).
func contentRange(bd *body, b dataquery.Bound, limit, maxRows int, total int64) string {
	first := 0
	if b.Cursor() {
		first = -1
	}
	if bd.done {
		return dataquery.ContentRange(first, bd.rowsSent, total)
	}
	n := maxRows
	switch {
	case b.Limit > 0:
		n = b.Limit
	case limit > 0:
		n = limit
	}
	if total < int64(n) {
		n = int(total)
	}
	return dataquery.ContentRange(first, n, total)
}
