package gateway

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"net/url"
	"slices"
	"sync"
	"time"

	"github.com/levee-gw/levee/internal/config"
	"github.com/levee-gw/levee/internal/dataapi"
	"github.com/levee-gw/levee/internal/dataformat"
	"github.com/levee-gw/levee/internal/dataquery"
	"github.com/levee-gw/levee/internal/datasource"
	"github.com/levee-gw/levee/internal/openapi"
	"github.com/levee-gw/levee/internal/proxy"
	"github.com/levee-gw/levee/internal/valuekind"
)

// This file serves GET /api/v1/openapi.json: it describes the serving
// configuration's routes for package openapi, with each data route's
// columns as its database reports them. The columns are asked for when
// the document is first requested (not at start, so a source that is down
// delays nothing) and kept per route version; while a source does not
// answer its routes' columns are "unknown" (the document is still served)
// and asked for again at most once per columnsRetry.

const (
	// docsDeadline bounds the admin request's wait for the databases: past
	// it, the columns not read yet are unknown in this document.
	docsDeadline = 2 * time.Second
	// columnsRetry spaces the attempts to read one route's columns while
	// its source fails.
	columnsRetry = time.Second
	// docsReaders caps the routes whose columns are read at once.
	docsReaders = 4
)

// openAPIView is the gateway as admin.APIDocs.
type openAPIView struct{ g *Gateway }

func (v openAPIView) OpenAPI(ctx context.Context) ([]byte, error) { return v.g.openAPI(ctx) }

// docsState keeps each data route's columns between requests. Its zero
// value is ready.
type docsState struct {
	mu     sync.Mutex
	routes map[string]*routeColumns // by route name; only the serving routes
}

// routeColumns are one data route's columns, read for one version of the
// route on one source pool. sem (one slot) serialises the reads, so
// concurrent documents make one query; the fields are guarded by it.
type routeColumns struct {
	version string
	source  *datasource.Source
	sem     chan struct{}
	known   bool
	cols    []openapi.Column
	note    string
	tried   time.Time
}

// openAPI renders the serving configuration's document.
func (g *Gateway) openAPI(ctx context.Context) ([]byte, error) {
	g.mu.Lock()
	cfg := g.cfg
	sources := make(map[string]*datasource.Source, len(g.pools.sources))
	for name, s := range g.pools.sources {
		sources[name] = s.source
	}
	g.mu.Unlock()

	doc := openapi.Document{Title: "levee",
		Description: "The routes levee serves on its data listener, from its configuration; data APIs with their parameters and " +
			"the columns their databases report. A path is a route's path prefix (x-levee-path-prefix): the route takes every path below it."}
	var wants, ask []*columnsWant
	for i := range cfg.Routes {
		rc := &cfg.Routes[i]
		rt := describeRoute(cfg, rc)
		doc.Routes = append(doc.Routes, rt)
		if rc.Data == nil {
			continue
		}
		w := &columnsWant{rc: rc, src: sources[rc.Data.Source], driver: cfg.DataSources[rc.Data.Source].Driver}
		wants = append(wants, w)
		if rc.Data.ColumnTypes == nil {
			ask = append(ask, w)
			continue
		}
		w.known, w.note = true, "as declared in the configuration (column_types)"
		names := rc.Data.ColumnTypeOrder // a SQL-mode statement's columns, in order
		if rc.Data.Table != "" {
			names = rc.Data.Columns // the answer's order; config checked they are the same set
		}
		for _, name := range names {
			w.cols = append(w.cols, openapi.Column{Name: name, Kind: rc.Data.ColumnTypes[name]})
		}
	}
	g.readColumns(ctx, ask)
	for i, j := 0, 0; i < len(doc.Routes); i++ {
		if d := doc.Routes[i].Data; d != nil {
			wants[j].apply(d)
			j++
		}
	}
	return openapi.Render(doc)
}

// columnsWant is one data route whose columns the document needs, and
// what was learnt.
type columnsWant struct {
	rc     *config.Route
	src    *datasource.Source
	driver string
	known  bool
	cols   []openapi.Column
	note   string
}

// apply puts the columns learnt into d (filters get their column's kind).
func (w *columnsWant) apply(d *openapi.Data) {
	d.ColumnsKnown, d.Columns, d.ColumnsNote = w.known, w.cols, w.note
	for i := range d.Filters {
		for _, c := range w.cols {
			if c.Name == d.Filters[i].Column {
				d.Filters[i].Kind = c.Kind
			}
		}
	}
}

// readColumns fills each want from the cache or the database, at most
// docsReaders at once, within docsDeadline.
func (g *Gateway) readColumns(ctx context.Context, wants []*columnsWant) {
	ctx, cancel := context.WithTimeout(ctx, docsDeadline)
	defer cancel()
	entries := g.docs.entries(wants)
	slots := make(chan struct{}, docsReaders)
	var wg sync.WaitGroup
	for i, w := range wants {
		wg.Add(1)
		go func() {
			defer wg.Done()
			select {
			case slots <- struct{}{}:
				defer func() { <-slots }()
			case <-ctx.Done():
				w.note = "the document's deadline passed before the data source was asked"
				return
			}
			entries[i].read(ctx, w, time.Now())
		}()
	}
	wg.Wait()
}

// entries returns the cache entry of each want, replacing those of an
// older route version or source pool, and drops the entries of routes no
// longer serving.
func (s *docsState) entries(wants []*columnsWant) []*routeColumns {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.routes == nil {
		s.routes = map[string]*routeColumns{}
	}
	live := make(map[string]bool, len(wants))
	out := make([]*routeColumns, len(wants))
	for i, w := range wants {
		name, version := w.rc.Name, w.rc.Data.Version()
		live[name] = true
		e := s.routes[name]
		if e == nil || e.version != version || e.source != w.src {
			e = &routeColumns{version: version, source: w.src, sem: make(chan struct{}, 1)}
			s.routes[name] = e
		}
		out[i] = e
	}
	for name := range s.routes {
		if !live[name] {
			delete(s.routes, name)
		}
	}
	return out
}

// read fills w from e, asking the database when e does not know the
// columns yet and its last attempt ended at least columnsRetry before now.
func (e *routeColumns) read(ctx context.Context, w *columnsWant, now time.Time) {
	select {
	case e.sem <- struct{}{}:
		defer func() { <-e.sem }()
	case <-ctx.Done():
		w.note = "another request is reading them from the data source"
		return
	}
	if !e.known && (e.tried.IsZero() || now.Sub(e.tried) >= columnsRetry) {
		e.cols, e.note, e.known = askColumns(ctx, w)
		// Spaced from the attempt's end: a source that hangs until a
		// timeout is not asked again as soon as it has answered.
		e.tried = time.Now()
	}
	w.known, w.cols, w.note = e.known, e.cols, e.note
}

// askColumns asks the route's source for its answer's columns: the SQL
// statement described (prepared, never run) or the table's columns.
func askColumns(ctx context.Context, w *columnsWant) ([]openapi.Column, string, bool) {
	d := w.rc.Data
	if w.src == nil {
		return nil, "the data source " + d.Source + " is not open", false
	}
	var cols []datasource.Column
	var err error
	if d.SQL != "" {
		sql, nargs, berr := describable(d, w.driver)
		if berr != nil {
			return nil, "the statement could not be bound to be described: " + berr.Error(), false
		}
		cols, err = w.src.Describe(ctx, sql, nargs)
	} else {
		cols, err = w.src.TableColumns(ctx, d.Table)
	}
	if err != nil {
		switch {
		case errors.Is(err, datasource.ErrUnavailable), errors.Is(err, datasource.ErrClosed),
			errors.Is(err, context.DeadlineExceeded), errors.Is(err, context.Canceled):
			return nil, "the data source " + d.Source + " did not answer (asked again on a later request)", false
		}
		return nil, "the data source " + d.Source + " refused to describe them: " + err.Error(), false
	}
	out := make([]openapi.Column, 0, len(cols))
	if d.SQL != "" {
		for _, c := range cols {
			out = append(out, openapi.Column{Name: c.Name, Type: c.Type, Kind: c.Kind})
		}
	} else {
		for _, name := range d.Columns { // the allow-list, in its order
			i := slices.IndexFunc(cols, func(c datasource.Column) bool { return c.Name == name })
			if i < 0 {
				return nil, "table " + d.Table + " has no column " + name + " (the route answers 502 query_failed)", false
			}
			out = append(out, openapi.Column{Name: name, Type: cols[i].Type, Kind: cols[i].Kind})
		}
	}
	return out, "as the database (" + w.driver + ") reports them", true
}

// describable returns a SQL-mode route's statement as it is run, bound
// with a valid sample value for each parameter (its default, else a
// bound, else a value of its type; one item for a list), and the number
// of bind arguments: what Source.Describe needs. Only the statement's
// shape matters (its columns do not depend on the values).
func describable(d *config.RouteData, driver string) (string, int, error) {
	dialect := dataquery.Postgres
	if driver == config.DriverSQLite {
		dialect = dataquery.SQLite
	}
	q, err := dataquery.CompileSQL(d.SQL, dataParams(d), nil, dialect)
	if err != nil {
		return "", 0, err
	}
	vals := url.Values{}
	for _, name := range d.ParamOrder {
		p := d.Params[name]
		v := p.Default
		if v == "" {
			v = p.Min
		}
		if v == "" {
			v = p.Max
		}
		if v == "" {
			spec, _ := valuekind.Lookup(p.Type)
			v = spec.Sample
		}
		vals.Set(name, v)
	}
	b, err := q.Bind(vals, false)
	if err != nil {
		return "", 0, err
	}
	return b.SQL, len(b.Args), nil
}

// describeRoute is route rc as the document shows it, its columns not yet
// filled in.
func describeRoute(cfg *config.Config, rc *config.Route) openapi.Route {
	rt := openapi.Route{Name: rc.Name, Host: rc.Match.Host, PathPrefix: rc.Match.PathPrefix, Methods: rc.Match.Methods,
		Auth: openapi.Auth(rc.Auth), Upstream: rc.Upstream}
	if rc.Auth == config.AuthNone {
		rt.Auth = openapi.AuthNone
	}
	if rt.PathPrefix == "" {
		rt.PathPrefix = "/"
	}
	rt.Refusals = routeRefusals(cfg, rc)
	d := rc.Data
	if d == nil {
		return rt
	}
	od := &openapi.Data{Source: d.Source, Table: d.Table, MaxRows: d.MaxRows, MaxBytes: d.MaxBytes,
		Cached: d.Cache != nil && d.Cache.TTL > 0, MaxFilters: dataquery.MaxFiltersPerColumn}
	for _, name := range d.ParamOrder {
		p := d.Params[name]
		op := openapi.Param{Name: name, Kind: p.Type, List: p.List, Required: p.Required, Default: p.Default,
			Min: p.Min, Max: p.Max, MaxLen: p.MaxLen, MaxItems: p.MaxItems}
		if op.Kind == valuekind.String && op.MaxLen == 0 {
			op.MaxLen = dataquery.DefaultMaxLen
		}
		if op.List && op.MaxItems == 0 {
			op.MaxItems = dataquery.DefaultMaxItems
		}
		od.Params = append(od.Params, op)
	}
	for _, col := range d.Columns { // the allow-list's order, filtered ones only
		if ops, ok := d.Filters[col]; ok {
			od.Filters = append(od.Filters, openapi.Filter{Column: col, Ops: ops})
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

// routeRefusals lists the refusals levee may answer rc's requests with,
// given the configuration: the request path's checks, the route's
// consumers, admission control in front of its upstream or data source,
// and the forwarding or the data query.
func routeRefusals(cfg *config.Config, rc *config.Route) []openapi.Refusal {
	reasons := []proxy.Reason{proxy.ReasonBadPath, proxy.ReasonHeaderTooLarge}
	if cfg.Server.UnderscoresInHeaders == config.UnderscoresReject {
		reasons = append(reasons, proxy.ReasonBadHeaderName)
	}
	if rc.Match.Methods != nil {
		reasons = append(reasons, proxy.ReasonMethodNotAllowed)
	}
	if rc.MaxBodyBytes > 0 {
		reasons = append(reasons, proxy.ReasonBodyTooLarge)
	}
	if rc.Auth == config.AuthAPIKey || rc.Auth == config.AuthHMAC {
		reasons = append(reasons, proxy.ReasonUnauthenticated, proxy.ReasonForbidden, proxy.ReasonRateLimited, proxy.ReasonQuotaExhausted)
	} else if rc.AnonymousLimits != nil {
		reasons = append(reasons, proxy.ReasonRateLimited)
	}
	if cfg.Memory != nil {
		reasons = append(reasons, proxy.ReasonMemoryPressure)
	}
	if d := rc.Data; d != nil {
		if ds := cfg.DataSources[d.Source]; ds != nil {
			reasons = append(reasons, admissionReasons(ds.Limits)...)
		}
		for _, r := range dataapi.Reasons() {
			switch r {
			case dataquery.ReasonMissingParameter:
				if !slices.ContainsFunc(d.ParamOrder, func(n string) bool { return d.Params[n].Required }) {
					continue
				}
			case dataquery.ReasonDuplicateParameter:
				if d.SQL == "" {
					continue
				}
			case dataquery.ReasonOperatorNotAllowed:
				if len(d.Filters) == 0 {
					continue
				}
			case dataquery.ReasonInvalidCursor, dataquery.ReasonInvalidLimit:
				if d.Page == nil {
					continue
				}
			}
			reasons = append(reasons, proxy.Reason(r))
		}
	} else {
		reasons = append(reasons, proxy.ReasonBadRequest)
		if u := cfg.Upstreams[rc.Upstream]; u != nil {
			reasons = append(reasons, admissionReasons(u.Limits)...)
		}
		reasons = append(reasons, proxy.ReasonNoAvailableEndpoint, proxy.ReasonUpstreamUnavailable, proxy.ReasonUpstreamTimeout)
	}
	table := refusalTable()
	out := make([]openapi.Refusal, 0, len(reasons))
	for _, r := range reasons {
		if rf, ok := table[r]; ok {
			out = append(out, rf)
		}
	}
	return out
}

// admissionReasons are the refusals of an admission block l (none
// without one): concurrency_limit without a queue, queue_full and
// queue_timeout with one.
func admissionReasons(l *config.Limits) []proxy.Reason {
	if l == nil {
		return nil
	}
	out := []proxy.Reason{proxy.ReasonConcurrencyLimit}
	if l.MaxQueue > 0 {
		out = []proxy.Reason{proxy.ReasonQueueFull, proxy.ReasonQueueTimeout}
	}
	return append(out, proxy.ReasonShedPriority, proxy.ReasonConsumerLimit)
}

// refusalTable is every reason as proxy.Refuse answers it (status,
// sentence, Retry-After), read once by rendering each refusal: the
// request path's table stays the one source.
var refusalTable = sync.OnceValue(func() map[proxy.Reason]openapi.Refusal {
	all := []proxy.Reason{proxy.ReasonBadPath, proxy.ReasonHeaderTooLarge, proxy.ReasonBadHeaderName, proxy.ReasonMethodNotAllowed,
		proxy.ReasonBodyTooLarge, proxy.ReasonUnauthenticated, proxy.ReasonForbidden, proxy.ReasonRateLimited,
		proxy.ReasonQuotaExhausted, proxy.ReasonMemoryPressure, proxy.ReasonConcurrencyLimit, proxy.ReasonQueueFull,
		proxy.ReasonQueueTimeout, proxy.ReasonShedPriority, proxy.ReasonConsumerLimit, proxy.ReasonBadRequest,
		proxy.ReasonNoAvailableEndpoint, proxy.ReasonUpstreamUnavailable, proxy.ReasonUpstreamTimeout}
	for _, r := range dataapi.Reasons() {
		all = append(all, proxy.Reason(r))
	}
	out := make(map[proxy.Reason]openapi.Refusal, len(all))
	for _, r := range all {
		w := &captureWriter{h: http.Header{}}
		status := proxy.Refuse(w, r)
		var body struct {
			Error string `json:"error"`
		}
		if status >= 500 && proxy.StatusOf(r) == 0 || json.Unmarshal(w.body.Bytes(), &body) != nil {
			continue // no row: TestOpenAPIKindsAgree reports it
		}
		// rate_limited and quota_exhausted carry the rate limiter's own
		// Retry-After, which Refuse leaves to it.
		retry := w.h.Get("Retry-After") != "" || r == proxy.ReasonRateLimited || r == proxy.ReasonQuotaExhausted
		out[r] = openapi.Refusal{Reason: string(r), Status: status, Sentence: body.Error, RetryAfter: retry}
	}
	return out
})

// captureWriter records one refusal as proxy.Refuse writes it.
type captureWriter struct {
	h    http.Header
	body bytes.Buffer
}

func (w *captureWriter) Header() http.Header         { return w.h }
func (w *captureWriter) WriteHeader(int)             {}
func (w *captureWriter) Write(p []byte) (int, error) { return w.body.Write(p) }
