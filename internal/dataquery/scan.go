package dataquery

import (
	"errors"
	"fmt"
	"strings"
)

// The SQL lexer finds what CompileSQL must know about a statement without
// parsing it: its :name placeholders, its parentheses, its top-level words
// (for the last ORDER BY and the statement check, statement.go), and
// anything that would let one statement become two or bind values behind
// levee's back. It skips what may hold any text, by each dialect's lexical
// rules: '...' strings ('' doubled, no backslash escapes: PostgreSQL's
// standard_conforming_strings, on by default since 9.1 and set on by the
// data source for its sessions; E'...' strings take backslash escapes on
// PostgreSQL), "..." identifiers ("" doubled), -- and /* */ comments
// (nested on PostgreSQL), PostgreSQL $tag$...$tag$ strings, and SQLite's
// `...` (`` doubled) and [...] identifiers. It refuses, with the line and
// column: ; anywhere outside those except one at the very end (followed
// by nothing but whitespace and comments, at no depth of parentheses:
// "two statements"), ? (the SQLite and JDBC positional placeholder, and
// PostgreSQL's jsonb ? operators: use jsonb_exists), $n, SQLite's $name
// and @name parameters, unbalanced parentheses, and anything left
// unterminated. :: is a cast, never a placeholder; a : not followed by a
// letter or _ (:=, [1:2]) is plain text, but [lo:hi] reads :hi as a
// placeholder. A number is digits with at most one . and an exponent, as
// PostgreSQL reads one; a word glued to it (1copy) is a word of its own,
// so the statement check sees it. Work is linear in the SQL's length,
// which CompileSQL caps at MaxSQLBytes.

type tokKind uint8

const (
	tWord        tokKind = iota + 1 // bare identifier or keyword
	tQIdent                         // quoted identifier, quotes included
	tString                         // string literal of any form
	tNumber                         // numeric literal
	tPlaceholder                    // :name
	tPunct                          // one byte of anything else; :: as one token
	tPositional                     // ? or $n, in statements levee built (lexBuilt)
	tEnd                            // the one ; allowed, at the end: always the last token
)

type token struct {
	kind       tokKind
	start, end int // sql[start:end] is the token's text
	depth      int // parentheses open before it
}

func isSpace(c byte) bool {
	return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\f' || c == '\v'
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
	at := func(i int) error { return errors.New(lineCol(sql, i)) }
	semi := -1 // the offset of the ; that ended the statement
	for i := 0; i < len(sql); {
		c := sql[i]
		if semi >= 0 && !isSpace(c) && !strings.HasPrefix(sql[i:], "--") && !strings.HasPrefix(sql[i:], "/*") {
			return nil, twoStatements(sql, semi) // only whitespace and comments may follow the ;
		}
		start := i
		emit := func(k tokKind, end int) {
			toks = append(toks, token{kind: k, start: start, end: end, depth: depth})
			i = end
		}
		switch {
		case isSpace(c):
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
		case c == '\'' || (c == 'E' || c == 'e') && d == Postgres && i+1 < len(sql) && sql[i+1] == '\'':
			// E'...' takes backslash escapes. The E starts a token here (in
			// code'x' it ends a word, and the string is a plain one); after a
			// number, 1e'x' is 1 then E'x', as PostgreSQL before 15 reads it.
			q, backslash := i, c != '\''
			if backslash {
				q++
			}
			end, ok := quoted(sql, q, '\'', backslash)
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
			if built || semi >= 0 || depth > 0 {
				if semi < 0 {
					semi = i
				}
				return nil, twoStatements(sql, semi)
			}
			semi = i
			emit(tEnd, i+1)
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
			emit(tNumber, number(sql, i))
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

// lineCol is where offset i of sql is, for errors.
func lineCol(sql string, i int) string {
	line := 1 + strings.Count(sql[:i], "\n")
	col := i - strings.LastIndexByte(sql[:i], '\n')
	return fmt.Sprintf("line %d column %d", line, col)
}

// twoStatements is the error for a ; that does not end the SQL.
func twoStatements(sql string, semi int) error {
	return fmt.Errorf("two statements: ';' at offset %d (%s); a data API's sql is one statement, "+
		"with at most one ';' at its very end", semi, lineCol(sql, semi))
}

// number returns the end of the numeric literal at sql[i]: digits, at most
// one '.', and an exponent (e, an optional sign, digits), as PostgreSQL's
// lexer reads them; a letter after it starts the next token.
func number(sql string, i int) int {
	digits := func(j int) int {
		for j < len(sql) && isDigit(sql[j]) {
			j++
		}
		return j
	}
	j := digits(i)
	if j < len(sql) && sql[j] == '.' && !(j+1 < len(sql) && sql[j+1] == '.') { // 1..2 is not a number in PostgreSQL
		j = digits(j + 1)
	}
	if j < len(sql) && (sql[j] == 'e' || sql[j] == 'E') {
		k := j + 1
		if k < len(sql) && (sql[k] == '+' || sql[k] == '-') {
			k++
		}
		if k < len(sql) && isDigit(sql[k]) {
			j = digits(k)
		}
	}
	return j
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
