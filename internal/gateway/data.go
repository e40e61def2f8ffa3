package gateway

import (
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"time"

	"github.com/levee-gw/levee/internal/balance"
	"github.com/levee-gw/levee/internal/config"
	"github.com/levee-gw/levee/internal/dataapi"
	"github.com/levee-gw/levee/internal/datacache"
	"github.com/levee-gw/levee/internal/dataformat"
	"github.com/levee-gw/levee/internal/dataquery"
	"github.com/levee-gw/levee/internal/datasource"
	"github.com/levee-gw/levee/internal/endpoint"
	"github.com/levee-gw/levee/internal/proxy"
)

// This file turns the configuration's data_sources and data routes into
// the request path's parts: each data source is a proxy.Upstream (its
// admission limiter in front of its pool, one endpoint standing for the
// database in the stats and the admin API) and each data route a
// proxy.Route whose Forwarder is a dataapi.Route.

// Bounds of the data routes' shared answer cache. One cache serves every
// route, so the bound is the process's: 64 MiB of answers, none larger
// than 8 MiB (a route's default max_bytes: every default-capped answer
// fits), at most 65,536 entries.
const (
	dataCacheBytes      = 64 << 20
	dataCacheEntryBytes = 8 << 20
	dataCacheEntries    = 1 << 16
)

// dataQueueTarget is a data source's short wait under controlled delay
// (admission's QueueTarget, 5ms for upstreams): the wait of a consumer
// that keeps the source's queue standing. A query holds its connection
// for tens to hundreds of milliseconds, so such a waiter almost never
// gets a slot within a few milliseconds; the wait would only delay its
// refusal. A consumer whose requests come one at a time keeps the whole
// queue_timeout.
const dataQueueTarget = time.Millisecond

// dataLimiterTuning is a data source's admission tuning: the short wait
// above, and an adaptive limit that starts at its max (at most max_conns)
// once the first probe has measured the query latency. The operator sized
// the pool; growing to it from the min window by window took seconds of
// half the goodput under a saturating load of 200 ms queries
// (admission's TestAdaptiveInitial).
var dataLimiterTuning = limiterTuning{queueTarget: dataQueueTarget, startAtMax: true}

// cursorKeyFile holds the key that signs data routes' page cursors, under
// state_dir: created on first start, kept so cursors outlive a restart.
const cursorKeyFile = "data-cursor.key"

// initData makes what every data route shares: the series, the answer
// cache and, when the file has data sources, the cursor key.
func (g *Gateway) initData(cfg *config.Config) error {
	var err error
	if g.dataMetrics, err = dataapi.NewMetrics(g.registry); err != nil {
		return err
	}
	if g.dataCache, err = datacache.New(datacache.Options{MaxBytes: dataCacheBytes, MaxEntryBytes: dataCacheEntryBytes, MaxEntries: dataCacheEntries}); err != nil {
		return err
	}
	if len(cfg.DataSources) > 0 {
		if g.cursorKey, err = loadCursorKey(cfg.StateDir); err != nil {
			return fmt.Errorf("data routes' cursor key: %w", err)
		}
	}
	return nil
}

// loadCursorKey reads the cursor key under stateDir, creating it (32
// random bytes, mode 0600) when it does not exist yet.
func loadCursorKey(stateDir string) ([]byte, error) {
	path := filepath.Join(stateDir, cursorKeyFile)
	key, err := os.ReadFile(path)
	if err == nil {
		if len(key) < dataquery.MinCursorKeyLen {
			return nil, fmt.Errorf("%s: %d bytes, want at least %d (delete it to have a new one made)", path, len(key), dataquery.MinCursorKeyLen)
		}
		return key, nil
	}
	if !errors.Is(err, os.ErrNotExist) {
		return nil, err
	}
	if err := os.MkdirAll(stateDir, 0o750); err != nil {
		return nil, err
	}
	key = make([]byte, 32)
	rand.Read(key)
	if err := os.WriteFile(path, key, 0o600); err != nil {
		return nil, err
	}
	return key, nil
}

// pooledSource keeps a data source's pool across reloads while its
// options are unchanged.
type pooledSource struct {
	opts   datasource.Options
	source *datasource.Source
}

// source returns data source name's pool, reusing the current one while
// its options are unchanged (its connections survive the reload).
func (p *pools) source(name string, o datasource.Options) (*datasource.Source, error) {
	if cur, ok := p.sources[name]; ok && cur.opts == o {
		return cur.source, nil
	}
	s, err := datasource.Open(context.Background(), o)
	if err != nil {
		return nil, fmt.Errorf("data_sources.%s: %w", name, err)
	}
	if cur, ok := p.sources[name]; ok {
		cur.source.Close()
	}
	p.sources[name] = pooledSource{opts: o, source: s}
	return s, nil
}

// dataSourceAddress is the address of the one endpoint that stands for a
// data source in endpoint stats and the admin API.
func dataSourceAddress(name string) string { return "data:" + name }

// dataUpstreams builds one proxy.Upstream per data source.
func (g *Gateway) dataUpstreams(cfg *config.Config, liveStats map[statsKey]bool) (map[string]*proxy.Upstream, []*proxy.Upstream, error) {
	byName := make(map[string]*proxy.Upstream, len(cfg.DataSources))
	ordered := make([]*proxy.Upstream, 0, len(cfg.DataSources))
	sources := make(map[string]*datasource.Source, len(cfg.DataSources))
	for _, name := range cfg.DataSourceOrder {
		dc := cfg.DataSources[name]
		src, err := g.pools.source(name, datasource.Options{Driver: dc.Driver, DSN: dc.Target(), MaxConns: dc.MaxConns,
			StatementTimeout: dc.StatementTimeout, ConnectTimeout: dc.ConnectTimeout})
		if err != nil {
			return nil, nil, err
		}
		sources[name] = src
		key := statsKey{name, dataSourceAddress(name)}
		st := g.pools.stats[key]
		if st == nil {
			st = &endpoint.Stats{}
			g.pools.stats[key] = st
		}
		liveStats[key] = true
		ep := &endpoint.Endpoint{Address: key.address, Weight: endpoint.WeightScale, Stats: st}
		up := (&proxy.Upstream{Name: name}).WithBalance(&proxy.Balance{Endpoints: []*endpoint.Endpoint{ep},
			Picker: balance.NewSmoothWeighted([]*endpoint.Endpoint{ep})})
		if up.Admission, err = g.pools.limiter(name, dc.Limits, dataLimiterTuning); err != nil {
			return nil, nil, fmt.Errorf("data_sources.%s.limits: %w", name, err)
		}
		byName[name] = up
		ordered = append(ordered, up)
	}
	g.dataMetrics.SetSources(sources)
	return byName, ordered, nil
}

// dataRoute builds route rc's forwarder on its source's upstream.
func (g *Gateway) dataRoute(cfg *config.Config, rc *config.Route) (*dataapi.Route, error) {
	d := rc.Data
	src := g.pools.sources[d.Source].source
	dialect := dataquery.Postgres
	if cfg.DataSources[d.Source].Driver == config.DriverSQLite {
		dialect = dataquery.SQLite
	}
	version := d.Version()
	var page *dataquery.Page
	if p := d.Page; p != nil {
		page = &dataquery.Page{Keyset: p.Keyset, Default: p.Default, Max: p.Max, Key: g.cursorKey, Scope: rc.Name + "@" + version}
	}
	o := dataapi.Options{
		Name: rc.Name, Version: version, Source: src, SourceName: d.Source, Driver: cfg.DataSources[d.Source].Driver,
		Metrics: g.dataMetrics, Logger: g.logger,
		Limits:           dataformat.Limits{MaxRows: d.MaxRows, MaxBytes: d.MaxBytes},
		StatementTimeout: d.StatementTimeout,
		CountMax:         d.CountMax,
	}
	o.PathNames, o.PathValues = rc.Match.PathCaptures()
	o.Single = d.Single
	bindings, err := dataBindings(d)
	if err != nil {
		return nil, err
	}
	o.Bindings = bindings
	for _, f := range d.Formats {
		format, err := dataformat.ParseFormat(f)
		if err != nil {
			return nil, err
		}
		o.Formats = append(o.Formats, format)
	}
	if c := d.Cache; c != nil {
		o.Cache = g.dataCache
		// A follower waits for the leader's query at most as long as the
		// query may run: past that it runs its own.
		wait := d.StatementTimeout
		if wait == 0 {
			wait = cfg.DataSources[d.Source].StatementTimeout
		}
		o.CachePolicy = datacache.Policy{TTL: c.TTL, StaleIfError: c.StaleIfError, MaxWait: wait}
	}
	if d.SQL != "" {
		o.Params = d.QueryParams()
		q, err := dataquery.CompileSQL(d.SQL, o.Params, page, dialect)
		if err != nil {
			return nil, err
		}
		o.Query = q
	} else {
		filters := make(map[string][]dataquery.Op, len(d.Filters))
		for col, ops := range d.Filters {
			for _, name := range ops {
				op, err := dataquery.ParseOp(name)
				if err != nil {
					return nil, err
				}
				filters[col] = append(filters[col], op)
			}
		}
		o.Table = &dataapi.TableOptions{Table: d.Table, Columns: d.Columns, Filters: filters, Order: d.Order, Orders: d.QueryOrders(), Page: page, Dialect: dialect,
			RowFilters: d.RowFilterColumns()}
	}
	return dataapi.New(o)
}
