package datasource

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgtype"
	"github.com/jackc/pgx/v5/pgxpool"
)

// A PostgreSQL query is one round trip once its statement is prepared on
// the connection: BEGIN READ ONLY, SET LOCAL statement_timeout, the
// statement (Bind and Execute of a prepared statement, so exactly one
// statement) and COMMIT are pipelined in one write, up to one Sync. The
// server runs them in order and streams the rows back; the rows are read
// from the pipeline as they arrive. When the statement fails the server
// skips the COMMIT up to the Sync and the transaction is left aborted:
// finish then sends ROLLBACK before the connection goes back to the pool.
// The three extra statements cost the server microseconds; three round
// trips (BEGIN, the query, ROLLBACK) ran 20-row lookups at 0.73x of a bare
// pgxpool's rate, this pipeline at 0.98x (BenchmarkPostgresLookup).

// pgConnState is a connection's statements, prepared by levee under its
// own names (pgx's statement cache is for pgx's Query; this pipeline uses
// pgconn directly). At most maxStatementsPerConn: past that the
// connection's statements are all deallocated and prepared again as used.
type pgConnState struct {
	stmts map[string]*pgStmt
	next  int
}

const maxStatementsPerConn = 256

// pgStmt is a prepared statement and everything derived from its
// description once: result formats, columns, decoders.
type pgStmt struct {
	sd      *pgconn.StatementDescription
	formats []int16
	cols    []Column
	decs    []pgDecoder
}

func (s *pgSource) connState(c *pgx.Conn) *pgConnState {
	if st, ok := s.states.Load(c); ok {
		return st.(*pgConnState)
	}
	st := &pgConnState{stmts: map[string]*pgStmt{}}
	s.states.Store(c, st)
	return st
}

// prepare returns sql's statement on c, preparing it on first use (one
// round trip).
func (s *pgSource) prepare(ctx context.Context, c *pgx.Conn, sql string) (*pgStmt, error) {
	st := s.connState(c)
	if p := st.stmts[sql]; p != nil {
		return p, nil
	}
	if len(st.stmts) >= maxStatementsPerConn {
		if err := c.DeallocateAll(ctx); err != nil {
			return nil, err
		}
		clear(st.stmts)
	}
	st.next++
	sd, err := c.PgConn().Prepare(ctx, "levee_"+strconv.Itoa(st.next), sql, nil)
	if err != nil {
		return nil, err
	}
	p := &pgStmt{sd: sd, formats: make([]int16, len(sd.Fields)), cols: make([]Column, len(sd.Fields)), decs: make([]pgDecoder, len(sd.Fields))}
	for i, f := range sd.Fields {
		p.formats[i] = resultFormats[f.DataTypeOID]
		name, kind, dec := s.typeOf(c.TypeMap(), f.DataTypeOID, p.formats[i])
		p.cols[i] = Column{Name: f.Name, Type: name, Kind: kind}
		p.decs[i] = dec
	}
	st.stmts[sql] = p
	return p, nil
}

// forget drops sql's statement on c (its plan went stale).
func (s *pgSource) forget(c *pgx.Conn, sql string) {
	delete(s.connState(c).stmts, sql)
}

func (s *pgSource) query(ctx context.Context, q Query, timeout time.Duration, r *Rows) error {
	budget := timeout + grace(timeout)
	args := make([]any, len(q.Args))
	for i, a := range q.Args {
		if t, ok := a.(time.Time); ok {
			// pgx binds a timestamp (without time zone) as the wall
			// clock of the value's location: make that UTC.
			a = t.UTC()
		}
		args[i] = a
	}
	// A connection that died with a restarted database fails before
	// anything ran, and a statement whose plan went stale (the table
	// changed) fails at its Bind: take another connection, or prepare
	// again (bounded: MaxConns + 1 tries).
	for attempt := 0; ; attempt++ {
		conn, err := s.acquire(ctx, budget)
		if err != nil {
			return err
		}
		qctx, cancel := context.WithTimeout(ctx, budget)
		p, retry, err := s.start(ctx, qctx, conn, q.SQL, args, timeout)
		if err != nil {
			cancel()
			if retry && ctx.Err() == nil && attempt < s.opts.MaxConns {
				continue
			}
			return err
		}
		p.cancel = cancel
		r.cols = p.stmt.cols
		r.vals = make([]any, len(p.stmt.cols))
		r.impl = p
		return nil
	}
}

// start sends the pipelined transaction and reads up to the statement's
// row description. On an error it has released the connection, and
// reports whether another try could succeed.
func (s *pgSource) start(ctx, qctx context.Context, conn *pgxpool.Conn, sql string, args []any, timeout time.Duration) (*pgRows, bool, error) {
	pc := conn.Conn()
	stmt, err := s.prepare(qctx, pc, sql)
	if err != nil {
		broken := pc.IsClosed()
		s.finish(conn, qctx, broken)
		return nil, broken, classifyPG(ctx, qctx, err, broken)
	}
	if len(args) != len(stmt.sd.ParamOIDs) {
		s.finish(conn, qctx, false)
		return nil, false, &QueryError{Err: fmt.Errorf("the SQL has %d placeholders, %d arguments given", len(stmt.sd.ParamOIDs), len(args))}
	}
	var eqb pgx.ExtendedQueryBuilder
	if err := eqb.Build(pc.TypeMap(), stmt.sd, args); err != nil {
		// The value does not fit the placeholder's type (an int64 past
		// int2's range): the request's fault.
		s.finish(conn, qctx, false)
		return nil, false, &QueryError{Err: err, clientFault: true, Arg: unencodable(pc.TypeMap(), stmt.sd, args)}
	}
	pl := pc.PgConn().StartPipeline(qctx)
	pl.SendQueryParams("BEGIN READ ONLY", nil, nil, nil, nil)
	pl.SendQueryParams(setTimeoutSQL(timeout), nil, nil, nil, nil)
	pl.SendQueryStatement(stmt.sd, eqb.ParamValues, eqb.ParamFormats, stmt.formats)
	pl.SendQueryParams("COMMIT", nil, nil, nil, nil)
	pl.SendPipelineSync()
	fail := func(err error) (*pgRows, bool, error) {
		_ = pl.Close()
		broken := pc.IsClosed()
		var pgErr *pgconn.PgError
		// 0A000: cached plan must not change result type; 26000: the
		// statement is gone. Both mean: prepare it again.
		stale := errors.As(err, &pgErr) && (pgErr.Code == "0A000" || pgErr.Code == "26000")
		if stale {
			s.forget(pc, sql)
		}
		s.finish(conn, qctx, broken)
		return nil, broken || stale, classifyPG(ctx, qctx, err, broken)
	}
	if err := pl.Flush(); err != nil {
		return fail(err)
	}
	for range 2 { // BEGIN, SET
		res, err := pl.GetResults()
		if err != nil {
			return fail(err)
		}
		rr, ok := res.(*pgconn.ResultReader)
		if !ok {
			return fail(fmt.Errorf("pipeline: unexpected %T", res))
		}
		if _, err := rr.Close(); err != nil {
			return fail(err)
		}
	}
	res, err := pl.GetResults()
	if err != nil {
		return fail(err)
	}
	rr, ok := res.(*pgconn.ResultReader)
	if !ok {
		return fail(fmt.Errorf("pipeline: unexpected %T", res))
	}
	return &pgRows{src: s, conn: conn, pl: pl, rr: rr, stmt: stmt, ctx: ctx, qctx: qctx}, false, nil
}

// unencodable returns the 1-based position of the first argument the
// driver cannot encode for its placeholder, encoding each alone (on the
// error path only); 0 when each alone encodes.
func unencodable(m *pgtype.Map, sd *pgconn.StatementDescription, args []any) int {
	for i, a := range args {
		var eqb pgx.ExtendedQueryBuilder
		one := &pgconn.StatementDescription{ParamOIDs: sd.ParamOIDs[i : i+1]}
		if eqb.Build(m, one, []any{a}) != nil {
			return i + 1
		}
	}
	return 0
}

func setTimeoutSQL(timeout time.Duration) string {
	ms := (timeout + time.Millisecond - 1) / time.Millisecond // round up: 0 would mean none
	return "SET LOCAL statement_timeout = " + strconv.FormatInt(int64(ms), 10)
}

type pgRows struct {
	src       *pgSource
	conn      *pgxpool.Conn
	pl        *pgconn.Pipeline
	rr        *pgconn.ResultReader
	stmt      *pgStmt
	ctx       context.Context // the caller's
	qctx      context.Context // the caller's, with the client-side deadline
	cancel    context.CancelFunc
	done      bool // no more rows for the caller (complete, or an error)
	exhausted bool // the server sent them all, or its error
	e         error
}

func (p *pgRows) next(vals []any) bool {
	if p.done {
		return false
	}
	if !p.rr.NextRow() {
		p.done, p.exhausted = true, true
		if _, err := p.rr.Close(); err != nil {
			p.e = classifyPG(p.ctx, p.qctx, err, p.conn.Conn().IsClosed())
		}
		return false
	}
	raw := p.rr.Values()
	decs, cols := p.stmt.decs, p.stmt.cols
	if len(raw) != len(decs) {
		p.done = true
		p.e = &QueryError{Err: fmt.Errorf("row of %d values for %d columns", len(raw), len(decs))}
		return false
	}
	for i, b := range raw {
		v, err := decs[i].decode(b)
		if err != nil {
			p.done = true
			p.e = &QueryError{Err: fmt.Errorf("column %q (%s): %w", cols[i].Name, cols[i].Type, err)}
			return false
		}
		vals[i] = v
	}
	return true
}

func (p *pgRows) err() error { return p.e }

// drain reads the rows left, bounded by drainRows and drainWait; it
// cancels the statement when they are not all read (the connection is
// then destroyed by finish).
func (p *pgRows) drain() {
	t := time.AfterFunc(drainWait, p.cancel)
	defer t.Stop()
	for range drainRows + 1 {
		if !p.rr.NextRow() {
			p.exhausted = true
			return
		}
	}
	p.cancel()
}

// drainRows and drainWait bound what close reads of the rows a caller
// left. A paged data API reads Limit+1 rows of a statement that asks for
// Limit+1 and stops at the extra row: what is left is only the end of the
// result, already on its way. Cancelling then closed the connection
// (qctx ended: finish destroys it), so every page opened a new PostgreSQL
// connection, and under load one that took past connect_timeout was a 503
// data_source_unavailable (bench/soak.sh: 2,881 connections for 2,900
// data requests, 8 such errors in 10 minutes).
const (
	drainRows = 16
	drainWait = 50 * time.Millisecond
)

func (p *pgRows) close() error {
	if !p.exhausted {
		// Rows left: read at most drainRows more (undecoded) within
		// drainWait, so a result that was about to end keeps its
		// connection; past either bound, cancel the statement in the
		// database rather than read the rest of them.
		p.drain()
	}
	_, _ = p.rr.Close()
	// Reads the COMMIT's result (or nothing, after an error) and the Sync.
	_ = p.pl.Close()
	p.src.finish(p.conn, p.qctx, false)
	p.cancel()
	return nil
}
