package dataquery

import (
	"fmt"
	"strings"
)

// The SQL lexer finds what CompileSQL must know about a statement without
// parsing it: its :name placeholders, its parentheses, its top-level words
// (for the last ORDER BY), and anything that would let one statement become
// two or bind values behind levee's back. It skips what may hold any text:
// '...' strings ('' doubled, no backslash escapes: PostgreSQL's
// standard_conforming_strings, on by default since 9.1; E'...' strings take
// backslash escapes on PostgreSQL), "..." identifiers ("" doubled), -- and
// /* */ comments (nested on PostgreSQL), PostgreSQL $tag$...$tag$ strings,
// and SQLite's `...` and [...] identifiers. It refuses, with the line and
// column: ; anywhere outside those (one statement only), ? (the SQLite and
// JDBC positional placeholder, and PostgreSQL's jsonb ? operators: use
// jsonb_exists), $n, SQLite's $name and @name parameters, unbalanced
// parentheses, and anything left unterminated. :: is a cast, never a
// placeholder; a : not followed by a letter or _ (:=, [1:2]) is plain
// text, but [lo:hi] reads :hi as a placeholder. Work is linear in the
// SQL's length, which CompileSQL caps at MaxSQLBytes.

type tokKind uint8

const (
	tWord        tokKind = iota + 1 // bare identifier or keyword
	tQIdent                         // quoted identifier, quotes included
	tString                         // string literal of any form
	tNumber                         // numeric literal
	tPlaceholder                    // :name
	tPunct                          // one byte of anything else; :: as one token
	tPositional                     // ? or $n, in statements levee built (lexBuilt)
)

type token struct {
	kind       tokKind
	start, end int // sql[start:end] is the token's text
	depth      int // parentheses open before it
}

func isIdentStart(c byte) bool {
	return 'a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || c == '_' || c >= 0x80
}

func isIdentByte(c byte) bool { return isIdentStart(c) || isDigit(c) || c == '$' }

// lex splits sql into tokens, dropping whitespace and comments.
func lex(sql string, d Dialect) ([]token, error) { return lexMode(sql, d, false) }

// lexBuilt lexes a statement levee built, whose ? or $n placeholders are
// tPositional tokens (the tests and fuzz targets count them).
func lexBuilt(sql string, d Dialect) ([]token, error) { return lexMode(sql, d, true) }

func lexMode(sql string, d Dialect, built bool) ([]token, error) {
	var toks []token
	depth := 0
	at := func(i int) error {
		line := 1 + strings.Count(sql[:i], "\n")
		col := i - strings.LastIndexByte(sql[:i], '\n')
		return fmt.Errorf("line %d column %d", line, col)
	}
	for i := 0; i < len(sql); {
		c := sql[i]
		start := i
		emit := func(k tokKind, end int) {
			toks = append(toks, token{kind: k, start: start, end: end, depth: depth})
			i = end
		}
		switch {
		case c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\f' || c == '\v':
			i++
		case c == '-' && i+1 < len(sql) && sql[i+1] == '-':
			if j := strings.IndexByte(sql[i:], '\n'); j >= 0 {
				i += j + 1
			} else {
				i = len(sql)
			}
		case c == '/' && i+1 < len(sql) && sql[i+1] == '*':
			end, ok := blockComment(sql, i, d == Postgres)
			if !ok {
				return nil, fmt.Errorf("unterminated /* comment at %v", at(start))
			}
			i = end
		case c == '\'':
			backslash := d == Postgres && i > 0 && (sql[i-1] == 'E' || sql[i-1] == 'e') &&
				(i == 1 || !isIdentByte(sql[i-2]))
			end, ok := quoted(sql, i, '\'', backslash)
			if !ok {
				return nil, fmt.Errorf("unterminated string at %v", at(start))
			}
			emit(tString, end)
		case c == '"' || c == '`' && d == SQLite:
			end, ok := quoted(sql, i, c, false)
			if !ok {
				return nil, fmt.Errorf("unterminated quoted identifier at %v", at(start))
			}
			emit(tQIdent, end)
		case c == '[' && d == SQLite:
			j := strings.IndexByte(sql[i:], ']')
			if j < 0 {
				return nil, fmt.Errorf("unterminated [identifier] at %v", at(start))
			}
			emit(tQIdent, i+j+1)
		case c == '?' && built && d == SQLite:
			emit(tPositional, i+1)
		case c == '$' && built && d == Postgres && i+1 < len(sql) && isDigit(sql[i+1]):
			j := i + 1
			for j < len(sql) && isDigit(sql[j]) {
				j++
			}
			emit(tPositional, j)
		case c == '$':
			if d == SQLite {
				return nil, fmt.Errorf("SQLite parameter $ at %v: declare parameters as :name", at(start))
			}
			if i+1 < len(sql) && isDigit(sql[i+1]) {
				return nil, fmt.Errorf("positional placeholder $n at %v: declare parameters as :name", at(start))
			}
			end, ok := dollarQuoted(sql, i)
			if !ok {
				return nil, fmt.Errorf("stray $ or unterminated dollar-quoted string at %v", at(start))
			}
			emit(tString, end)
		case c == '?':
			return nil, fmt.Errorf("positional placeholder ? at %v: declare parameters as :name", at(start))
		case c == ';':
			return nil, fmt.Errorf("; at %v: a data query is exactly one statement, with no ;", at(start))
		case c == '@' && d == SQLite && i+1 < len(sql) && isIdentStart(sql[i+1]):
			return nil, fmt.Errorf("SQLite parameter @name at %v: declare parameters as :name", at(start))
		case c == ':':
			switch {
			case i+1 < len(sql) && sql[i+1] == ':':
				emit(tPunct, i+2)
			case i+1 < len(sql) && isIdentStart(sql[i+1]):
				j := i + 2
				for j < len(sql) && (isIdentStart(sql[j]) || isDigit(sql[j])) {
					j++
				}
				emit(tPlaceholder, j)
			default:
				emit(tPunct, i+1)
			}
		case isIdentStart(c):
			j := i + 1
			for j < len(sql) && isIdentByte(sql[j]) {
				j++
			}
			emit(tWord, j)
		case isDigit(c) || c == '.' && i+1 < len(sql) && isDigit(sql[i+1]):
			j := i + 1
			for j < len(sql) && (isIdentByte(sql[j]) || sql[j] == '.') {
				j++
			}
			emit(tNumber, j)
		case c == '(':
			emit(tPunct, i+1)
			depth++
		case c == ')':
			if depth == 0 {
				return nil, fmt.Errorf("unbalanced ) at %v", at(start))
			}
			depth--
			emit(tPunct, i+1)
		default:
			emit(tPunct, i+1)
		}
	}
	if depth != 0 {
		return nil, fmt.Errorf("%d unclosed ( at the end of the SQL", depth)
	}
	return toks, nil
}

// quoted returns the end of the quoted run starting at sql[i] == q, where
// a doubled q is a q and, with backslash, \x escapes x.
func quoted(sql string, i int, q byte, backslash bool) (int, bool) {
	for j := i + 1; j < len(sql); j++ {
		switch sql[j] {
		case '\\':
			if backslash {
				j++
			}
		case q:
			if j+1 < len(sql) && sql[j+1] == q {
				j++
				continue
			}
			return j + 1, true
		}
	}
	return 0, false
}

// blockComment returns the end of the /* comment at sql[i]; PostgreSQL
// nests them, SQLite does not.
func blockComment(sql string, i int, nested bool) (int, bool) {
	level := 0
	for j := i; j+1 < len(sql); {
		switch {
		case sql[j] == '/' && sql[j+1] == '*' && (nested || level == 0):
			level++
			j += 2
		case sql[j] == '*' && sql[j+1] == '/':
			level--
			j += 2
			if level == 0 {
				return j, true
			}
		default:
			j++
		}
	}
	return 0, false
}

// dollarQuoted returns the end of the $tag$...$tag$ string at sql[i]; the
// tag is empty or an identifier not starting with a digit.
func dollarQuoted(sql string, i int) (int, bool) {
	j := i + 1
	if j < len(sql) && isIdentStart(sql[j]) {
		for j < len(sql) && (isIdentStart(sql[j]) || isDigit(sql[j])) {
			j++
		}
	}
	if j >= len(sql) || sql[j] != '$' {
		return 0, false
	}
	tag := sql[i : j+1]
	k := strings.Index(sql[j+1:], tag)
	if k < 0 {
		return 0, false
	}
	return j + 1 + k + len(tag), true
}
