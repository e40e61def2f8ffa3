package urlpath

import (
	"errors"
	"strings"
	"testing"
)

func TestNormalize(t *testing.T) {
	type want struct {
		out string
		err error
	}
	ok := func(s string) want { return want{out: s} }
	bad := func(e error) want { return want{err: e} }
	cases := []struct {
		in   string
		mode EscapedSlashes
		want want
	}{
		// Already normal: returned as is.
		{"/", Reject, ok("/")},
		{"/users/42", Reject, ok("/users/42")},
		{"/users/42/", Reject, ok("/users/42/")},
		{"/a%20b/%C3%A9", Reject, ok("/a%20b/%C3%A9")},
		{"/a;b=c,d/e:f@g/!$&'()*+", Reject, ok("/a;b=c,d/e:f@g/!$&'()*+")},
		{"/...", Reject, ok("/...")},
		{"/.a/a./..b", Reject, ok("/.a/a./..b")},

		// Dot segments (RFC 3986 section 5.2.4 and its examples).
		{"/a/b/c/./../../g", Reject, ok("/a/g")},
		{"/mid/content=5/../6", Reject, ok("/mid/6")},
		{"/users/x/../admin/x", Reject, ok("/users/admin/x")},
		{"/..", Reject, ok("/")},
		{"/../../a", Reject, ok("/a")},
		{"/a/..", Reject, ok("/")},
		{"/a/.", Reject, ok("/a/")},
		{"/a/b/..", Reject, ok("/a/")},
		{"/a/./b", Reject, ok("/a/b")},
		{"/./", Reject, ok("/")},
		{"/a/b/../../../c/", Reject, ok("/c/")},

		// Encoded dots count once decoded; decoded unreserved characters.
		{"/users/x/%2e%2E/admin", Reject, ok("/users/admin")},
		{"/users/%2e/admin", Reject, ok("/users/admin")},
		{"/users/.%2e/admin", Reject, ok("/admin")},
		{"/%7Euser/%41%62%2D%5f", Reject, ok("/~user/Ab-_")},
		{"/%2e%2e%2e", Reject, ok("/...")},

		// Remaining escapes are upper-cased; never decoded twice.
		{"/a%2a%c3%a9", Reject, ok("/a%2A%C3%A9")},
		{"/users/%252e%252e/admin", Reject, ok("/users/%252e%252e/admin")},
		{"/users/%252E%252E/admin", Reject, ok("/users/%252E%252E/admin")},
		{"/a%3fb%23c", Reject, ok("/a%3Fb%23c")},

		// Repeated slashes merge, before dot segments are resolved.
		{"/users//admin/x", Reject, ok("/users/admin/x")},
		{"//users///admin//", Reject, ok("/users/admin/")},
		{"/a//../b", Reject, ok("/b")},

		// Raw bytes a URI cannot hold are encoded; raw UTF-8 too.
		{"/a\"b<c>{|}^`[]", Reject, ok("/a%22b%3Cc%3E%7B%7C%7D%5E%60%5B%5D")},
		{"/caf\xc3\xa9", Reject, ok("/caf%C3%A9")},

		// Refused outright.
		{"", Reject, bad(ErrNotOriginForm)},
		{"users", Reject, bad(ErrNotOriginForm)},
		{"*", Reject, bad(ErrNotOriginForm)},
		{"/a\x00b", Reject, bad(ErrNUL)},
		{"/a%00b", Reject, bad(ErrNUL)},
		{"/a%G1", Reject, bad(ErrBadEscape)},
		{"/a%4", Reject, bad(ErrBadEscape)},
		{"/a%", Reject, bad(ErrBadEscape)},
		{"/a%%41", Reject, bad(ErrBadEscape)},
		{"/a\\b", Reject, bad(ErrBadByte)},
		{"/a#b", Reject, bad(ErrBadByte)},
		{"/a b", Reject, bad(ErrBadByte)},
		{"/a\tb", Reject, bad(ErrBadByte)},
		{"/a\x7f", Reject, bad(ErrBadByte)},

		// Invalid UTF-8 once decoded.
		{"/%C0%AE%C0%AE/admin", Reject, bad(ErrBadUTF8)}, // overlong '.'
		{"/%E0%80%AE", Reject, bad(ErrBadUTF8)},          // overlong '.'
		{"/%F0%80%80%AE", Reject, bad(ErrBadUTF8)},       // overlong '.'
		{"/%C1%9C", Reject, bad(ErrBadUTF8)},             // overlong '\'
		{"/%ED%A0%80", Reject, bad(ErrBadUTF8)},          // surrogate
		{"/%F4%90%80%80", Reject, bad(ErrBadUTF8)},       // above U+10FFFF
		{"/%C3", Reject, bad(ErrBadUTF8)},                // truncated
		{"/%C3/%A9", Reject, bad(ErrBadUTF8)},            // cut by a slash
		{"/%A9", Reject, bad(ErrBadUTF8)},                // stray continuation
		{"/\xc0\xae", Reject, bad(ErrBadUTF8)},           // raw overlong
		{"/%FF", Reject, bad(ErrBadUTF8)},

		// Characters NFKC folds to '.', '/', '\', '%', raw or encoded.
		{"/users/%EF%BC%8E%EF%BC%8E/admin", Reject, bad(ErrConfusable)}, // U+FF0E
		{"/users\xef\xbc\x8fadmin", Reject, bad(ErrConfusable)},         // U+FF0F
		{"/users%ef%bc%bcadmin", Reject, bad(ErrConfusable)},            // U+FF3C
		{"/%EF%BC%85%32%65", Reject, bad(ErrConfusable)},                // U+FF05
		{"/%EF%B9%92", Reject, bad(ErrConfusable)},                      // U+FE52
		{"/%E2%80%A5", Reject, bad(ErrConfusable)},                      // U+2025
		{"/%EF%BC%90", Reject, ok("/%EF%BC%90")},                        // U+FF10 FULLWIDTH DIGIT ZERO: not a separator

		// ';' path parameters: opaque, except on a dot segment.
		{"/users/..;/admin", Reject, bad(ErrDotParam)},
		{"/users/.;x/admin", Reject, bad(ErrDotParam)},
		{"/users/%2e%2e;/admin", Reject, bad(ErrDotParam)},
		{"/users/..%3B/admin", Reject, bad(ErrDotParam)},
		{"/users/..%3b", Reject, bad(ErrDotParam)},
		{"/app/page;jsessionid=1", Reject, ok("/app/page;jsessionid=1")},
		{"/users;x/admin", Reject, ok("/users;x/admin")},
		{"/;/", Reject, ok("/;/")},
		{"/...;x", Reject, ok("/...;x")},

		// Case is significant: letters are never folded.
		{"/USERS/Admin", Reject, ok("/USERS/Admin")},

		// Escaped slashes and backslashes, by mode.
		{"/users%2Fadmin", Reject, bad(ErrEscapedSlash)},
		{"/users%2fadmin", Reject, bad(ErrEscapedSlash)},
		{"/users%5Cadmin", Reject, bad(ErrEscapedSlash)},
		{"/users%5cadmin", Reject, bad(ErrEscapedSlash)},
		{"/users/x%2F..%2Fadmin", Keep, ok("/users/x%2F..%2Fadmin")},
		{"/a%2fb%5cc", Keep, ok("/a%2Fb%5Cc")},
		{"/a/..%2f", Keep, ok("/a/..%2F")},
		{"/users/x%2F..%2Fadmin", Decode, ok("/users/admin")},
		{"/users%2f%2F%5cadmin", Decode, ok("/users/admin")},
		{"/a%2f..", Decode, ok("/")},
		{"/a/..%5c..%5cb", Decode, ok("/b")},
		{"/a%2F%00", Decode, bad(ErrNUL)},
	}
	for _, c := range cases {
		got, err := Normalize(c.in, c.mode)
		if !errors.Is(err, c.want.err) || got != c.want.out {
			t.Errorf("Normalize(%q, %v) = %q, %v; want %q, %v", c.in, c.mode, got, err, c.want.out, c.want.err)
			continue
		}
		if err == nil {
			if again, err := Normalize(got, c.mode); again != got || err != nil {
				t.Errorf("Normalize(%q, %v) = %q, %v; not idempotent", got, c.mode, again, err)
			}
		}
	}
}

// TestNormalizeNormalPathsDoNotAllocate pins the common case: a path in
// normal form comes back as is, with no allocation.
func TestNormalizeNormalPathsDoNotAllocate(t *testing.T) {
	for _, p := range []string{"/", "/users/42/profile", "/a%20b/%C3%A9;v=1", "/api/v1/items/"} {
		n := testing.AllocsPerRun(100, func() {
			if q, err := Normalize(p, Reject); err != nil || q != p {
				t.Fatalf("Normalize(%q) = %q, %v", p, q, err)
			}
		})
		if n != 0 {
			t.Errorf("Normalize(%q): %v allocations, want 0", p, n)
		}
	}
}

func TestNormalizeLongInputsAreLinear(t *testing.T) {
	// Many ".." after many segments: each byte is scanned a bounded number
	// of times, so this is quick and the answer is the root.
	p := strings.Repeat("/a", 100000) + strings.Repeat("/..", 100000)
	if got, err := Normalize(p, Reject); err != nil || got != "/" {
		t.Fatalf("got %q, %v; want /", got[:min(len(got), 20)], err)
	}
	p = strings.Repeat("/", 200000) + "x"
	if got, err := Normalize(p, Reject); err != nil || got != "/x" {
		t.Fatalf("got %q, %v; want /x", got[:min(len(got), 20)], err)
	}
}

func TestUnescape(t *testing.T) {
	for in, want := range map[string]string{
		"/a/b":             "/a/b",
		"/a%20b":           "/a b",
		"/a%2Fb%C3%A9":     "/a/b\u00e9",
		"/%252e":           "/%2e",
		"/users%3Bx/admin": "/users;x/admin",
	} {
		if got := Unescape(in); got != want {
			t.Errorf("Unescape(%q) = %q, want %q", in, got, want)
		}
	}
}

func BenchmarkNormalize(b *testing.B) {
	for _, bc := range []struct{ name, path string }{
		{"normal", "/api/v1/users/12345/profile"},
		{"dots", "/api/v1/users/../x/./12345//profile"},
		{"escapes", "/api/v1/%7eusers/caf%c3%a9/%41"},
	} {
		b.Run(bc.name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				_, _ = Normalize(bc.path, Reject)
			}
		})
	}
}
