package dataapi

import (
	"bytes"
	"errors"
	"io"
	"net/http"
	"slices"
	"time"

	"github.com/levee-gw/levee/internal/datacache"
	"github.com/levee-gw/levee/internal/dataformat"
	"github.com/levee-gw/levee/internal/dataquery"
	"github.com/levee-gw/levee/internal/datasource"
)

// truncatedTrailer is the trailer a capped answer carries, naming the cap
// (max_rows, max_bytes, or quota_exhausted for an app's row or byte quota).
const truncatedTrailer = "Levee-Truncated"

// errCutShort ends a JSON or CSV answer whose rows failed after it began:
// the proxy then aborts the client's connection, and the document is left
// unterminated, so the client cannot take it for a complete answer.
var errCutShort = errors.New("dataapi: the answer was cut short")

// body is a streaming answer: the proxy's copy loop reads it, and each
// Read encodes rows until the writer has flushed a chunk (FlushSize, 32
// KiB) into out or the rows ended. So rows leave the database only as fast
// as the client takes them, one chunk is the most held, and no goroutine
// runs beside the request.
type body struct {
	rt     *Route
	rows   *datasource.Rows
	w      *dataformat.Writer
	out    bytes.Buffer
	flight *datacache.Flight
	format dataformat.Format
	start  time.Time

	q     dataquery.Query
	b     dataquery.Bound
	paged bool
	// keyIdx are the keyset columns' indexes in the row; last holds the
	// keyset values of the newest row while paged.
	keyIdx []int
	last   []any
	more   bool // paged: a row past the page exists
	// max is the client's limit= of an answer that is not a page (0:
	// none): the answer ends, complete, after max rows.
	max int
	// ncols is the number of result columns the answer shows: the rest
	// (Bound.Hidden) are keyset columns fetched only for the cursor.
	ncols int

	// trailer is the response's trailer map: Levee-Truncated is set in it
	// when a cap cut the answer (CSV cannot say so in its body).
	trailer  http.Header
	rowsSent int
	done     bool
	err      error // io.EOF after a complete answer
	failed   error // what cut the answer short, if anything
	closed   bool
}

func (rt *Route) newBody(rows *datasource.Rows, q dataquery.Query, b dataquery.Bound, f dataformat.Format, flight *datacache.Flight, start time.Time, lim dataformat.Limits) (*body, error) {
	bd := &body{rt: rt, rows: rows, flight: flight, format: f, start: start, q: q, b: b, paged: b.Limit > 0}
	rcols := rows.Columns()
	names := make([]string, len(rcols))
	for i, c := range rcols {
		names[i] = c.Name
	}
	bd.ncols = len(names) - b.Hidden
	if bd.ncols < 1 {
		return nil, errors.New("the statement's result has no column to show")
	}
	var dst io.Writer = &bd.out
	if flight != nil {
		dst = io.MultiWriter(&bd.out, flight)
	}
	cols, err := rt.columns(names[:bd.ncols])
	if err != nil {
		return nil, err
	}
	w, err := dataformat.NewWriter(f, dst, cols, lim)
	if err != nil {
		return nil, err
	}
	bd.w = w
	if bd.paged {
		keyset := b.Keyset
		if keyset == nil {
			keyset = q.Keyset()
		}
		for _, k := range keyset {
			i := indexOf(names, k)
			if i < 0 {
				w.Discard()
				return nil, errors.New("keyset column " + k + " is not in the statement's result")
			}
			bd.keyIdx = append(bd.keyIdx, i)
		}
		bd.last = make([]any, len(bd.keyIdx))
	}
	return bd, nil
}

// columns returns the writer's prepared column names, made once per route
// (again only if the statement's result columns change).
func (rt *Route) columns(names []string) (*dataformat.Columns, error) {
	if c := rt.cols.Load(); c != nil && slices.Equal(c.Names(), names) {
		return c, nil
	}
	c, err := dataformat.NewColumns(names)
	if err != nil {
		return nil, err
	}
	rt.cols.Store(c)
	return c, nil
}

func indexOf(names []string, s string) int {
	for i, n := range names {
		if n == s {
			return i
		}
	}
	return -1
}

// Read implements io.Reader for the proxy's copy loop.
func (bd *body) Read(p []byte) (int, error) {
	for bd.out.Len() == 0 && !bd.done {
		bd.fill()
	}
	if bd.out.Len() > 0 {
		return bd.out.Read(p)
	}
	return 0, bd.err
}

// fill encodes rows until the writer flushes a chunk into out or the
// answer ends. Bounded: each pass reads at most one row.
func (bd *body) fill() {
	for bd.out.Len() == 0 {
		if bd.max > 0 && bd.rowsSent == bd.max {
			bd.finish(dataformat.Tail{})
			return
		}
		if !bd.rows.Next() {
			if err := bd.rows.Err(); err != nil {
				bd.abort(err)
				return
			}
			bd.finish(dataformat.Tail{})
			return
		}
		vals := bd.rows.Values()
		if bd.paged && bd.rowsSent == bd.b.Limit {
			bd.more = true // the extra row: there is a next page
			bd.finish(dataformat.Tail{})
			return
		}
		if err := bd.w.Row(vals[:bd.ncols]); err != nil {
			if errors.Is(err, dataformat.ErrLimit) {
				bd.finish(dataformat.Tail{})
				return
			}
			bd.abort(err)
			return
		}
		bd.rowsSent++
		if bd.paged {
			for i, k := range bd.keyIdx {
				bd.last[i] = vals[k]
			}
		}
	}
}

// finish ends a complete answer: the page's cursor when there is a next
// one, the trailing fields, the cache entry.
func (bd *body) finish(t dataformat.Tail) {
	bd.done, bd.err = true, io.EOF
	if bd.more {
		next, err := bd.q.NextCursor(bd.b, bd.last)
		if err != nil {
			bd.abort(err)
			return
		}
		t.NextCursor = next
	}
	if err := bd.w.Finish(t); err != nil {
		bd.abort(err)
		return
	}
	if truncated, c := bd.w.Truncated(); truncated {
		bd.trailer.Set(truncatedTrailer, c.String())
	}
	bd.end()
	if bd.flight != nil {
		if truncated, _ := bd.w.Truncated(); truncated {
			bd.flight.Abandon(errors.New("answer truncated at a cap: not cached"))
		} else {
			_ = bd.flight.Commit(bd.format.ContentType(), bd.rt.o.Now())
		}
	}
}

// abort ends an answer cut short by err after it began. NDJSON says so in
// its last line and ends normally; JSON and CSV end unterminated, and the
// body's error makes the proxy abort the connection.
func (bd *body) abort(err error) {
	bd.done, bd.failed = true, err
	reason, msg := dataquery.ReasonQueryFailed, "the query failed"
	switch {
	case errors.Is(err, datasource.ErrStatementTimeout):
		reason, msg = dataquery.ReasonStatementTimeout, "the query ran past its statement timeout and was cancelled"
	case errors.Is(err, datasource.ErrUnavailable):
		reason, msg = dataquery.ReasonSourceUnavailable, "the data source went away"
	}
	bd.rt.o.Logger.Warn("data answer cut short", "route", bd.rt.o.Name, "rows", bd.rowsSent, "error", err)
	_ = bd.w.Abort(reason, msg)
	bd.err = errCutShort
	if bd.format == dataformat.NDJSON {
		bd.err = io.EOF
	}
	bd.end()
	if bd.flight != nil {
		bd.flight.Abandon(err)
	}
}

// end releases the database connection and counts the answer.
func (bd *body) end() {
	_ = bd.rows.Close()
	bd.rt.metrics.rows.Add(float64(bd.rowsSent))
	bd.rt.metrics.duration.Observe(time.Since(bd.start).Seconds())
}

// Close releases what an answer the client did not read to the end still
// holds: its database connection and its cache flight.
func (bd *body) Close() error {
	if bd.closed {
		return nil
	}
	bd.closed = true
	if !bd.done {
		bd.done = true
		bd.w.Discard()
		bd.end()
		if bd.flight != nil {
			bd.flight.Abandon(errCutShort)
		}
	}
	return nil
}
