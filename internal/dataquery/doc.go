// Package dataquery turns a data API route's declared query and a
// request's query string into SQL text and bind arguments. Its one job is
// that no byte of a request ever becomes SQL: every value is a bind
// argument, every identifier comes from configuration and is quoted, and
// the request is parsed strictly, each refusal an *Error naming the
// parameter. It is pure: no I/O, no database, no clock; running the
// statement is internal/datasource's job.
//
// # Modes
//
// SQL mode: CompileSQL(sql, params, page, dialect) checks that a
// statement is one query (SELECT, WITH ... SELECT, VALUES or TABLE; no
// COPY, no data-modifying WITH, no SELECT ... INTO, no second statement:
// statement.go) and its :name placeholders against its declared Params
// (the checks `levee validate`, `levee run` and the data-API admin API
// report) and returns a *SQLQuery. Table mode:
// CompileTable(spec, page, dialect) compiles an allow-listed table, its
// columns and PostgREST-style filters (?region=eq.north, see Op) into a
// *TableQuery. Both are Query values:
//
//	b, err := q.Bind(r.URL.Query(), paged) // err is an *Error: answer 400 with err.Reason
//	rows := run(b.SQL, b.Args...)          // fetches b.Limit+1 rows when paged
//	next, err := q.NextCursor(b, keysetValuesOfRow(b.Limit))
//
// # Values
//
// Kinds and their strict syntax are listed at Kind. A list parameter is
// one query value with comma-separated items ("ids=1,2,3"); a comma inside
// a string item is written \, and a backslash \\ (PostgREST's quoting is
// not supported); empty items are refused. Bind arguments are only int64,
// float64, bool, string (uuid as its lower-case canonical text),
// time.Time (timestamps in UTC, dates at 00:00 UTC) and nil (SQL NULL, a
// missing optional parameter). A list binds one placeholder per item
// (IN ($3, $4, $5)), so no array types reach the driver. Each placeholder
// is its own argument, even for a name used twice, so the placeholders in
// Bound.SQL always number len(Bound.Args), in both dialects.
//
// # Paging
//
// With a Page, JSON answers are pages ordered by the keyset: the
// statement selects Limit+1 rows (limit=, default Page.Default, at most
// Page.Max) after the row a cursor= names. Cursors are opaque base64url,
// HMAC-signed over the page's Scope (route name and version), the request's
// canonical parameters (Bound.Params) and the last row's keyset values;
// see cursor.go for the format. A cursor= that is empty means the first
// page. NDJSON and CSV answers are not paged (Bind with paged false): every
// row is selected, limit= and cursor= are refused, and the caller caps the
// rows (package dataapi reads an unpaged answer's limit= itself, up to
// max_rows, and takes it out of the query string before Bind).
//
// # Client choices (table mode)
//
// select= picks and orders the answer's columns, order= one of the
// TableSpec's Orders (each paged by its own keyset), and or=/and= groups
// combine filters, each condition with an optional not. (selectorder.go,
// filterops.go). Both choices are part of Bound.Params. count.go builds
// the statements of Prefer: count= (a COUNT over a LIMIT max+1 subquery,
// or EXPLAIN for the planner's estimate).
//
// # Dialects
//
// Postgres numbers placeholders $1, $2, ...; SQLite uses ?. Both quote
// identifiers "x" with " doubled. The SQL lexer knows each dialect's
// strings, quoted identifiers and comments (scan.go).
//
// Compiled queries are immutable and safe for concurrent use.
package dataquery
