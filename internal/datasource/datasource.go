// Package datasource is a database levee queries on behalf of data APIs:
// one bounded pool per source (PostgreSQL through pgx's pgxpool, SQLite
// through modernc.org/sqlite), every query read-only with a statement
// timeout enforced in the database and by a client-side deadline, rows
// streamed one at a time and normalised to the value vocabulary the
// encoders render (nil, bool, int64, float64, string, time.Time in UTC,
// []byte, json.RawMessage), and failures sorted into a few typed errors the
// proxy maps to HTTP answers.
//
// It builds no SQL from requests (internal/dataquery does, as text plus
// bind arguments) and encodes nothing (internal/dataformat does).
package datasource

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
)

// Defaults applied by Open to the zero values of Options.
const (
	DefaultMaxConns         = 8
	DefaultStatementTimeout = 2 * time.Second
	DefaultConnectTimeout   = 2 * time.Second
)

// Options configure a Source. The gateway builds them from the
// configuration's data_sources entry.
type Options struct {
	// Driver is "postgres" or "sqlite".
	Driver string
	// DSN is a libpq URL or key=value DSN for postgres, a file path for
	// sqlite (opened read-only; the file must exist).
	DSN string
	// MaxConns is the hard cap on connections open to the database at once
	// (0: DefaultMaxConns). For PostgreSQL it bounds sockets, not just
	// pooled connections: a connection being closed holds its slot until
	// its socket is closed.
	MaxConns int
	// StatementTimeout is each query's limit unless Query.Timeout says
	// otherwise (0: DefaultStatementTimeout).
	StatementTimeout time.Duration
	// ConnectTimeout bounds opening one connection (0:
	// DefaultConnectTimeout): a database that is down answers
	// ErrUnavailable within it.
	ConnectTimeout time.Duration
}

// Query is one statement and its bind arguments.
type Query struct {
	// SQL is one SELECT (or other row-returning, read-only statement) with
	// positional placeholders: $1, $2... for PostgreSQL, ? or ?NNN for
	// SQLite.
	SQL string
	// Args are the bind arguments, each nil, int64, float64, bool, string
	// or time.Time; anything else is refused before the database is
	// reached. A date argument is a time.Time at 00:00 UTC, a uuid its
	// canonical string. PostgreSQL converts each to the placeholder's type
	// (int2/4/8, numeric, float, text, bool, date, timestamp, timestamptz,
	// uuid). SQLite has no such types: time.Time is bound as RFC 3339 text
	// in UTC ("2025-01-02T03:04:05Z", fractional seconds only when
	// present), so timestamps are expected stored that way; compare a
	// date column with date(?).
	Args []any
	// Timeout is this statement's timeout (0: the source's).
	Timeout time.Duration
}

// Column describes one result column.
type Column struct {
	// Name is the column's name as the database reports it.
	Name string
	// Type is the database's own type name: PostgreSQL's pg_type.typname
	// (int4, numeric, timestamptz, ...), SQLite's declared type in upper
	// case ("" for an expression).
	Type string
	// Kind is what the column's values are, one of package valuekind's kinds: the
	// OpenAPI schema and table-mode filter parsing follow it.
	Kind string
	// NotNull is true when the database's catalogue says the column holds
	// no NULL: a table's (or view's base) column declared NOT NULL, read by
	// TableColumns only (PostgreSQL's pg_attribute.attnotnull, SQLite's
	// PRAGMA table_info). A statement's column may be NULL whatever its
	// table says (an outer join, an aggregate of no rows): Describe and
	// Query leave it false, as they do for every column not known NOT NULL.
	NotNull bool
}

// PoolStats is a snapshot of a source's connections, for the metric
// levee_data_pool_connections{source,state}.
type PoolStats struct {
	Max   int // the cap, Options.MaxConns
	Open  int // open (and, for PostgreSQL, being opened)
	InUse int // held by a query
	Idle  int // open and free
}

// Errors a query can end with. The proxy maps them (see docs):
//
//	ErrUnavailable      503 data_source_unavailable, Retry-After (serve stale if cached)
//	ErrStatementTimeout 504 statement_timeout (serve stale if cached)
//	ErrPoolTimeout      503 db_pool_exhausted, Retry-After
//	*QueryError         500 query_failed, or 400 when ClientFault (the database refused a value)
//	context.Canceled    499: the caller's own context ended (client gone)
var (
	// ErrUnavailable: the database cannot be reached or is shutting down
	// (connection refused or timed out, lost connection, too many
	// connections, SQLite file missing or locked). Answered within the
	// connect timeout; the source recovers by itself once the database is
	// back.
	ErrUnavailable = errors.New("data source unavailable")
	// ErrStatementTimeout: the statement ran past its timeout and was
	// cancelled in the database.
	ErrStatementTimeout = errors.New("statement timeout")
	// ErrPoolTimeout: no connection came free within the query's time
	// budget (timeout plus grace) while the pool was at its cap.
	ErrPoolTimeout = errors.New("no database connection free within the statement timeout")
	// ErrClosed: the Source was closed.
	ErrClosed = errors.New("data source closed")
)

// QueryError is any other failure of a statement: a syntax error, an
// unknown column, a write refused by the read-only transaction, a value the
// database refused, an argument of an unsupported type, or a column value
// that cannot be normalised.
type QueryError struct {
	// SQLState is PostgreSQL's SQLSTATE ("" for SQLite and for errors
	// raised before the database answered).
	SQLState string
	// Err is the underlying error.
	Err error
	// Arg is the 1-based position in Query.Args of the argument the
	// database (or the driver) refused, when it is known: PostgreSQL says
	// which bind parameter it could not read ("unnamed portal parameter
	// $2" in the error's context); a value refused later, while the
	// statement runs (a division by zero), names none. 0 when not known.
	Arg int

	clientFault bool // an argument the driver could not bind to its placeholder's type
}

func (e *QueryError) Error() string {
	if e.SQLState != "" {
		return fmt.Sprintf("query failed (SQLSTATE %s): %v", e.SQLState, e.Err)
	}
	return "query failed: " + e.Err.Error()
}

func (e *QueryError) Unwrap() error { return e.Err }

// ClientFault reports whether the database refused a value the request
// supplied (SQLSTATE class 22, data exception: out of range, invalid text
// for the type, division by zero), or the driver could not bind it to its
// placeholder's type, so the answer is a 400, not a 500.
func (e *QueryError) ClientFault() bool {
	return e.clientFault || len(e.SQLState) == 5 && e.SQLState[:2] == "22"
}

// Source is one data source's pool. It is safe for concurrent use.
type Source struct {
	opts    Options
	backend backend
}

// backend is a driver's implementation behind Source.
type backend interface {
	query(ctx context.Context, q Query, timeout time.Duration, r *Rows) error
	describe(ctx context.Context, sql string, nargs int) ([]Column, error)
	tableColumns(ctx context.Context, table string) ([]Column, error)
	stats() PoolStats
	close()
}

// rowsImpl is a driver's open result behind Rows.
type rowsImpl interface {
	// next decodes the next row into vals; false at the end or on an error
	// (returned by err).
	next(vals []any) bool
	err() error
	close() error
}

// Check reports what Open would refuse in a driver and its DSN (a
// postgres DSN that does not parse, a sqlite path in URI form), without
// building anything: the configuration calls it, so that `levee validate`
// refuses what `levee run` refuses. Errors do not echo a password.
func Check(driver, dsn string) error {
	switch driver {
	case "postgres":
		if _, err := pgxpool.ParseConfig(dsn); err != nil {
			return fmt.Errorf("postgres dsn: %w", err)
		}
		return nil
	case "sqlite":
		return checkSQLitePath(dsn)
	}
	return fmt.Errorf("unknown driver %q (postgres or sqlite)", driver)
}

// Open validates opts and builds the source's pool without connecting: a
// database that is down at start is not an error here but ErrUnavailable
// from the queries until it is back.
func Open(ctx context.Context, opts Options) (*Source, error) {
	if opts.MaxConns < 0 || opts.StatementTimeout < 0 || opts.ConnectTimeout < 0 {
		return nil, fmt.Errorf("datasource: negative max_conns, statement_timeout or connect_timeout")
	}
	if opts.MaxConns == 0 {
		opts.MaxConns = DefaultMaxConns
	}
	if opts.StatementTimeout == 0 {
		opts.StatementTimeout = DefaultStatementTimeout
	}
	if opts.ConnectTimeout == 0 {
		opts.ConnectTimeout = DefaultConnectTimeout
	}
	s := &Source{opts: opts}
	var err error
	switch opts.Driver {
	case "postgres":
		s.backend, err = openPostgres(opts)
	case "sqlite":
		s.backend, err = openSQLite(opts)
	default:
		return nil, fmt.Errorf("datasource: unknown driver %q (postgres or sqlite)", opts.Driver)
	}
	if err != nil {
		return nil, err
	}
	return s, nil
}

// Close closes the pool's connections. It waits for queries in flight to
// end (their deadlines bound that), at most the default statement budget
// plus the connect timeout; safe to call more than once.
func (s *Source) Close() { s.backend.close() }

// Stats returns the pool's connection counts.
func (s *Source) Stats() PoolStats { return s.backend.stats() }

// Query runs q and returns its rows, streaming: the caller reads them with
// Next and Values and must Close them, which ends the transaction and
// returns the connection. The wait for a connection, the statement and the
// reading of its rows are bounded by ctx and by the timeout plus a short
// grace (the client-side deadline, for a database that does not answer).
// Errors are ErrUnavailable, ErrStatementTimeout, ErrPoolTimeout, a
// *QueryError, or ctx's own error; so is Rows.Err.
func (s *Source) Query(ctx context.Context, q Query) (*Rows, error) {
	for i, a := range q.Args {
		switch a.(type) {
		case nil, int64, float64, bool, string, time.Time:
		default:
			return nil, &QueryError{Err: fmt.Errorf("argument %d has unsupported type %T", i+1, a)}
		}
	}
	timeout := q.Timeout
	if timeout <= 0 {
		timeout = s.opts.StatementTimeout
	}
	r := &Rows{}
	if err := s.backend.query(ctx, q, timeout, r); err != nil {
		return nil, err
	}
	// Read the first row here, so that a statement failing before its
	// first row (a timeout, the database going away, a refused value) is
	// Query's error, answered with a proper status, not a stream cut short.
	if r.impl.next(r.vals) {
		r.pending = true
	} else if err := r.impl.err(); err != nil {
		_ = r.impl.close()
		return nil, err
	}
	return r, nil
}

// Describe returns the columns a query would return, without running it
// (PostgreSQL prepares it; SQLite prepares it inside SELECT * FROM (...)
// LIMIT 0). nargs is the number of bind arguments the SQL takes: for
// PostgreSQL a different count of placeholders is an error.
func (s *Source) Describe(ctx context.Context, sql string, nargs int) ([]Column, error) {
	ctx, cancel := context.WithTimeout(ctx, s.opts.ConnectTimeout+s.opts.StatementTimeout)
	defer cancel()
	return s.backend.describe(ctx, sql, nargs)
}

// TableColumns returns a table's (or view's) columns in order. table may be
// schema-qualified (schema.table); each part is quoted as an identifier, so
// it is matched exactly (case included).
func (s *Source) TableColumns(ctx context.Context, table string) ([]Column, error) {
	ctx, cancel := context.WithTimeout(ctx, s.opts.ConnectTimeout+s.opts.StatementTimeout)
	defer cancel()
	return s.backend.tableColumns(ctx, table)
}

// Rows is a query's result, read one row at a time. It is not safe for
// concurrent use.
type Rows struct {
	cols    []Column
	vals    []any
	impl    rowsImpl
	err     error
	pending bool // the first row, read by Query, is in vals
	closed  bool
}

// Columns returns the result's columns. The slice is shared with other
// queries of the same SQL: do not modify it.
func (r *Rows) Columns() []Column { return r.cols }

// Next advances to the next row; false at the end of the rows or on an
// error (see Err). A false Next does not release the connection: Close
// does.
func (r *Rows) Next() bool {
	if r.closed || r.err != nil {
		return false
	}
	if r.pending {
		r.pending = false
		return true
	}
	if !r.impl.next(r.vals) {
		r.err = r.impl.err()
		return false
	}
	return true
}

// Values returns the current row's values, one per column, each of the
// types listed for the column's Kind or nil for NULL. The slice and its
// []byte values are valid until the next call to Next or Close.
func (r *Rows) Values() []any { return r.vals }

// Err returns the error that ended the rows, nil after a complete read.
func (r *Rows) Err() error { return r.err }

// Close ends the query (cancelling it in the database when rows are left),
// ends its transaction and returns the connection. It returns Err, or an
// error closing when there was none. Safe to call more than once.
func (r *Rows) Close() error {
	if r.closed {
		return r.err
	}
	r.closed = true
	if err := r.impl.close(); err != nil && r.err == nil {
		r.err = err
	}
	return r.err
}

// grace is how long past the statement timeout the client-side deadline
// falls: the database's own timeout fires first and answers with its
// error; the deadline is for a database that does not answer at all.
func grace(timeout time.Duration) time.Duration {
	return 100*time.Millisecond + timeout/10
}
