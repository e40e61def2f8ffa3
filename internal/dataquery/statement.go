package dataquery

import (
	"errors"
	"fmt"
	"strings"
)

// The statement check (issue 22): a data API's sql is a query and nothing
// else. Running inside BEGIN READ ONLY is not enough: PostgreSQL lets a
// read-only transaction run COPY ... TO PROGRAM and COPY ... TO 'file',
// and a data API's SQL may come from the admin API. So CompileSQL accepts
// exactly one statement (lex: at most one ';', at the very end) that
//
//   - begins (after whitespace, comments and opening parentheses) with
//     SELECT, VALUES, TABLE (PostgreSQL only: SQLite has no TABLE
//     statement) or WITH;
//   - if it begins with WITH: each CTE's body begins with SELECT, VALUES,
//     TABLE or WITH, and the statement after the CTE list begins with
//     SELECT, VALUES or TABLE;
//   - has none of the words INSERT, UPDATE, DELETE, MERGE, INTO and COPY
//     outside strings, comments and quoted identifiers, anywhere.
//
// The last rule is deliberately blunt: it is what refuses a
// data-modifying CTE nested anywhere, SELECT ... INTO (which creates a
// table) and COPY whatever its form, without parsing SQL. Its price: a
// column so named must be quoted ("delete", t."update"), and
// SELECT ... FOR UPDATE is refused (a read-only transaction refuses it
// anyway). The words are compared case-insensitively, as both databases
// read keywords. Work is linear in the number of tokens.

// refusedWords are refused as bare words anywhere in a data API's SQL.
var refusedWords = [...]string{"INSERT", "UPDATE", "DELETE", "MERGE", "INTO", "COPY"}

const wordList = "INSERT, UPDATE, DELETE, MERGE, INTO or COPY"

// queryKeywords are the words a query (or a CTE's body) may begin with.
var queryKeywords = [...]string{"SELECT", "VALUES", "TABLE"}

// queryTokens lexes sql and checks that it is one query. It returns the
// SQL without its final ';' (and the comments after it, so a paged
// statement can be wrapped as a subquery) and its tokens.
func queryTokens(sql string, d Dialect) (string, []token, error) {
	toks, err := lex(sql, d)
	if err != nil {
		return "", nil, err
	}
	if n := len(toks); n > 0 && toks[n-1].kind == tEnd {
		sql, toks = sql[:toks[n-1].start], toks[:n-1]
	}
	if err := checkStatement(sql, toks, d); err != nil {
		return "", nil, err
	}
	return sql, toks, nil
}

// checkStatement applies the rules above to toks, sql's tokens without the
// final ';'.
func checkStatement(sql string, toks []token, d Dialect) error {
	st := stmt{sql: sql, toks: toks, d: d}
	if len(toks) == 0 {
		return errors.New("no statement: only whitespace, comments or a ';'")
	}
	i := st.skipOpen(0)
	switch kw := st.keyword(i); {
	case kw == "WITH":
		if err := st.with(i); err != nil {
			return err
		}
	case st.isQuery(kw):
	default:
		return st.notQuery(i, "")
	}
	for j, t := range toks {
		if t.kind != tWord {
			continue
		}
		w := st.text(j)
		for _, r := range refusedWords {
			if !strings.EqualFold(w, r) {
				continue
			}
			if r == "INTO" {
				return fmt.Errorf("SELECT ... INTO at %s is not a query (it creates a table); "+
					"quote a name spelt into (\"into\")", st.at(j))
			}
			return fmt.Errorf("%s at %s: a data API's sql may not hold %s outside strings and quoted identifiers "+
				"(no data-modifying WITH, no COPY, no FOR UPDATE); quote a name so spelt (%q)",
				r, st.at(j), wordList, strings.ToLower(r))
		}
	}
	return nil
}

// stmt is a statement's tokens with the helpers the check reads them by.
type stmt struct {
	sql  string
	toks []token
	d    Dialect
}

func (st *stmt) text(i int) string { return st.sql[st.toks[i].start:st.toks[i].end] }

// keyword is toks[i] upper-cased when it is a bare word, else "".
func (st *stmt) keyword(i int) string {
	if i >= len(st.toks) || st.toks[i].kind != tWord {
		return ""
	}
	return strings.ToUpper(st.text(i))
}

// word reports whether toks[i] is the bare word w at depth.
func (st *stmt) word(i, depth int, w string) bool {
	return i < len(st.toks) && st.toks[i].kind == tWord && st.toks[i].depth == depth && strings.EqualFold(st.text(i), w)
}

func (st *stmt) punct(i int, p string) bool {
	return i < len(st.toks) && st.toks[i].kind == tPunct && st.text(i) == p
}

// skipOpen returns the index of the first token from i on that is not '('.
func (st *stmt) skipOpen(i int) int {
	for st.punct(i, "(") {
		i++
	}
	return i
}

// closing returns the index of the ')' closing the '(' at toks[i]. The
// lexer has checked that every '(' is closed.
func (st *stmt) closing(i int) int {
	depth := st.toks[i].depth
	for j := i + 1; j < len(st.toks); j++ {
		if st.toks[j].depth == depth && st.punct(j, ")") {
			return j
		}
	}
	return len(st.toks)
}

// at says where toks[i] is.
func (st *stmt) at(i int) string {
	if i >= len(st.toks) {
		return "the end of the SQL"
	}
	return lineCol(st.sql, st.toks[i].start)
}

func (st *stmt) isQuery(kw string) bool {
	if kw == "TABLE" && st.d == SQLite {
		return false
	}
	for _, q := range queryKeywords {
		if kw == q {
			return true
		}
	}
	return false
}

// notQuery is the error for a statement (or, with what, a part of one)
// that begins with toks[i].
func (st *stmt) notQuery(i int, what string) error {
	want := "SELECT, WITH, VALUES or TABLE"
	if st.d == SQLite {
		want = "SELECT, WITH or VALUES"
	}
	if what == "" {
		what = "a data API's sql is one query, beginning with " + want
	}
	kw := st.keyword(i)
	switch {
	case i >= len(st.toks):
		return fmt.Errorf("the SQL ends where a statement should begin: %s", what)
	case kw == "":
		return fmt.Errorf("the statement begins with %s at %s: %s", quote(st.text(i)), st.at(i), what)
	case kw == "TABLE":
		return fmt.Errorf("TABLE at %s: SQLite has no TABLE statement; write SELECT * FROM the table", st.at(i))
	}
	return fmt.Errorf("%s is not a query (%s): %s", kw, st.at(i), what)
}

// with checks a statement beginning WITH at toks[i]: its CTEs' bodies and
// the statement after them. Each step moves j forward, so the loops end
// within len(toks) steps.
func (st *stmt) with(i int) error {
	depth := st.toks[i].depth
	j := i + 1
	if st.word(j, depth, "RECURSIVE") {
		j++
	}
	expect := func(j int, what string) error {
		got := "the end of the SQL"
		if j < len(st.toks) {
			got = quote(st.text(j)) + " at " + st.at(j)
		}
		return fmt.Errorf("WITH: expected %s, found %s", what, got)
	}
	for {
		if j >= len(st.toks) || st.toks[j].kind != tWord && st.toks[j].kind != tQIdent {
			return expect(j, "the name of a WITH query")
		}
		name := st.text(j)
		j++
		if st.punct(j, "(") { // its column names
			j = st.closing(j) + 1
		}
		if !st.word(j, depth, "AS") {
			return expect(j, "AS")
		}
		j++
		if st.word(j, depth, "NOT") {
			j++
		}
		if st.word(j, depth, "MATERIALIZED") {
			j++
		}
		if !st.punct(j, "(") {
			return expect(j, "( and the statement of WITH query "+name)
		}
		body := st.skipOpen(j + 1)
		if kw := st.keyword(body); kw != "WITH" && !st.isQuery(kw) {
			if kw != "" {
				return fmt.Errorf("WITH %s AS (%s ...) at %s: a data-modifying WITH is not a query; "+
					"each WITH query must be a SELECT, VALUES or TABLE", name, kw, st.at(body))
			}
			return st.notQuery(body, "each WITH query must be a SELECT, VALUES or TABLE")
		}
		j = st.closing(j) + 1
		for st.word(j, depth, "SEARCH") || st.word(j, depth, "CYCLE") {
			end := "SET" // SEARCH {BREADTH|DEPTH} FIRST BY col, ... SET col
			if st.word(j, depth, "CYCLE") {
				end = "USING" // CYCLE col, ... SET col [TO v DEFAULT v] USING col
			}
			for j < len(st.toks) && !st.word(j, depth, end) {
				j++
			}
			if j >= len(st.toks) {
				return expect(j, end)
			}
			j += 2 // the keyword and its column
		}
		if !st.punct(j, ",") {
			break
		}
		j++
	}
	main := st.skipOpen(j)
	if !st.isQuery(st.keyword(main)) {
		return st.notQuery(main, "the statement after WITH's queries must be a SELECT, VALUES or TABLE")
	}
	return nil
}
