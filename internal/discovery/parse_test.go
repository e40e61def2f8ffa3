package discovery

import (
	"errors"
	"fmt"
	"reflect"
	"strings"
	"testing"
)

func mustList(t *testing.T, payload string) Update {
	t.Helper()
	u, err := ParseList([]byte(payload), Limits{})
	if err != nil {
		t.Fatalf("ParseList(%.80q): %v", payload, err)
	}
	return u
}

func TestParseListExample(t *testing.T) {
	u := mustList(t, `[
		{"address": "10.0.0.5:8080", "weight": 3, "zone": "a", "metadata": {"version": "v2"}},
		{"address": "10.0.0.6:8080", "weight": "0", "registry_id": 17, "tags": ["x"]},
		{"Address": "Web-1.Example.COM:0080", "WEIGHT": "2.50"}
	]`)
	want := []Instance{
		{Address: "10.0.0.5:8080", Weight: 300, Zone: "a", Metadata: map[string]string{"version": "v2"}},
		{Address: "10.0.0.6:8080", Weight: 0},
		{Address: "web-1.example.com:80", Weight: 250},
	}
	if !reflect.DeepEqual(u.Instances, want) || len(u.Rejected) != 0 {
		t.Fatalf("got %+v / %+v\nwant %+v", u.Instances, u.Rejected, want)
	}
}

// TestParseListRefusedWhole: payloads that are refused as a whole, each
// with its code and sentinel.
func TestParseListRefusedWhole(t *testing.T) {
	deep := strings.Repeat("[", 10000) + strings.Repeat("]", 10000)
	many := "[" + strings.Repeat(`{"address":"a.example:1"},`, DefaultMaxInstances) + `{"address":"b.example:1"}]`
	for _, c := range []struct {
		name, payload string
		sentinel      error
		code          string
	}{
		{"empty", ``, ErrMalformed, CodeNotJSON},
		{"not json", `address: 10.0.0.1:80`, ErrMalformed, CodeNotJSON},
		{"truncated", `[{"address": "10.0.0.1:80"`, ErrMalformed, CodeNotJSON},
		{"trailing garbage", `[] []`, ErrMalformed, CodeNotJSON},
		{"object", `{"address": "10.0.0.1:80", "weight": 1}`, ErrMalformed, CodeNotArray},
		{"null", `null`, ErrMalformed, CodeNotArray},
		{"string", `"[]"`, ErrMalformed, CodeNotArray},
		{"depth 10000", deep, ErrTooLarge, CodeTooDeep},
		{"depth 33 in metadata", `[{"address":"a.example:1","metadata":` + strings.Repeat(`{"a":`, 31) + `1` + strings.Repeat("}", 31) + `}]`, ErrTooLarge, CodeTooDeep},
		{"100001 items", many, ErrTooLarge, CodeTooManyInstances},
		{"all rejected", `[{"address": "x"}, {"address": "10.0.0.1:80", "weight": "abc"}]`, ErrAllRejected, CodeAllRejected},
		{"all duplicates after a bad one", `[{"address": "10.0.0.1:80", "weight": -1}, {"address": "10.0.0.1:80"}]`, ErrAllRejected, CodeAllRejected},
	} {
		t.Run(c.name, func(t *testing.T) {
			u, err := ParseList([]byte(c.payload), Limits{})
			if !errors.Is(err, c.sentinel) {
				t.Fatalf("err = %v, want %v", err, c.sentinel)
			}
			var pe *PayloadError
			if !errors.As(err, &pe) || pe.Code != c.code {
				t.Fatalf("err = %#v, want code %s", err, c.code)
			}
			if len(u.Instances) != 0 {
				t.Fatalf("refused payload returned instances %v", u.Instances)
			}
		})
	}
	// Every limit is configurable and checked before decoding.
	if _, err := ParseList([]byte(`[{"address":"a.example:1"}]`), Limits{MaxPayloadBytes: 10}); !errors.Is(err, ErrTooLarge) {
		t.Errorf("MaxPayloadBytes: err = %v", err)
	}
	if _, err := ParseList([]byte(`[{"address":"a.example:1"},{"address":"b.example:1"}]`), Limits{MaxInstances: 1}); !errors.Is(err, ErrTooLarge) {
		t.Errorf("MaxInstances: err = %v", err)
	}
	if _, err := ParseList([]byte(`[{"address":"a.example:1"}]`), Limits{MaxDepth: 1}); !errors.Is(err, ErrTooLarge) {
		t.Errorf("MaxDepth: err = %v", err)
	}
	if _, err := ParseList([]byte(`[]`), Limits{MaxDepth: -1}); err == nil {
		t.Error("negative MaxDepth accepted")
	}
}

// TestParseListAtLimits: exactly at each limit is fine; brackets inside
// strings do not count towards depth or items.
func TestParseListAtLimits(t *testing.T) {
	u, err := ParseList([]byte(`[{"address":"a.example:1","metadata":{"k":"[[[[{{{{,,,,\"]]]"}}]`), Limits{MaxDepth: 3, MaxInstances: 1})
	if err != nil || len(u.Instances) != 1 || u.Instances[0].Metadata["k"] != `[[[[{{{{,,,,"]]]` {
		t.Fatalf("got %+v, %v", u, err)
	}
	many := "[" + strings.Repeat(`{"address":"a.example:1"},`, DefaultMaxInstances-1) + `{"address":"b.example:1"}]`
	u, err = ParseList([]byte(many), Limits{})
	if err != nil || len(u.Instances) != 2 || len(u.Rejected) != DefaultMaxInstances-2 {
		t.Fatalf("100000 items: %d instances, %d rejected, %v", len(u.Instances), len(u.Rejected), err)
	}
}

func TestParseListEmptyArray(t *testing.T) {
	u := mustList(t, ` [ ] `)
	if u.Instances == nil || len(u.Instances) != 0 || len(u.Rejected) != 0 {
		t.Fatalf("got %+v, want an empty non-nil list", u)
	}
}

// TestParseListHugeString: a 10 MB string as a weight, an address, a zone,
// a metadata value and an unknown field is rejected (or ignored) after
// linear work; the test asserts it finishes and what it says.
func TestParseListHugeString(t *testing.T) {
	huge := `"` + strings.Repeat("9", 10<<20) + `"`
	for _, c := range []struct {
		field  string
		reason Reason
	}{
		{"weight", ReasonNotANumber},
		{"address", ReasonBadAddress},
		{"zone", ReasonBadZone},
		{"metadata", ReasonBadMetadata},
		{"unknown", ""},
	} {
		var item string
		switch c.field {
		case "metadata":
			item = `{"address":"a.example:1","metadata":{"k":` + huge + `}}`
		case "address":
			item = `{"address":` + huge + `}`
		default:
			item = `{"address":"a.example:1","` + c.field + `":` + huge + `}`
		}
		u, err := ParseList([]byte(`[`+item+`,{"address":"b.example:1"}]`), Limits{})
		if err != nil {
			t.Fatalf("%s: %v", c.field, err)
		}
		if c.reason == "" {
			if len(u.Instances) != 2 {
				t.Fatalf("%s: %+v", c.field, u.Rejected)
			}
			continue
		}
		if len(u.Instances) != 1 || len(u.Rejected) != 1 || u.Rejected[0].Reason != c.reason {
			t.Fatalf("%s: %d instances, rejected %+v", c.field, len(u.Instances), u.Rejected)
		}
		if len(u.Rejected[0].Raw) > 256 {
			t.Fatalf("%s: Raw is %d bytes", c.field, len(u.Rejected[0].Raw))
		}
	}
	// A 10 MB JSON number as a weight: linear, beyond float64.
	u, err := ParseList([]byte(`[{"address":"a.example:1","weight":`+strings.Repeat("9", 10<<20)+`},{"address":"b.example:1"}]`), Limits{})
	if err != nil || len(u.Rejected) != 1 || u.Rejected[0].Reason != ReasonNotFinite {
		t.Fatalf("10 MB number: %+v, %v", u.Rejected, err)
	}
	// 0.000…0001 with 10 MB of zeros: too small, not a long loop.
	u, err = ParseList([]byte(`[{"address":"a.example:1","weight":0.`+strings.Repeat("0", 10<<20)+`1},{"address":"b.example:1"}]`), Limits{})
	if err != nil || len(u.Rejected) != 1 || u.Rejected[0].Reason != ReasonTooSmall {
		t.Fatalf("10 MB fraction: %+v, %v", u.Rejected, err)
	}
}

// TestParseListMixed: good instances are kept in order, bad ones listed
// with key, reason, field and raw value.
func TestParseListMixed(t *testing.T) {
	u := mustList(t, `[
		{"address": "10.0.0.1:80", "weight": 1},
		{"address": "10.0.0.2:80", "weight": "abc"},
		"10.0.0.3:80",
		{"address": "10.0.0.4:80", "weight": 2},
		{"address": "10.0.0.4:80", "weight": 9},
		{"address": "10.0.0.5", "weight": 1},
		{"address": "10.0.0.6:80", "zone": "Zone A"},
		{"address": "10.0.0.7:80", "metadata": {"v": 2}},
		{"address": "10.0.0.8:80", "weight": 1, "Weight": 0},
		{"address": "[::1]:80", "weight": 0},
		{"address": "[0:0::1]:80", "weight": 5}
	]`)
	var got []string
	for _, in := range u.Instances {
		got = append(got, fmt.Sprintf("%s=%d", in.Address, in.Weight))
	}
	if want := []string{"10.0.0.1:80=100", "10.0.0.4:80=200", "[::1]:80=0"}; !reflect.DeepEqual(got, want) {
		t.Fatalf("instances %v, want %v", got, want)
	}
	want := []Rejection{
		{Key: "[1]", Reason: ReasonNotANumber, Field: "weight", Raw: `"abc"`},
		{Key: "[2]", Reason: ReasonBadInstance, Raw: `"10.0.0.3:80"`},
		{Key: "[4]", Reason: ReasonDuplicateAddress, Field: "address", Raw: `"10.0.0.4:80"`},
		{Key: "[5]", Reason: ReasonBadAddress, Field: "address", Raw: `"10.0.0.5"`},
		{Key: "[6]", Reason: ReasonBadZone, Field: "zone", Raw: `"Zone A"`},
		{Key: "[7]", Reason: ReasonBadMetadata, Field: "metadata", Raw: `{"v": 2}`},
		{Key: "[8]", Reason: ReasonBadInstance, Raw: `{"address": "10.0.0.8:80", "weight": 1, "Weight": 0}`},
		{Key: "[10]", Reason: ReasonDuplicateAddress, Field: "address", Raw: `"[::1]:80"`},
	}
	if len(u.Rejected) != len(want) {
		t.Fatalf("rejected %+v", u.Rejected)
	}
	for i, r := range u.Rejected {
		if r.Message == "" {
			t.Errorf("%s: empty message", r.Key)
		}
		r.Message = ""
		if r != want[i] {
			t.Errorf("rejection %d = %+v\nwant %+v", i, r, want[i])
		}
	}
}

func TestAddresses(t *testing.T) {
	for _, c := range []struct{ in, want string }{
		{"10.0.0.5:8080", "10.0.0.5:8080"},
		{"Web-1.Example.com:0443", "web-1.example.com:443"},
		{"localhost:1", "localhost:1"},
		{"a.example.:65535", "a.example.:65535"},
		{"[2001:DB8::1]:80", "[2001:db8::1]:80"},
		{"[::ffff:10.0.0.1]:80", "[::ffff:10.0.0.1]:80"},
		{"10.0.0.5", ""},
		{"10.0.0.5:0", ""},
		{"10.0.0.5:65536", ""},
		{"10.0.0.5:-1", ""},
		{"10.0.0.5:+80", ""},
		{"10.0.0.5: 80", ""},
		{":80", ""},
		{"::1:80", ""},
		{"[10.0.0.5]:80", ""},
		{"[fe80::1%eth0]:80", ""},
		{"[web]:80", ""},
		{"10.0.0.256:80", ""},
		{"-web.example:80", ""},
		{"web_1.example:80", ""},
		{"wéb.example:80", ""},
		{"web..example:80", ""},
		{strings.Repeat("a", 64) + ".example:80", ""},
		{strings.Repeat("a.", 127) + "ab:80", ""},
		{" 10.0.0.5:80", ""},
		{"http://10.0.0.5:80", ""},
	} {
		got, msg := canonicalAddress(c.in)
		if got != c.want || (got == "") != (msg != "") {
			t.Errorf("canonicalAddress(%q) = %q, %q; want %q", c.in, got, msg, c.want)
		}
	}
	if _, rej := ParseInstance("k", []byte(`{"weight": 1}`), Limits{}); rej == nil || rej.Reason != ReasonBadAddress {
		t.Errorf("missing address: %v", rej)
	}
	if _, rej := ParseInstance("k", []byte(`{"address": 8080}`), Limits{}); rej == nil || rej.Reason != ReasonBadAddress {
		t.Errorf("numeric address: %v", rej)
	}
}

func TestZoneAndMetadata(t *testing.T) {
	okMD := `{` + func() string {
		var b []string
		for i := range 64 {
			b = append(b, fmt.Sprintf(`"%s%d": "%s"`, strings.Repeat("k", 120), i, strings.Repeat("v", 1024)))
		}
		return strings.Join(b, ",")
	}() + `}`
	for _, c := range []struct {
		fields string
		reason Reason
	}{
		{`"zone": "eu-west-1a.b_c"`, ""},
		{`"zone": ""`, ""},
		{`"zone": null`, ""},
		{`"zone": "` + strings.Repeat("z", 64) + `"`, ""},
		{`"zone": "` + strings.Repeat("z", 65) + `"`, ReasonBadZone},
		{`"zone": "A"`, ReasonBadZone},
		{`"zone": "a b"`, ReasonBadZone},
		{`"zone": 1`, ReasonBadZone},
		{`"zone": ["a"]`, ReasonBadZone},
		{`"metadata": {}`, ""},
		{`"metadata": null`, ""},
		{`"metadata": ` + okMD, ""},
		{`"metadata": {"a": "1", "a": "2"}`, ReasonBadMetadata},
		{`"metadata": {"a": 1}`, ReasonBadMetadata},
		{`"metadata": {"a": 1e999}`, ReasonBadMetadata},
		{`"metadata": {"a": null}`, ReasonBadMetadata},
		{`"metadata": {"a": {"b": "c"}}`, ReasonBadMetadata},
		{`"metadata": {"a": ["b"]}`, ReasonBadMetadata},
		{`"metadata": ["a"]`, ReasonBadMetadata},
		{`"metadata": "a=b"`, ReasonBadMetadata},
		{`"metadata": {"` + strings.Repeat("k", 129) + `": "v"}`, ReasonBadMetadata},
		{`"metadata": {"k": "` + strings.Repeat("v", 1025) + `"}`, ReasonBadMetadata},
		{`"metadata": ` + okMD[:len(okMD)-1] + `, "one more": "x"}`, ReasonBadMetadata},
	} {
		in, rej := ParseInstance("k", []byte(`{"address": "a.example:1", `+c.fields+`}`), Limits{})
		switch {
		case c.reason == "" && rej != nil:
			t.Errorf("%.60s: rejected %v", c.fields, rej)
		case c.reason != "" && (rej == nil || rej.Reason != c.reason):
			t.Errorf("%.60s: got %+v, %v; want %s", c.fields, in, rej, c.reason)
		}
	}
}

func TestParseInstanceWhole(t *testing.T) {
	for _, c := range []struct {
		name, data string
	}{
		{"not json", `{"address": `},
		{"array", `[{"address": "a.example:1"}]`},
		{"string", `"a.example:1"`},
		{"null", `null`},
		{"empty", ``},
		{"two values", `{"address": "a.example:1"} {}`},
		{"deep", strings.Repeat(`{"a":`, 40) + `1` + strings.Repeat(`}`, 40)},
	} {
		_, rej := ParseInstance("/levee/services/video/i-1", []byte(c.data), Limits{})
		if rej == nil || rej.Reason != ReasonBadInstance || rej.Key != "/levee/services/video/i-1" {
			t.Errorf("%s: %+v", c.name, rej)
		}
	}
	in, rej := ParseInstance("k", []byte(` {"address": "10.0.0.5:8080", "weight": "0"} `), Limits{})
	if rej != nil || in.Address != "10.0.0.5:8080" || in.Weight != 0 {
		t.Fatalf("got %+v, %v", in, rej)
	}
}

func TestTruncateRaw(t *testing.T) {
	s := strings.Repeat("é", 200) // 400 bytes
	got := truncateRaw([]byte(s))
	if len(got) != 256 || !strings.HasPrefix(s, got) {
		t.Fatalf("len %d", len(got))
	}
	got = truncateRaw([]byte("a" + s))
	if len(got) != 255 || !strings.HasPrefix("a"+s, got) {
		t.Fatalf("odd cut: len %d", len(got))
	}
	if got := truncateRaw([]byte("\xff\"")); got != "\uFFFD\"" {
		t.Fatalf("invalid UTF-8: %q", got)
	}
	// Found by FuzzParseInstance (testdata/fuzz/FuzzParseInstance/b3b1c18d9018d4c2):
	// replacing invalid bytes after the cut made Raw longer than 256 bytes.
	got = truncateRaw([]byte(strings.Repeat("0", 128) + "\x80" + strings.Repeat("0", 128)))
	if len(got) > 256 || !strings.HasPrefix(got, strings.Repeat("0", 128)+"\uFFFD") {
		t.Fatalf("invalid UTF-8 before the cut: len %d, %q", len(got), got)
	}
	got = truncateRaw([]byte(strings.Repeat("a\xff", 200)))
	if len(got) != 256 || !strings.HasPrefix(got, "a\uFFFDa\uFFFD") {
		t.Fatalf("alternating invalid: len %d", len(got))
	}
}
