package discovery

import (
	"encoding/json"
	"errors"
	"reflect"
	"strings"
	"testing"
)

// fuzzWeightSeeds are the weight spellings issue 3 requires as seeds, each
// placed in an otherwise valid instance; the table cases are added too.
func fuzzWeightSeeds() []string {
	seeds := []string{
		`"0"`, `0`, `"0.0"`, `"-0"`, `"NaN"`, `"Inf"`, `1e309`, `""`, `"0x10"`, `" 3"`,
		`null`, `true`, `[]`, `{}`,
		`"` + strings.Repeat("7", 10<<20) + `"`,             // a 10 MB string
		strings.Repeat("[", 100) + strings.Repeat("]", 100), // deeply nested
		strings.Repeat(`{"a":`, 40) + `1` + strings.Repeat(`}`, 40),
	}
	for _, c := range weightCases {
		seeds = append(seeds, c.raw)
	}
	return seeds
}

func instanceWithWeight(w string) string {
	if w == "" {
		return `{"address": "10.0.0.5:8080", "zone": "a", "metadata": {"version": "v2"}}`
	}
	return `{"address": "10.0.0.5:8080", "weight": ` + w + `, "zone": "a", "metadata": {"version": "v2"}}`
}

// FuzzParseList feeds ParseList arbitrary payloads. It must not panic, must
// refuse with a *PayloadError or return an Update whose instances are
// bounded, unique and canonical with every item accounted for, and what it
// accepts must survive MarshalList → ParseList unchanged. Crashers are kept
// under testdata/fuzz/FuzzParseList/ and replayed by plain "go test".
func FuzzParseList(f *testing.F) {
	for _, w := range fuzzWeightSeeds() {
		f.Add([]byte(`[` + instanceWithWeight(w) + `, {"address": "10.0.0.6:8080"}]`))
	}
	for _, s := range []string{
		``, `[]`, `{}`, `null`, `"x"`, `[null]`, `[[]]`, `[{}]`, `[1, "a", true]`,
		`[{"address": "10.0.0.1:80"}, {"address": "10.0.0.1:80"}]`,
		`[{"address": "A.example:80"}, {"address": "a.EXAMPLE:080"}]`,
		`[{"address": "10.0.0.1:80", "weight": "abc"}]`,
		`[{"address": "[::1]:80", "Weight": 1, "weight": 2}]`,
		`[{"address": "x.example:1", "metadata": {"a": "1", "a": "2"}}]`,
		`[{"address": "x.example:1", "metadata": {"a": 1}}]`,
		`[{"address": "x.example:1", "zone": "Z"}]`,
		`[{"address": "x.example:1"` + strings.Repeat(`, "x": 1`, 100) + `}]`,
		`[{"address": "x.example:1", "weight": 0.1e1}, {"address": "y.example:1", "weight": 9999.995}]`,
		`[{"address": "x.example:1", "weight": "\u0033"}]`,
		strings.Repeat("[", 10000) + strings.Repeat("]", 10000),
		`[` + strings.Repeat(`{"address": "x.example:1"},`, 1000) + `{}]`,
		`[{"address": "x.example:1", "extra": "` + strings.Repeat("x", 10<<20) + `"}]`,
		"[\"\\\"]\", {\"address\": \"x.example:1\"}]",
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		u, err := ParseList(data, Limits{})
		checkUpdate(t, u, err, -1, 0)
		if err != nil {
			return
		}
		// Differential: ParseList agrees with ParseInstance on each item
		// that is not a duplicate.
		out, err := MarshalList(u.Instances)
		if err != nil {
			t.Fatalf("MarshalList: %v", err)
		}
		again, err := ParseList(out, Limits{})
		if len(u.Instances) == 0 {
			if err != nil || len(again.Instances) != 0 {
				t.Fatalf("empty list round trip: %+v, %v", again, err)
			}
			return
		}
		if err != nil || len(again.Rejected) != 0 || !reflect.DeepEqual(again.Instances, u.Instances) {
			t.Fatalf("round trip changed the list:\n%+v\n%+v\n%v", u.Instances, again, err)
		}
	})
}

// FuzzParseInstance feeds ParseInstance arbitrary values. It must not
// panic, must return exactly one of an Instance and a Rejection, and must
// agree with ParseList on the same value wrapped in an array.
func FuzzParseInstance(f *testing.F) {
	for _, w := range fuzzWeightSeeds() {
		f.Add([]byte(instanceWithWeight(w)))
	}
	for _, s := range []string{
		``, `{}`, `[]`, `null`, `"10.0.0.1:80"`, `{"address": null}`,
		`{"address": "10.0.0.1:80"} {}`,
		`{"address": "[fe80::1%eth0]:80"}`,
		`{"address": "x.example:1", "ADDRESS": "y.example:1"}`,
		`{"address": "x.example:1", "metadata": {"` + strings.Repeat("k", 129) + `": ""}}`,
		strings.Repeat(`{"a":`, 10000) + strings.Repeat(`}`, 10000),
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		in, rej := ParseInstance("/levee/services/video/1", data, Limits{})
		if rej != nil {
			if rej.Key != "/levee/services/video/1" || rej.Message == "" || len(rej.Raw) > maxRawLen {
				t.Fatalf("bad rejection %+v", rej)
			}
			if !reflect.DeepEqual(in, Instance{}) {
				t.Fatalf("rejection with an instance %+v", in)
			}
		} else {
			if in.Weight > DefaultMaxWeight*100 {
				t.Fatalf("weight %d", in.Weight)
			}
			if again, _ := canonicalAddress(in.Address); again != in.Address {
				t.Fatalf("address %q not canonical", in.Address)
			}
		}
		// The same value as the only item of a list (one level deeper, two
		// bytes longer) must get the same verdict. (Not for invalid JSON:
		// `1, {...}` is no instance but a list of two.)
		if !json.Valid(data) {
			return
		}
		list := append(append([]byte{'['}, data...), ']')
		u, err := ParseList(list, Limits{MaxDepth: DefaultMaxDepth + 1, MaxPayloadBytes: DefaultMaxPayloadBytes + 2})
		switch {
		case rej == nil && (err != nil || len(u.Instances) != 1 || !reflect.DeepEqual(u.Instances[0], in)):
			t.Fatalf("ParseInstance accepted %+v; ParseList says %+v, %v", in, u, err)
		case rej != nil && err == nil:
			t.Fatalf("ParseInstance rejected (%v); ParseList accepted %+v", rej, u.Instances)
		case rej != nil && errors.Is(err, ErrAllRejected) && u.Rejected[0].Reason != rej.Reason:
			t.Fatalf("reasons differ: ParseInstance %v, ParseList %v", rej, u.Rejected[0])
		}
	})
}
