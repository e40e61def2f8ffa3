package discovery

import (
	"encoding/json"
	"errors"
	"strings"
	"testing"

	"pgregory.net/rapid"
)

// anyWeight draws a weight value as a registry might send it: numbers of
// every size and sign, numeric strings, junk strings, other JSON types,
// or nothing.
func anyWeight() *rapid.Generator[any] {
	return rapid.OneOf(
		rapid.Map(rapid.Float64(), func(f float64) any { return f }),
		rapid.Map(rapid.Float64Range(-1, 20000), func(f float64) any { return f }),
		rapid.Map(rapid.IntRange(-5, 20000), func(i int) any { return i }),
		rapid.Map(rapid.StringMatching(`-?[0-9]{1,6}(\.[0-9]{1,4})?`), func(s string) any { return s }),
		rapid.Map(rapid.String(), func(s string) any { return s }),
		rapid.SampledFrom([]any{nil, true, false, "NaN", "Inf", "", " 3", "0x10", "-0", "0", []any{}, map[string]any{}, json.Number("1e309"), json.Number("-0")}),
	)
}

func anyAddress() *rapid.Generator[any] {
	return rapid.OneOf(
		rapid.Map(rapid.IntRange(0, 20), func(i int) any { return "10.0.0." + string(rune('0'+i%10)) + ":80" }),
		rapid.Map(rapid.StringMatching(`[a-zA-Z][a-zA-Z0-9-]{0,8}\.(example|EXAMPLE)\.com:[0-9]{1,5}`), func(s string) any { return s }),
		rapid.Map(rapid.String(), func(s string) any { return s }),
		rapid.SampledFrom([]any{nil, 80, "[::1]:80", "[0::1]:80", "::1:80"}),
	)
}

// TestPropParseList: for any generated list, ParseList never panics, every
// weight is within MaxWeight×100, addresses are unique, and every item is
// accounted for exactly once.
func TestPropParseList(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		n := rapid.IntRange(0, 60).Draw(t, "n")
		items := make([]any, n)
		for i := range items {
			if rapid.IntRange(0, 20).Draw(t, "notObject") == 0 {
				items[i] = rapid.SampledFrom([]any{"x", 1, nil, []any{}}).Draw(t, "item")
				continue
			}
			m := map[string]any{}
			if rapid.Bool().Draw(t, "hasAddress") {
				m["address"] = anyAddress().Draw(t, "address")
			}
			if rapid.Bool().Draw(t, "hasWeight") {
				m["weight"] = anyWeight().Draw(t, "weight")
			}
			if rapid.IntRange(0, 3).Draw(t, "hasZone") == 0 {
				m["zone"] = rapid.SampledFrom([]any{"a", "A", nil, 3, strings.Repeat("z", 65)}).Draw(t, "zone")
			}
			if rapid.IntRange(0, 3).Draw(t, "hasMetadata") == 0 {
				m["metadata"] = rapid.SampledFrom([]any{map[string]any{"v": "2"}, map[string]any{"v": 2}, "x", nil}).Draw(t, "metadata")
			}
			items[i] = m
		}
		data, err := json.Marshal(items)
		if err != nil {
			t.Skip("unmarshalable draw")
		}
		maxW := rapid.SampledFrom([]uint32{0, 1, 100, DefaultMaxWeight, MaxWeightLimit}).Draw(t, "maxWeight")
		u, err := ParseList(data, Limits{MaxWeight: maxW})
		checkUpdate(t, u, err, n, maxW)
	})
}

// checkUpdate asserts the invariants of a ParseList result for a payload
// of n items (n < 0: unknown).
func checkUpdate(t interface {
	Fatalf(string, ...any)
}, u Update, err error, n int, maxW uint32) {
	if maxW == 0 {
		maxW = DefaultMaxWeight
	}
	if err != nil {
		var pe *PayloadError
		if !errors.As(err, &pe) || pe.Code == "" || pe.Detail == "" {
			t.Fatalf("error %v is not a *PayloadError", err)
		}
		if len(u.Instances) != 0 {
			t.Fatalf("refused update carries %d instances", len(u.Instances))
		}
		if errors.Is(err, ErrAllRejected) {
			if len(u.Rejected) == 0 || n >= 0 && len(u.Rejected) != n {
				t.Fatalf("all rejected: %d rejections of %d items", len(u.Rejected), n)
			}
		} else if len(u.Rejected) != 0 {
			t.Fatalf("refused update carries rejections")
		}
		return
	}
	if n >= 0 && len(u.Instances)+len(u.Rejected) != n {
		t.Fatalf("%d instances + %d rejected != %d items", len(u.Instances), len(u.Rejected), n)
	}
	if len(u.Rejected) > 0 && len(u.Instances) == 0 {
		t.Fatalf("every instance rejected but no error")
	}
	seen := map[string]bool{}
	for _, in := range u.Instances {
		if uint64(in.Weight) > uint64(maxW)*100 {
			t.Fatalf("weight %d above %d×100", in.Weight, maxW)
		}
		key := strings.ToLower(in.Address)
		if seen[key] {
			t.Fatalf("duplicate address %s", in.Address)
		}
		seen[key] = true
		if again, msg := canonicalAddress(in.Address); again != in.Address {
			t.Fatalf("address %q not canonical (%q, %s)", in.Address, again, msg)
		}
		if len(in.Zone) > maxZoneLen || len(in.Metadata) > maxMetadataKeys {
			t.Fatalf("zone or metadata over its limit: %+v", in)
		}
	}
	for _, r := range u.Rejected {
		if r.Key == "" || r.Message == "" || len(r.Raw) > maxRawLen {
			t.Fatalf("bad rejection %+v", r)
		}
		known := false
		for _, reason := range Reasons {
			known = known || r.Reason == reason
		}
		if !known {
			t.Fatalf("unknown reason %q", r.Reason)
		}
	}
}

// TestPropWeightOrder: for decimal strings, parsing agrees with exact
// rounding of the value computed independently in integer arithmetic.
func TestPropWeightOrder(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		whole := rapid.IntRange(0, 12000).Draw(t, "whole")
		frac := rapid.IntRange(0, 9999).Draw(t, "frac4") // 4 decimals
		s := itoa(whole) + "." + pad4(frac)
		got, p := parseWeight([]byte(`"`+s+`"`), DefaultMaxWeight*100)
		h := whole*100 + frac/100
		if frac%100 >= 50 {
			h++
		}
		switch {
		case whole == 0 && frac == 0:
			if p != nil || got != 0 {
				t.Fatalf("%s: %d, %v", s, got, p)
			}
		case h == 0:
			if p == nil || p.reason != ReasonTooSmall {
				t.Fatalf("%s: %d, %v; want too_small", s, got, p)
			}
		case h > DefaultMaxWeight*100:
			if p == nil || p.reason != ReasonTooLarge {
				t.Fatalf("%s: %d, %v; want too_large", s, got, p)
			}
		default:
			if p != nil || int(got) != h {
				t.Fatalf("%s: %d, %v; want %d", s, got, p, h)
			}
		}
	})
}

func itoa(i int) string { b, _ := json.Marshal(i); return string(b) }

func pad4(i int) string {
	s := itoa(i)
	return strings.Repeat("0", 4-len(s)) + s
}
