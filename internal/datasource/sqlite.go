package datasource

import (
	"context"
	"database/sql"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"net/url"
	"strconv"
	"strings"
	"time"

	"modernc.org/sqlite"
	sqlite3 "modernc.org/sqlite/lib"

	"github.com/levee-gw/levee/internal/valuekind"
)

// sqliteSource is a SQLite file opened read-only twice over: mode=ro (the
// connection cannot write, and a missing file is an error, not a new empty
// database) and PRAGMA query_only. database/sql's pool is capped at
// MaxConns; a statement's timeout is its context, which modernc turns into
// sqlite3_interrupt.
type sqliteSource struct {
	opts Options
	db   *sql.DB
}

func openSQLite(opts Options) (*sqliteSource, error) {
	if err := checkSQLitePath(opts.DSN); err != nil {
		return nil, fmt.Errorf("datasource: %w", err)
	}
	q := url.Values{}
	q.Set("mode", "ro")
	q.Add("_pragma", "query_only(1)")
	// A writer holding the lock: wait for it up to the statement timeout.
	q.Add("_pragma", "busy_timeout("+strconv.FormatInt(opts.StatementTimeout.Milliseconds(), 10)+")")
	db, err := sql.Open("sqlite", "file:"+(&url.URL{Path: opts.DSN}).EscapedPath()+"?"+q.Encode())
	if err != nil {
		return nil, fmt.Errorf("datasource: sqlite %s: %w", opts.DSN, err)
	}
	db.SetMaxOpenConns(opts.MaxConns)
	db.SetMaxIdleConns(opts.MaxConns)
	return &sqliteSource{opts: opts, db: db}, nil
}

// checkSQLitePath refuses a path levee would not open as a plain file:
// empty, in URI form, or with a query that could change how it is opened.
func checkSQLitePath(path string) error {
	if path == "" || strings.HasPrefix(path, "file:") || strings.Contains(path, "?") {
		return fmt.Errorf("sqlite path %q: want a plain file path (no file: URI, no ?)", path)
	}
	return nil
}

func (s *sqliteSource) close() { _ = s.db.Close() }

func (s *sqliteSource) stats() PoolStats {
	st := s.db.Stats()
	return PoolStats{Max: st.MaxOpenConnections, Open: st.OpenConnections, InUse: st.InUse, Idle: st.Idle}
}

// sqliteArgs converts the arguments: time.Time as RFC 3339 text in UTC.
func sqliteArgs(args []any) []any {
	out := make([]any, len(args))
	for i, a := range args {
		if t, ok := a.(time.Time); ok {
			out[i] = t.UTC().Format(time.RFC3339Nano)
			continue
		}
		out[i] = a
	}
	return out
}

func (s *sqliteSource) query(ctx context.Context, q Query, timeout time.Duration, r *Rows) error {
	// SQLite has no server to time out first: the deadline is the timeout.
	qctx, cancel := context.WithTimeout(ctx, timeout)
	rows, err := s.db.QueryContext(qctx, q.SQL, sqliteArgs(q.Args)...)
	if err != nil {
		defer cancel()
		return classifySQLite(ctx, qctx, err)
	}
	cts, err := rows.ColumnTypes()
	if err != nil {
		rows.Close()
		cancel()
		return classifySQLite(ctx, qctx, err)
	}
	r.cols = make([]Column, len(cts))
	for i, ct := range cts {
		r.cols[i] = sqliteColumn(ct.Name(), ct.DatabaseTypeName())
	}
	p := &sqliteRows{rows: rows, ctx: ctx, qctx: qctx, cancel: cancel, cols: r.cols,
		raw: make([]any, len(cts)), ptrs: make([]any, len(cts))}
	for i := range p.raw {
		p.ptrs[i] = &p.raw[i]
	}
	r.vals = make([]any, len(cts))
	r.impl = p
	return nil
}

// sqliteColumn maps a declared type to a kind by its name (SQLite's own
// affinity rules decide storage, not what the values mean).
func sqliteColumn(name, decl string) Column {
	t := strings.ToUpper(strings.TrimSpace(decl))
	base := t
	if i := strings.IndexByte(base, '('); i >= 0 {
		base = strings.TrimSpace(base[:i])
	}
	kind := valuekind.String
	switch base {
	case "INT", "INTEGER", "BIGINT", "SMALLINT", "TINYINT", "MEDIUMINT", "INT2", "INT4", "INT8", "UNSIGNED BIG INT":
		kind = valuekind.Int64
	case "REAL", "DOUBLE", "DOUBLE PRECISION", "FLOAT":
		kind = valuekind.Float64
	case "BOOLEAN", "BOOL":
		kind = valuekind.Bool
	case "NUMERIC", "DECIMAL":
		kind = valuekind.Numeric
	case "DATE":
		kind = valuekind.Date
	case "DATETIME", "TIMESTAMP", "TIMESTAMPTZ":
		kind = valuekind.Timestamp
	case "UUID":
		kind = valuekind.UUID
	case "BLOB", "BYTEA":
		kind = valuekind.Bytes
	case "JSON", "JSONB":
		kind = valuekind.JSON
	}
	return Column{Name: name, Type: t, Kind: kind}
}

type sqliteRows struct {
	rows   *sql.Rows
	ctx    context.Context
	qctx   context.Context
	cancel context.CancelFunc
	cols   []Column
	raw    []any // scanned driver values
	ptrs   []any // &raw[i], reused for every row
	done   bool
	e      error
}

func (p *sqliteRows) next(vals []any) bool {
	if p.done {
		return false
	}
	if !p.rows.Next() {
		p.done = true
		if err := p.rows.Err(); err != nil {
			p.e = classifySQLite(p.ctx, p.qctx, err)
		}
		return false
	}
	if err := p.rows.Scan(p.ptrs...); err != nil {
		p.done = true
		p.e = classifySQLite(p.ctx, p.qctx, err)
		return false
	}
	for i, v := range p.raw {
		nv, err := sqliteValue(p.cols[i].Kind, v)
		if err != nil {
			p.done = true
			p.e = &QueryError{Err: fmt.Errorf("column %q (%s): %w", p.cols[i].Name, p.cols[i].Type, err)}
			return false
		}
		vals[i] = nv
	}
	return true
}

// sqliteValue normalises a value by its column's kind. SQLite is
// dynamically typed: a value that does not fit its column's kind (text in
// an INTEGER column) is passed on as what it is, which is always one of
// the vocabulary's types.
func sqliteValue(kind string, v any) (any, error) {
	switch kind {
	case valuekind.Bool:
		if n, ok := v.(int64); ok {
			return n != 0, nil
		}
	case valuekind.Numeric:
		switch n := v.(type) {
		case int64:
			return strconv.FormatInt(n, 10), nil
		case float64:
			return strconv.FormatFloat(n, 'f', -1, 64), nil
		}
	case valuekind.Date:
		if t, ok := v.(time.Time); ok {
			return t.UTC().Format(time.DateOnly), nil
		}
	case valuekind.Timestamp:
		if t, ok := v.(time.Time); ok && t.Location() != time.UTC {
			return t.UTC(), nil
		}
	case valuekind.UUID:
		if b, ok := v.([]byte); ok && len(b) == 16 {
			return uuidText(b), nil
		}
	case valuekind.JSON:
		switch j := v.(type) {
		case string:
			if !json.Valid([]byte(j)) {
				return nil, errors.New("invalid JSON")
			}
			return json.RawMessage(j), nil
		case []byte:
			if !json.Valid(j) {
				return nil, errors.New("invalid JSON")
			}
			return json.RawMessage(j), nil
		}
	}
	if t, ok := v.(time.Time); ok && t.Location() != time.UTC {
		return t.UTC(), nil
	}
	return v, nil
}

func uuidText(b []byte) string {
	var t [36]byte
	hex.Encode(t[0:8], b[0:4])
	t[8] = '-'
	hex.Encode(t[9:13], b[4:6])
	t[13] = '-'
	hex.Encode(t[14:18], b[6:8])
	t[18] = '-'
	hex.Encode(t[19:23], b[8:10])
	t[23] = '-'
	hex.Encode(t[24:36], b[10:16])
	return string(t[:])
}

func (p *sqliteRows) err() error { return p.e }

func (p *sqliteRows) close() error {
	err := p.rows.Close()
	p.cancel()
	if err != nil && !p.done {
		return classifySQLite(p.ctx, p.qctx, err)
	}
	return nil
}

// classifySQLite sorts a SQLite error into the package's errors.
func classifySQLite(ctx, qctx context.Context, err error) error {
	if ctx.Err() != nil {
		return ctx.Err()
	}
	var se *sqlite.Error
	if errors.As(err, &se) {
		switch se.Code() & 0xff {
		case sqlite3.SQLITE_INTERRUPT:
			if qctx.Err() != nil {
				return fmt.Errorf("%w: %v", ErrStatementTimeout, err)
			}
		case sqlite3.SQLITE_CANTOPEN, sqlite3.SQLITE_NOTADB, sqlite3.SQLITE_CORRUPT, sqlite3.SQLITE_IOERR:
			return fmt.Errorf("%w: %w", ErrUnavailable, err)
		case sqlite3.SQLITE_BUSY, sqlite3.SQLITE_LOCKED:
			return fmt.Errorf("%w: %w", ErrUnavailable, err)
		}
		return &QueryError{Err: err}
	}
	if qctx.Err() != nil {
		if errors.Is(qctx.Err(), context.DeadlineExceeded) {
			return fmt.Errorf("%w: %v", ErrStatementTimeout, err)
		}
	}
	if errors.Is(err, sql.ErrConnDone) {
		return ErrClosed
	}
	if strings.Contains(err.Error(), "sql: database is closed") {
		return ErrClosed
	}
	return &QueryError{Err: err}
}

func (s *sqliteSource) describe(ctx context.Context, query string, nargs int) ([]Column, error) {
	// Prepared inside SELECT * FROM (...) LIMIT 0 so nothing is scanned;
	// SQLite carries the declared types through the subquery.
	args := make([]any, nargs)
	rows, err := s.db.QueryContext(ctx, "SELECT * FROM ("+strings.TrimRight(strings.TrimSpace(query), ";")+"\n) LIMIT 0", args...)
	if err != nil {
		return nil, classifySQLite(ctx, ctx, err)
	}
	defer rows.Close()
	cts, err := rows.ColumnTypes()
	if err != nil {
		return nil, classifySQLite(ctx, ctx, err)
	}
	cols := make([]Column, len(cts))
	for i, ct := range cts {
		cols[i] = sqliteColumn(ct.Name(), ct.DatabaseTypeName())
	}
	return cols, nil
}

func (s *sqliteSource) tableColumns(ctx context.Context, table string) ([]Column, error) {
	parts, err := splitTable(table)
	if err != nil {
		return nil, err
	}
	for i, p := range parts {
		parts[i] = `"` + strings.ReplaceAll(p, `"`, `""`) + `"`
	}
	cols, err := s.describe(ctx, "SELECT * FROM "+strings.Join(parts, "."), 0)
	if err != nil {
		return nil, err
	}
	// PRAGMA table_info names the NOT NULL columns (its notnull column);
	// "schema".table_info("table") for a qualified name.
	pragma := "PRAGMA table_info(" + parts[len(parts)-1] + ")"
	if len(parts) == 2 {
		pragma = "PRAGMA " + parts[0] + ".table_info(" + parts[1] + ")"
	}
	rows, err := s.db.QueryContext(ctx, pragma)
	if err != nil {
		return nil, classifySQLite(ctx, ctx, err)
	}
	defer rows.Close()
	// A table's one INTEGER PRIMARY KEY column is its rowid (or, WITHOUT
	// ROWID, a key SQLite holds NOT NULL): never NULL though table_info
	// says notnull 0.
	pks, pkName := 0, ""
	for rows.Next() { // one row per column of the table
		var (
			cid, notnull, pk int64
			name, typ        string
			dflt             any
		)
		if err := rows.Scan(&cid, &name, &typ, &notnull, &dflt, &pk); err != nil {
			return nil, &QueryError{Err: err}
		}
		if pk != 0 {
			pks++
			if strings.EqualFold(typ, "INTEGER") {
				pkName = name
			}
		}
		for i := range cols {
			if cols[i].Name == name && notnull != 0 {
				cols[i].NotNull = true
			}
		}
	}
	if err := rows.Err(); err != nil {
		return nil, classifySQLite(ctx, ctx, err)
	}
	if pks == 1 && pkName != "" {
		for i := range cols {
			if cols[i].Name == pkName {
				cols[i].NotNull = true
			}
		}
	}
	return cols, nil
}

// splitTable splits "schema.table" (or "table") into its identifiers.
func splitTable(table string) ([]string, error) {
	parts := strings.Split(table, ".")
	if len(parts) > 2 {
		return nil, fmt.Errorf("datasource: table %q: at most schema.table", table)
	}
	for _, p := range parts {
		if p == "" || strings.IndexByte(p, 0) >= 0 {
			return nil, fmt.Errorf("datasource: table %q: empty or NUL identifier", table)
		}
	}
	return parts, nil
}
