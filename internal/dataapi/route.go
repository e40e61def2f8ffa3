package dataapi

import (
	"bytes"
	"context"
	"errors"
	"io"
	"log/slog"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"github.com/levee-gw/levee/internal/datacache"
	"github.com/levee-gw/levee/internal/dataformat"
	"github.com/levee-gw/levee/internal/dataquery"
	"github.com/levee-gw/levee/internal/datasource"
	"github.com/levee-gw/levee/internal/upstream"
)

// Options build a Route. The gateway fills them from the route's `data`
// block and its source.
type Options struct {
	// Name is the route's name: the metrics' route label.
	Name string
	// Version changes whenever the route's definition does: it is part of
	// every cache key, so a changed route never serves an old answer.
	// (Cursors are bound to it through the Page's Scope.)
	Version string
	// Query is the compiled statement (SQL mode). Table mode leaves it
	// nil and sets Table instead.
	Query dataquery.Query
	// Table is a table-mode route, compiled on first use with the column
	// kinds the database reports (see columns.go).
	Table *TableOptions
	// Params are a SQL-mode route's declared parameters: Columns binds a
	// sample value of each to have the statement described.
	Params []dataquery.Param
	// Source runs the statements; SourceName and Driver name it (in the
	// notes of Columns).
	Source     *datasource.Source
	SourceName string
	Driver     string
	// Formats are the answer formats offered, the first the default
	// (Accept absent or */*). Required.
	Formats []dataformat.Format
	// Limits cap every answer (max_rows, max_bytes).
	Limits dataformat.Limits
	// StatementTimeout is the route's own timeout (0: the source's).
	StatementTimeout time.Duration
	// CountMax caps Prefer: count=exact (count.go); 0 means
	// DefaultCountMax.
	CountMax int
	// Cache and CachePolicy: answers are cached when both are set and
	// CachePolicy.TTL > 0.
	Cache       *datacache.Cache
	CachePolicy datacache.Policy
	Metrics     *Metrics
	Logger      *slog.Logger
	// PathNames and PathValues bind a path template's captures: PathValues
	// returns the request path's captured segments in the order of
	// PathNames, each bound as the query parameter of that name (typed by
	// its declaration); a query string that also gives one is refused.
	// nil: the route has no template.
	PathNames  []string
	PathValues func(path string) []string
	// Single: the answer is the query's one row as a JSON object
	// (single.go); Formats must then be JSON only.
	Single bool
	// Now is the clock (time.Now when nil): cache freshness and the
	// spacing of the attempts to learn the columns are judged on it.
	Now func() time.Time
	// Bindings are the parameters (SQL mode) and row filter columns
	// (table mode, also in Table.RowFilters) bound to the caller's
	// identity (bind.go).
	Bindings []Binding
}

// TableOptions are a table-mode route's declaration: dataquery.TableSpec
// without the column kinds, which come from the database.
type TableOptions struct {
	Table   string
	Columns []string
	Filters map[string][]dataquery.Op
	Order   []string
	Orders  []dataquery.OrderSpec
	Page    *dataquery.Page
	Dialect dataquery.Dialect
	// RowFilters are the columns bound to the caller's identity
	// (dataquery.TableSpec.RowFilters); each is also in Options.Bindings.
	RowFilters []string
}

// Route is one data route's forwarder. Safe for concurrent use.
type Route struct {
	o       Options
	metrics *routeMetrics
	logger  *slog.Logger
	learnt  *columnCache
	cols    atomic.Pointer[dataformat.Columns]
}

// New checks o and returns the route.
func New(o Options) (*Route, error) {
	if o.Name == "" || o.Source == nil || o.Metrics == nil || len(o.Formats) == 0 {
		return nil, errors.New("dataapi: Name, Source, Metrics and Formats are required")
	}
	if (o.Query == nil) == (o.Table == nil) {
		return nil, errors.New("dataapi: exactly one of Query and Table is required")
	}
	if o.Single && (len(o.Formats) != 1 || o.Formats[0] != dataformat.JSON) {
		return nil, errors.New("dataapi: a Single route answers JSON only")
	}
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	if o.Now == nil {
		o.Now = time.Now
	}
	rt := &Route{o: o, metrics: o.Metrics.route(o.Name), logger: o.Logger.With("route", o.Name)}
	rt.learnt = newColumnCache(o.Now, rt.ask)
	return rt, nil
}

var _ upstream.Forwarder = (*Route)(nil)

// Forward answers one attempt of r (see the package doc). Its errors are
// *upstream.Refusal, or ctx's own when the client left.
func (rt *Route) Forward(ctx context.Context, r *http.Request, ob upstream.Outbound) (*http.Response, error) {
	if len(rt.o.Bindings) == 0 {
		return rt.forward(ctx, r, ob, nil)
	}
	resp, err := rt.forward(ctx, r, ob, &ob.Caller)
	return resp, rt.boundRefusal(err)
}

// forward is Forward; caller is the identity a route with Bindings binds.
func (rt *Route) forward(ctx context.Context, r *http.Request, out upstream.Outbound, caller *upstream.Caller) (*http.Response, error) {
	format, ok := dataformat.Negotiate(r.Header.Get("Accept"), rt.o.Formats)
	if !ok {
		return nil, &upstream.Refusal{Reason: dataquery.ReasonNotAcceptable, Detail: "this route answers " + formatList(rt.o.Formats)}
	}
	q, err := rt.query(ctx)
	if err != nil {
		return nil, refusal(ctx, err)
	}
	vals, err := url.ParseQuery(r.URL.RawQuery)
	if err != nil {
		return nil, &upstream.Refusal{Reason: dataquery.ReasonInvalidParameter, Detail: "the query string is malformed (a bad %-escape or a ';')"}
	}
	if len(rt.o.Bindings) > 0 {
		if ref := rt.bindCaller(vals, caller); ref != nil {
			return nil, ref
		}
	}
	if rt.o.PathValues != nil {
		if ref := bindPath(vals, r.URL.Path, rt.o.PathNames, rt.o.PathValues); ref != nil {
			return nil, ref
		}
	}
	if rt.o.Single {
		if ref := singleOpts(vals); ref != nil {
			return nil, ref
		}
	}
	paged := format == dataformat.JSON && q.Keyset() != nil && !rt.o.Single
	// limit= of an answer that is not a page (NDJSON, CSV, JSON of a route
	// without page): up to max_rows, read here, not by the query.
	limit, err := rt.streamLimit(vals, paged)
	if err != nil {
		return nil, refusal(ctx, err)
	}
	countMode, err := dataquery.ParsePrefer(r.Header.Values("Prefer"))
	if err != nil {
		return nil, refusal(ctx, err)
	}
	if rt.o.Single {
		countMode = dataquery.CountNone // one row has no range to count: the preference is not applied
	}
	b, err := q.Bind(vals, paged)
	if err != nil {
		return nil, refusal(ctx, err)
	}
	var total int64
	if countMode != dataquery.CountNone {
		if total, err = rt.count(ctx, q, vals, countMode); err != nil {
			return nil, refusal(ctx, err)
		}
	}
	now := rt.o.Now()
	var flight *datacache.Flight
	key := ""
	// A counted answer is neither served from the cache nor cached: its
	// Content-Range is of the moment.
	// An app with a row or byte quota is charged each row as written
	// (dataformat.Limits.Meter): its answers are neither served from the
	// cache nor cached, so every row it gets is counted. A single-row
	// route leaves the charge to the proxy (its body's bytes).
	metered := out.Usage != nil && !rt.o.Single
	if metered {
		out.Usage.Own()
	}
	if rt.cached() && countMode == dataquery.CountNone && !metered {
		key = cacheKey(rt.o.Version, format, b, vals, limit)
		res, err := rt.o.Cache.Begin(ctx, key, rt.o.CachePolicy, now)
		if err != nil {
			return nil, refusal(ctx, err)
		}
		if res.Entry != nil {
			rt.metrics.cached(res.Status)
			return cachedResponse(res), nil
		}
		flight = res.Flight
	}
	rows, err := rt.o.Source.Query(ctx, datasource.Query{SQL: b.SQL, Args: b.Args, Timeout: rt.o.StatementTimeout})
	if err != nil {
		rt.metrics.duration.Observe(time.Since(now).Seconds())
		if flight != nil {
			if sourceFailed(err) {
				flight.Abandon(datacache.SourceFailure(err))
				if res := rt.o.Cache.Stale(key, rt.o.CachePolicy, now); res.Entry != nil {
					rt.metrics.cached(res.Status)
					return cachedResponse(res), nil
				}
			} else {
				flight.Abandon(err)
			}
		}
		if !sourceFailed(err) && ctx.Err() == nil {
			// A query the database refused (a bad statement, a refused
			// value): worth a line each. The source failing (down, timing
			// out) is counted in the metrics, not logged per request.
			rt.o.Logger.Warn("data query failed", "route", rt.o.Name, "error", err)
		}
		return nil, queryRefusal(ctx, err, q, vals, paged)
	}
	if rt.o.Single {
		return rt.single(ctx, rows, q, b, vals, flight, now)
	}
	lim := rt.o.Limits
	if metered {
		lim.Meter = out.Usage
	}
	body, err := rt.newBody(rows, q, b, format, flight, now, lim)
	if body != nil {
		body.max = limit
	}
	if err != nil {
		rows.Close()
		if flight != nil {
			flight.Abandon(err)
		}
		rt.o.Logger.Error("data route cannot encode its columns", "route", rt.o.Name, "error", err)
		return nil, &upstream.Refusal{Reason: dataquery.ReasonQueryFailed, Failure: true}
	}
	h := http.Header{"Content-Type": {format.ContentType()}, "Vary": {"Accept"}}
	body.trailer = http.Header{truncatedTrailer: nil}
	// The first chunk is encoded before the head is sent: an answer that
	// fits in it (most lookups) goes out with a Content-Length, and one
	// that fails within it gets its proper status instead of a cut stream.
	body.fill()
	length := int64(-1)
	if body.done {
		if body.failed != nil {
			return nil, queryRefusal(ctx, body.failed, q, vals, paged)
		}
		length = int64(body.out.Len())
		h["Content-Length"] = []string{strconv.FormatInt(length, 10)}
		if v := body.trailer.Get(truncatedTrailer); v != "" {
			h[truncatedTrailer] = []string{v}
		}
		body.trailer = nil
	}
	if countMode != dataquery.CountNone {
		h["Content-Range"] = []string{contentRange(body, b, limit, rt.o.Limits.MaxRows, total)}
		h["Preference-Applied"] = []string{"count=" + countMode}
	}
	if flight != nil {
		h["Levee-Cache"] = []string{datacache.Miss.Header()}
		if flight.Leader() {
			rt.metrics.cached(datacache.Miss)
		} else {
			rt.metrics.cached(datacache.Bypass)
		}
	}
	return &http.Response{StatusCode: http.StatusOK, Proto: "HTTP/1.1", ProtoMajor: 1, ProtoMinor: 1,
		Header: h, Body: body, ContentLength: length, Trailer: body.trailer}, nil
}

// cached reports whether the route caches its answers.
func (rt *Route) cached() bool { return rt.o.Cache != nil && rt.o.CachePolicy.TTL > 0 }

// query returns the route's compiled statement.
func (rt *Route) query(ctx context.Context) (dataquery.Query, error) {
	if rt.o.Table != nil {
		return rt.tableQuery(ctx)
	}
	return rt.o.Query, nil
}

// cacheKey is the cache key of one answer: the route's version, the
// format, the canonical parameters and the page asked for.
func cacheKey(version string, f dataformat.Format, b dataquery.Bound, vals url.Values, limit int) string {
	var sb strings.Builder
	sb.WriteString(version)
	sb.WriteByte(0)
	sb.WriteString(f.String())
	sb.WriteByte(0)
	sb.WriteString(b.Params)
	sb.WriteByte(0)
	sb.WriteString(strconv.Itoa(b.Limit))
	if limit > 0 {
		sb.WriteString("/")
		sb.WriteString(strconv.Itoa(limit))
	}
	if c := vals["cursor"]; len(c) == 1 {
		sb.WriteByte(0)
		sb.WriteString(c[0])
	}
	return sb.String()
}

// cachedResponse is an answer from the cache, with its age.
func cachedResponse(res datacache.Result) *http.Response {
	e := res.Entry
	h := http.Header{
		"Content-Type":   {e.ContentType},
		"Content-Length": {strconv.Itoa(len(e.Body))},
		"Age":            {strconv.FormatInt(res.AgeSeconds(), 10)},
		"Levee-Cache":    {res.Status.Header()},
		"Vary":           {"Accept"},
	}
	return &http.Response{StatusCode: http.StatusOK, Proto: "HTTP/1.1", ProtoMajor: 1, ProtoMinor: 1,
		Header: h, Body: io.NopCloser(bytes.NewReader(e.Body)), ContentLength: int64(len(e.Body))}
}

func formatList(fs []dataformat.Format) string {
	names := make([]string, len(fs))
	for i, f := range fs {
		names[i] = f.MediaType()
	}
	return strings.Join(names, ", ")
}

// tableQuery is a table-mode route's query, compiled once the database
// has told the kinds of its columns (columns.go): the failure to learn
// them as the request path answers it.
func (rt *Route) tableQuery(ctx context.Context) (dataquery.Query, error) {
	v, err := rt.learnt.get(ctx)
	if err == nil {
		return v.q, nil
	}
	if errors.Is(err, datasource.ErrUnavailable) || ctx.Err() != nil {
		return nil, err
	}
	return nil, &datasource.QueryError{Err: err} // query_failed
}

// ask is the route's columnCache's question to the database. A failure
// other than the source down or the asker leaving is logged, once per
// attempt: a table that does not match the declaration is a
// configuration mistake.
func (rt *Route) ask(ctx context.Context) (learnt, error) {
	if rt.o.Table == nil {
		return askStatement(ctx, rt.o.Source, rt.o.Query, rt.o.Params)
	}
	v, err := askTable(ctx, rt.o.Source, rt.o.Table)
	var mm *mismatchError
	switch {
	case err == nil, errors.Is(err, datasource.ErrUnavailable), ctx.Err() != nil:
	case errors.As(err, &mm):
		rt.logger.Error("data route: configuration does not match the table", "table", rt.o.Table.Table, "error", err)
	default:
		rt.logger.Error("data route: cannot read the table's columns", "table", rt.o.Table.Table, "error", err)
	}
	return v, err
}

// bindPath adds a path template's captures to vals, each under its name.
// A capture the query string also gives is refused (one value, from one
// place); a path the template does not match (the router matched it, so
// only a caller's bug) is refused as no route.
func bindPath(vals url.Values, path string, names []string, values func(string) []string) *upstream.Refusal {
	got := values(path)
	if len(got) != len(names) {
		return &upstream.Refusal{Reason: dataquery.ReasonInvalidParameter, Detail: "the path does not match the route's template"}
	}
	for i, name := range names {
		if _, dup := vals[name]; dup {
			return &upstream.Refusal{Reason: dataquery.ReasonInvalidParameter, Param: name, Detail: "given by the path; not also in the query string"}
		}
		vals[name] = []string{got[i]}
	}
	return nil
}
