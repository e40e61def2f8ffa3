package dataformat

import (
	"bytes"
	"encoding/csv"
	"encoding/json"
	"errors"
	"io"
	"math"
	"strings"
	"testing"
	"time"
)

// TestJSONValuesParse: the JSON answer parses with encoding/json to the
// values the contract names: integers exact as numbers up to 2^53 and as
// strings beyond, floats as the same float64, NaN and infinities as
// strings, times as RFC 3339 UTC, bytes as base64, json inline.
func TestJSONValuesParse(t *testing.T) {
	cols := []string{"v"}
	cases := []struct {
		in   any
		want any // what encoding/json decodes, with UseNumber
	}{
		{nil, nil},
		{true, true},
		{int64(1 << 53), json.Number("9007199254740992")},
		{int64(-1 << 53), json.Number("-9007199254740992")},
		{int64(1<<53 + 1), "9007199254740993"},
		{int64(-1<<53 - 1), "-9007199254740993"},
		{int64(math.MinInt64), "-9223372036854775808"},
		{1e21, json.Number("1e+21")},
		{1e-7, json.Number("1e-7")},
		{0.1, json.Number("0.1")},
		{math.NaN(), "NaN"},
		{math.Inf(1), "Infinity"},
		{math.Inf(-1), "-Infinity"},
		{"a\u2028b\xffc", "a\u2028b\uFFFDc"},
		{ts, "2025-03-09T06:02:03.45Z"},
		{[]byte{0, 1, 254, 255}, "AAH+/w=="},
		{json.RawMessage(" [1, {\"k\": \"v\"}] "), []any{json.Number("1"), map[string]any{"k": "v"}}},
	}
	for _, f := range []Format{JSON, NDJSON} {
		for _, c := range cases {
			var out bytes.Buffer
			w, err := NewWriter(f, &out, mustColumns(t, cols), Limits{})
			if err != nil {
				t.Fatal(err)
			}
			if err := w.Row([]any{c.in}); err != nil {
				t.Fatalf("%v %#v: %v", f, c.in, err)
			}
			if err := w.Finish(Tail{}); err != nil {
				t.Fatal(err)
			}
			row := decodeRows(t, f, out.Bytes())[0]
			if got := row["v"]; !jsonEqual(got, c.want) {
				t.Errorf("%v: %#v encoded as %s decodes to %#v, want %#v", f, c.in, out.Bytes(), got, c.want)
			}
		}
	}
}

func jsonEqual(a, b any) bool {
	x, _ := json.Marshal(a)
	y, _ := json.Marshal(b)
	return bytes.Equal(x, y)
}

// decodeRows parses a complete JSON or NDJSON answer into its rows,
// failing the test if it is not exactly the documented shape.
func decodeRows(t testing.TB, f Format, body []byte) []map[string]any {
	t.Helper()
	var rows []map[string]any
	switch f {
	case JSON:
		var doc struct {
			Rows       []map[string]any `json:"rows"`
			NextCursor *string          `json:"next_cursor"`
			Truncated  *bool            `json:"truncated"`
		}
		dec := json.NewDecoder(bytes.NewReader(body))
		dec.UseNumber()
		dec.DisallowUnknownFields()
		if err := dec.Decode(&doc); err != nil {
			t.Fatalf("JSON answer %q: %v", body, err)
		}
		if doc.Rows == nil || doc.Truncated == nil {
			t.Fatalf("JSON answer %q lacks rows or truncated", body)
		}
		if dec.More() {
			t.Fatalf("JSON answer %q: more after the document", body)
		}
		rows = doc.Rows
	case NDJSON:
		if len(body) > 0 && body[len(body)-1] != '\n' {
			t.Fatalf("NDJSON answer %q does not end with a newline", body)
		}
		for _, line := range strings.Split(strings.TrimSuffix(string(body), "\n"), "\n") {
			if line == "" {
				continue
			}
			dec := json.NewDecoder(strings.NewReader(line))
			dec.UseNumber()
			var m map[string]any
			if err := dec.Decode(&m); err != nil {
				t.Fatalf("NDJSON line %q: %v", line, err)
			}
			if dec.More() {
				t.Fatalf("NDJSON line %q holds more than one value", line)
			}
			rows = append(rows, m)
		}
	}
	return rows
}

// TestCapsAtTheEdge: max_rows lets exactly max_rows rows through; a row
// that makes the body exactly max_bytes long is written and one byte more
// is refused, and the refusal names its cap, in every format.
func TestCapsAtTheEdge(t *testing.T) {
	cols := []string{"id", "name"}
	row := func(i int) []any { return []any{int64(i), "name-" + strings.Repeat("x", i)} }
	for _, f := range Formats {
		// The body's length after the prelude and k rows.
		var full bytes.Buffer
		w, _ := NewWriter(f, &full, mustColumns(t, cols), Limits{})
		var sizes []int64
		for i := 0; i < 5; i++ {
			if err := w.Row(row(i)); err != nil {
				t.Fatal(err)
			}
			sizes = append(sizes, int64(len(w.buf)))
		}
		w.Discard()
		for _, lim := range []int64{sizes[2], sizes[2] + 1, sizes[3] - 1} {
			var out bytes.Buffer
			w, _ := NewWriter(f, &out, mustColumns(t, cols), Limits{MaxBytes: lim})
			n := 0
			var err error
			for i := 0; i < 5; i++ {
				if err = w.Row(row(i)); err != nil {
					break
				}
				n++
			}
			var le *LimitError
			if !errors.As(err, &le) || le.Cap != MaxBytesCap || le.Limit != lim || !errors.Is(err, ErrLimit) {
				t.Fatalf("%v max_bytes %d: err %v, want a max_bytes LimitError", f, lim, err)
			}
			if n != 3 {
				t.Errorf("%v max_bytes %d (3 rows take %d): %d rows written, want 3", f, lim, sizes[2], n)
			}
			if err := w.Row(row(0)); err != le {
				t.Errorf("%v: Row after the cap = %v, want the same LimitError", f, err)
			}
			if tr, c := w.Truncated(); !tr || c != MaxBytesCap {
				t.Errorf("%v: Truncated() = %v, %v", f, tr, c)
			}
			if err := w.Finish(Tail{}); err != nil {
				t.Fatal(err)
			}
			body := out.Bytes()
			if int64(len(body)) < sizes[2] {
				t.Fatalf("%v: body %q", f, body)
			}
			switch f {
			case JSON:
				if !bytes.HasSuffix(body, []byte(`,"truncated":true}`+"\n")) {
					t.Errorf("JSON: truncated answer ends %q", body)
				}
				if rows := decodeRows(t, f, body); len(rows) != 3 {
					t.Errorf("JSON: %d rows decoded", len(rows))
				}
			case NDJSON:
				if !bytes.HasSuffix(body, []byte("\"}\n{\"truncated\":true,\"reason\":\"max_bytes\"}\n")) {
					t.Errorf("NDJSON: truncated answer ends %q", body)
				}
				if int64(len(body)) != sizes[2]+int64(len(`{"truncated":true,"reason":"max_bytes"}`+"\n")) {
					t.Errorf("NDJSON: body of %d bytes, rows %d", len(body), sizes[2])
				}
			case CSV:
				if int64(len(body)) != sizes[2] {
					t.Errorf("CSV: body of %d bytes, want %d", len(body), sizes[2])
				}
			}
		}
		// max_rows: exactly max_rows rows pass; the next is refused.
		var out bytes.Buffer
		w, _ = NewWriter(f, &out, mustColumns(t, cols), Limits{MaxRows: 3, MaxBytes: sizes[4]})
		for i := 0; i < 3; i++ {
			if err := w.Row(row(i)); err != nil {
				t.Fatalf("%v row %d under max_rows 3: %v", f, i, err)
			}
		}
		if tr, _ := w.Truncated(); tr {
			t.Errorf("%v: truncated before the cap refused a row", f)
		}
		err := w.Row(row(3))
		var le *LimitError
		if !errors.As(err, &le) || le.Cap != MaxRowsCap || le.Limit != 3 || le.Error() != "dataformat: answer reached max_rows (3)" {
			t.Fatalf("%v: 4th row under max_rows 3: %v", f, err)
		}
		if err := w.Finish(Tail{}); err != nil || w.Rows() != 3 {
			t.Fatalf("%v: Finish %v, rows %d", f, err, w.Rows())
		}
		if f == NDJSON && !bytes.HasSuffix(out.Bytes(), []byte(`{"truncated":true,"reason":"max_rows"}`+"\n")) {
			t.Errorf("NDJSON: %q", out.Bytes())
		}
	}
}

// TestBigValueRefusedBeforeEncoding: a value larger than what is left of
// max_bytes is refused without being copied into the buffer.
func TestBigValueRefusedBeforeEncoding(t *testing.T) {
	big := strings.Repeat("x", 1<<20)
	for _, f := range Formats {
		for _, v := range []any{big, []byte(big), json.RawMessage(`"` + big + `"`)} {
			w, _ := NewWriter(f, io.Discard, mustColumns(t, []string{"v"}), Limits{MaxBytes: 64 << 10})
			if err := w.Row([]any{v}); !errors.Is(err, ErrLimit) {
				t.Fatalf("%v %T: %v", f, v, err)
			}
			if cap(w.buf) > 2*FlushSize {
				t.Errorf("%v %T: buffer grew to %d bytes for a refused value", f, v, cap(w.buf))
			}
			w.Discard()
		}
	}
}

// TestAbortIsDetectable: a stream cut short is told apart from a complete
// one by every format's standard reader.
func TestAbortIsDetectable(t *testing.T) {
	cols := []string{"id", "name"}
	for _, rows := range []int{0, 2, 3000} { // none, buffered, some already flushed
		for _, f := range Formats {
			var out bytes.Buffer
			w, _ := NewWriter(f, &out, mustColumns(t, cols), Limits{})
			for i := 0; i < rows; i++ {
				if err := w.Row([]any{int64(i), `n"a,m` + "\ne"}); err != nil {
					t.Fatal(err)
				}
			}
			if err := w.Abort("statement_timeout", `took "too" long`+"\r\nsecond line"); err != nil {
				t.Fatal(err)
			}
			if err := w.Row([]any{int64(1), "x"}); err != ErrClosed {
				t.Errorf("Row after Abort: %v", err)
			}
			body := out.Bytes()
			switch f {
			case JSON:
				var v any
				if err := json.Unmarshal(body, &v); err == nil {
					t.Errorf("JSON: aborted answer parses: %q", body)
				}
			case NDJSON:
				lines := strings.Split(strings.TrimSuffix(string(body), "\n"), "\n")
				if len(lines) != rows+1 {
					t.Fatalf("NDJSON: %d lines for %d rows", len(lines), rows)
				}
				var e map[string]string
				if err := json.Unmarshal([]byte(lines[len(lines)-1]), &e); err != nil {
					t.Fatal(err)
				}
				if e["reason"] != "statement_timeout" || e["error"] != `took "too" long`+"\r\nsecond line" || len(e) != 2 {
					t.Errorf("NDJSON: error line %q", lines[len(lines)-1])
				}
			case CSV:
				r := csv.NewReader(bytes.NewReader(body))
				recs, err := r.ReadAll()
				var pe *csv.ParseError
				if !errors.As(err, &pe) || !errors.Is(err, csv.ErrQuote) {
					t.Errorf("CSV: aborted answer reads as %d records, err %v", len(recs), err)
				}
				lr := csv.NewReader(bytes.NewReader(body))
				lr.LazyQuotes = true
				lr.FieldsPerRecord = -1
				recs, err = lr.ReadAll()
				if err != nil {
					t.Fatal(err)
				}
				last := recs[len(recs)-1]
				if len(recs) != rows+2 || len(last) != 1 || last[0] != `levee error: statement_timeout: took "too" long  second line` {
					t.Errorf("CSV: lenient read: %d records, last %q", len(recs), last)
				}
			}
		}
	}
}

// TestCompleteCSVReads: a finished CSV answer is read back by encoding/csv
// to the same fields, NULL and the empty string both as "" there (on the
// wire NULL is unquoted, the empty string quoted).
func TestCompleteCSVReads(t *testing.T) {
	var out bytes.Buffer
	w, _ := NewWriter(CSV, &out, mustColumns(t, []string{"a", "b c", "d,e"}), Limits{})
	rows := [][]any{
		{nil, "", " x "},
		{"line\r\nbreak", `q"uote`, "é"},
		{json.RawMessage("{\"k\" : [1,\n2]}"), int64(-1), true},
	}
	for _, r := range rows {
		if err := w.Row(r); err != nil {
			t.Fatal(err)
		}
	}
	if err := w.Finish(Tail{NextCursor: "ignored"}); err != nil {
		t.Fatal(err)
	}
	if !bytes.Contains(out.Bytes(), []byte("\r\n,\"\",\" x \"\r\n")) {
		t.Errorf("NULL and empty string: %q", out.Bytes())
	}
	recs, err := csv.NewReader(bytes.NewReader(out.Bytes())).ReadAll()
	if err != nil {
		t.Fatal(err)
	}
	want := [][]string{{"a", "b c", "d,e"}, {"", "", " x "}, {"line\nbreak", `q"uote`, "é"}, {`{"k":[1,2]}`, "-1", "true"}}
	if len(recs) != len(want) {
		t.Fatalf("records %q", recs)
	}
	for i := range want {
		if strings.Join(recs[i], "|") != strings.Join(want[i], "|") {
			t.Errorf("record %d = %q, want %q", i, recs[i], want[i])
		}
	}
}

// TestValueErrors: a value outside the vocabulary, a row of the wrong
// length, a year RFC 3339 cannot write, JSON text that is not JSON: each
// is refused with the column named, the row is not written, and the
// writer goes on.
func TestValueErrors(t *testing.T) {
	cols := []string{"id", "payload"}
	cases := []struct {
		row  []any
		want string
	}{
		{[]any{int64(1), 3}, `dataformat: column "payload" (1): value of Go type int is not in the row vocabulary`},
		{[]any{int32(1), nil}, `dataformat: column "id" (0): value of Go type int32 is not in the row vocabulary`},
		{[]any{int64(1), float32(1)}, `dataformat: column "payload" (1): value of Go type float32 is not in the row vocabulary`},
		{[]any{int64(1), &ts}, `dataformat: column "payload" (1): value of Go type *time.Time is not in the row vocabulary`},
		{[]any{int64(1), time.Date(10000, 1, 1, 0, 0, 0, 0, time.UTC)}, `dataformat: column "payload" (1): time.Time in year 10000, outside RFC 3339's 0000-9999`},
		{[]any{int64(1), time.Date(-1, 1, 1, 0, 0, 0, 0, time.UTC)}, `dataformat: column "payload" (1): time.Time in year -1, outside RFC 3339's 0000-9999`},
		{[]any{int64(1), json.RawMessage(`1},{"admin":true`)}, `dataformat: column "payload" (1): json.RawMessage is not valid JSON: invalid character '}' after top-level value`},
		{[]any{int64(1), json.RawMessage(``)}, `dataformat: column "payload" (1): json.RawMessage is not valid JSON: unexpected end of JSON input`},
		{[]any{int64(1)}, `dataformat: row has 1 values for 2 columns`},
	}
	for _, f := range Formats {
		for _, c := range cases {
			var out bytes.Buffer
			w, _ := NewWriter(f, &out, mustColumns(t, cols), Limits{})
			if err := w.Row([]any{int64(7), "ok"}); err != nil {
				t.Fatal(err)
			}
			err := w.Row(c.row)
			if !errors.Is(err, ErrValue) || err.Error() != c.want {
				t.Errorf("%v %#v: err %v, want %s", f, c.row, err, c.want)
			}
			if err := w.Row([]any{int64(8), "ok"}); err != nil {
				t.Fatalf("%v: after a value error: %v", f, err)
			}
			if err := w.Finish(Tail{}); err != nil {
				t.Fatal(err)
			}
			if w.Rows() != 2 {
				t.Errorf("%v: %d rows", f, w.Rows())
			}
			if f != CSV {
				if rows := decodeRows(t, f, out.Bytes()); len(rows) != 2 {
					t.Errorf("%v: %q", f, out.Bytes())
				}
			} else if recs, err := csv.NewReader(&out).ReadAll(); err != nil || len(recs) != 3 {
				t.Errorf("CSV: %q %v", recs, err)
			}
		}
	}
}

func TestNewWriterRefuses(t *testing.T) {
	if _, err := NewWriter(0, io.Discard, mustColumns(t, []string{"a"}), Limits{}); err == nil {
		t.Error("format 0 accepted")
	}
	if _, err := NewWriter(JSON, io.Discard, nil, Limits{}); err == nil {
		t.Error("nil columns accepted")
	}
	if _, err := NewColumns(nil); err == nil {
		t.Error("no columns accepted")
	}
	_, err := NewColumns([]string{"id", "x", "id"})
	if err == nil || err.Error() != `dataformat: column "id" appears twice (give one an alias)` {
		t.Errorf("duplicate column: %v", err)
	}
	// Two names that are one once their invalid UTF-8 is replaced.
	if _, err = NewColumns([]string{"a\xff", "a\xfe"}); err == nil {
		t.Error("columns equal after U+FFFD replacement accepted")
	}
	names := []string{"a", "b"}
	c := mustColumns(t, names)
	names[0] = "changed"
	if c.Names()[0] != "a" {
		t.Error("Columns keeps the caller's slice")
	}
}

// mustColumns returns NewColumns(names), failing the test on an error.
func mustColumns(t testing.TB, names []string) *Columns {
	t.Helper()
	c, err := NewColumns(names)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// failWriter accepts ok bytes, then fails every write.
type failWriter struct{ ok int }

var errGone = errors.New("client gone")

func (f *failWriter) Write(p []byte) (int, error) {
	if len(p) <= f.ok {
		f.ok -= len(p)
		return len(p), nil
	}
	n := f.ok
	f.ok = 0
	return n, errGone
}

// TestWriteErrorSticky: once a write to the connection failed, Row, Flush
// and Finish all report it, and no more bytes are attempted.
func TestWriteErrorSticky(t *testing.T) {
	for _, f := range Formats {
		fw := &failWriter{ok: 100}
		w, _ := NewWriter(f, fw, mustColumns(t, []string{"s"}), Limits{})
		var err error
		for i := 0; i < 10000 && err == nil; i++ {
			err = w.Row([]any{"0123456789abcdef"})
		}
		if !errors.Is(err, errGone) {
			t.Fatalf("%v: %v", f, err)
		}
		if w.Written() != 100 {
			t.Errorf("%v: Written %d", f, w.Written())
		}
		if err := w.Row([]any{"x"}); !errors.Is(err, errGone) {
			t.Errorf("%v: Row after failure: %v", f, err)
		}
		if err := w.Flush(); !errors.Is(err, errGone) {
			t.Errorf("%v: Flush after failure: %v", f, err)
		}
		if err := w.Finish(Tail{}); !errors.Is(err, errGone) {
			t.Errorf("%v: Finish after failure: %v", f, err)
		}
		if err := w.Finish(Tail{}); err != ErrClosed {
			t.Errorf("%v: second Finish: %v", f, err)
		}
	}
}

// countWriter records the size of every write.
type countWriter struct{ writes []int }

func (c *countWriter) Write(p []byte) (int, error) {
	c.writes = append(c.writes, len(p))
	return len(p), nil
}

// TestStreamsInFlushSizeWrites: rows reach the connection while the answer
// is still being written, in writes of about FlushSize, and nothing before
// the first flush (so a caller can still choose an error status).
func TestStreamsInFlushSizeWrites(t *testing.T) {
	for _, f := range Formats {
		cw := &countWriter{}
		w, _ := NewWriter(f, cw, mustColumns(t, []string{"id", "s"}), Limits{})
		if err := w.Row([]any{int64(1), "x"}); err != nil {
			t.Fatal(err)
		}
		if len(cw.writes) != 0 || w.Written() != 0 {
			t.Fatalf("%v: wrote before a buffer filled", f)
		}
		for i := 0; i < 20000; i++ {
			if err := w.Row([]any{int64(i), "some text of a row"}); err != nil {
				t.Fatal(err)
			}
		}
		if len(cw.writes) < 10 {
			t.Fatalf("%v: %d writes for 20000 rows", f, len(cw.writes))
		}
		for _, n := range cw.writes {
			if n < FlushSize || n > FlushSize+64 {
				t.Errorf("%v: a write of %d bytes", f, n)
			}
		}
		before := len(cw.writes)
		if err := w.Flush(); err != nil || len(cw.writes) != before+1 {
			t.Errorf("%v: Flush: %v, %d writes", f, err, len(cw.writes)-before)
		}
		if err := w.Finish(Tail{}); err != nil {
			t.Fatal(err)
		}
	}
}

// TestDiscardWritesNothing: a caller that gives up before the first flush
// leaves the connection untouched.
func TestDiscardWritesNothing(t *testing.T) {
	cw := &countWriter{}
	w, _ := NewWriter(JSON, cw, mustColumns(t, []string{"id"}), Limits{})
	_ = w.Row([]any{int64(1)})
	w.Discard()
	if len(cw.writes) != 0 {
		t.Fatal("Discard wrote")
	}
	if err := w.Finish(Tail{}); err != ErrClosed {
		t.Fatalf("Finish after Discard: %v", err)
	}
}
