package jsonstr

import (
	"encoding/json"
	"strings"
	"testing"
	"unicode/utf8"
)

// encodingJSON is what encoding/json writes for s, with or without its
// HTML escaping.
func encodingJSON(t testing.TB, s string, html bool) string {
	var sb strings.Builder
	enc := json.NewEncoder(&sb)
	enc.SetEscapeHTML(html)
	if err := enc.Encode(s); err != nil {
		t.Fatal(err)
	}
	return strings.TrimSuffix(sb.String(), "\n")
}

func TestAppendAgreesWithEncodingJSON(t *testing.T) {
	cases := []string{"", "plain", `q"b\s`, "\n\r\t\b\f\x00\x1f\x7f", "<a href='x'>&amp;</a>",
		"é中🙂", "\u2028\u2029", "bad \xff\xfe utf8", "\xe2\x80", strings.Repeat("x", 100) + "\x01"}
	for _, s := range cases {
		if got, want := string(Append(nil, s)), encodingJSON(t, s, false); got != want {
			t.Errorf("Append(%q) = %s, encoding/json %s", s, got, want)
		}
		if got, want := string(AppendHTMLSafe(nil, s)), encodingJSON(t, s, true); got != want {
			t.Errorf("AppendHTMLSafe(%q) = %s, encoding/json %s", s, got, want)
		}
	}
}

func TestAppendAllocatesNothing(t *testing.T) {
	buf := make([]byte, 0, 256)
	if n := testing.AllocsPerRun(100, func() { buf = Append(buf[:0], "a \"quoted\"\n line é \u2028") }); n != 0 {
		t.Errorf("Append: %v allocations, want 0", n)
	}
}

// FuzzAppend: every output is valid JSON that decodes to s (invalid UTF-8
// as U+FFFD, as encoding/json decodes it) and is byte-identical to
// encoding/json's.
func FuzzAppend(f *testing.F) {
	for _, s := range []string{"", "a\"b", "\x00\xff", "\u2028<&>", "é"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		for _, html := range []bool{false, true} {
			var out []byte
			if html {
				out = AppendHTMLSafe(nil, s)
			} else {
				out = Append(nil, s)
			}
			var back string
			if err := json.Unmarshal(out, &back); err != nil {
				t.Fatalf("%q: not JSON: %s: %v", s, out, err)
			}
			if want := strings.ToValidUTF8(s, "\uFFFD"); utf8.ValidString(s) && back != want {
				t.Fatalf("%q decodes to %q", s, back)
			}
			if want := encodingJSON(t, s, html); string(out) != want {
				t.Fatalf("%q: %s, encoding/json %s", s, out, want)
			}
		}
	})
}
