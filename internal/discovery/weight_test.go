package discovery

import (
	"strings"
	"testing"
)

// weightCase is one weight spelling: the raw JSON of the weight field
// (empty = field missing) and the expected hundredths or reason.
type weightCase struct {
	raw    string
	want   uint32
	reason Reason
}

// weightCases covers every spelling in issue 3 and the outage's "string 0" (docs/balancing.md)
// outage, plus the rounding and grammar edges. It is shared with the fuzz
// seeds.
var weightCases = []weightCase{
	// The outage: "0" as a string is drained, like 0.
	{`"0"`, 0, ""},
	{`0`, 0, ""},
	{`"0.0"`, 0, ""},
	{`"-0"`, 0, ""},
	{`-0`, 0, ""},
	{`-0.0e5`, 0, ""},
	{`0.000`, 0, ""},
	{`"00"`, 0, ""},
	// Accepted spellings.
	{`3`, 300, ""},
	{`"3"`, 300, ""},
	{`"1.0"`, 100, ""},
	{`2.50`, 250, ""},
	{`"2.50"`, 250, ""},
	{`0.5`, 50, ""},
	{`"00012"`, 1200, ""},
	{`"\u0033"`, 300, ""}, // an escaped "3" is the string "3"
	{`1e3`, 100000, ""},
	{`1E2`, 10000, ""},
	{`0.1e1`, 100, ""},
	{`1e+2`, 10000, ""},
	{`12345e-4`, 123, ""}, // 1.2345 → 1.23
	{`10000`, 1000000, ""},
	{`"10000"`, 1000000, ""},
	{`10000.00`, 1000000, ""},
	{`10000.004`, 1000000, ""},
	{`1e4`, 1000000, ""},
	{`null`, 100, ""},
	{``, 100, ""}, // missing
	// Rounding half away from zero at the third decimal.
	{`0.125`, 13, ""},
	{`"0.125"`, 13, ""},
	{`0.005`, 1, ""},
	{`0.0149`, 1, ""},
	{`0.015`, 2, ""},
	{`9999.995`, 1000000, ""},
	{`9999.994`, 999999, ""},
	{`1.005`, 101, ""},
	{`0.01`, 1, ""},
	{`"0.0050000000000000000000000000000000000000000000000000000000001"`, 1, ""},
	// too_small: above zero, rounds to 0.00.
	{`0.004`, 0, ReasonTooSmall},
	{`"0.004"`, 0, ReasonTooSmall},
	{`0.0049999`, 0, ReasonTooSmall},
	{`1e-3`, 0, ReasonTooSmall},
	{`1e-999999999999999999999`, 0, ReasonTooSmall},
	// too_large.
	{`10000.005`, 0, ReasonTooLarge},
	{`10000.01`, 0, ReasonTooLarge},
	{`10001`, 0, ReasonTooLarge},
	{`"10001"`, 0, ReasonTooLarge},
	{`4294967295`, 0, ReasonTooLarge},
	{`1e308`, 0, ReasonTooLarge},
	{`"99999999999999999999999999999999999999999999999999999999999999"`, 0, ReasonTooLarge},
	// not_finite.
	{`"NaN"`, 0, ReasonNotFinite},
	{`"nan"`, 0, ReasonNotFinite},
	{`"Inf"`, 0, ReasonNotFinite},
	{`"+Inf"`, 0, ReasonNotFinite},
	{`"-Infinity"`, 0, ReasonNotFinite},
	{`1e309`, 0, ReasonNotFinite},
	{`-1e309`, 0, ReasonNotFinite},
	{`1.8e308`, 0, ReasonNotFinite},
	{`1.7976931348623157e308`, 0, ReasonTooLarge}, // float64's max is finite
	{`1e99999999999999999999999`, 0, ReasonNotFinite},
	// negative.
	{`-1`, 0, ReasonNegative},
	{`"-0.5"`, 0, ReasonNegative},
	{`-0.001`, 0, ReasonNegative},
	{`"-3"`, 0, ReasonNegative},
	// not_a_number.
	{`"abc"`, 0, ReasonNotANumber},
	{`""`, 0, ReasonNotANumber},
	{`"0x10"`, 0, ReasonNotANumber},
	{`" 3"`, 0, ReasonNotANumber},
	{`"3 "`, 0, ReasonNotANumber},
	{`"1e3"`, 0, ReasonNotANumber},
	{`"1E3"`, 0, ReasonNotANumber},
	{`"+3"`, 0, ReasonNotANumber},
	{`"1."`, 0, ReasonNotANumber},
	{`".5"`, 0, ReasonNotANumber},
	{`"-"`, 0, ReasonNotANumber},
	{`"-.5"`, 0, ReasonNotANumber},
	{`"1.2.3"`, 0, ReasonNotANumber},
	{`"1,5"`, 0, ReasonNotANumber},
	{`"٣"`, 0, ReasonNotANumber}, // Arabic-Indic digit three
	{`"３"`, 0, ReasonNotANumber}, // fullwidth digit three
	{`"3\u0000"`, 0, ReasonNotANumber},
	{`true`, 0, ReasonNotANumber},
	{`false`, 0, ReasonNotANumber},
	{`[]`, 0, ReasonNotANumber},
	{`[3]`, 0, ReasonNotANumber},
	{`{}`, 0, ReasonNotANumber},
	{`{"value": 3}`, 0, ReasonNotANumber},
	{`"` + strings.Repeat("0", 65) + `"`, 0, ReasonNotANumber},
}

// TestWeightTable runs every spelling through ParseInstance, the full path
// a registry value takes, and asserts the hundredths or the reason exactly.
func TestWeightTable(t *testing.T) {
	if len(weightCases) < 40 {
		t.Fatalf("only %d cases", len(weightCases))
	}
	for _, c := range weightCases {
		t.Run(c.raw, func(t *testing.T) {
			doc := `{"address": "10.0.0.5:8080"}`
			if c.raw != "" {
				doc = `{"address": "10.0.0.5:8080", "weight": ` + c.raw + `}`
			}
			in, rej := ParseInstance("k", []byte(doc), Limits{})
			if c.reason != "" {
				if rej == nil {
					t.Fatalf("weight %s accepted as %d hundredths; want %s", c.raw, in.Weight, c.reason)
				}
				if rej.Reason != c.reason || rej.Field != "weight" || rej.Key != "k" {
					t.Fatalf("weight %s rejected as %+v; want reason %s on field weight", c.raw, rej, c.reason)
				}
				if want := truncateRaw([]byte(c.raw)); rej.Raw != want {
					t.Fatalf("Raw = %q, want %q", rej.Raw, want)
				}
				return
			}
			if rej != nil {
				t.Fatalf("weight %s rejected: %v", c.raw, rej)
			}
			if in.Weight != c.want {
				t.Fatalf("weight %s = %d hundredths, want %d", c.raw, in.Weight, c.want)
			}
		})
	}
}

// TestWeightMaxConfigurable: the maximum follows Limits.MaxWeight, and the
// largest allowed maximum still fits in hundredths.
func TestWeightMaxConfigurable(t *testing.T) {
	for _, c := range []struct {
		max    uint32
		raw    string
		want   uint32
		reason Reason
	}{
		{5, `5`, 500, ""},
		{5, `5.01`, 0, ReasonTooLarge},
		{MaxWeightLimit, `42949672`, 4294967200, ""},
		{MaxWeightLimit, `42949672.01`, 0, ReasonTooLarge},
		{MaxWeightLimit, `99999999.99`, 0, ReasonTooLarge},
	} {
		doc := `{"address": "a.example:1", "weight": ` + c.raw + `}`
		in, rej := ParseInstance("k", []byte(doc), Limits{MaxWeight: c.max})
		switch {
		case c.reason == "" && rej != nil:
			t.Errorf("max %d, weight %s: rejected %v", c.max, c.raw, rej)
		case c.reason == "" && in.Weight != c.want:
			t.Errorf("max %d, weight %s = %d, want %d", c.max, c.raw, in.Weight, c.want)
		case c.reason != "" && (rej == nil || rej.Reason != c.reason):
			t.Errorf("max %d, weight %s: got %v, want %s", c.max, c.raw, rej, c.reason)
		}
	}
	if err := (Limits{MaxWeight: MaxWeightLimit + 1}).Validate(); err == nil {
		t.Error("MaxWeight above MaxWeightLimit accepted")
	}
}

// TestFormatWeightRoundTrip: every hundredths value formats to a decimal
// that parses back to itself.
func TestFormatWeightRoundTrip(t *testing.T) {
	for _, h := range []uint32{0, 1, 5, 10, 50, 99, 100, 101, 110, 250, 999999, 1000000} {
		s := FormatWeight(h)
		for _, raw := range []string{s, `"` + s + `"`} {
			got, p := parseWeight([]byte(raw), 1000000)
			if p != nil || got != h {
				t.Errorf("FormatWeight(%d) = %s parses to %d, %v", h, raw, got, p)
			}
		}
	}
	if got := FormatWeight(250); got != "2.5" {
		t.Errorf("FormatWeight(250) = %q", got)
	}
	if got := FormatWeight(5); got != "0.05" {
		t.Errorf("FormatWeight(5) = %q", got)
	}
}
