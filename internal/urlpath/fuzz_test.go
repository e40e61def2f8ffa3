package urlpath

import (
	"strings"
	"testing"
)

// FuzzNormalizePath checks the properties the request path relies on, in
// every mode: the normal form is a fixed point; it is never longer than
// the input plus the escapes Normalize adds (two bytes per raw byte it
// must encode); it never holds an empty, "." or ".." segment, a raw
// backslash, '#', NUL or a lower-case escape; and in reject mode no
// escaped slash survives.
func FuzzNormalizePath(f *testing.F) {
	for _, s := range []string{
		"/", "/users/x/../admin/x", "/users//admin/x", "/users/%2e%2E/admin", "/users/..;/admin",
		"/users%2Fadmin", "/users%5cadmin", "/%252e%252e/", "/%C0%AE%C0%AE/", "/%EF%BC%8E%EF%BC%8E/",
		"/caf\xc3\xa9/", "/a\\b", "/a#b", "/a%00", "/a%G1", "/a%4", "/a/.", "/a/..", "/a;b/c;d=e",
		"/x/%2e%2e%2fadmin", "/.%2e/", "//a//b//", "/a\"<>{}",
	} {
		f.Add(s, uint8(0))
		f.Add(s, uint8(1))
		f.Add(s, uint8(2))
	}
	f.Fuzz(func(t *testing.T, in string, m uint8) {
		mode := EscapedSlashes(m % 3)
		out, err := Normalize(in, mode)
		if err != nil {
			if out != "" {
				t.Fatalf("Normalize(%q) = %q with error %v", in, out, err)
			}
			return
		}
		again, err := Normalize(out, mode)
		if err != nil || again != out {
			t.Fatalf("not idempotent: %q -> %q -> %q, %v", in, out, again, err)
		}
		added := 0
		for i := 0; i < len(in); i++ {
			if in[i] != '%' && class[in[i]] == clsEscape {
				added += 2
			}
		}
		if len(out) > len(in)+added {
			t.Fatalf("Normalize(%q) = %q: longer than the input plus %d escape bytes", in, out, added)
		}
		if out == "" || out[0] != '/' {
			t.Fatalf("Normalize(%q) = %q: not origin form", in, out)
		}
		for _, bad := range []string{"//", "/./", "/../", "\\", "#", "\x00"} {
			if strings.Contains(out, bad) {
				t.Fatalf("Normalize(%q) = %q: contains %q", in, out, bad)
			}
		}
		if strings.HasSuffix(out, "/.") || strings.HasSuffix(out, "/..") {
			t.Fatalf("Normalize(%q) = %q: ends in a dot segment", in, out)
		}
		for i := 0; i < len(out); i++ {
			if out[i] != '%' {
				continue
			}
			esc := out[i : i+3]
			if strings.ToUpper(esc) != esc {
				t.Fatalf("Normalize(%q) = %q: lower-case escape %s", in, out, esc)
			}
			if c := Unescape(esc); unreserved(c[0]) {
				t.Fatalf("Normalize(%q) = %q: escaped unreserved %s", in, out, esc)
			}
			if mode != Keep && (esc == "%2F" || esc == "%5C") {
				t.Fatalf("Normalize(%q) = %q: escaped slash kept in mode %v", in, out, mode)
			}
		}
	})
}
