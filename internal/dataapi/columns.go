package dataapi

import (
	"context"
	"errors"
	"fmt"
	"net/url"
	"slices"
	"strconv"
	"sync"
	"time"

	"github.com/levee-gw/levee/internal/dataquery"
	"github.com/levee-gw/levee/internal/datasource"
	"github.com/levee-gw/levee/internal/valuekind"
)

// This file keeps what a route learns from its database: its answer's
// columns (a table-mode route also compiles its query with their kinds).
// They are asked for at the first request that needs them (a serving
// request of a table-mode route, or the OpenAPI document), not at start,
// so a source that is down delays nothing; while the source fails they
// are asked for again at most once per ColumnsRetry, on the route's clock.
//
// One request at a time asks the database (a one-slot channel): the
// others wait for its answer, each only as long as its own context lets
// it, and no lock is held across the round trip.

// ColumnsRetry spaces the attempts to learn a route's columns while its
// source fails (or the table does not match the declaration).
const ColumnsRetry = time.Second

// learnt is what a route learnt from its database.
type learnt struct {
	cols []datasource.Column
	// q is a table-mode route's query, compiled with the columns' kinds.
	q dataquery.Query
}

// columnCache learns a route's columns once. Safe for concurrent use.
type columnCache struct {
	ask func(ctx context.Context) (learnt, error)
	now func() time.Time
	// slot (one slot) is held by the one request asking the database.
	slot chan struct{}

	mu    sync.Mutex // guards the fields below; never held across I/O
	val   learnt
	known bool
	err   error     // the last attempt's failure
	tried time.Time // when it ended (zero: none failed yet)
}

func newColumnCache(now func() time.Time, ask func(ctx context.Context) (learnt, error)) *columnCache {
	return &columnCache{ask: ask, now: now, slot: make(chan struct{}, 1)}
}

// errNoAnswer is kept when the source did not answer within the deadline
// of the request that asked it: the source counts as unavailable.
var errNoAnswer = fmt.Errorf("%w: no answer within the asking request's deadline", datasource.ErrUnavailable)

// errWaiting wraps the context error of a request whose context ended
// while another request was asking the database.
var errWaiting = errors.New("another request is reading the columns from the data source")

// get returns the columns, asking the database when they are not known
// and the last failure ended at least ColumnsRetry ago (that failure is
// returned otherwise). A request that finds another asking waits for it
// until its own context ends (errWaiting, wrapping ctx's error). When
// the asker's context ends first, its deadline passing counts as the
// source not answering (kept as errNoAnswer, so the source is not asked
// again within ColumnsRetry), the asker leaving (cancelled) does not:
// the next request asks again.
func (c *columnCache) get(ctx context.Context) (learnt, error) {
	if v, done, err := c.cached(); done {
		return v, err
	}
	select {
	case c.slot <- struct{}{}:
	case <-ctx.Done():
		return learnt{}, errors.Join(errWaiting, ctx.Err())
	}
	defer func() { <-c.slot }()
	// Whoever held the slot before may have learnt them, or failed.
	if v, done, err := c.cached(); done {
		return v, err
	}
	v, err := c.ask(ctx)
	c.mu.Lock()
	defer c.mu.Unlock()
	switch {
	case err == nil:
		c.val, c.known, c.err = v, true, nil
	case ctx.Err() == nil:
		// Spaced from the attempt's end: a source that hangs until a
		// timeout is not asked again as soon as it has answered.
		c.err, c.tried = err, c.now()
	case errors.Is(ctx.Err(), context.DeadlineExceeded):
		c.err, c.tried = errNoAnswer, c.now()
	}
	return v, err
}

// cached returns the columns when known, or the last failure while it is
// recent; done is false when the database should be asked.
func (c *columnCache) cached() (learnt, bool, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.known {
		return c.val, true, nil
	}
	if !c.tried.IsZero() && c.now().Sub(c.tried) < ColumnsRetry {
		return learnt{}, true, c.err
	}
	return learnt{}, false, nil
}

// mismatchError is a table that does not satisfy the route's declaration
// (a column it lacks, a filter on a column that cannot be filtered): a
// configuration mistake, answered query_failed.
type mismatchError struct {
	msg string
	// missing is the declared column the table lacks ("" for another
	// mismatch).
	missing string
}

func (e *mismatchError) Error() string { return e.msg }

// askTable asks the database for table-mode route t's columns and
// compiles its query with their kinds.
func askTable(ctx context.Context, src *datasource.Source, t *TableOptions) (learnt, error) {
	cols, err := src.TableColumns(ctx, t.Table)
	if err != nil {
		return learnt{}, err
	}
	kinds := make(map[string]string, len(cols))
	dbTypes := make(map[string]string, len(cols))
	for _, c := range cols {
		kinds[c.Name] = c.Kind
		dbTypes[c.Name] = c.Type
	}
	spec := dataquery.TableSpec{Table: t.Table, Filters: t.Filters, Order: t.Order, Orders: t.Orders, RowFilters: t.RowFilters}
	for _, name := range t.Columns {
		kind, ok := kinds[name]
		if !ok {
			return learnt{}, &mismatchError{msg: "table " + strconv.Quote(t.Table) + " has no column " + strconv.Quote(name), missing: name}
		}
		k, filterable := filterKind(kind)
		if _, filtered := t.Filters[name]; filtered && !filterable {
			return learnt{}, &mismatchError{msg: "column " + strconv.Quote(name) + " is " + kind + ", which cannot be filtered"}
		}
		spec.Columns = append(spec.Columns, dataquery.Column{Name: name, Kind: k, DBType: dbTypes[name]})
	}
	q, err := dataquery.CompileTable(spec, t.Page, t.Dialect)
	if err != nil {
		return learnt{}, &mismatchError{msg: "cannot compile the table query: " + err.Error()}
	}
	return learnt{cols: cols, q: q}, nil
}

// filterKind is how a filter value on a column of the database's kind is
// parsed: its valuekind row's Filter (numeric values are passed as text
// for the database to read exactly, a value it refuses is the client's
// 400); false for a kind that cannot be filtered (bytes, json).
func filterKind(kind string) (dataquery.Kind, bool) {
	spec, _ := valuekind.Lookup(kind)
	k, err := dataquery.ParseKind(spec.Filter)
	if err != nil {
		return dataquery.String, false
	}
	return k, true
}

// errNotBound is a SQL-mode statement that could not be bound with sample
// values to be described.
type errNotBound struct{ err error }

func (e *errNotBound) Error() string { return e.err.Error() }

// askStatement asks the database to describe SQL-mode query q (prepared,
// never run), bound with a valid sample value for each of params: only
// the statement's shape matters, its columns do not depend on the values.
func askStatement(ctx context.Context, src *datasource.Source, q dataquery.Query, params []dataquery.Param) (learnt, error) {
	b, err := q.Bind(sampleValues(params), false)
	if err != nil {
		return learnt{}, &errNotBound{err}
	}
	cols, err := src.Describe(ctx, b.SQL, len(b.Args))
	if err != nil {
		return learnt{}, err
	}
	return learnt{cols: cols}, nil
}

// sampleValues are a valid value for each parameter: its default, else a
// bound, else its kind's sample (one item for a list).
func sampleValues(params []dataquery.Param) url.Values {
	vals := url.Values{}
	for _, p := range params {
		v := p.Default
		if v == "" {
			v = p.Min
		}
		if v == "" {
			v = p.Max
		}
		if v == "" {
			spec, _ := valuekind.Lookup(p.Type.String())
			v = spec.Sample
		}
		vals.Set(p.Name, v)
	}
	return vals
}

// Columns are a route's answer columns as the OpenAPI document shows
// them.
type Columns struct {
	// Known is true when the database reported them; Columns are then
	// the answer's, in order (a table-mode route's allow-list order).
	Known   bool
	Columns []datasource.Column
	// Note says where they came from, or why they are unknown.
	Note string
}

// Columns returns the route's answer columns, asking the database when
// they are not known yet (see columnCache.get): within ctx, which bounds
// the wait.
func (rt *Route) Columns(ctx context.Context) Columns {
	v, err := rt.learnt.get(ctx)
	src := rt.o.SourceName
	if err != nil {
		var nb *errNotBound
		var mm *mismatchError
		switch {
		case errors.Is(err, errWaiting):
			return Columns{Note: "another request is reading them from the data source"}
		case errors.As(err, &nb):
			return Columns{Note: "the statement could not be bound to be described: " + nb.Error()}
		case errors.As(err, &mm) && mm.missing != "":
			return Columns{Note: "table " + rt.o.Table.Table + " has no column " + mm.missing + " (the route answers 502 query_failed)"}
		case errors.As(err, &mm):
			return Columns{Note: mm.Error() + " (the route answers 502 query_failed)"}
		case errors.Is(err, datasource.ErrUnavailable), errors.Is(err, datasource.ErrClosed),
			errors.Is(err, context.DeadlineExceeded), errors.Is(err, context.Canceled):
			return Columns{Note: "the data source " + src + " did not answer (asked again on a later request)"}
		}
		return Columns{Note: "the data source " + src + " refused to describe them: " + err.Error()}
	}
	out := Columns{Known: true, Note: "as the database (" + rt.o.Driver + ") reports them"}
	if rt.o.Table == nil {
		out.Columns = v.cols
		return out
	}
	for _, name := range rt.o.Table.Columns { // the allow-list, in its order
		if i := slices.IndexFunc(v.cols, func(c datasource.Column) bool { return c.Name == name }); i >= 0 {
			out.Columns = append(out.Columns, v.cols[i])
		}
	}
	return out
}
