package dataformat

import (
	"bytes"
	"encoding/json"
	"flag"
	"math"
	"os"
	"path/filepath"
	"testing"
	"time"
)

var update = flag.Bool("update", false, "rewrite the golden files under testdata/golden")

// ts is a timestamp with nanoseconds, in a zone other than UTC, so the
// tests see the conversion.
var ts = time.Date(2025, 3, 9, 1, 2, 3, 450000000, time.FixedZone("x", -5*3600))

// goldenCase is one answer rendered in every format and compared with
// testdata/golden/<name>.<format>.
type goldenCase struct {
	name string
	cols []string
	rows [][]any
	lim  Limits
	tail Tail
	// abort, when set, ends the answer with Abort(abort[0], abort[1]).
	abort []string
}

var goldenCases = []goldenCase{
	{
		name: "types",
		cols: []string{"null", "bool", "int", "float", "string", "time", "bytes", "json"},
		rows: [][]any{
			{nil, true, int64(42), 1.5, "north", ts, []byte("hi\x00\xff"), json.RawMessage(`{"a": [1, 2.5, "x"],` + "\n" + ` "b": null}`)},
			{nil, false, int64(-7), math.Copysign(0, -1), "", time.Date(2025, 1, 1, 0, 0, 0, 0, time.UTC), []byte{}, json.RawMessage(`"s"`)},
		},
		tail: Tail{NextCursor: "eyJpZCI6NDJ9.sig"},
	},
	{
		name: "empty",
		cols: []string{"id", "name"},
		tail: Tail{},
	},
	{
		name: "escapes",
		cols: []string{`we"ird`, "new\nline", "é,col", " sp"},
		rows: [][]any{
			{"quote \" backslash \\ slash /", "ctl \x00\x01\x1f\t\r\n\b\f\x7f", "uni é 中 😀 \u2028\u2029", "bad \xff\xfe utf8 \xe2\x82"},
			{" lead", "trail ", `\.`, "a,b"},
		},
	},
	{
		name: "numbers",
		cols: []string{"n"},
		rows: [][]any{
			{int64(1 << 53)}, {int64(-1 << 53)}, {int64(1<<53 + 1)}, {int64(-1<<53 - 1)},
			{int64(math.MaxInt64)}, {int64(math.MinInt64)}, {int64(0)},
			{1e20}, {1e21}, {1e-6}, {1e-7}, {123456789.125}, {0.1}, {-2.5e-300}, {math.MaxFloat64},
			{math.NaN()}, {math.Inf(1)}, {math.Inf(-1)},
		},
	},
	{
		name: "times",
		cols: []string{"t"},
		rows: [][]any{
			{time.Date(2025, 6, 1, 12, 0, 0, 0, time.UTC)},
			{time.Date(2025, 6, 1, 12, 0, 0, 1, time.UTC)},
			{time.Date(2025, 6, 1, 12, 0, 0, 120000000, time.UTC)},
			{time.Date(1, 1, 1, 0, 0, 0, 0, time.UTC)},
			{time.Date(9999, 12, 31, 23, 59, 59, 999999999, time.UTC)},
			{ts},
		},
	},
	{
		name: "max_rows",
		cols: []string{"id"},
		rows: [][]any{{int64(1)}, {int64(2)}, {int64(3)}},
		lim:  Limits{MaxRows: 2},
		tail: Tail{NextCursor: "c2"},
	},
	{
		name: "caller_truncated",
		cols: []string{"id"},
		rows: [][]any{{int64(1)}},
		tail: Tail{Truncated: true, Reason: MaxBytesCap},
	},
	{
		name:  "abort",
		cols:  []string{"id", "name"},
		rows:  [][]any{{int64(1), "a"}, {int64(2), "b"}},
		abort: []string{"statement_timeout", `canceling statement due to "statement timeout"` + "\nline two"},
	},
}

// render writes c's answer in f, returning the body and Row's errors.
func render(t testing.TB, f Format, c goldenCase) ([]byte, []error) {
	t.Helper()
	var out bytes.Buffer
	w, err := NewWriter(f, &out, mustColumns(t, c.cols), c.lim)
	if err != nil {
		t.Fatal(err)
	}
	var errs []error
	for _, r := range c.rows {
		if err := w.Row(r); err != nil {
			errs = append(errs, err)
		}
	}
	if c.abort != nil {
		err = w.Abort(c.abort[0], c.abort[1])
	} else {
		err = w.Finish(c.tail)
	}
	if err != nil {
		t.Fatal(err)
	}
	return out.Bytes(), errs
}

// TestGolden: every format's bytes for every value type, escapes, big
// numbers, times, caps and aborts, against reviewed files (go test -update
// rewrites them).
func TestGolden(t *testing.T) {
	for _, c := range goldenCases {
		for _, f := range Formats {
			t.Run(c.name+"."+f.String(), func(t *testing.T) {
				got, _ := render(t, f, c)
				path := filepath.Join("testdata", "golden", c.name+"."+f.String())
				if *update {
					if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
						t.Fatal(err)
					}
					if err := os.WriteFile(path, got, 0o644); err != nil {
						t.Fatal(err)
					}
				}
				want, err := os.ReadFile(path)
				if err != nil {
					t.Fatal(err)
				}
				if !bytes.Equal(got, want) {
					t.Errorf("got\n%s\nwant\n%s", got, want)
				}
			})
		}
	}
}
