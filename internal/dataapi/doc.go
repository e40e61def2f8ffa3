// Package dataapi serves a data route: a SQL query or a table published as
// an HTTP API. A Route is the route's upstream.Forwarder, so the request
// path treats a data route as it treats a proxied one (identity, grants,
// rate limits, admission in front of the data source's pool, the memory
// guard, metrics, the access log) and only the attempt differs: instead of
// an endpoint, the attempt
//
//  1. negotiates the answer's format from Accept (dataformat),
//  2. binds the request's query string to the route's statement
//     (dataquery: every value a bind argument, every refusal naming its
//     parameter),
//     and, with Prefer: count=, counts the rows its filters select (at
//     most count_max + 1 read; count.go),
//  3. answers from the route's cache when it can (datacache: fresh hits,
//     single flight between concurrent misses, the last good answer while
//     the source fails),
//  4. or runs the statement on the source's bounded, read-only pool
//     (datasource) and streams the rows as they arrive, encoded into a
//     32 KiB buffer that the proxy's copy loop drains: no goroutine per
//     answer, no rows collected in memory, and the database connection is
//     held only while the client keeps reading (the route's send timeout
//     bounds each write).
//
// A request the route refuses (bad parameter, unacceptable format, the
// source down or past its statement timeout) ends the attempt with an
// *upstream.Refusal whose reason is one of dataquery.Reasons; proxy's
// reason table derives a row for each.
//
// A table route compiles its query once its database has told the kinds
// of its columns, and a route's answer columns (for the OpenAPI document,
// Route.Columns) are learnt the same way: once, by one request at a time,
// the others waiting only within their own context (columns.go).
package dataapi
