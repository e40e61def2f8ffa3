package datasource

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgconn/ctxwatch"
	"github.com/jackc/pgx/v5/pgtype"
	"github.com/jackc/pgx/v5/pgxpool"
)

// pgSource is a PostgreSQL source: a pgxpool whose every connection holds
// one of MaxConns socket slots from dial to close.
//
// A query (pgquery.go) is: acquire (bounded), then BEGIN READ ONLY, SET
// LOCAL statement_timeout, the statement (extended protocol, prepared once
// per connection, so the SQL is always exactly one statement) and COMMIT
// pipelined in one round trip, the rows streamed as they arrive, and the
// release (after a ROLLBACK when the statement failed). Sessions also
// start with default_transaction_read_only on, so nothing outside such a
// transaction can write either, and standard_conforming_strings on, so the
// server reads strings as levee's statement check does.
type pgSource struct {
	opts   Options
	pool   *pgxpool.Pool
	slots  chan struct{} // one token per open socket (cancel requests excepted)
	closed atomic.Bool
	states sync.Map // *pgx.Conn -> *pgConnState, dropped when the connection closes

	mu        sync.Mutex
	typeNames map[uint32]string // names of types pgx does not know, from pg_type
}

// maxTypeNames bounds the cache of type names looked up in pg_type.
const maxTypeNames = 4096

// cancelDialKey marks the context of a cancel request's dial: a cancel
// request is a short-lived connection the server never counts as a
// session, and it must not wait for a slot, since all slots may be held by
// the very queries it is cancelling.
type cancelDialKey struct{}

func openPostgres(opts Options) (*pgSource, error) {
	cfg, err := pgxpool.ParseConfig(opts.DSN)
	if err != nil {
		return nil, fmt.Errorf("datasource: postgres dsn: %w", err)
	}
	s := &pgSource{opts: opts, slots: make(chan struct{}, opts.MaxConns), typeNames: map[uint32]string{}}
	cfg.MaxConns = int32(opts.MaxConns)
	cfg.MinConns = 0
	cc := cfg.ConnConfig
	cc.ConnectTimeout = opts.ConnectTimeout
	rp := cc.RuntimeParams
	// Ours win over a DSN's (whatever their spelling: two spellings of one
	// setting would both be sent, in map order).
	for k := range rp {
		switch strings.ToLower(k) {
		case "default_transaction_read_only", "datestyle", "intervalstyle", "timezone", "standard_conforming_strings":
			delete(rp, k)
		}
	}
	rp["default_transaction_read_only"] = "on"
	// The server must read '...' strings as levee's statement check does
	// (internal/dataquery: a backslash is no escape outside E'...'), or
	// the two could disagree on where a string ends.
	rp["standard_conforming_strings"] = "on"
	// Text renderings levee passes through (date, interval, the text of
	// expressions over timestamps) must not depend on the server's or the
	// database's settings.
	rp["DateStyle"] = "ISO, YMD"
	rp["IntervalStyle"] = "postgres"
	rp["TimeZone"] = "UTC"
	if rp["application_name"] == "" {
		rp["application_name"] = "levee"
	}
	cc.BuildContextWatcherHandler = func(c *pgconn.PgConn) ctxwatch.Handler {
		return &cancelHandler{conn: c}
	}
	baseDial := cc.DialFunc
	cc.DialFunc = func(ctx context.Context, network, addr string) (net.Conn, error) {
		if ctx.Value(cancelDialKey{}) != nil {
			return baseDial(ctx, network, addr)
		}
		select {
		case s.slots <- struct{}{}:
		case <-ctx.Done():
			return nil, ctx.Err()
		}
		c, err := baseDial(ctx, network, addr)
		if err != nil {
			<-s.slots
			return nil, err
		}
		return &slotConn{Conn: c, slots: s.slots}, nil
	}
	// Names for the types created in the database (enums, domains,
	// extension types: OIDs from 16384), which pgx does not know, read
	// once per new connection so Query's columns can name them.
	cfg.AfterConnect = func(ctx context.Context, c *pgx.Conn) error {
		_ = s.cacheTypeNames(ctx, c, "SELECT oid::int8, typname::text FROM pg_catalog.pg_type WHERE oid >= 16384 ORDER BY oid LIMIT "+strconv.Itoa(maxTypeNames))
		return nil
	}
	cfg.BeforeClose = func(c *pgx.Conn) { s.states.Delete(c) }
	// pgxpool pings a connection idle over a second before handing it out
	// (its default): one that died with a restarted database is dropped
	// there instead of failing a query.
	s.pool, err = pgxpool.NewWithConfig(context.Background(), cfg)
	if err != nil {
		return nil, fmt.Errorf("datasource: postgres pool: %w", err)
	}
	return s, nil
}

// slotConn gives its slot back when closed (once).
type slotConn struct {
	net.Conn
	slots chan struct{}
	once  sync.Once
}

func (c *slotConn) Close() error {
	err := c.Conn.Close()
	c.once.Do(func() { <-c.slots })
	return err
}

// cancelHandler is what pgx does when a query's context ends: a cancel
// request to the server, so the statement stops there too, and a deadline
// on the socket (half a second later) in case the server does not answer.
// The connection is not reused afterwards (finish closes it): a cancel
// request that arrived late could otherwise cancel its next statement.
type cancelHandler struct {
	conn *pgconn.PgConn
	stop context.CancelFunc
	done chan struct{}
}

const cancelDeadline = 500 * time.Millisecond

func (h *cancelHandler) HandleCancel(context.Context) {
	_ = h.conn.Conn().SetDeadline(time.Now().Add(cancelDeadline))
	ctx, stop := context.WithTimeout(context.WithValue(context.Background(), cancelDialKey{}, true), cancelDeadline)
	h.stop, h.done = stop, make(chan struct{})
	go func() {
		defer close(h.done)
		_ = h.conn.CancelRequest(ctx)
	}()
}

func (h *cancelHandler) HandleUnwatchAfterCancel() {
	<-h.done
	h.stop()
	_ = h.conn.Conn().SetDeadline(time.Time{})
}

// close closes the pool. pgxpool's Close waits for every connection in
// use to come back; queries in flight end by their own deadlines, so the
// wait is bounded here too: past the longest default budget the pool
// finishes closing in the background (a Rows never closed would otherwise
// hold Close forever).
func (s *pgSource) close() {
	if s.closed.Swap(true) {
		return
	}
	done := make(chan struct{})
	go func() {
		s.pool.Close()
		close(done)
	}()
	wait := s.opts.StatementTimeout + grace(s.opts.StatementTimeout) + s.opts.ConnectTimeout
	select {
	case <-done:
	case <-time.After(wait):
	}
}

func (s *pgSource) stats() PoolStats {
	st := s.pool.Stat()
	return PoolStats{Max: int(st.MaxConns()), Open: int(st.TotalConns()), InUse: int(st.AcquiredConns()), Idle: int(st.IdleConns())}
}

// resultFormats asks for binary results where decoding binary is exact and
// cheaper than parsing text; every other type (numeric, date, float4,
// json, text, time, interval, enums, arrays, ...) comes as the server's own
// text rendering.
var resultFormats = pgx.QueryResultFormatsByOID{
	pgtype.Int2OID: pgx.BinaryFormatCode, pgtype.Int4OID: pgx.BinaryFormatCode, pgtype.Int8OID: pgx.BinaryFormatCode,
	pgtype.OIDOID: pgx.BinaryFormatCode, pgtype.Float8OID: pgx.BinaryFormatCode, pgtype.BoolOID: pgx.BinaryFormatCode,
	pgtype.TimestampOID: pgx.BinaryFormatCode, pgtype.TimestamptzOID: pgx.BinaryFormatCode,
	pgtype.UUIDOID: pgx.BinaryFormatCode, pgtype.ByteaOID: pgx.BinaryFormatCode,
}

// acquire takes a connection within the later of the statement's budget
// and the connect timeout.
func (s *pgSource) acquire(ctx context.Context, budget time.Duration) (*pgxpool.Conn, error) {
	wait := max(budget, s.opts.ConnectTimeout+100*time.Millisecond)
	actx, cancel := context.WithTimeout(ctx, wait)
	defer cancel()
	conn, err := s.pool.Acquire(actx)
	if err == nil {
		return conn, nil
	}
	if ctx.Err() != nil {
		return nil, ctx.Err()
	}
	if s.closed.Load() {
		return nil, ErrClosed
	}
	if actx.Err() != nil {
		st := s.pool.Stat()
		if st.AcquiredConns() >= st.MaxConns() {
			return nil, ErrPoolTimeout
		}
		return nil, fmt.Errorf("%w: no connection within %v", ErrUnavailable, wait)
	}
	return nil, classifyPG(ctx, nil, err, true)
}

// finish ends the transaction and returns the connection, or closes it
// when the query's context ended while it was in use (see cancelHandler)
// or the transaction cannot be ended.
func (s *pgSource) finish(conn *pgxpool.Conn, qctx context.Context, destroy bool) {
	pc := conn.Conn()
	if qctx.Err() != nil {
		destroy = true
	}
	if !destroy && !pc.IsClosed() && pc.PgConn().TxStatus() != 'I' {
		ctx, cancel := context.WithTimeout(context.Background(), s.opts.ConnectTimeout)
		if err := pc.PgConn().Exec(ctx, "ROLLBACK").Close(); err != nil {
			destroy = true
		}
		cancel()
	}
	if destroy && !pc.IsClosed() {
		ctx, cancel := context.WithTimeout(context.Background(), cancelDeadline)
		_ = pc.Close(ctx)
		cancel()
	}
	conn.Release() // a closed connection is destroyed, not pooled
}

// classifyPG sorts a PostgreSQL error into the package's errors. qctx is
// the statement's context (nil before it began); broken says the
// connection closed with the error.
func classifyPG(ctx, qctx context.Context, err error, broken bool) error {
	if ctx.Err() != nil {
		return ctx.Err()
	}
	var pgErr *pgconn.PgError
	if errors.As(err, &pgErr) {
		switch code := pgErr.Code; {
		case code == "57014": // query_canceled: by statement_timeout, or by the cancel our deadline sent
			return fmt.Errorf("%w: %s", ErrStatementTimeout, pgErr.Message)
		case strings.HasPrefix(code, "08"), code == "57P01", code == "57P02", code == "57P03", code == "53300", code == "53000":
			return fmt.Errorf("%w: %w", ErrUnavailable, err)
		}
		return &QueryError{SQLState: pgErr.Code, Err: err, Arg: bindParam(pgErr.Where)}
	}
	if qctx != nil && errors.Is(qctx.Err(), context.DeadlineExceeded) {
		return fmt.Errorf("%w: no answer within the client-side deadline: %v", ErrStatementTimeout, err)
	}
	var ce *pgconn.ConnectError
	var ne net.Error
	if broken || errors.As(err, &ce) || errors.As(err, &ne) || errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) ||
		errors.Is(err, syscall.ECONNREFUSED) || errors.Is(err, syscall.ECONNRESET) || errors.Is(err, net.ErrClosed) {
		return fmt.Errorf("%w: %w", ErrUnavailable, err)
	}
	return &QueryError{Err: err}
}

// bindParam reads which bind parameter an error's context names: the
// server adds "unnamed portal parameter $N = '...'" (PostgreSQL 13 and
// later, in English unless lc_messages says otherwise) to an error raised
// while it reads the parameters of a Bind. 0 when there is none.
func bindParam(where string) int {
	const mark = "parameter $"
	i := strings.Index(where, mark)
	if i < 0 {
		return 0
	}
	n := 0
	for _, c := range []byte(where[i+len(mark):]) {
		if c < '0' || c > '9' || n > 1<<16 { // bounded: a statement has at most 65535 parameters
			break
		}
		n = n*10 + int(c-'0')
	}
	return n
}

func (s *pgSource) describe(ctx context.Context, sql string, nargs int) ([]Column, error) {
	conn, err := s.acquire(ctx, s.opts.StatementTimeout)
	if err != nil {
		return nil, err
	}
	defer s.finish(conn, ctx, false)
	sd, err := conn.Conn().Prepare(ctx, "", sql)
	if err != nil {
		return nil, classifyPG(ctx, nil, err, conn.Conn().IsClosed())
	}
	if len(sd.ParamOIDs) != nargs {
		return nil, &QueryError{Err: fmt.Errorf("the SQL has %d placeholders, %d arguments declared", len(sd.ParamOIDs), nargs)}
	}
	tm := conn.Conn().TypeMap()
	var unknown []int64
	for _, f := range sd.Fields {
		if _, ok := tm.TypeForOID(f.DataTypeOID); !ok && builtinTypes[f.DataTypeOID].name == "" {
			unknown = append(unknown, int64(f.DataTypeOID))
		}
	}
	if len(unknown) > 0 {
		if err := s.lookupTypeNames(ctx, conn.Conn(), unknown); err != nil {
			return nil, err
		}
	}
	cols := make([]Column, len(sd.Fields))
	for i, f := range sd.Fields {
		format := resultFormats[f.DataTypeOID]
		name, kind, _ := s.typeOf(tm, f.DataTypeOID, format)
		cols[i] = Column{Name: f.Name, Type: name, Kind: kind}
	}
	return cols, nil
}

// lookupTypeNames caches the pg_type names of types pgx does not know
// (enums, domains, extension types), so Query's columns name them.
func (s *pgSource) lookupTypeNames(ctx context.Context, c *pgx.Conn, oids []int64) error {
	return s.cacheTypeNames(ctx, c, "SELECT oid::int8, typname::text FROM pg_catalog.pg_type WHERE oid::int8 = ANY($1)", oids)
}

func (s *pgSource) cacheTypeNames(ctx context.Context, c *pgx.Conn, sql string, args ...any) error {
	rows, err := c.Query(ctx, sql, args...)
	if err != nil {
		return classifyPG(ctx, nil, err, c.IsClosed())
	}
	defer rows.Close()
	for rows.Next() {
		var oid int64
		var name string
		if err := rows.Scan(&oid, &name); err != nil {
			return &QueryError{Err: err}
		}
		s.mu.Lock()
		if len(s.typeNames) >= maxTypeNames {
			clear(s.typeNames)
		}
		s.typeNames[uint32(oid)] = name
		s.mu.Unlock()
	}
	if err := rows.Err(); err != nil {
		return classifyPG(ctx, nil, err, c.IsClosed())
	}
	return nil
}

func (s *pgSource) tableColumns(ctx context.Context, table string) ([]Column, error) {
	ident, err := splitTable(table)
	if err != nil {
		return nil, err
	}
	quoted := pgx.Identifier(ident).Sanitize()
	cols, err := s.describe(ctx, "SELECT * FROM "+quoted+" LIMIT 0", 0)
	if err != nil {
		return nil, err
	}
	if err := s.notNull(ctx, quoted, cols); err != nil {
		return nil, err
	}
	return cols, nil
}

// notNull marks the columns of table (quoted, as FROM takes it) that the
// catalogue declares NOT NULL (pg_attribute.attnotnull; a view's columns
// are never marked). Bounded: one row per column of the table.
func (s *pgSource) notNull(ctx context.Context, quoted string, cols []Column) error {
	conn, err := s.acquire(ctx, s.opts.StatementTimeout)
	if err != nil {
		return err
	}
	defer s.finish(conn, ctx, false)
	c := conn.Conn()
	rows, err := c.Query(ctx, "SELECT attname::text FROM pg_catalog.pg_attribute WHERE attrelid = $1::regclass AND attnum > 0 AND NOT attisdropped AND attnotnull", quoted)
	if err != nil {
		return classifyPG(ctx, nil, err, c.IsClosed())
	}
	defer rows.Close()
	for rows.Next() {
		var name string
		if err := rows.Scan(&name); err != nil {
			return &QueryError{Err: err}
		}
		for i := range cols {
			if cols[i].Name == name {
				cols[i].NotNull = true
			}
		}
	}
	if err := rows.Err(); err != nil {
		return classifyPG(ctx, nil, err, c.IsClosed())
	}
	return nil
}
