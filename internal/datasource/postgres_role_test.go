package datasource

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/levee-gw/levee/internal/testsvc"
)

// testRefusedValueNamesItsArgument is TestPostgres/RefusedValueNamesItsArgument.
func testRefusedValueNamesItsArgument(t *testing.T, src *Source) {
	ctx := context.Background()
	// issue 22, 6b: the argument the database could not read is known
	// (by the server's "unnamed portal parameter $N" context, or by
	// encoding each argument alone), so the answer can name the
	// request's parameter; a value refused while the statement runs
	// names none.
	for _, c := range []struct {
		sql     string
		args    []any
		state   string
		wantArg int
	}{
		{"SELECT id FROM types WHERE t = $1 AND n > $2", []any{"plain", "not a number"}, "22P02", 2},
		{"SELECT id FROM types WHERE d = $1", []any{"2025-13-45"}, "22008", 1},
		{"SELECT id FROM types WHERE t = $1 AND i2 = $2", []any{"plain", int64(1 << 40)}, "", 2},
		{"SELECT 1 / $1::int8", []any{int64(0)}, "22012", 0},
	} {
		r, err := src.Query(ctx, Query{SQL: c.sql, Args: c.args})
		if err == nil {
			r.Close()
		}
		var qe *QueryError
		if !errors.As(err, &qe) || !qe.ClientFault() || qe.SQLState != c.state || qe.Arg != c.wantArg {
			t.Errorf("%s %v: %#v, want a client fault with SQLSTATE %q naming argument %d", c.sql, c.args, err, c.state, c.wantArg)
			continue
		}
		t.Logf("%s: SQLSTATE %q, argument %d: %v", c.sql, qe.SQLState, qe.Arg, qe.Err)
	}
}

// testReaderRole is TestPostgres/ReaderRole.
func testReaderRole(t *testing.T, pg *testsvc.Postgres, src *Source) {
	ctx := context.Background()
	// issue 22: BEGIN READ ONLY does not stop COPY ... TO PROGRAM (a
	// superuser's runs, on the database host), which is why data APIs
	// refuse COPY and docs/data-apis.md asks for a reader role; the
	// role it shows can read its tables and nothing of the server's.
	mark := fmt.Sprintf("/tmp/levee-copy-%d", time.Now().UnixNano())
	t.Cleanup(func() { os.Remove(mark) }) // best effort: the server's user made it
	if r, err := src.Query(ctx, Query{SQL: "COPY (SELECT 1) TO PROGRAM 'touch " + mark + "'"}); err == nil {
		r.Close()
	}
	if rows := pg.QueryText(t, "SELECT (pg_stat_file('"+mark+"', true)).size IS NOT NULL"); *rows[0][0] != "t" {
		t.Errorf("COPY TO PROGRAM as a superuser in BEGIN READ ONLY did not run (the premise of the statement check)")
	}
	pg.Exec(t, `
CREATE ROLE levee_reader LOGIN PASSWORD 'x' NOSUPERUSER NOCREATEDB NOCREATEROLE NOREPLICATION NOBYPASSRLS;
GRANT CONNECT ON DATABASE postgres TO levee_reader;
GRANT USAGE ON SCHEMA public TO levee_reader;
GRANT SELECT ON types TO levee_reader;
REVOKE CREATE ON SCHEMA public FROM PUBLIC;
ALTER ROLE levee_reader SET default_transaction_read_only = on;`)
	if rows := pg.QueryText(t, `SELECT rolsuper, (SELECT count(*) FROM pg_auth_members m JOIN pg_roles r ON r.oid = m.member
		WHERE r.rolname = 'levee_reader') FROM pg_roles WHERE rolname = 'levee_reader'`); *rows[0][0] != "f" || *rows[0][1] != "0" {
		t.Fatalf("the docs' check: superuser %s, memberships %s", *rows[0][0], *rows[0][1])
	}
	reader := openPG(t, strings.Replace(pg.DSN, "postgres@", "levee_reader:x@", 1), Options{MaxConns: 1})
	if rows := collectQuery(t, reader, Query{SQL: "SELECT count(*) FROM types"}); len(rows) != 1 || rows[0][0] != int64(4) {
		t.Errorf("the reader reads types: %v", rows)
	}
	for _, sql := range []string{
		"COPY (SELECT 1) TO PROGRAM 'touch " + mark + "-reader'",
		"COPY types TO '" + mark + "-reader'",
		"SELECT pg_read_file('/etc/hostname')",
		"SELECT lo_export(0, '" + mark + "-reader')",
	} {
		r, err := reader.Query(ctx, Query{SQL: sql})
		if err == nil {
			r.Close()
		}
		var qe *QueryError
		if !errors.As(err, &qe) || qe.SQLState != "42501" {
			t.Errorf("the reader ran %s: %v, want 42501 insufficient_privilege", sql, err)
		}
	}
}
