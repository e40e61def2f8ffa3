package dataapi

import (
	"bytes"
	"context"
	"errors"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"time"

	"github.com/levee-gw/levee/internal/datacache"
	"github.com/levee-gw/levee/internal/dataformat"
	"github.com/levee-gw/levee/internal/dataquery"
	"github.com/levee-gw/levee/internal/datasource"
	"github.com/levee-gw/levee/internal/upstream"
)

// A single-row route (`single: true`, Options.Single) answers its query's
// one row as a JSON object, {"id":5,"name":"..."} and a newline, instead
// of a page: 404 not_found when the query returns no row, 502
// query_failed with detail more_than_one_row when it returns more (the
// route's promise of one row at most is broken: a fault of the route, not
// of the request, so the client is not sent an arbitrary one of them).
// The whole answer is read before the head is sent (one row, and at most
// two rows leave the database), so every outcome has its proper status.

// errNoRow abandons a cache flight whose query returned no row: a 404 is
// not cached (the followers run their own query).
var errNoRow = errors.New("dataapi: no row")

// singleOpts refuses what a single-row route does not take: limit= (one
// row is not limited). It returns nil when the request may go on.
func singleOpts(vals url.Values) *upstream.Refusal {
	if _, ok := vals["limit"]; ok {
		return &upstream.Refusal{Reason: dataquery.ReasonUnknownParameter, Param: "limit",
			Detail: "this route answers one row (single: true): it takes no limit"}
	}
	return nil
}

// single reads rows, the result of statement b of q bound from vals, and
// answers the one row as a JSON object; flight, when not nil, is the
// answer's cache flight (committed with the object, abandoned otherwise).
// It closes rows.
func (rt *Route) single(ctx context.Context, rows *datasource.Rows, q dataquery.Query, b dataquery.Bound, vals url.Values,
	flight *datacache.Flight, start time.Time) (*http.Response, error) {
	n := 0
	fail := func(err error, ref error) (*http.Response, error) {
		_ = rows.Close()
		rt.metrics.rows.Add(float64(n))
		rt.metrics.duration.Observe(time.Since(start).Seconds())
		if flight != nil {
			if sourceFailed(err) {
				flight.Abandon(datacache.SourceFailure(err))
			} else {
				flight.Abandon(err)
			}
		}
		return nil, ref
	}
	rcols := rows.Columns()
	names := make([]string, len(rcols))
	for i, c := range rcols {
		names[i] = c.Name
	}
	ncols := len(names) - b.Hidden
	if ncols < 1 {
		err := errors.New("the statement's result has no column to show")
		rt.o.Logger.Error("data route cannot encode its columns", "route", rt.o.Name, "error", err)
		return fail(err, &upstream.Refusal{Reason: dataquery.ReasonQueryFailed, Failure: true})
	}
	cols, err := rt.columns(names[:ncols])
	if err != nil {
		rt.o.Logger.Error("data route cannot encode its columns", "route", rt.o.Name, "error", err)
		return fail(err, &upstream.Refusal{Reason: dataquery.ReasonQueryFailed, Failure: true})
	}
	if !rows.Next() {
		if err := rows.Err(); err != nil {
			return fail(err, queryRefusal(ctx, err, q, vals, false))
		}
		return fail(errNoRow, &upstream.Refusal{Reason: dataquery.ReasonNotFound})
	}
	n = 1
	var out bytes.Buffer
	// NDJSON's one row is exactly the object and its newline; the writer
	// is JSON's (same values, same escaping), only the framing differs.
	w, err := dataformat.NewWriter(dataformat.NDJSON, &out, cols, rt.o.Limits)
	if err != nil {
		return fail(err, &upstream.Refusal{Reason: dataquery.ReasonQueryFailed, Failure: true})
	}
	if err := w.Row(rows.Values()[:ncols]); err != nil {
		w.Discard()
		var le *dataformat.LimitError
		if errors.As(err, &le) {
			return fail(err, &upstream.Refusal{Reason: dataquery.ReasonQueryFailed,
				Detail: "the row is larger than the route's limits.max_bytes (" + strconv.FormatInt(rt.o.Limits.MaxBytes, 10) + ")"})
		}
		rt.o.Logger.Warn("data row cannot be encoded", "route", rt.o.Name, "error", err)
		return fail(err, &upstream.Refusal{Reason: dataquery.ReasonQueryFailed})
	}
	if rows.Next() {
		n = 2
		w.Discard()
		rt.o.Logger.Warn("single-row data route: the query returned more than one row", "route", rt.o.Name)
		return fail(errors.New(dataquery.DetailMoreThanOneRow), &upstream.Refusal{Reason: dataquery.ReasonQueryFailed, Detail: dataquery.DetailMoreThanOneRow})
	}
	if err := rows.Err(); err != nil {
		w.Discard()
		return fail(err, queryRefusal(ctx, err, q, vals, false))
	}
	if err := w.Finish(dataformat.Tail{}); err != nil { // a bytes.Buffer does not fail
		return fail(err, &upstream.Refusal{Reason: dataquery.ReasonQueryFailed})
	}
	_ = rows.Close()
	rt.metrics.rows.Add(1)
	rt.metrics.duration.Observe(time.Since(start).Seconds())
	body := out.Bytes()
	ct := dataformat.JSON.ContentType()
	h := http.Header{"Content-Type": {ct}, "Vary": {"Accept"}, "Content-Length": {strconv.Itoa(len(body))}}
	if flight != nil {
		_, _ = flight.Write(body)
		_ = flight.Commit(ct, rt.o.Now())
		h["Levee-Cache"] = []string{datacache.Miss.Header()}
		if flight.Leader() {
			rt.metrics.cached(datacache.Miss)
		} else {
			rt.metrics.cached(datacache.Bypass)
		}
	}
	return &http.Response{StatusCode: http.StatusOK, Proto: "HTTP/1.1", ProtoMajor: 1, ProtoMinor: 1,
		Header: h, Body: io.NopCloser(bytes.NewReader(body)), ContentLength: int64(len(body))}, nil
}
