package dataquery

import (
	"strings"
	"testing"
)

// statementCase is one statement the check refuses (want: a part of the
// error) or accepts (want "").
type statementCase struct {
	name     string
	sql      string
	dialects []Dialect
	want     string
}

var (
	bothDialects = []Dialect{Postgres, SQLite}
	pgOnly       = []Dialect{Postgres}
	sqliteOnly   = []Dialect{SQLite}
)

// RefusedStatements are the statements a data API's sql may not be
// (issue 22): config, cmd/levee and gateway tests run the same ones.
var refusedStatements = []statementCase{
	{"COPY TO PROGRAM", "COPY (SELECT 1) TO PROGRAM 'touch /tmp/pwned'", bothDialects, "COPY is not a query (line 1 column 1)"},
	{"COPY TO file", "COPY t TO '/tmp/t.csv'", bothDialects, "COPY is not a query"},
	{"COPY TO STDOUT", "copy (SELECT 1) to stdout", bothDialects, "COPY is not a query"},
	{"COPY FROM PROGRAM", "COPY t FROM PROGRAM 'id'", bothDialects, "COPY is not a query"},
	{"COPY after a comment", "/* read */ -- only\n  COPY t TO STDOUT", bothDialects, "COPY is not a query (line 2 column 3)"},
	{"COPY in parentheses", "(COPY t TO STDOUT)", bothDialects, "COPY is not a query"},
	{"data-modifying CTE", "WITH x AS (DELETE FROM t RETURNING *) SELECT * FROM x", bothDialects,
		"WITH x AS (DELETE ...) at line 1 column 12: a data-modifying WITH is not a query"},
	{"data-modifying CTE, second", "WITH a AS (SELECT 1), b AS (UPDATE t SET v = 1 RETURNING v) SELECT * FROM a, b", bothDialects,
		"WITH b AS (UPDATE ...)"},
	{"data-modifying CTE, materialized", "WITH x AS NOT MATERIALIZED ((INSERT INTO t VALUES (1) RETURNING *)) SELECT * FROM x", bothDialects,
		"WITH x AS (INSERT ...)"},
	{"data-modifying CTE, merge", "WITH m AS (MERGE INTO t USING s ON t.id = s.id WHEN MATCHED THEN DELETE RETURNING *) TABLE m", pgOnly,
		"WITH m AS (MERGE ...)"},
	{"nested data-modifying CTE", "WITH a AS (WITH b AS (DELETE FROM t RETURNING *) SELECT * FROM b) SELECT * FROM a", bothDialects,
		"DELETE at line 1 column 23"},
	{"WITH then INSERT", "WITH a AS (SELECT 1) INSERT INTO t SELECT * FROM a", bothDialects,
		"INSERT is not a query (line 1 column 22): the statement after WITH's queries must be"},
	{"WITH without AS", "WITH a (SELECT 1) SELECT 1", bothDialects, "WITH: expected AS, found"},
	{"WITH and nothing", "WITH a AS (SELECT 1)", bothDialects, "the SQL ends where a statement should begin"},
	{"SELECT INTO", "SELECT * INTO newt FROM t", bothDialects, "SELECT ... INTO at line 1 column 10 is not a query (it creates a table)"},
	{"SELECT INTO TEMP", "select a, b into temporary x from t", bothDialects, "SELECT ... INTO at line 1 column 13"},
	{"two statements", "SELECT 1; SELECT 2", bothDialects, "two statements: ';' at offset 8 (line 1 column 9)"},
	{"two statements, long", "SELECT id FROM orders WHERE a=1; DELETE FROM orders", bothDialects, "two statements: ';' at offset 31"},
	{"comment hides a second statement", "SELECT 1; -- x\n DROP TABLE t", bothDialects, "two statements: ';' at offset 8"},
	{"block comment then a second statement", "SELECT 1 /* ; */; /* */ DROP TABLE t", bothDialects, "two statements: ';' at offset 16"},
	{"line comment ends at the newline", "SELECT 1 -- ;\n; DROP TABLE t", bothDialects, "two statements: ';' at offset 14"},
	{"semicolon in parentheses", "SELECT (SELECT 1;)", bothDialects, "two statements"},
	{"two semicolons", "SELECT 1;;", bothDialects, "two statements"},
	{"E string ends at the unescaped quote", `SELECT E'\'' ; DELETE FROM t`, pgOnly, "two statements: ';' at offset 13"},
	{"plain string has no backslash escape", `SELECT 'a\' ; DELETE FROM t --'`, bothDialects, "two statements: ';' at offset 12"},
	{"dollar tag must match", "SELECT $a$ $b$ ; $a$ ; DELETE FROM t", pgOnly, "two statements: ';' at offset 21"},
	{"nested comment closes twice", "SELECT 1 /* /* */ ; */ ; DELETE FROM t", pgOnly, "two statements: ';' at offset 23"},
	{"sqlite comments do not nest", "SELECT 1 /* /* */ ; DELETE FROM t", sqliteOnly, "two statements: ';' at offset 18"},
	{"sqlite bracket ends at ]", "SELECT [a;] ; DELETE FROM t", sqliteOnly, "two statements: ';' at offset 12"},
	{"sqlite backquote doubled", "SELECT `a``;` ; DELETE FROM t", sqliteOnly, "two statements: ';' at offset 14"},
	{"CALL", "CALL do_it()", bothDialects, "CALL is not a query"},
	{"DO", "DO $$BEGIN PERFORM 1; END$$", pgOnly, "DO is not a query"},
	{"EXPLAIN ANALYZE", "EXPLAIN ANALYZE SELECT 1", bothDialects, "EXPLAIN is not a query"},
	{"SET", "SET search_path = evil", bothDialects, "SET is not a query"},
	{"PRAGMA", "PRAGMA query_only = 0", bothDialects, "PRAGMA is not a query"},
	{"ATTACH", "ATTACH DATABASE '/tmp/x.db' AS x", bothDialects, "ATTACH is not a query"},
	{"VACUUM INTO", "VACUUM INTO '/tmp/copy.db'", bothDialects, "VACUUM is not a query"},
	{"REPLACE", "REPLACE INTO t VALUES (1)", bothDialects, "REPLACE is not a query"},
	{"DELETE", "DELETE FROM t", bothDialects, "DELETE is not a query"},
	{"UPDATE", "update t set a = 1", bothDialects, "UPDATE is not a query"},
	{"INSERT", "INSERT INTO t VALUES (1)", bothDialects, "INSERT is not a query"},
	{"MERGE", "MERGE INTO t USING s ON true WHEN MATCHED THEN DELETE", bothDialects, "MERGE is not a query"},
	{"CREATE", "CREATE TABLE x AS SELECT 1", bothDialects, "CREATE is not a query"},
	{"DROP", "DROP TABLE t", bothDialects, "DROP is not a query"},
	{"TRUNCATE", "TRUNCATE t", bothDialects, "TRUNCATE is not a query"},
	{"GRANT", "GRANT pg_execute_server_program TO levee", bothDialects, "GRANT is not a query"},
	{"LISTEN", "LISTEN x", bothDialects, "LISTEN is not a query"},
	{"transaction control", "COMMIT", bothDialects, "COMMIT is not a query"},
	{"a string first", "'SELECT 1'", bothDialects, `the statement begins with "'SELECT 1'" at line 1 column 1`},
	{"a quoted identifier first", `"SELECT" 1`, bothDialects, "the statement begins with"},
	{"only comments", "-- nothing\n/* here */", bothDialects, "no statement: only whitespace"},
	{"only a semicolon", " ; ", bothDialects, "no statement"},
	{"FOR UPDATE", "SELECT * FROM t FOR UPDATE", bothDialects, `UPDATE at line 1 column 21: a data API's sql may not hold`},
	{"a column named delete", "SELECT delete FROM t", bothDialects, `quote a name so spelt ("delete")`},
	{"a qualified column named copy", "SELECT t.copy FROM t", bothDialects, "COPY at line 1 column 10"},
	{"a word glued to a number", "SELECT 1into x", bothDialects, "SELECT ... INTO at line 1 column 9"},
	{"TABLE on SQLite", "TABLE t", sqliteOnly, "SQLite has no TABLE statement"},
	{"WITH then TABLE on SQLite", "WITH a AS (SELECT 1) TABLE a", sqliteOnly, "SQLite has no TABLE statement"},
	{"COPY in a subquery", "SELECT * FROM (COPY t TO STDOUT) x", bothDialects, "COPY at line 1 column 16"},
}

// acceptedStatements must stay accepted.
var acceptedStatements = []statementCase{
	{"SELECT", "SELECT 1", bothDialects, ""},
	{"lower case", "select id from orders where id = 1", bothDialects, ""},
	{"mixed case", "SeLeCt 1", bothDialects, ""},
	{"leading whitespace and comments", " \n\t-- why\n/* what */ SELECT 1", bothDialects, ""},
	{"nested leading comment", "/* a /* b */ c */ SELECT 1", pgOnly, ""},
	{"trailing semicolon", "SELECT 1;", bothDialects, ""},
	{"trailing semicolon, whitespace and comments", "SELECT 1 ; -- done\n/* ; */\n", bothDialects, ""},
	{"semicolon in a block comment", "SELECT 1 /* ; */", bothDialects, ""},
	{"semicolon in a nested block comment", "SELECT 1 /* /* ; */ ; */", pgOnly, ""},
	{"semicolon in a line comment", "SELECT 1 -- ; DROP TABLE t", bothDialects, ""},
	{"semicolon in a string", "SELECT ';'", bothDialects, ""},
	{"doubled quote in a string", "SELECT 'it''s; fine'", bothDialects, ""},
	{"semicolon in an E string", `SELECT E'\';'`, pgOnly, ""},
	{"E string with a doubled quote", `SELECT e'a''b;\\'`, pgOnly, ""},
	{"semicolon in dollar quotes", "SELECT $$;$$", pgOnly, ""},
	{"semicolon in tagged dollar quotes", "SELECT $tag$ $$ ; $tag$", pgOnly, ""},
	{"semicolon in a quoted identifier", `SELECT "a;b" FROM t`, bothDialects, ""},
	{"doubled quote in an identifier", `SELECT "a"";b" FROM t`, bothDialects, ""},
	{"sqlite backquotes", "SELECT `a;b` FROM t", sqliteOnly, ""},
	{"sqlite brackets", "SELECT [a;b] FROM t", sqliteOnly, ""},
	{"refused words in literals and quoted names", `SELECT 'COPY', "delete", "into", E'\'update' FROM t`, pgOnly, ""},
	{"refused words in comments", "SELECT 1 -- INSERT INTO t\n/* COPY t TO PROGRAM 'x' */", bothDialects, ""},
	{"a column named like a refused word", "SELECT copy_count, updated_at, deleted, intox, t.\"insert\" FROM t", bothDialects, ""},
	{"VALUES", "VALUES (1), (2)", bothDialects, ""},
	{"TABLE", "TABLE t", pgOnly, ""},
	{"WITH", "WITH a AS (SELECT 1) SELECT * FROM a", bothDialects, ""},
	{"WITH RECURSIVE, columns, several", "WITH RECURSIVE n(i) AS (VALUES (1) UNION ALL SELECT i + 1 FROM n WHERE i < 5), m AS (SELECT 2) SELECT * FROM n, m", bothDialects, ""},
	{"WITH MATERIALIZED", "WITH a AS MATERIALIZED (SELECT 1), b AS NOT MATERIALIZED (SELECT 2) SELECT * FROM a, b", bothDialects, ""},
	{"WITH SEARCH and CYCLE", "WITH RECURSIVE t(id, p) AS (SELECT 1, 0 UNION ALL SELECT id + 1, id FROM t) " +
		"SEARCH DEPTH FIRST BY id, p SET ord CYCLE id, p SET is_cycle TO true DEFAULT false USING path SELECT * FROM t", pgOnly, ""},
	{"WITH quoted name", `WITH "my cte" AS (SELECT 1) SELECT * FROM "my cte"`, bothDialects, ""},
	{"WITH nested", "WITH a AS (WITH b AS (SELECT 1) SELECT * FROM b) SELECT * FROM a", bothDialects, ""},
	{"WITH then VALUES", "WITH a AS (SELECT 1) VALUES (2)", bothDialects, ""},
	{"WITH then TABLE", "WITH a AS (SELECT 1) TABLE a", pgOnly, ""},
	{"parenthesised", "(SELECT 1) UNION (SELECT 2)", bothDialects, ""},
	{"parenthesised WITH", "(WITH a AS (SELECT 1) SELECT * FROM a)", bothDialects, ""},
	{"a placeholder named like a refused word", "SELECT * FROM t WHERE a = :update", bothDialects, ""},
	{"numbers", "SELECT 1.5e-3, .5, 1e5, 2.", bothDialects, ""},
	{"functions of strings", "SELECT replace(name, 'a', 'b'), upper(x) FROM t", bothDialects, ""},
}

// TestStatementCheck: CompileSQL refuses every statement that is not one
// query, saying what it found and where, and accepts the queries.
func TestStatementCheck(t *testing.T) {
	for _, tc := range append(refusedStatements, acceptedStatements...) {
		for _, d := range tc.dialects {
			var params []Param
			if strings.Contains(tc.sql, ":update") {
				params = []Param{{Name: "update", Type: Int64}}
			}
			_, err := CompileSQL(tc.sql, params, nil, d)
			switch {
			case tc.want == "" && err != nil:
				t.Errorf("%s (%v): %q refused: %v", tc.name, d, tc.sql, err)
			case tc.want != "" && err == nil:
				t.Errorf("%s (%v): %q accepted, want %q", tc.name, d, tc.sql, tc.want)
			case tc.want != "" && !strings.Contains(err.Error(), tc.want):
				t.Errorf("%s (%v): %q: %v, want %q", tc.name, d, tc.sql, err, tc.want)
			}
		}
	}
}

// TestTrailingSemicolonDropped: the one ';' allowed at the end, and the
// comments after it, are not part of the bound statement, so a paged
// statement wraps as a subquery.
func TestTrailingSemicolonDropped(t *testing.T) {
	for _, d := range bothDialects {
		q := mustSQL(t, ordersSQL+" ; -- the end", []Param{{Name: "customer_id", Type: Int64, Required: true}}, ordersPage(), d)
		for _, paged := range []bool{false, true} {
			b, err := q.Bind(query(t, "customer_id=3"), paged)
			if err != nil {
				t.Fatal(err)
			}
			if strings.Contains(b.SQL, ";") || strings.Contains(b.SQL, "the end") {
				t.Errorf("%v paged %v: %q", d, paged, b.SQL)
			}
		}
	}
}
