package config

import (
	"strings"
	"testing"
)

func TestNormalizeHashOn(t *testing.T) {
	tests := []struct{ in, want, problem string }{
		{"client_ip", "client_ip", ""},
		{"path", "path", ""},
		{"header:x-user", "header:X-User", ""},
		{"header:X-USER-ID", "header:X-User-Id", ""},
		{"header:x_user", "header:X_user", ""},
		{"cookie:SID", "cookie:SID", ""},
		{"query:user id", "query:user id", ""},
		{"query:" + strings.Repeat("q", 128), "query:" + strings.Repeat("q", 128), ""},
		{"query:é", "query:é", ""},
		{"", "", `must be "header:NAME", "cookie:NAME", "query:NAME", "client_ip" or "path"`},
		{"header", "header", `needs a name after "header:"`},
		{"query:", "query:", `needs a name after "query:"`},
		{"path:/x", "path:/x", `"path" takes no name`},
		{"header:a:b", "header:a:b", "header name must be an HTTP token (letters, digits and !#$%&'*+-.^_`|~)"},
		{"cookie:" + strings.Repeat("c", 129), "cookie:" + strings.Repeat("c", 129), "cookie name must be at most 128 bytes"},
		{"query:a\x7f", "query:a\x7f", "query key must not contain control characters"},
		{"CLIENT_IP", "CLIENT_IP", `must be "header:NAME", "cookie:NAME", "query:NAME", "client_ip" or "path"`},
	}
	for _, tt := range tests {
		got, problem := normalizeHashOn(tt.in)
		if got != tt.want || problem != tt.problem {
			t.Errorf("normalizeHashOn(%q) = %q, %q; want %q, %q", tt.in, got, problem, tt.want, tt.problem)
		}
	}
	for in, want := range map[string][2]string{"header:X-User": {"header", "X-User"}, "query:a:b": {"query", "a:b"}, "path": {"path", ""}} {
		if k, n := (ConsistentHash{HashOn: in}).Key(); k != want[0] || n != want[1] {
			t.Errorf("Key(%q) = %q, %q; want %q", in, k, n, want)
		}
	}
}
