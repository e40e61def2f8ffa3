package route

import (
	"fmt"
	"math/rand/v2"
	"strings"
	"testing"
)

// rules is the table most tests share. Value is the rule's name, so a
// failure says which rule won.
var rules = []Rule[string]{
	{Host: "api.example.com", PathPrefix: "/", Value: "api-root"},
	{Host: "api.example.com", PathPrefix: "/v1/", Value: "api-v1"},
	{Host: "api.example.com", PathPrefix: "/v1/users", Methods: []string{"POST"}, Value: "api-users-post"},
	{Host: "api.example.com", PathPrefix: "/v1/users", Value: "api-users"},
	{Host: "api.example.com", PathPrefix: "/v1/users", Methods: []string{"DELETE"}, Value: "api-users-delete"},
	{Host: "only-a.example.com", PathPrefix: "/a", Value: "only-a"},
	{Host: "readonly.example.com", PathPrefix: "/data", Methods: []string{"GET", "HEAD"}, Value: "readonly-data"},
	{Host: "*.example.com", PathPrefix: "/", Value: "wild-example"},
	{Host: "*.eu.example.com", PathPrefix: "/eu", Value: "wild-eu"},
	{Host: "*.cdn.example.com", PathPrefix: "/video", Value: "wild-cdn-video"},
	{Host: "::1", PathPrefix: "/", Value: "ipv6-loopback"},
	{Host: "10.0.0.1", PathPrefix: "/", Value: "ipv4"},
	{Host: "", PathPrefix: "/b", Value: "any-b"},
	{Host: "", PathPrefix: "/data", Value: "any-data"},
	{Host: "", PathPrefix: "/video/", Value: "any-video-slash"},
	{Host: "", PathPrefix: "/img", Methods: []string{"GET"}, Value: "any-img-get"},
	{Host: "opts.test", PathPrefix: "/img", Methods: []string{"GET"}, Value: "opts-img-get"},
	{Host: "opts.test", PathPrefix: "", Methods: []string{"OPTIONS"}, Value: "opts-options"},
}

func TestLookup(t *testing.T) {
	tab := NewTable(rules)
	tests := []struct {
		name           string
		host, path     string
		method         string
		want           string // "" = no match
		methodMismatch bool
	}{
		// Exact host.
		{"exact root", "api.example.com", "/", "GET", "api-root", false},
		{"exact longest prefix", "api.example.com", "/v1/orders", "GET", "api-v1", false},
		{"exact longer prefix beats shorter", "api.example.com", "/v1/users/7", "GET", "api-users", false},
		{"method-specific beats method-less", "api.example.com", "/v1/users", "POST", "api-users-post", false},
		{"second method-specific rule", "api.example.com", "/v1/users/7", "DELETE", "api-users-delete", false},
		{"method-less takes other methods", "api.example.com", "/v1/users", "PUT", "api-users", false},
		{"prefix without slash matches on segment boundaries only", "api.example.com", "/v1/usersettings", "POST", "api-v1", false},
		{"prefix without slash matches itself", "api.example.com", "/v1/users", "POST", "api-users-post", false},
		{"prefix with slash does not match the bare word", "api.example.com", "/v1", "GET", "api-root", false},

		// Host spelling.
		{"port stripped", "api.example.com:8080", "/v1/x", "GET", "api-v1", false},
		{"upper case", "API.Example.COM", "/v1/x", "GET", "api-v1", false},
		{"upper case with port", "API.EXAMPLE.COM:443", "/", "GET", "api-root", false},
		{"trailing dot", "api.example.com.", "/", "GET", "api-root", false},
		{"trailing dot with port", "api.example.com.:80", "/", "GET", "api-root", false},
		{"two trailing dots are not one", "api.example.com..", "/b", "GET", "any-b", false},
		{"ipv6 with port", "[::1]:8080", "/x", "GET", "ipv6-loopback", false},
		{"ipv6 without port", "[::1]", "/x", "GET", "ipv6-loopback", false},
		{"ipv6 bare", "::1", "/x", "GET", "ipv6-loopback", false},
		{"ipv4 with port", "10.0.0.1:9000", "/x", "GET", "ipv4", false},
		{"ipv4 is not a wildcard of its octets", "10.0.0.1.example.com", "/x", "GET", "wild-example", false},

		// Wildcards.
		{"wildcard one label", "www.example.com", "/x", "GET", "wild-example", false},
		{"wildcard several labels", "a.b.example.com", "/x", "GET", "wild-example", false},
		{"wildcard does not match the apex", "example.com", "/b", "GET", "any-b", false},
		{"wildcard does not match a bare suffix", ".example.com", "/b", "GET", "any-b", false},
		{"wildcard needs a dot boundary", "badexample.com", "/b", "GET", "any-b", false},
		{"exact beats wildcard", "api.example.com", "/x", "GET", "api-root", false},
		{"longer wildcard first", "x.eu.example.com", "/eu/1", "GET", "wild-eu", false},
		{"longer wildcard falls through to shorter", "x.eu.example.com", "/other", "GET", "wild-example", false},
		{"wildcard upper case with port", "X.CDN.Example.Com:8443", "/video/s", "GET", "wild-cdn-video", false},
		{"wildcard prefix not on a segment boundary", "X.CDN.Example.Com:8443", "/videos", "GET", "wild-example", false},

		// Fall-through between groups and method mismatch.
		{"exact without path match falls through to wildcard", "only-a.example.com", "/b", "GET", "wild-example", false},
		{"exact with path match stays", "only-a.example.com", "/a/bc", "GET", "only-a", false},
		{"exact host without a segment match falls through", "only-a.example.com", "/abc", "GET", "wild-example", false},
		{"falls through to any-host", "unknown.test", "/b/c", "GET", "any-b", false},
		{"method mismatch stops at the host", "readonly.example.com", "/data/1", "POST", "", true},
		{"method listed", "readonly.example.com", "/data/1", "HEAD", "readonly-data", false},
		{"method is case-sensitive", "readonly.example.com", "/data/1", "get", "", true},
		{"any-host method mismatch", "unknown.test", "/img/1.png", "POST", "", true},
		{"any-host method match", "unknown.test", "/img/1.png", "GET", "any-img-get", false},
		{"shorter prefix admits the method", "opts.test", "/img/1.png", "OPTIONS", "opts-options", false},
		{"longer prefix admits the method", "opts.test", "/img/1.png", "GET", "opts-img-get", false},
		{"empty prefix means slash", "opts.test", "/zzz", "OPTIONS", "opts-options", false},
		{"empty path means slash", "opts.test", "", "OPTIONS", "opts-options", false},
		{"method mismatch hides any-host path match", "opts.test", "/b", "GET", "", true},

		// Path prefix edge cases.
		{"slash prefix matches itself", "unknown.test", "/video/", "GET", "any-video-slash", false},
		{"slash prefix needs the slash", "unknown.test", "/video", "GET", "", false},
		{"no host, no path", "", "/nothing", "GET", "", false},
		{"empty host uses any-host", "", "/b", "GET", "any-b", false},
		{"asterisk path matches nothing", "opts.test", "*", "OPTIONS", "", false},
		{"no match", "unknown.test", "/zzz", "GET", "", false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			v, ok, mm := tab.Lookup(tc.host, tc.path, tc.method)
			if got := nameOf(v, ok); got != orNone(tc.want) || mm != tc.methodMismatch {
				t.Errorf("Lookup(%q, %q, %q) = %s, methodMismatch=%v; want %s, methodMismatch=%v",
					tc.host, tc.path, tc.method, got, mm, orNone(tc.want), tc.methodMismatch)
			}
			mv, mok := tab.Match(tc.host, tc.path, tc.method)
			if mv != v || mok != ok {
				t.Errorf("Match = %q, %v; Lookup = %q, %v", mv, mok, v, ok)
			}
		})
	}
}

func nameOf(v string, ok bool) string {
	if !ok {
		if v != "" {
			return "non-zero value with ok=false: " + v
		}
		return "(none)"
	}
	return v
}

func orNone(s string) string {
	if s == "" {
		return "(none)"
	}
	return s
}

func TestNewTableCanonicalisesRuleHosts(t *testing.T) {
	tab := NewTable([]Rule[string]{
		{Host: "API.Example.COM.", Value: "exact"},
		{Host: "*.Wild.Example.", Value: "wild"},
		{Host: "[fe80::1]", Value: "v6"},
	})
	for _, tc := range []struct{ host, want string }{
		{"api.example.com", "exact"},
		{"x.wild.example", "wild"},
		{"[FE80::1]:443", "v6"},
	} {
		if v, ok := tab.Match(tc.host, "/", "GET"); !ok || v != tc.want {
			t.Errorf("Match(%q) = %q, %v; want %q", tc.host, v, ok, tc.want)
		}
	}
}

func TestNewTableDoesNotRetainRules(t *testing.T) {
	in := []Rule[string]{{Host: "a.test", PathPrefix: "/", Methods: []string{"GET"}, Value: "a"}}
	tab := NewTable(in)
	in[0].Methods[0] = "POST"
	in[0].Host = "b.test"
	if v, ok := tab.Match("a.test", "/", "GET"); !ok || v != "a" {
		t.Fatalf("after changing the input, Match = %q, %v; want a", v, ok)
	}
}

func TestEqualRulesFirstWins(t *testing.T) {
	tab := NewTable([]Rule[string]{
		{Host: "a.test", PathPrefix: "/x", Value: "first-any"},
		{Host: "a.test", PathPrefix: "/x", Methods: []string{"GET"}, Value: "first-get"},
		{Host: "a.test", PathPrefix: "/x", Value: "second-any"},
		{Host: "a.test", PathPrefix: "/x", Methods: []string{"GET"}, Value: "second-get"},
	})
	if v, _ := tab.Match("a.test", "/x", "GET"); v != "first-get" {
		t.Errorf("GET: got %q, want first-get", v)
	}
	if v, _ := tab.Match("a.test", "/x", "PUT"); v != "first-any" {
		t.Errorf("PUT: got %q, want first-any", v)
	}
}

func TestEmptyTables(t *testing.T) {
	var nilTab *Table[int]
	var zero Table[int]
	for name, tab := range map[string]*Table[int]{
		"nil":   nilTab,
		"zero":  &zero,
		"empty": NewTable[int](nil),
	} {
		if v, ok, mm := tab.Lookup("a.test", "/", "GET"); v != 0 || ok || mm {
			t.Errorf("%s: Lookup = %v, %v, %v; want no match", name, v, ok, mm)
		}
		if n := tab.Len(); n != 0 {
			t.Errorf("%s: Len = %d, want 0", name, n)
		}
	}
	if n := NewTable(rules).Len(); n != len(rules) {
		t.Errorf("Len = %d, want %d", n, len(rules))
	}
}

// TestLongRuleHost covers a rule host longer than the stack buffer, which
// no DNS name is: it must still match (allocating is allowed there).
func TestLongRuleHost(t *testing.T) {
	long := strings.Repeat("a", 300) + ".test"
	tab := NewTable([]Rule[string]{
		{Host: long, Value: "exact"},
		{Host: "*." + long, Value: "wild"},
	})
	for _, tc := range []struct{ host, want string }{
		{strings.ToUpper(long) + ":80", "exact"},
		{"X." + strings.ToUpper(long), "wild"},
		{"x." + long, "wild"},
	} {
		if v, ok := tab.Match(tc.host, "/", "GET"); !ok || v != tc.want {
			t.Errorf("Match(%.20q...) = %q, %v; want %q", tc.host, v, ok, tc.want)
		}
	}
}

func TestMatchDoesNotAllocate(t *testing.T) {
	tab := NewTable(rules)
	bigRules := generateRules(rand.New(rand.NewPCG(1, 2)), 1000)
	big := NewTable(bigRules)
	exactHost, exactPath := requestFor(bigRules[400], true)
	wildHost, wildPath := requestFor(bigRules[401], true)
	// Longer than the 32 bytes the compiler may keep on the stack for a
	// variable-sized make, so a heap fallback would show.
	longHost := strings.Repeat("label.", 15) + "example.com"
	long := NewTable([]Rule[string]{
		{Host: longHost, PathPrefix: "/", Value: "long"},
		{Host: "*." + longHost, PathPrefix: "/", Value: "long-wild"},
	})
	cases := []struct {
		tab                *Table[string]
		host, path, method string
	}{
		{tab, "api.example.com", "/v1/users", "POST"},
		{tab, "API.Example.COM:8443", "/v1/users/1", "GET"},
		{tab, "X.CDN.EXAMPLE.COM.:80", "/video/1", "GET"},
		{tab, "[::1]:80", "/", "GET"},
		{tab, "Unknown.Test:1", "/img/x", "PUT"},
		{tab, "unknown.test", "/nothing", "GET"},
		{big, exactHost, exactPath, "GET"},
		{big, wildHost, wildPath, "DELETE"},
		{big, "Nowhere.Test:80", "/nothing", "GET"},
		{long, strings.ToUpper(longHost) + ":443", "/x", "GET"},
		{long, "X." + strings.ToUpper(longHost) + ".", "/x", "GET"},
	}
	for _, c := range cases {
		if _, ok, mm := c.tab.Lookup(c.host, c.path, c.method); !ok && !mm && c.path != "/nothing" {
			t.Fatalf("Lookup(%q, %q, %q) matched nothing; the case would not measure a match", c.host, c.path, c.method)
		}
		allocs := testing.AllocsPerRun(100, func() {
			c.tab.Lookup(c.host, c.path, c.method)
		})
		if allocs != 0 {
			t.Errorf("Lookup(%q, %q, %q) allocates %v times, want 0", c.host, c.path, c.method, allocs)
		}
	}
}

// TestLookupAllow checks the Allow value of method mismatches: the methods
// of every rule on the matched prefix chain of the group that ended the
// search, and nothing from other groups or from prefixes that do not match.
func TestLookupAllow(t *testing.T) {
	tab := NewTable([]Rule[string]{
		{Host: "a.test", PathPrefix: "/x/", Methods: []string{"PUT", "GET"}, Value: "x-put-get"},
		{Host: "a.test", PathPrefix: "/x/y/", Methods: []string{"POST", "GET"}, Value: "xy-post"},
		{Host: "a.test", PathPrefix: "/x/y/", Methods: []string{"DELETE"}, Value: "xy-delete"},
		{Host: "a.test", PathPrefix: "/z/", Methods: []string{"PATCH"}, Value: "z-patch"},
		{Host: "a.test", PathPrefix: "/any/", Value: "any"},
		{Host: "a.test", PathPrefix: "/any/get/", Methods: []string{"GET"}, Value: "any-get"},
		{Host: "", PathPrefix: "/x/", Methods: []string{"OPTIONS"}, Value: "other-host"},
	})
	tests := []struct {
		host, path, method string
		want               string // "" = no mismatch
	}{
		{"a.test", "/x/1", "POST", "GET, PUT"},
		{"a.test", "/x/y/1", "PATCH", "DELETE, GET, POST, PUT"}, // the chain: /x/y/ and /x/
		{"A.TEST:80", "/z/", "GET", "PATCH"},
		{"a.test", "/x/1", "GET", ""},        // matched
		{"a.test", "/any/get/1", "POST", ""}, // the method-less /any/ takes it
		{"a.test", "/nothing", "GET", ""},    // 404, not 405
		{"b.test", "/x/1", "GET", "OPTIONS"}, // the any-host group
		{"a.test", "/x/y/", "OPTIONS", "DELETE, GET, POST, PUT"},
	}
	for _, tc := range tests {
		_, ok, allow := tab.LookupAllow(tc.host, tc.path, tc.method)
		if got := strings.Join(allow, "|"); got != tc.want || (ok && allow != nil) || len(allow) > 1 {
			t.Errorf("LookupAllow(%q, %q, %q) = ok %v, allow %q; want allow %q", tc.host, tc.path, tc.method, ok, allow, tc.want)
		}
		if _, _, mm := tab.Lookup(tc.host, tc.path, tc.method); mm != (tc.want != "") {
			t.Errorf("Lookup(%q, %q, %q) methodMismatch = %v, want %v", tc.host, tc.path, tc.method, mm, tc.want != "")
		}
	}
	// The value is built with the table: a mismatch allocates nothing.
	if n := testing.AllocsPerRun(100, func() { tab.LookupAllow("A.Test:80", "/x/y/1", "PATCH") }); n != 0 {
		t.Errorf("LookupAllow on a method mismatch allocates %v times, want 0", n)
	}
}

func BenchmarkMatch(b *testing.B) {
	big := generateRules(rand.New(rand.NewPCG(1, 2)), 1000)
	oneHost := make([]Rule[string], 1000)
	for i := range oneHost {
		oneHost[i] = Rule[string]{Host: "api.example.com", PathPrefix: fmt.Sprintf("/svc%d/", i), Value: fmt.Sprint(i)}
	}
	type bench struct {
		name               string
		rules              []Rule[string]
		host, path, method string
	}
	benches := []bench{
		{"10routes/exact", rules[:10], "api.example.com", "/v1/users/42", "GET"},
		{"10routes/exact-upper-port", rules[:10], "API.Example.COM:8443", "/v1/users/42", "GET"},
		{"10routes/wildcard", rules[:10], "x.cdn.example.com", "/video/1", "GET"},
	}
	for _, c := range []struct {
		name string
		rule int
		loud bool
	}{
		{"1000routes/exact", 400, false},
		{"1000routes/exact-upper-port", 400, true},
		{"1000routes/wildcard", 401, false},
		{"1000routes/any-host", 998, false},
	} {
		host, path := requestFor(big[c.rule], c.loud)
		benches = append(benches, bench{c.name, big, host, path, "GET"})
	}
	benches = append(benches,
		bench{"1000routes/one-host", oneHost, "api.example.com", "/svc999/x", "GET"},
		bench{"1000routes/no-match", big, "Nowhere.Test:80", "/nothing", "GET"},
	)
	for _, bc := range benches {
		tab := NewTable(bc.rules)
		if _, ok := tab.Match(bc.host, bc.path, bc.method); ok == (bc.name == "1000routes/no-match") {
			b.Fatalf("%s: Match(%q, %q) ok=%v", bc.name, bc.host, bc.path, ok)
		}
		b.Run(bc.name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				tab.Match(bc.host, bc.path, bc.method)
			}
		})
	}
}
