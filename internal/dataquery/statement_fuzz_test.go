package dataquery

import (
	"strings"
	"testing"
	"time"
)

// FuzzStatementCheck: the statement check (lex, then checkStatement)
// never panics and answers within a bound; and a statement it accepts,
// read by refScan (a second, plain reading of the dialect's lexical rules,
// written apart from the lexer), is terminated, has no ';' outside
// strings, quoted identifiers and comments except one followed by nothing
// else, begins with SELECT, WITH, VALUES or TABLE, and holds none of the
// refused words outside them.
func FuzzStatementCheck(f *testing.F) {
	refused, accepted := statements(f)
	for _, tc := range append(refused, accepted...) {
		f.Add(tc.SQL, false)
		f.Add(tc.SQL, true)
	}
	for _, s := range []string{
		"SELECT 1e'\\';' ;", "SELECT 1.e5x ;", "SELECT $a$$a$;", "SELECT x$a$ ; $a$", "SELECT [a]]; ]", "WITH a AS (SELECT 1) SEARCH",
		"WITH a(x, y) AS (SELECT 1) CYCLE x SET y USING z, b AS (VALUES (1)) SELECT 1", "SELECT 1 -- x", "SELECT 1;/*",
	} {
		f.Add(s, false)
		f.Add(s, true)
	}
	f.Fuzz(func(t *testing.T, sql string, sqlite bool) {
		d := Postgres
		if sqlite {
			d = SQLite
		}
		start := time.Now()
		_, _, err := queryTokens(sql, d)
		// Linear work: microseconds for what the fuzzer makes, so a second
		// (with the race detector's slowdown) means a loop gone wrong; the
		// load step times MaxSQLBytes inputs (TestStatementCheckLargeInputs).
		if took := time.Since(start); took > time.Second {
			t.Fatalf("%d bytes took %v", len(sql), took)
		}
		if err != nil {
			return
		}
		r := refScan(sql, d)
		switch {
		case !r.terminated:
			t.Fatalf("accepted %q (%v), which the reference reads as unterminated", sql, d)
		case len(r.semis) > 1 || len(r.semis) == 1 && r.afterSemi:
			t.Fatalf("accepted %q (%v): ';' outside literals at %v", sql, d, r.semis)
		}
		if len(r.words) == 0 {
			t.Fatalf("accepted %q (%v) with no first word", sql, d)
		}
		switch strings.ToUpper(r.words[0]) {
		case "SELECT", "WITH", "VALUES", "TABLE":
		default:
			t.Fatalf("accepted %q (%v) beginning with %q", sql, d, r.words[0])
		}
		for _, w := range r.words {
			for _, bad := range refusedWords {
				if strings.EqualFold(w, bad) {
					t.Fatalf("accepted %q (%v) holding the word %s", sql, d, w)
				}
			}
		}
	})
}

// refRead is what refScan finds outside strings, quoted identifiers and
// comments.
type refRead struct {
	terminated bool     // every string, identifier and comment is closed
	semis      []int    // offsets of ';'
	afterSemi  bool     // something other than whitespace and comments follows a ';'
	words      []string // bare words, in order; the first only if nothing but '(' precedes it
}

// refScan reads sql by the dialect's lexical rules, one byte at a time.
func refScan(sql string, d Dialect) refRead {
	r := refRead{terminated: true}
	pg := d == Postgres
	ident := func(c byte) bool {
		return c == '_' || c >= 0x80 || c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '$'
	}
	digit := func(c byte) bool { return c >= '0' && c <= '9' }
	first := true // nothing but '(' seen yet
	seen := func(word string) {
		if first || len(r.words) > 0 {
			r.words = append(r.words, word)
		}
		first = false
	}
	// until returns the offset after the closing quote q of the literal
	// opened at i (-1 if none); doubled quotes are one, and with
	// backslash a backslash escapes the next byte.
	until := func(i int, q byte, backslash bool) int {
		for j := i + 1; j < len(sql); j++ {
			if backslash && sql[j] == '\\' {
				j++
				continue
			}
			if sql[j] == q {
				if j+1 < len(sql) && sql[j+1] == q {
					j++
					continue
				}
				return j + 1
			}
		}
		return -1
	}
	i := 0
	for i < len(sql) {
		c := sql[i]
		if len(r.semis) > 0 && !(c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\f' || c == '\v') &&
			!strings.HasPrefix(sql[i:], "--") && !strings.HasPrefix(sql[i:], "/*") {
			r.afterSemi = true
		}
		next := -1
		switch {
		case strings.HasPrefix(sql[i:], "--"):
			next = len(sql)
			if j := strings.IndexByte(sql[i:], '\n'); j >= 0 {
				next = i + j + 1
			}
		case strings.HasPrefix(sql[i:], "/*"):
			depth := 0
			for j := i; j < len(sql); j++ {
				if strings.HasPrefix(sql[j:], "/*") && (pg || depth == 0) {
					depth++
					j++
				} else if strings.HasPrefix(sql[j:], "*/") {
					depth--
					j++
					if depth == 0 {
						next = j + 1
						break
					}
				}
			}
		case c == '\'':
			next = until(i, '\'', false)
		case pg && (c == 'e' || c == 'E') && i+1 < len(sql) && sql[i+1] == '\'':
			next = until(i+1, '\'', true)
		case c == '"':
			next = until(i, '"', false)
		case !pg && c == '`':
			next = until(i, '`', false)
		case !pg && c == '[':
			if j := strings.IndexByte(sql[i:], ']'); j >= 0 {
				next = i + j + 1
			}
		case pg && c == '$' && !(i+1 < len(sql) && digit(sql[i+1])):
			j := i + 1
			for j < len(sql) && ident(sql[j]) && sql[j] != '$' {
				j++
			}
			if j < len(sql) && sql[j] == '$' {
				tag := sql[i : j+1]
				if k := strings.Index(sql[j+1:], tag); k >= 0 {
					next = j + 1 + k + len(tag)
				}
			}
		case digit(c) || c == '.' && i+1 < len(sql) && digit(sql[i+1]):
			j := i
			for j < len(sql) && digit(sql[j]) {
				j++
			}
			if j < len(sql) && sql[j] == '.' && (j+1 >= len(sql) || sql[j+1] != '.') {
				for j++; j < len(sql) && digit(sql[j]); j++ {
				}
			}
			if j < len(sql) && (sql[j] == 'e' || sql[j] == 'E') {
				k := j + 1
				if k < len(sql) && (sql[k] == '+' || sql[k] == '-') {
					k++
				}
				if k < len(sql) && digit(sql[k]) {
					for j = k; j < len(sql) && digit(sql[j]); j++ {
					}
				}
			}
			first = false
			i = j
			continue
		case ident(c) && c != '$':
			j := i
			for j < len(sql) && ident(sql[j]) {
				j++
			}
			seen(sql[i:j])
			i = j
			continue
		case c == ':' && i+1 < len(sql) && sql[i+1] == ':': // a cast
			first = false
			i += 2
			continue
		case c == ':' && i+1 < len(sql) && ident(sql[i+1]) && !digit(sql[i+1]) && sql[i+1] != '$': // :name
			j := i + 1
			for j < len(sql) && ident(sql[j]) && sql[j] != '$' {
				j++
			}
			first = false
			i = j
			continue
		default:
			switch c {
			case ';':
				r.semis = append(r.semis, i)
			case '(', ' ', '\t', '\n', '\r', '\f', '\v':
			default:
				first = false
			}
			i++
			continue
		}
		if next < 0 {
			r.terminated = false
			return r
		}
		if c != '-' && c != '/' { // a literal or quoted identifier, not a comment
			first = false
		}
		i = next
	}
	return r
}
