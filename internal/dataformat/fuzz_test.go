package dataformat

import (
	"bytes"
	"encoding/base64"
	"encoding/csv"
	"encoding/json"
	"errors"
	"math"
	"strconv"
	"strings"
	"testing"
	"time"
	"unicode/utf8"
)

// validString is s as it should read back: invalid UTF-8 replaced by
// U+FFFD, one per bad byte (as encoding/json decodes it too).
func validString(s string) string {
	var b strings.Builder
	for i := 0; i < len(s); {
		r, size := utf8.DecodeRuneInString(s[i:])
		b.WriteRune(r)
		i += size
	}
	return b.String()
}

// FuzzJSONRoundTrip: arbitrary strings (as values and column names),
// bytes, integers, floats and times through the JSON and NDJSON writers
// always make output that encoding/json parses back to the same values.
func FuzzJSONRoundTrip(f *testing.F) {
	f.Add("name", "value", []byte("bytes"), int64(42), 1.5, int64(0), false, []byte(`{"a": [1, 2.5e3, "x\u2028"], "b": null}`))
	f.Add("we\"ird\n", "\x00\x1f\u2028\xff\xfe\"\\", []byte{0, 255}, int64(1<<53+1), math.Inf(-1), int64(-62135596800123456), true, []byte("1},{\"x\":1"))
	f.Add("", "", []byte{}, int64(math.MinInt64), 1e-7, int64(253402300799999999), false, []byte(" \n\t\"s\xff\" "))
	f.Add("é", "中\xe2\x82", []byte(nil), int64(-1<<53), math.NaN(), int64(1), true, []byte(nil))
	f.Fuzz(func(t *testing.T, col, s string, p []byte, n int64, fl float64, tn int64, nul bool, raw []byte) {
		at := time.Unix(0, tn).UTC()
		cols := []string{col, col + "_bytes", col + "_int", col + "_float", col + "_time", col + "_null", col + "_json"}
		var null any
		if !nul {
			null = s
		}
		// JSON text: written (compacted) when valid, refused when not.
		valid := json.Valid(raw)
		var rawValue any = json.RawMessage(raw)
		if !valid {
			var out bytes.Buffer
			w, _ := NewWriter(JSON, &out, mustColumns(t, []string{"j"}), Limits{})
			if err := w.Row([]any{rawValue}); !errors.Is(err, ErrValue) {
				t.Fatalf("invalid JSON %q: %v", raw, err)
			}
			rawValue = nil
		}
		row := []any{s, p, n, fl, at, null, rawValue}
		for _, fm := range []Format{JSON, NDJSON} {
			var out bytes.Buffer
			w, err := NewWriter(fm, &out, mustColumns(t, cols), Limits{})
			if err != nil { // the suffixes keep names apart, even after U+FFFD
				t.Fatal(err)
			}
			for i := 0; i < 2; i++ {
				if err := w.Row(row); err != nil {
					t.Fatal(err)
				}
			}
			if err := w.Finish(Tail{NextCursor: s}); err != nil {
				t.Fatal(err)
			}
			body := out.Bytes()
			if !utf8.Valid(body) {
				t.Fatalf("%v: answer is not UTF-8: %q", fm, body)
			}
			if fm == NDJSON && bytes.Count(body, []byte("\n")) != 2 {
				t.Fatalf("NDJSON: %d lines in %q", bytes.Count(body, []byte("\n")), body)
			}
			rows := decodeRows(t, fm, body)
			if len(rows) != 2 {
				t.Fatalf("%v: %d rows", fm, len(rows))
			}
			got := rows[1]
			if len(got) != len(cols) {
				// Two names equal once invalid UTF-8 is replaced would
				// collide; with the suffixes they cannot.
				t.Fatalf("%v: %d keys for %d columns: %q", fm, len(got), len(cols), body)
			}
			vc := validString(col)
			if g, _ := got[vc].(string); g != validString(s) {
				t.Fatalf("%v: string %q read back as %q", fm, s, g)
			}
			if g, _ := got[vc+"_bytes"].(string); g != base64.StdEncoding.EncodeToString(p) {
				t.Fatalf("%v: bytes %x read back as %q", fm, p, g)
			}
			switch g := got[vc+"_int"].(type) {
			case json.Number:
				if n > 1<<53 || n < -1<<53 || g.String() != strconv.FormatInt(n, 10) {
					t.Fatalf("%v: int %d read back as number %s", fm, n, g)
				}
			case string:
				if n <= 1<<53 && n >= -1<<53 || g != strconv.FormatInt(n, 10) {
					t.Fatalf("%v: int %d read back as string %s", fm, n, g)
				}
			default:
				t.Fatalf("%v: int %d read back as %T", fm, n, g)
			}
			switch g := got[vc+"_float"].(type) {
			case json.Number:
				v, err := strconv.ParseFloat(g.String(), 64)
				if err != nil || v != fl || math.Signbit(v) != math.Signbit(fl) {
					t.Fatalf("%v: float %v read back as %s", fm, fl, g)
				}
			case string:
				if !(math.IsNaN(fl) && g == "NaN" || math.IsInf(fl, 1) && g == "Infinity" || math.IsInf(fl, -1) && g == "-Infinity") {
					t.Fatalf("%v: float %v read back as %q", fm, fl, g)
				}
			default:
				t.Fatalf("%v: float %v read back as %T", fm, fl, g)
			}
			g, _ := got[vc+"_time"].(string)
			if back, err := time.Parse(time.RFC3339Nano, g); err != nil || !back.Equal(at) || !strings.HasSuffix(g, "Z") {
				t.Fatalf("%v: time %v read back as %q (%v)", fm, at, g, err)
			}
			if nul && got[vc+"_null"] != nil || !nul && got[vc+"_null"] != validString(s) {
				t.Fatalf("%v: null column read back as %#v", fm, got[vc+"_null"])
			}
			if valid {
				dec := json.NewDecoder(bytes.NewReader(raw))
				dec.UseNumber()
				var want any
				if err := dec.Decode(&want); err != nil {
					t.Fatal(err)
				}
				if !jsonEqual(got[vc+"_json"], want) {
					t.Fatalf("%v: JSON %q read back as %#v", fm, raw, got[vc+"_json"])
				}
			}
		}
	})
}

// FuzzCSVRoundTrip: arbitrary strings through the CSV writer read back by
// encoding/csv as the same fields (invalid UTF-8 replaced), with the
// header first.
func FuzzCSVRoundTrip(f *testing.F) {
	f.Add("a", "b", "c")
	f.Add(" lead", "trail\t", "q\"u,o\r\nte")
	f.Add("", `\.`, "\xff\r")
	f.Fuzz(func(t *testing.T, a, b, c string) {
		var out bytes.Buffer
		cols := []string{"x" + a, "y" + b, "z" + c}
		w, err := NewWriter(CSV, &out, mustColumns(t, cols), Limits{})
		if err != nil {
			t.Fatal(err)
		}
		rows := [][]any{{a, b, c}, {c, nil, a}}
		for _, r := range rows {
			if err := w.Row(r); err != nil {
				t.Fatal(err)
			}
		}
		if err := w.Finish(Tail{}); err != nil {
			t.Fatal(err)
		}
		recs, err := csv.NewReader(bytes.NewReader(out.Bytes())).ReadAll()
		if err != nil {
			t.Fatalf("%q: %v", out.Bytes(), err)
		}
		// encoding/csv turns \r\n inside a quoted field into \n.
		norm := func(s string) string { return strings.ReplaceAll(validString(s), "\r\n", "\n") }
		want := [][]string{
			{norm(cols[0]), norm(cols[1]), norm(cols[2])},
			{norm(a), norm(b), norm(c)},
			{norm(c), "", norm(a)},
		}
		if len(recs) != len(want) {
			t.Fatalf("%d records from %q", len(recs), out.Bytes())
		}
		for i := range want {
			for j := range want[i] {
				if recs[i][j] != want[i][j] {
					t.Fatalf("record %d field %d: %q, want %q (body %q)", i, j, recs[i][j], want[i][j], out.Bytes())
				}
			}
		}
	})
}

// FuzzNegotiate: any Accept value, any allowed list: no panic, and an
// answer that is one of the allowed formats.
func FuzzNegotiate(f *testing.F) {
	for _, s := range []string{"", "*/*", "text/csv;q=0.5, application/json", `a/b;c="d\"e,f"`, "*; q=.2", "text/*;q=0", ",,;,", `"`} {
		f.Add(s, uint8(7))
	}
	f.Fuzz(func(t *testing.T, accept string, mask uint8) {
		var allowed []Format
		for i, fm := range []Format{CSV, JSON, NDJSON, 0} {
			if mask&(1<<i) != 0 {
				allowed = append(allowed, fm)
			}
		}
		got, ok := Negotiate(accept, allowed)
		if !ok {
			if got != 0 {
				t.Fatalf("refusal with format %v", got)
			}
			return
		}
		found := false
		for _, fm := range allowed {
			found = found || (fm == got && fm.Valid())
		}
		if !found {
			t.Fatalf("Negotiate(%q, %v) = %v, not allowed", accept, allowed, got)
		}
	})
}
