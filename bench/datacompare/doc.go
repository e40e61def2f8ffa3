// Package datacompare measures levee's data routes side by side with a bare
// Go server on the same database and queries (issue 16, "Speed"): NDJSON
// streaming of 1M PostgreSQL rows, 20-row indexed lookups, a pool
// saturated by 200 ms queries, and a SQLite full scan. levee (bin/levee)
// and the baseline (./baseline) run as separate processes, so each one's
// RSS and CPU are its own.
//
// The comparison is a test behind the build tag datacompare, so `make
// test` never runs it (its judgements are wall-clock ones): run it with
// `make bench-data`. It only reports; it fails only when a run breaks
// (a wrong row count, a process that does not start).
package datacompare
