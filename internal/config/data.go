package config

import (
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"fmt"
	"math"
	"slices"
	"time"

	"github.com/levee-gw/levee/internal/dataformat"
	"github.com/levee-gw/levee/internal/dataquery"
	"github.com/levee-gw/levee/internal/datasource"
)

// This file reads the data APIs' configuration: `data_sources` and a
// route's `data` block (a SQL query or a table published as an API). The
// fields are described in fields.go like every other; what is here are
// the types, the rules across fields, and the check that a route's SQL
// and its declared parameters agree (dataquery compiles it exactly as
// `levee run` will).

// The data source drivers.
const (
	DriverPostgres = "postgres"
	DriverSQLite   = "sqlite"
)

var dataDrivers = []string{DriverPostgres, DriverSQLite}

// The answer formats of data routes.
var dataFormats = dataformat.FormatNames()

// dataParamTypes are the types a SQL-mode parameter may have
// (dataquery.Kind's names).
var dataParamTypes = dataquery.KindNames()

// dataColumnKinds are the kinds a route's column_types may declare
// (datasource's column kinds).
var dataColumnKinds = datasource.KindNames()

// dataScalarForms are the forms of a parameter's default, min and max:
// written as the file pleases, parsed by the parameter's type.
var dataScalarForms = []field{{kind: kindString}, {kind: kindNumber, flo: -math.MaxFloat64, fhi: math.MaxFloat64}, {kind: kindBool}}

// dataIdentPattern is the schema's rule for a parameter name (what
// dataquery accepts after a colon).
const dataIdentPattern = `^[A-Za-z_][A-Za-z0-9_]{0,62}$`

// Bounds of data sources and data routes.
const (
	maxDataConns = 1000
	maxDataRows  = 10_000_000
	maxDataBytes = 1 << 30
	// maxDSNBytes bounds a dsn_file: one line.
	maxDSNBytes = 4096
)

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

// RouteData is a route's `data` block: the route answers from a data
// source instead of an upstream.
type RouteData struct {
	// Source names the data source (`source`, required).
	Source string
	// SQL is the statement of a SQL-mode route (`sql`): one SELECT whose
	// :name placeholders are exactly the declared Params. Exactly one of
	// SQL and Table.
	SQL string
	// Params are the SQL-mode parameters by name (`params`), in file order
	// in ParamOrder.
	Params     map[string]*DataParam
	ParamOrder []string
	// Table is a table-mode route's table or view (`table`, may be
	// schema.table); Columns the allow-listed columns it answers with
	// (`columns`, required with table); Filters, per column, the
	// operators a request may filter it with (`filters`); Order the
	// columns it is ordered by (`order`, each may end in " desc").
	Table   string
	Columns []string
	Filters map[string][]string
	Order   []string
	// ColumnTypes declares the answer's columns and their kinds
	// (`column_types`, column -> one of datasource's column kinds), in
	// file order in ColumnTypeOrder: the OpenAPI document then shows them
	// instead of asking the database. A table-mode route must declare
	// every one of its columns and only those; a SQL-mode route declares
	// its statement's columns in order (not checked against the database).
	// nil: the document asks the database.
	ColumnTypes     map[string]string
	ColumnTypeOrder []string
	// Page pages JSON answers by keyset (`page`); nil: not paged.
	Page *DataPage
	// MaxRows and MaxBytes cap every answer (`limits.max_rows`, default
	// DefaultDataMaxRows 10000; `limits.max_bytes`, default
	// DefaultDataMaxBytes 8MiB).
	MaxRows  int
	MaxBytes int64
	// Formats are the answer formats offered, the first the default
	// (`formats`, default [json, ndjson, csv]).
	Formats []string
	// Cache caches answers per parameter set (`cache`); nil: no cache.
	Cache *DataCache
	// StatementTimeout overrides the source's (`statement_timeout`), e.g.
	// for a long export; 0: the source's.
	StatementTimeout time.Duration
	// SendTimeout bounds each write of the answer to the client
	// (`send_timeout`), so a client that stops reading cannot hold a
	// database connection. Default DefaultDataSendTimeout (10s).
	SendTimeout time.Duration
}

// DataParam is one declared parameter of a SQL-mode route
// (`params.<name>`): see dataquery.Param for the rules of each field.
type DataParam struct {
	Type     string
	List     bool
	Required bool
	// Default, Min and Max are as written in the file (a number, a
	// boolean or a string), parsed by the parameter's type.
	Default  string
	Min, Max string
	MaxLen   int
	MaxItems int
}

// DataPage is a data route's `page`: keyset pagination of JSON answers.
type DataPage struct {
	// Keyset are the columns that order the rows and make each row's
	// place unique (`keyset`, required; none may be NULL in any row).
	Keyset []string
	// Default is the page size without limit= (`default`, default 100);
	// Max the largest limit= accepted (`max`, default 1000).
	Default int
	Max     int
}

// DataCache is a data route's `cache`.
type DataCache struct {
	// TTL is how long an answer is served from the cache (`ttl`,
	// required).
	TTL time.Duration
	// StaleIfError is how long past TTL an answer is still served while
	// the source fails (`stale_if_error`, default 0: never).
	StaleIfError time.Duration
}

// Version identifies the route's data definition: every field that
// changes what the route answers goes into it. Cursors and cache keys are
// bound to it, so a changed route refuses old cursors and never serves an
// old answer. TestDataVersionCoversEveryField holds it to the struct.
func (d *RouteData) Version() string {
	h := sha256.New()
	str := func(s string) {
		var n [8]byte
		binary.LittleEndian.PutUint64(n[:], uint64(len(s)))
		h.Write(n[:])
		h.Write([]byte(s))
	}
	num := func(v int64) {
		var n [8]byte
		binary.LittleEndian.PutUint64(n[:], uint64(v))
		h.Write(n[:])
	}
	strs := func(ss []string) {
		num(int64(len(ss)))
		for _, s := range ss {
			str(s)
		}
	}
	str(d.Source)
	str(d.SQL)
	strs(d.ParamOrder)
	for _, name := range d.ParamOrder {
		p := d.Params[name]
		if p == nil {
			str("")
			continue
		}
		str(p.Type)
		str(fmt.Sprint(p.List, p.Required))
		str(p.Default)
		str(p.Min)
		str(p.Max)
		num(int64(p.MaxLen))
		num(int64(p.MaxItems))
	}
	str(d.Table)
	strs(d.Columns)
	cols := make([]string, 0, len(d.Filters))
	for c := range d.Filters {
		cols = append(cols, c)
	}
	slices.Sort(cols)
	for _, c := range cols {
		str(c)
		strs(d.Filters[c])
	}
	strs(d.Order)
	if d.Page != nil {
		strs(d.Page.Keyset)
		num(int64(d.Page.Default))
		num(int64(d.Page.Max))
	}
	num(int64(d.MaxRows))
	num(d.MaxBytes)
	strs(d.Formats)
	// Cache, StatementTimeout and SendTimeout change how the route
	// answers, not what: they are left out, so changing them keeps the
	// cursors clients hold.
	return hex.EncodeToString(h.Sum(nil)[:8])
}

func defaultDataSource(name string) *DataSource {
	return withDefaults(dataSourceBlock, &DataSource{Name: name})
}

func defaultRouteData() *RouteData {
	return withDefaults(dataLimitsBlock, withDefaults(dataBlock, &RouteData{Formats: DefaultDataFormats()})) // limits binds fields of RouteData itself
}

// DefaultDataFormats is RouteData.Formats when omitted. A new slice each
// call.
func DefaultDataFormats() []string { return slices.Clone(dataFormats) }
