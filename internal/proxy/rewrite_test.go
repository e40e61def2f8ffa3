package proxy

import (
	"regexp"
	"testing"
)

// TestRewritePath: each path rewrite on the escaped normal form, at and
// around segment boundaries (the request path normalises the result
// after; TestRouteRewrites in internal/gateway sends them over sockets).
func TestRewritePath(t *testing.T) {
	swap := regexp.MustCompile(`^/r/([^/]+)/([^/]+)$`)
	tests := []struct {
		rw       Rewrite
		in, want string
	}{
		{Rewrite{StripPrefix: "/api"}, "/api/users/1", "/users/1"},
		{Rewrite{StripPrefix: "/api"}, "/api", "/"},
		{Rewrite{StripPrefix: "/api"}, "/api/", "/"},
		{Rewrite{StripPrefix: "/api"}, "/apix/1", "/apix/1"}, // not on a boundary
		{Rewrite{StripPrefix: "/api/"}, "/api/x", "/x"},
		{Rewrite{StripPrefix: "/api/"}, "/api", "/api"},
		{Rewrite{ReplacePrefix: &PrefixReplace{"/v1", "/internal/v2"}}, "/v1/a", "/internal/v2/a"},
		{Rewrite{ReplacePrefix: &PrefixReplace{"/v1", "/internal/v2"}}, "/v1", "/internal/v2"},
		{Rewrite{ReplacePrefix: &PrefixReplace{"/v1", "/internal/v2"}}, "/v1x", "/v1x"},
		{Rewrite{ReplacePrefix: &PrefixReplace{"/s/", "/t"}}, "/s/a", "/t/a"},
		{Rewrite{ReplacePrefix: &PrefixReplace{"/s/", "/t/"}}, "/s/a", "/t/a"},
		{Rewrite{ReplacePrefix: &PrefixReplace{"/", "/base"}}, "/a", "/base/a"},
		{Rewrite{Regex: swap, Substitution: "/$2/$1"}, "/r/a/b", "/b/a"},
		{Rewrite{Regex: swap, Substitution: "/$2/$1"}, "/r/a/b/c", "/r/a/b/c"},
		{Rewrite{Host: "h.internal"}, "/x", "/x"},
	}
	for _, tc := range tests {
		if got := rewritePath(tc.in, &tc.rw); got != tc.want {
			t.Errorf("%+v on %q = %q, want %q", tc.rw, tc.in, got, tc.want)
		}
	}
}
