package config

import (
	"fmt"
	"os"
	"strings"
	"time"

	"github.com/levee-gw/levee/internal/config/engine"
	"github.com/levee-gw/levee/internal/datasource"
	"gopkg.in/yaml.v3"
)

// The data_sources block (`data_sources`): each database data routes
// query, its connection pool and the limits in front of it.

var dataSourceBlock = engine.NewBlock(
	engine.Field{Name: "driver", Kind: engine.KindEnum, Enum: dataDrivers, Required: true, Doc: "the database: postgres or sqlite",
		Bind: engine.At(func(d *DataSource) *string { return &d.Driver })},
	engine.Field{Name: "dsn", Kind: engine.KindString, NonEmpty: true, Doc: "postgres: a libpq URL or key=value DSN (or dsn_file)", Secret: true,
		Bind: engine.At(func(d *DataSource) *string { return &d.DSN })},
	engine.Field{Name: "dsn_file", Kind: engine.KindString, NonEmpty: true, Doc: "postgres: a file whose first line is the DSN",
		Check: checkReadable, Bind: engine.At(func(d *DataSource) *string { return &d.DSNFile }), NotSecret: "a path; the DSN it holds shows as dsn, redacted"},
	engine.Field{Name: "path", Kind: engine.KindString, NonEmpty: true, Doc: "sqlite: the database file, opened read-only",
		Check: checkReadable, Bind: engine.At(func(d *DataSource) *string { return &d.Path })},
	engine.Field{Name: "max_conns", Kind: engine.KindInt, Lo: 1, Hi: maxDataConns, Def: DefaultDataMaxConns, Doc: "hard cap on connections to the source",
		Bind: engine.At(func(d *DataSource) *int { return &d.MaxConns })},
	engine.Field{Name: "statement_timeout", Kind: engine.KindDuration, Def: DefaultDataStatementTimeout, Doc: "each statement's timeout, enforced in the database",
		Bind: engine.At(func(d *DataSource) *time.Duration { return &d.StatementTimeout })},
	engine.Field{Name: "connect_timeout", Kind: engine.KindDuration, Def: DefaultDataConnectTimeout, Doc: "opening one connection; past it: 503 data_source_unavailable",
		Bind: engine.At(func(d *DataSource) *time.Duration { return &d.ConnectTimeout })},
	engine.Field{Name: "limits", Kind: engine.KindBlock, Sub: limitsBlock, Doc: "admission in front of the pool; adaptive up to max_conns when omitted; queue_timeout defaults to 500ms here"},
)

// dataSources reads `data_sources` into c and returns the names declared.
func (p *parser) dataSources(c *Config, n *yaml.Node) map[string]bool {
	const path = "data_sources"
	if n.Kind == yaml.AliasNode {
		return nil
	}
	if n.Kind != yaml.MappingNode {
		p.Add(n, path, "must be a mapping of data source names to data sources, got %s", engine.Describe(n))
		return nil
	}
	declared := map[string]bool{}
	c.DataSources = map[string]*DataSource{}
	for _, e := range p.Pairs(path, n) {
		sp := engine.Key(path, e.Key)
		declared[e.Key] = true
		if !validName(e.Key) {
			p.Add(e.K, sp, "name %s, got %s", nameRule, engine.Quote(e.Key))
		}
		if _, clash := c.Upstreams[e.Key]; clash {
			p.Add(e.K, sp, "%s is also an upstream's name; a data source is an upstream to metrics and the admin API, so the names must differ", engine.Quote(e.Key))
		}
		c.DataSources[e.Key] = p.dataSource(sp, e.Key, e.V)
		c.DataSourceOrder = append(c.DataSourceOrder, e.Key)
	}
	return declared
}

// dataSource reads one `data_sources.<name>`.
func (p *parser) dataSource(path, name string, n *yaml.Node) *DataSource {
	d := defaultDataSource(name)
	f, ok := p.Block(path, n, dataSourceBlock)
	if !ok {
		d.Limits = dataSourceLimits(d.MaxConns, nil, false)
		return d
	}
	bad := p.Bind(f, n, path, dataSourceBlock, d)
	switch {
	case bad["driver"]:
	case d.Driver == DriverPostgres:
		for _, k := range []string{"path"} {
			if f[k] != nil {
				p.Add(f[k], engine.Key(path, k), "only applies to driver sqlite (postgres takes dsn or dsn_file)")
			}
		}
		switch {
		case f["dsn"] != nil && f["dsn_file"] != nil:
			p.Add(f["dsn_file"], engine.Key(path, "dsn_file"), "give dsn or dsn_file, not both")
		case f["dsn"] == nil && f["dsn_file"] == nil:
			p.Add(n, engine.Key(path, "dsn"), "required for driver postgres (or dsn_file)")
		case f["dsn_file"] != nil && !bad["dsn_file"]:
			if dsn, err := readDSNFile(d.DSNFile); err != nil {
				p.Add(f["dsn_file"], engine.Key(path, "dsn_file"), "%v", err)
			} else {
				d.DSN = dsn
			}
		}
	case d.Driver == DriverSQLite:
		for _, k := range []string{"dsn", "dsn_file"} {
			if f[k] != nil {
				p.Add(f[k], engine.Key(path, k), "only applies to driver postgres (sqlite takes path)")
			}
		}
		if f["path"] == nil {
			p.Add(n, engine.Key(path, "path"), "required for driver sqlite: the database file")
		}
	}
	if f["driver"] != nil && !bad["driver"] && d.Target() != "" {
		if err := datasource.Check(d.Driver, d.Target()); err != nil {
			field := "path"
			if d.Driver == DriverPostgres {
				field = "dsn"
				if d.DSNFile != "" {
					field = "dsn_file"
				}
			}
			p.Add(f[field], engine.Key(path, field), "%v", err)
		}
	}
	var l *Limits
	explicitMax := false
	if v := f["limits"]; v != nil {
		l = p.limits(engine.Key(path, "limits"), v)
		explicitMax = firstKey(v, "max") != nil
		if firstKey(v, "queue_timeout") == nil {
			l.QueueTimeout = DefaultDataQueueTimeout
		}
		lp := engine.Key(path, "limits")
		switch {
		case !l.Adaptive && l.MaxConcurrency > d.MaxConns:
			p.Add(firstKey(v, "max_concurrency"), engine.Key(lp, "max_concurrency"), "must be at most max_conns (%d): a query admitted must find a connection, got %d", d.MaxConns, l.MaxConcurrency)
		case l.Adaptive && explicitMax && l.Max > d.MaxConns:
			p.Add(firstKey(v, "max"), engine.Key(lp, "max"), "must be at most max_conns (%d): a query admitted must find a connection, got %d", d.MaxConns, l.Max)
		}
	}
	d.Limits = dataSourceLimits(d.MaxConns, l, explicitMax)
	return d
}

// dataSourceLimits is a data source's admission limit: l as read (nil
// when the block is omitted: adaptive from min(4, max_conns) to
// max_conns, queue 4 x max_conns, queue_timeout DefaultDataQueueTimeout),
// its adaptive max brought down to max_conns when it was not given.
func dataSourceLimits(maxConns int, l *Limits, explicitMax bool) *Limits {
	if l == nil {
		l = defaultLimits(1, true)
		l.MaxQueue = DefaultDataQueuePerConn * maxConns
		l.QueueTimeout = DefaultDataQueueTimeout
	}
	if l.Adaptive && !explicitMax && l.Max > maxConns {
		l.Max = maxConns
	}
	if l.Adaptive && l.Min > l.Max {
		l.Min = l.Max
	}
	return l
}

// readDSNFile reads a DSN: the file's first line, trimmed.
func readDSNFile(path string) (string, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return "", err
	}
	if len(b) > maxDSNBytes {
		return "", fmt.Errorf("%s is %d bytes; a DSN file holds one line of at most %d", path, len(b), maxDSNBytes)
	}
	line, _, _ := strings.Cut(string(b), "\n")
	if line = strings.TrimSpace(line); line == "" {
		return "", fmt.Errorf("%s holds no DSN on its first line", path)
	}
	return line, nil
}

// The data source drivers.
const (
	DriverPostgres = "postgres"
	DriverSQLite   = "sqlite"
)

var dataDrivers = []string{DriverPostgres, DriverSQLite}

// DataSource is one `data_sources.<name>` entry: a database levee queries
// for data routes through one pool.
type DataSource struct {
	// Name is the source's key in data_sources; data routes name it in
	// data.source. It shares the upstreams' namespace (it is the upstream
	// label of the source's metrics), so no upstream may have it.
	Name string
	// Driver is `postgres` or `sqlite` (required).
	Driver string
	// DSN is PostgreSQL's libpq URL or key=value DSN: `dsn` as written,
	// or the first line of `dsn_file` (read when the file is loaded, so
	// `levee validate` reads it too). Exactly one of the two for
	// postgres; neither for sqlite.
	DSN string
	// DSNFile is `dsn_file` as written ("" when dsn is inline).
	DSNFile string
	// Path is the SQLite database file (`path`, required for sqlite; it
	// must exist and be readable: levee opens it read-only).
	Path string
	// MaxConns is the hard cap on connections levee opens to the source
	// (`max_conns`, 1 to 1000). Default DefaultDataMaxConns (8).
	MaxConns int
	// StatementTimeout bounds each statement, enforced in the database
	// (SET LOCAL statement_timeout) and by a client-side deadline
	// (`statement_timeout`). Default DefaultDataStatementTimeout (2s); a
	// route's data.statement_timeout overrides it.
	StatementTimeout time.Duration
	// ConnectTimeout bounds opening one connection (`connect_timeout`):
	// a database that is down is answered 503 data_source_unavailable
	// within it. Default DefaultDataConnectTimeout (2s).
	ConnectTimeout time.Duration
	// Limits is the admission block in front of the pool (`limits`, as an
	// upstream's). Never nil: without the block, an adaptive limit from
	// min(4, max_conns) to max_conns with a queue of 4 x max_conns. The
	// limit never exceeds max_conns, so a query admitted finds a
	// connection and the refusals come before any wait for one.
	Limits *Limits
}

// Target is what the source connects to: the DSN for postgres, the file
// for sqlite.
func (d *DataSource) Target() string {
	if d.Driver == DriverSQLite {
		return d.Path
	}
	return d.DSN
}

func defaultDataSource(name string) *DataSource {
	return engine.WithDefaults(dataSourceBlock, &DataSource{Name: name})
}

const (
	// DefaultDataMaxConns is DataSource.MaxConns when omitted.
	DefaultDataMaxConns = 8
	// DefaultDataStatementTimeout is DataSource.StatementTimeout when omitted.
	DefaultDataStatementTimeout = 2 * time.Second
	// DefaultDataConnectTimeout is DataSource.ConnectTimeout when omitted.
	DefaultDataConnectTimeout = 2 * time.Second
	// DefaultDataQueuePerConn times max_conns is a data source's queue
	// without a limits block: a few rounds of the pool, past which a
	// refusal now is worth more than a long wait.
	DefaultDataQueuePerConn = 4
	// DefaultDataQueueTimeout is a data source's limits.queue_timeout when
	// omitted (an upstream's is DefaultLimitsQueueTimeout, 50ms). A slot
	// frees only when a query ends, and queries hold a connection for tens
	// to hundreds of milliseconds: a consumer whose turn is next would
	// otherwise be refused while it waits for the slot it is owed. A
	// consumer that floods the queue waits only the short wait of
	// controlled delay (1ms), so the longer timeout is the well-behaved
	// consumers' alone.
	DefaultDataQueueTimeout = 500 * time.Millisecond
)
