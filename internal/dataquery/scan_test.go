package dataquery

import (
	"slices"
	"strings"
	"testing"
)

func placeholders(t *testing.T, sql string, d Dialect) ([]string, error) {
	t.Helper()
	toks, err := lex(sql, d)
	if err != nil {
		return nil, err
	}
	var names []string
	for _, tk := range toks {
		if tk.kind == tPlaceholder {
			names = append(names, sql[tk.start+1:tk.end])
		}
	}
	return names, nil
}

// TestScanPlaceholders: what is and is not a :name placeholder, in each
// dialect.
func TestScanPlaceholders(t *testing.T) {
	both := []Dialect{Postgres, SQLite}
	pg := []Dialect{Postgres}
	lite := []Dialect{SQLite}
	tests := []struct {
		name     string
		sql      string
		dialects []Dialect
		want     []string
	}{
		{"plain", "SELECT * FROM t WHERE a = :a AND b = :b_2", both, []string{"a", "b_2"}},
		{"adjacent", "SELECT :a||:b", both, []string{"a", "b"}},
		{"cast", "SELECT :a::int, x::text FROM t", both, []string{"a"}},
		{"cast token then placeholder", "SELECT x:::a", both, []string{"a"}}, // "::" then ":a", as PostgreSQL's lexer reads it
		{"in string", "SELECT ':a', 'it''s :b' FROM t WHERE c = :c", both, []string{"c"}},
		{"in quoted ident", `SELECT ":a", "x"":b" FROM t`, both, nil},
		{"line comment", "SELECT 1 -- :a\n, :b", both, []string{"b"}},
		{"line comment at end", "SELECT :b -- :a", both, []string{"b"}},
		{"block comment", "SELECT /* :a */ :b", both, []string{"b"}},
		{"nested block comment", "SELECT /* /* :a */ :b */ :c", pg, []string{"c"}},
		{"sqlite block comments do not nest", "SELECT /* /* :a */ :b", lite, []string{"b"}},
		{"dollar quoted", "SELECT $$ :a ' $$, $tag$ :b $$ $tag$, :c", pg, []string{"c"}},
		{"dollar in identifier", "SELECT a$b, :c FROM t", pg, []string{"c"}},
		{"E string", `SELECT E'\' :a', :b`, pg, []string{"b"}},
		{"not an E string", `SELECT 'x\', :b`, pg, []string{"b"}},
		{"identifier ending in e", `SELECT code'x', :b`, pg, []string{"b"}},
		{"backtick", "SELECT `:a`, [:b], :c", lite, []string{"c"}},
		{"brackets are arrays in pg", "SELECT a[1:2], a[:lo] FROM t", pg, []string{"lo"}},
		{"assignment", "SELECT f(x := 1)", pg, nil},
		{"digits", "SELECT :1", both, nil},
		{"unicode", "SELECT 'é:a', :ü", both, []string{"ü"}},
		{"in parens", "SELECT * FROM t WHERE id IN (:ids)", both, []string{"ids"}},
	}
	for _, tc := range tests {
		for _, d := range tc.dialects {
			got, err := placeholders(t, tc.sql, d)
			if err != nil {
				t.Errorf("%s (%v): %v", tc.name, d, err)
				continue
			}
			if !slices.Equal(got, tc.want) {
				t.Errorf("%s (%v): placeholders %q, want %q", tc.name, d, got, tc.want)
			}
		}
	}
}

// TestScanRefuses: what makes a statement unacceptable, with where.
func TestScanRefuses(t *testing.T) {
	tests := []struct {
		name string
		sql  string
		d    Dialect
		want string
	}{
		{"semicolon", "SELECT 1; DROP TABLE x", Postgres, "two statements: ';' at offset 8 (line 1 column 9)"},
		{"two trailing semicolons", "SELECT 1;;", SQLite, "two statements: ';' at offset 8"},
		{"semicolon then a comment then more", "SELECT 1; -- x\n/* y */ 2", Postgres, "two statements: ';' at offset 8"},
		{"semicolon in parens", "SELECT (1;)", Postgres, "two statements: ';' at offset 9"},
		{"question mark", "SELECT * FROM t WHERE a = ?", Postgres, "positional placeholder ?"},
		{"jsonb ?", "SELECT d ? 'k' FROM t", Postgres, "positional placeholder ?"},
		{"dollar n", "SELECT * FROM t WHERE a = $1", Postgres, "positional placeholder $n"},
		{"sqlite dollar", "SELECT $a", SQLite, "SQLite parameter $"},
		{"sqlite at", "SELECT @a", SQLite, "SQLite parameter @name"},
		{"unterminated string", "SELECT 'abc", Postgres, "unterminated string"},
		{"unterminated E string", `SELECT E'abc\'`, Postgres, "unterminated string"},
		{"unterminated ident", `SELECT "abc`, SQLite, "unterminated quoted identifier"},
		{"unterminated comment", "SELECT /* x", Postgres, "unterminated /*"},
		{"unterminated nested comment", "SELECT /* /* x */", Postgres, "unterminated /*"},
		{"unterminated dollar", "SELECT $x$ abc", Postgres, "dollar-quoted"},
		{"stray dollar", "SELECT $ 1", Postgres, "stray $"},
		{"unterminated bracket", "SELECT [abc", SQLite, "unterminated [identifier]"},
		{"close paren", "SELECT 1) AS x, (2", Postgres, "unbalanced )"},
		{"open paren", "SELECT (1", Postgres, "1 unclosed ("},
		{"line numbers", "SELECT 1\nFROM t\nWHERE a = ?", Postgres, "line 3 column 11"},
	}
	for _, tc := range tests {
		_, err := lex(tc.sql, tc.d)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: error %v, want one containing %q", tc.name, err, tc.want)
		}
	}
	// What a refusal above must not catch inside strings and comments.
	for _, sql := range []string{
		"SELECT ';', '?', '$1' -- ; ? $1\n/* ; ? $1 */",
		`SELECT ";", "?"`,
		"SELECT $$;?$1$$",
		"SELECT '(', ')'",
		"SELECT 1;", "SELECT 1 ; -- end\n/* end */ \n",
	} {
		if _, err := lex(sql, Postgres); err != nil {
			t.Errorf("%q: %v", sql, err)
		}
	}
}
