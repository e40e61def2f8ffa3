//go:build !race

package dataquery

import (
	"strings"
	"testing"
	"time"
)

// TestStatementCheckLargeInputs: the check's work is linear: SQL of
// MaxSQLBytes in shapes that would make a careless scanner quadratic
// (many comments, CTEs, parentheses, words, unterminated tags) is read in
// well under a second (each takes about a millisecond).
// Wall-clock: in LOAD_TESTS.
func TestStatementCheckLargeInputs(t *testing.T) {
	fill := func(prefix, unit, suffix string) string {
		n := (MaxSQLBytes - len(prefix) - len(suffix)) / len(unit)
		return prefix + strings.Repeat(unit, n) + suffix
	}
	ctes := func() string {
		var b strings.Builder
		b.WriteString("WITH ")
		for i := 0; b.Len() < MaxSQLBytes-64; i++ {
			if i > 0 {
				b.WriteString(", ")
			}
			b.WriteString("a AS (SELECT 1)")
		}
		b.WriteString(" SELECT 1")
		return b.String()
	}
	for _, sql := range []string{
		fill("SELECT 1 ", "/* /* */ */ ", ""),
		fill("SELECT ", "((", "") + strings.Repeat(")", 1),
		fill("SELECT ", "(1)+", "1"),
		fill("SELECT ", "a, ", "b"),
		fill("SELECT ", "$a$ ", ""),
		fill("SELECT 1 ", "-- x\n", ""),
		fill("WITH ", "a AS (SELECT 1) SEARCH DEPTH FIRST BY x ", "SELECT 1"),
		ctes(),
	} {
		for _, d := range []Dialect{Postgres, SQLite} {
			start := time.Now()
			_, _, _ = queryTokens(sql, d)
			took := time.Since(start)
			if took > time.Second {
				t.Errorf("%d bytes starting %q (%v) took %v", len(sql), sql[:20], d, took)
			}
			t.Logf("%d bytes starting %q (%v): %v", len(sql), sql[:20], d, took)
		}
	}
}
