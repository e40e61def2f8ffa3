package dataquery

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/levee-gw/levee/internal/valuekind"
)

var injections = []string{
	"1; DROP TABLE x", "' OR 1=1 --", "1 OR 1=1", "\"; DELETE FROM t; --", "$1", "?", ":id", "/*", "1)--",
	"\x00", "ab\x00cd", "\xff\xfe", "１２３", "٣", "1e1000",
}

// TestKindValues: every kind's accepted and refused spellings, with the Go
// value each accepted one binds.
func TestKindValues(t *testing.T) {
	utc := func(y int, m time.Month, d, hh, mm, ss, ns int) time.Time {
		return time.Date(y, m, d, hh, mm, ss, ns, time.UTC)
	}
	tests := []struct {
		kind Kind
		in   string
		want any // nil: refused
	}{
		{Int64, "0", int64(0)},
		{Int64, "42", int64(42)},
		{Int64, "-42", int64(-42)},
		{Int64, "9223372036854775807", int64(9223372036854775807)},
		{Int64, "-9223372036854775808", int64(-9223372036854775808)},
		{Int64, "9223372036854775808", nil},
		{Int64, "-9223372036854775809", nil},
		{Int64, "99999999999999999999999", nil},
		{Int64, "+1", nil},
		{Int64, "01", nil},
		{Int64, "-0", nil},
		{Int64, "00", nil},
		{Int64, " 1", nil},
		{Int64, "1 ", nil},
		{Int64, "1.0", nil},
		{Int64, "1e3", nil},
		{Int64, "0x10", nil},
		{Int64, "1_000", nil},
		{Int64, "", nil},
		{Int64, "-", nil},
		{Float64, "0", 0.0},
		{Float64, "-1.5", -1.5},
		{Float64, "1e3", 1000.0},
		{Float64, "1E-3", 0.001},
		{Float64, "2.5e+2", 250.0},
		{Float64, "1.7976931348623157e308", 1.7976931348623157e308},
		{Float64, "1e309", nil},
		{Float64, "-1e309", nil},
		{Float64, "NaN", nil},
		{Float64, "nan", nil},
		{Float64, "Inf", nil},
		{Float64, "+Inf", nil},
		{Float64, "infinity", nil},
		{Float64, "+1", nil},
		{Float64, ".5", nil},
		{Float64, "5.", nil},
		{Float64, "01.5", nil},
		{Float64, "0x1p-2", nil},
		{Float64, "1_0", nil},
		{Float64, "1e", nil},
		{Float64, strings.Repeat("1", 65), nil},
		{Bool, "true", true},
		{Bool, "false", false},
		{Bool, "TRUE", nil},
		{Bool, "1", nil},
		{Bool, "t", nil},
		{Bool, "yes", nil},
		{String, "", ""},
		{String, "héllo wörld ✓ 😀", "héllo wörld ✓ 😀"},
		{String, "' OR 1=1 --", "' OR 1=1 --"},
		{String, "1; DROP TABLE x", "1; DROP TABLE x"},
		{String, "a\x00b", nil},
		{String, "\xff", nil},
		{String, "\xed\xa0\x80", nil}, // a UTF-16 surrogate encoded as UTF-8
		{String, strings.Repeat("x", DefaultMaxLen), strings.Repeat("x", DefaultMaxLen)},
		{String, strings.Repeat("x", DefaultMaxLen+1), nil},
		{Date, "2024-02-29", utc(2024, 2, 29, 0, 0, 0, 0)},
		{Date, "2000-02-29", utc(2000, 2, 29, 0, 0, 0, 0)},
		{Date, "0001-01-01", utc(1, 1, 1, 0, 0, 0, 0)},
		{Date, "9999-12-31", utc(9999, 12, 31, 0, 0, 0, 0)},
		{Date, "2023-02-29", nil},
		{Date, "1900-02-29", nil},
		{Date, "2024-04-31", nil},
		{Date, "2024-13-01", nil},
		{Date, "2024-00-10", nil},
		{Date, "0000-01-01", nil},
		{Date, "2024-1-01", nil},
		{Date, "24-01-01", nil},
		{Date, "2024/01/01", nil},
		{Date, "2024-01-01T00:00:00Z", nil},
		{Date, "+2024-01-01", nil},
		{Timestamp, "2025-01-01T00:00:00Z", utc(2025, 1, 1, 0, 0, 0, 0)},
		{Timestamp, "2025-01-01T02:30:00+02:30", utc(2025, 1, 1, 0, 0, 0, 0)},
		{Timestamp, "2024-12-31T23:00:00-01:00", utc(2025, 1, 1, 0, 0, 0, 0)},
		{Timestamp, "2025-06-30T12:00:00.123456789Z", utc(2025, 6, 30, 12, 0, 0, 123456789)},
		{Timestamp, "2025-06-30T12:00:00.1Z", utc(2025, 6, 30, 12, 0, 0, 100000000)},
		{Timestamp, "2024-02-29T00:00:00Z", utc(2024, 2, 29, 0, 0, 0, 0)},
		{Timestamp, "2023-02-29T00:00:00Z", nil},
		{Timestamp, "2025-01-01T00:00:00", nil},
		{Timestamp, "2025-01-01 00:00:00Z", nil},
		{Timestamp, "2025-01-01t00:00:00z", nil},
		{Timestamp, "2025-01-01T24:00:00Z", nil},
		{Timestamp, "2025-01-01T23:59:60Z", nil},
		{Timestamp, "2025-01-01T00:00:00.Z", nil},
		{Timestamp, "2025-01-01T00:00:00.1234567890Z", nil},
		{Timestamp, "2025-01-01T00:00:00+0100", nil},
		{Timestamp, "2025-01-01T00:00:00+24:00", nil},
		{Timestamp, "2025-01-01T00:00:00+01:60", nil},
		{Timestamp, "2025-01-01T00:00Z", nil},
		{Timestamp, "0001-01-01T00:30:00+01:00", nil}, // year 0 in UTC
		{Timestamp, "9999-12-31T23:30:00-01:00", nil}, // year 10000 in UTC
		{UUID, "123e4567-e89b-12d3-a456-426614174000", "123e4567-e89b-12d3-a456-426614174000"},
		{UUID, "123E4567-E89B-12D3-A456-426614174000", "123e4567-e89b-12d3-a456-426614174000"},
		{UUID, "123e4567e89b12d3a456426614174000", nil},
		{UUID, "{123e4567-e89b-12d3-a456-426614174000}", nil},
		{UUID, "123e4567-e89b-12d3-a456-42661417400g", nil},
		{UUID, "123e4567-e89b-12d3-a456_426614174000", nil},
		{UUID, "123e4567-e89b-12d3-a456-4266141740000", nil},
	}
	for _, k := range []Kind{Int64, Float64, Bool, Date, Timestamp, UUID} {
		for _, s := range injections {
			tests = append(tests, struct {
				kind Kind
				in   string
				want any
			}{k, s, nil})
		}
	}
	for _, tc := range tests {
		r, err := newRule("test", tc.kind, false, 0, 0, "", "")
		if err != nil {
			t.Fatal(err)
		}
		got, e := r.scalar("p", tc.in)
		switch {
		case tc.want == nil && e == nil:
			t.Errorf("%v %q: accepted as %#v, want refused", tc.kind, tc.in, got)
		case tc.want == nil:
			if e.Param != "p" || e.Reason != ReasonInvalidParameter || !strings.Contains(e.Message, `"p"`) {
				t.Errorf("%v %q: error %+v, want invalid_parameter naming p", tc.kind, tc.in, e)
			}
		case e != nil:
			t.Errorf("%v %q: refused (%v), want %#v", tc.kind, tc.in, e, tc.want)
		default:
			if wt, ok := tc.want.(time.Time); ok {
				gt, ok := got.(time.Time)
				if !ok || !gt.Equal(wt) || gt.Location() != time.UTC {
					t.Errorf("%v %q: got %#v, want %v in UTC", tc.kind, tc.in, got, wt)
				}
			} else if got != tc.want {
				t.Errorf("%v %q: got %#v (%T), want %#v (%T)", tc.kind, tc.in, got, got, tc.want, tc.want)
			}
		}
	}
}

// TestBounds: min and max, inclusive, for each kind that has them, and
// the configuration errors around them.
func TestBounds(t *testing.T) {
	tests := []struct {
		kind     Kind
		min, max string
		in       string
		ok       bool
	}{
		{Int64, "1", "10", "1", true},
		{Int64, "1", "10", "10", true},
		{Int64, "1", "10", "0", false},
		{Int64, "1", "10", "11", false},
		{Int64, "1", "", "9223372036854775807", true},
		{Float64, "-1.5", "1.5", "1.5", true},
		{Float64, "-1.5", "1.5", "1.50001", false},
		{Float64, "-1.5", "", "-2", false},
		{Date, "2024-01-01", "2024-12-31", "2024-02-29", true},
		{Date, "2024-01-01", "2024-12-31", "2025-01-01", false},
		{Timestamp, "2025-01-01T00:00:00Z", "", "2025-01-01T00:59:59+01:00", false},
		{Timestamp, "2025-01-01T00:00:00Z", "", "2025-01-01T01:00:00+01:00", true},
	}
	for _, tc := range tests {
		r, err := newRule("p", tc.kind, false, 0, 0, tc.min, tc.max)
		if err != nil {
			t.Fatalf("%+v: %v", tc, err)
		}
		_, e := r.scalar("p", tc.in)
		if (e == nil) != tc.ok {
			t.Errorf("%v [%s, %s] %q: error %v, want ok %v", tc.kind, tc.min, tc.max, tc.in, e, tc.ok)
		}
		if e != nil && !strings.Contains(e.Message, "outside") {
			t.Errorf("%v %q: message %q does not say it is outside the bounds", tc.kind, tc.in, e.Message)
		}
	}
	for _, tc := range []struct {
		kind             Kind
		list             bool
		maxLen, maxItems int
		min, max         string
		want             string
	}{
		{Int64, false, 0, 0, "10", "1", "above max"},
		{Int64, false, 0, 0, "x", "", "min: not an int64"},
		{Date, false, 0, 0, "", "2023-02-29", "max: not a valid date"},
		{String, false, 0, 0, "a", "", "applies to int64"},
		{Bool, false, 0, 0, "", "true", "applies to int64"},
		{Int64, false, 5, 0, "", "", "max_len applies to string"},
		{String, false, MaxMaxLen + 1, 0, "", "", "max_len"},
		{String, false, -1, 0, "", "", "max_len"},
		{Int64, false, 0, 5, "", "", "max_items applies to lists"},
		{Int64, true, 0, MaxMaxItems + 1, "", "", "max_items"},
		{0, false, 0, 0, "", "", "invalid type"},
	} {
		_, err := newRule("p", tc.kind, tc.list, tc.maxLen, tc.maxItems, tc.min, tc.max)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%+v: error %v, want one containing %q", tc, err, tc.want)
		}
	}
}

// TestLists: comma-separated items, the \, escape, empty items and the
// item limit.
func TestLists(t *testing.T) {
	tests := []struct {
		kind     Kind
		maxItems int
		in       string
		want     []any // nil: refused
	}{
		{Int64, 0, "1,2,3", []any{int64(1), int64(2), int64(3)}},
		{Int64, 0, "7", []any{int64(7)}},
		{Int64, 0, "", nil},
		{Int64, 0, "1,,2", nil},
		{Int64, 0, "1,2,", nil},
		{Int64, 0, ",1", nil},
		{Int64, 0, "1, 2", nil},
		{Int64, 3, "1,2,3", []any{int64(1), int64(2), int64(3)}},
		{Int64, 3, "1,2,3,4", nil},
		{String, 0, `a\,b,c`, []any{"a,b", "c"}},
		{String, 0, `a\\,b`, []any{`a\`, "b"}},
		{String, 0, `a\\\,b`, []any{`a\,b`}},
		{String, 0, `a\b`, nil},
		{String, 0, `a\`, nil},
		{String, 0, `x,\,`, []any{"x", ","}},
		{String, 0, `x,y\,`, []any{"x", "y,"}},
		{String, 0, `a,b\,`, []any{"a", "b,"}},
		{String, 0, `a\,,`, nil},
		{UUID, 0, "123E4567-E89B-12D3-A456-426614174000,00000000-0000-0000-0000-000000000000",
			[]any{"123e4567-e89b-12d3-a456-426614174000", "00000000-0000-0000-0000-000000000000"}},
	}
	for _, tc := range tests {
		r, err := newRule("p", tc.kind, true, 0, tc.maxItems, "", "")
		if err != nil {
			t.Fatal(err)
		}
		got, e := r.value("p", tc.in)
		if tc.want == nil {
			if e == nil {
				t.Errorf("%q: accepted as %#v, want refused", tc.in, got)
			}
			continue
		}
		if e != nil {
			t.Errorf("%q: refused: %v", tc.in, e)
			continue
		}
		g := got.([]any)
		if len(g) != len(tc.want) {
			t.Errorf("%q: got %#v, want %#v", tc.in, g, tc.want)
			continue
		}
		for i := range g {
			if g[i] != tc.want[i] {
				t.Errorf("%q: item %d is %#v, want %#v", tc.in, i, g[i], tc.want[i])
			}
		}
	}
	r, _ := newRule("p", Int64, true, 0, 0, "", "")
	if _, e := r.value("p", strings.Repeat("1,", DefaultMaxItems)+"1"); e == nil || !strings.Contains(e.Message, "more than 100") {
		t.Errorf("101 items: error %v, want the default limit of 100", e)
	}
}

// TestErrorsEchoLittle: a refusal quotes at most maxEcho bytes of the
// value, as valid UTF-8.
func TestErrorsEchoLittle(t *testing.T) {
	r, _ := newRule("p", Int64, false, 0, 0, "", "")
	long := strings.Repeat("é", 200) + "SECRET-TAIL"
	_, e := r.scalar("p", long)
	if e == nil || strings.Contains(e.Message, "SECRET") || len(e.Message) > 150 {
		t.Fatalf("error %v echoes too much", e)
	}
	if !strings.Contains(e.Message, "...") {
		t.Errorf("message %q does not mark the cut", e.Message)
	}
	for n := 0; n < 80; n++ {
		c := clip(strings.Repeat("x", n) + "😀😀😀\xff")
		if len(c) > maxEcho+3 || !validUTF8(c) {
			t.Errorf("clip of %d+emoji: %q", n, c)
		}
	}
	var pe *Error
	if !errors.As(error(e), &pe) || pe.Reason != ReasonInvalidParameter {
		t.Errorf("not an *Error: %v", e)
	}
}

func TestParseKindAndOp(t *testing.T) {
	for k := Int64; k <= UUID; k++ {
		if got, err := ParseKind(k.String()); err != nil || got != k {
			t.Errorf("ParseKind(%q) = %v, %v", k.String(), got, err)
		}
	}
	if _, err := ParseKind("integer"); err == nil {
		t.Error("ParseKind(integer) accepted")
	}
	for o := OpEq; o <= OpIlike; o++ {
		if got, err := ParseOp(o.String()); err != nil || got != o {
			t.Errorf("ParseOp(%q) = %v, %v", o.String(), got, err)
		}
	}
	if _, err := ParseOp("match"); err == nil {
		t.Error("ParseOp(match) accepted")
	}
}

// TestKindsAreValuekinds holds the Kind constants to package valuekind's
// parameter kinds: one Kind per kind, each named as its row, and a
// filter's parse form a Kind.
func TestKindsAreValuekinds(t *testing.T) {
	kinds := []Kind{Int64, Float64, Bool, String, Date, Timestamp, UUID}
	names := valuekind.ParamNames()
	if len(names) != len(kinds) {
		t.Fatalf("valuekind has %d parameter kinds %v, dataquery %d Kinds", len(names), names, len(kinds))
	}
	for i, k := range kinds {
		if k.String() != names[i] {
			t.Errorf("Kind %d is %q, valuekind's row %q", k, k.String(), names[i])
		}
		if pk, err := ParseKind(names[i]); err != nil || pk != k {
			t.Errorf("ParseKind(%q) = %v, %v", names[i], pk, err)
		}
	}
	for _, s := range valuekind.All() {
		if _, err := ParseKind(s.Name); (err == nil) != s.Param {
			t.Errorf("kind %q: Param %v, ParseKind error %v", s.Name, s.Param, err)
		}
		if s.Filter != "" {
			if _, err := ParseKind(s.Filter); err != nil {
				t.Errorf("kind %q filters as %q: %v", s.Name, s.Filter, err)
			}
		}
	}
}
