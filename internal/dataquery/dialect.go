package dataquery

import (
	"strconv"
	"strings"
)

// Dialect is the SQL flavour a query is compiled for: its bind placeholders
// and its identifier quoting. The zero Dialect is invalid.
type Dialect uint8

const (
	// Postgres numbers its placeholders $1, $2, ... across the statement.
	Postgres Dialect = iota + 1
	// SQLite uses anonymous ? placeholders, bound in textual order.
	SQLite
)

func (d Dialect) String() string {
	switch d {
	case Postgres:
		return "postgres"
	case SQLite:
		return "sqlite"
	}
	return "dialect(" + strconv.Itoa(int(d)) + ")"
}

func (d Dialect) valid() bool { return d == Postgres || d == SQLite }

// appendPlaceholder appends the placeholder of the n-th bind argument
// (1-based).
func (d Dialect) appendPlaceholder(b []byte, n int) []byte {
	if d == SQLite {
		return append(b, '?')
	}
	return strconv.AppendInt(append(b, '$'), int64(n), 10)
}

// QuoteIdent quotes one identifier part the same way in both dialects:
// "x", with an inner " doubled. Identifiers only ever come from
// configuration; they are quoted anyway so no name can change the
// statement's shape. A name holding NUL is refused earlier (checkIdent).
func (d Dialect) QuoteIdent(name string) string {
	return `"` + strings.ReplaceAll(name, `"`, `""`) + `"`
}

// maxIdentLen is PostgreSQL's limit (NAMEDATALEN-1); longer names would be
// silently truncated there.
const maxIdentLen = 63
