package route

import (
	"fmt"
	"math/rand/v2"
	"net/http"
	"slices"
	"strings"
	"testing"
)

// The path kinds, conditions and precedence of issue 25: exact paths,
// templates, regexes, segment-boundary prefixes, header and query
// conditions, and the one order (compare) that decides between them.

var kindRules = []Rule[string]{
	{PathPrefix: "/v1/products", Value: "prefix"},
	{PathPrefix: "/v1/", Value: "v1-slash"},
	{Path: "/v1/products/special", Value: "exact"},
	{PathTemplate: "/v1/products/{id:int}", Value: "tmpl-int"},
	{PathTemplate: "/v1/products/{slug}", Value: "tmpl-any"},
	{PathTemplate: "/v1/{kind}/featured", Value: "tmpl-featured"},
	{PathRegex: `/v1/products/[a-z]+\.json`, Value: "regex-json"},
	{PathRegex: `/v2/.*`, Value: "regex-v2"},
	{PathPrefix: "/v1/products", Headers: []Cond{{Name: "x-canary", Kind: CondExact, Value: "1"}}, Value: "prefix-canary"},
	{PathPrefix: "/v1/products", Query: []Cond{{Name: "debug", Kind: CondPresent}}, Headers: []Cond{{Name: "X-Debug-Token", Kind: CondRegex, Value: `[0-9a-f]{8}`}}, Value: "prefix-debug"},
	{PathPrefix: "/v1/products", Methods: []string{"POST"}, Value: "prefix-post"},
	{PathPrefix: "/h", Headers: []Cond{{Name: "Accept", Kind: CondPrefix, Value: "application/json"}}, Value: "h-json"},
	{PathPrefix: "/h", Headers: []Cond{{Name: "Authorization", Kind: CondAbsent}}, Value: "h-anon"},
	{PathPrefix: "/q", Query: []Cond{{Name: "v", Kind: CondExact, Value: "a b"}}, Value: "q-ab"},
	{PathPrefix: "/q", Query: []Cond{{Name: "v", Kind: CondAbsent}}, Value: "q-none"},
}

func TestLookupKinds(t *testing.T) {
	tab := NewTable(kindRules)
	tests := []struct {
		path   string
		hdr    http.Header
		query  string
		method string
		want   string
	}{
		{"/v1/products", nil, "", "GET", "prefix"},
		{"/v1/products/", nil, "", "GET", "prefix"},
		{"/v1/products/7/reviews", nil, "", "GET", "prefix"},
		{"/v1/productsXYZ", nil, "", "GET", "v1-slash"},
		{"/v1/products/special", nil, "", "GET", "exact"},
		{"/v1/products/42", nil, "", "GET", "tmpl-int"},
		{"/v1/products/-42", nil, "", "GET", "tmpl-int"},
		{"/v1/products/99999999999999999999", nil, "", "GET", "tmpl-any"}, // overflows int64
		{"/v1/products/shoe", nil, "", "GET", "tmpl-any"},
		{"/v1/products/shoe.json", nil, "", "GET", "tmpl-any"}, // a template beats a regex
		{"/v1/products/featured", nil, "", "GET", "tmpl-any"},  // literal "products" at segment 2 first
		{"/v1/gadgets/featured", nil, "", "GET", "tmpl-featured"},
		{"/v1/products/42", http.Header{"X-Canary": {"1"}}, "", "GET", "tmpl-int"}, // the kind before conditions
		{"/v1/products/42/x", http.Header{"X-Canary": {"1"}}, "", "GET", "prefix-canary"},
		{"/v1/products/42/x", http.Header{"X-Canary": {"2"}}, "", "GET", "prefix"},
		{"/v1/products/42/x", http.Header{"X-Canary": {"2", "1"}}, "", "GET", "prefix-canary"}, // any line
		{"/v1/products/42/x", http.Header{"X-Canary": {"1"}, "X-Debug-Token": {"deadbeef"}}, "debug", "GET", "prefix-debug"},
		{"/v1/products/42/x", http.Header{"X-Debug-Token": {"deadbeef0"}}, "debug=1", "GET", "prefix"},
		{"/v1/products/42/x", nil, "", "POST", "prefix-post"},
		{"/v2/anything", nil, "", "GET", "regex-v2"},
		{"/v2", nil, "", "GET", ""},
		{"/h/1", http.Header{"Accept": {"application/json; q=1"}, "Authorization": {"x"}}, "", "GET", "h-json"},
		{"/h/1", http.Header{"Accept": {"text/html"}}, "", "GET", "h-anon"},
		{"/h/1", http.Header{"Accept": {"text/html"}, "Authorization": {"x"}}, "", "GET", ""},
		{"/q", nil, "v=a+b", "GET", "q-ab"},
		{"/q", nil, "w=1&v=a%20b&v=c", "GET", "q-ab"},
		{"/q", nil, "v=c&v=a+b", "GET", ""}, // the first value only
		{"/q", nil, "w=1", "GET", "q-none"},
		{"/q", nil, "%zz=1", "GET", "q-none"}, // a pair that does not decode is skipped
	}
	for _, tc := range tests {
		v, ok, _ := tab.LookupRequest("x.test", tc.path, tc.method, tc.hdr, tc.query)
		if !ok {
			v = ""
		}
		if v != tc.want {
			t.Errorf("LookupRequest(%q, %v, %q, %s) = %q, want %q", tc.path, tc.hdr, tc.query, tc.method, v, tc.want)
		}
	}
}

func TestTemplateValues(t *testing.T) {
	tp, err := ParseTemplate("/v1/{shop}/products/{id:int}")
	if err != nil {
		t.Fatal(err)
	}
	if got := tp.Values("/v1/acme/products/12"); !slices.Equal(got, []string{"acme", "12"}) {
		t.Errorf("Values = %q", got)
	}
	if got := tp.Names(); !slices.Equal(got, []string{"shop", "id"}) {
		t.Errorf("Names = %q", got)
	}
	if tp.Shape() != "/v1/{}/products/{int}" {
		t.Errorf("Shape = %q", tp.Shape())
	}
	for _, p := range []string{"/v1/acme/products/x", "/v1/acme/products/12/", "/v1//products/12", "/v1/acme/products", "v1/acme/products/12", ""} {
		if tp.Match(p) || tp.Values(p) != nil {
			t.Errorf("%q matched", p)
		}
	}
	for _, bad := range []string{"", "/", "v1", "/a//b", "/a/", "/{}", "/{Id}", "/{1d}", "/{id:uuid}", "/x{id}", "/{id}x", "/{a}/{a}", "/{a{b}}", "/a?b", "/a b", strings.Repeat("/a", 33), "/" + strings.Repeat("a", 1024)} {
		if _, err := ParseTemplate(bad); err == nil {
			t.Errorf("ParseTemplate(%q) accepted", bad)
		}
	}
}

func TestConflicts(t *testing.T) {
	rs := []Rule[int]{
		{Host: "a.test", PathPrefix: "/x", Methods: []string{"GET"}},                              // 0
		{Host: "A.TEST.", PathPrefix: "/x", Methods: []string{"POST", "GET"}},                     // 1: same as 0 on GET
		{Host: "a.test", PathPrefix: "/x"},                                                        // 2: no methods: fine
		{Host: "a.test", PathTemplate: "/p/{id}"},                                                 // 3
		{Host: "a.test", PathTemplate: "/p/{name}"},                                               // 4: same shape as 3
		{Host: "a.test", PathTemplate: "/p/{id:int}"},                                             // 5: more specific: fine
		{Host: "a.test", Path: "/e", Headers: []Cond{{Name: "x-a", Kind: CondExact, Value: "1"}}}, // 6
		{Host: "a.test", Path: "/e", Headers: []Cond{{Name: "X-A", Kind: CondExact, Value: "1"}}}, // 7: same as 6
		{Host: "a.test", Path: "/e", Headers: []Cond{{Name: "X-A", Kind: CondExact, Value: "2"}}}, // 8: other value: fine
		{Host: "a.test", PathRegex: "/r.*"},                                                       // 9
		{Host: "a.test", PathRegex: "/r.+"},                                                       // 10: undecided: fine
		{Host: "a.test", PathRegex: "/r.*"},                                                       // 11: same as 9
		{Host: "a.test", PathPrefix: "/", Query: []Cond{{Name: "a", Kind: CondPresent}}},          // 12
		{Host: "a.test", Query: []Cond{{Name: "a", Kind: CondPresent}}},                           // 13: "" is "/": same as 12
		{Host: "a.test", Query: []Cond{{Name: "A", Kind: CondPresent}}},                           // 14: query names are case-sensitive
		{Host: "*.test", PathPrefix: "/x", Methods: []string{"GET"}},                              // 15: another host class
		{Host: "a.test", Path: "/x", Methods: []string{"GET"}},                                    // 16: another kind
	}
	var got []string
	Conflicts(rs, func(i, j int, m string) { got = append(got, fmt.Sprintf("%d~%d:%s", i, j, m)) })
	want := []string{"1~0:GET", "4~3:", "7~6:", "11~9:", "13~12:"}
	if !slices.Equal(got, want) {
		t.Errorf("Conflicts = %q, want %q", got, want)
	}
}

// TestLookupFollowsCompare holds Lookup to compare over random tables of
// every path kind and condition: the chosen rule is the first, in compare
// order, of the first host group in which some rule's path and conditions
// hold, that admits the method.
func TestLookupFollowsCompare(t *testing.T) {
	rng := rand.New(rand.NewPCG(25, 1))
	hosts := []string{"", "a.test", "*.test", "*.b.test"}
	paths := []string{"/a", "/a/b", "/a/1", "/ab", "/a/b/c", "/b/1/c", "/", "/a/"}
	methods := []string{"GET", "POST"}
	hdrs := []http.Header{nil, {"X-K": {"1"}}, {"X-K": {"2"}, "X-J": {"y"}}}
	queries := []string{"", "k=1", "j=&k=2"}
	reqHosts := []string{"a.test", "x.b.test", "other", "c.test"}
	for round := range 400 {
		n := 1 + rng.IntN(10)
		rs := make([]Rule[int], n)
		for i := range rs {
			r := Rule[int]{Host: hosts[rng.IntN(len(hosts))], Value: i}
			switch rng.IntN(4) {
			case 0:
				r.Path = paths[rng.IntN(len(paths))]
			case 1:
				r.PathTemplate = []string{"/a/{x}", "/a/{x:int}", "/{y}/b", "/b/{x}/c", "/{x}"}[rng.IntN(5)]
			case 2:
				r.PathPrefix = []string{"/a", "/a/", "/", "/a/b", "/b"}[rng.IntN(5)]
			case 3:
				r.PathRegex = []string{"/a.*", "/[ab]/.*", ".*c"}[rng.IntN(3)]
			}
			if rng.IntN(3) == 0 {
				r.Headers = []Cond{{Name: "x-k", Kind: CondKind(1 + rng.IntN(5)), Value: "1"}}
			}
			if rng.IntN(3) == 0 {
				r.Query = []Cond{{Name: "k", Kind: CondKind(1 + rng.IntN(5)), Value: "1"}}
			}
			if rng.IntN(2) == 0 {
				r.Methods = []string{methods[rng.IntN(2)]}
			}
			rs[i] = r
		}
		tab := NewTable(rs)
		built := make([]*rule[int], n)
		for i := range rs {
			built[i] = newRule(i, &rs[i])
		}
		order := slices.Clone(built)
		slices.SortFunc(order, compare[int])
		for range 20 {
			host := reqHosts[rng.IntN(len(reqHosts))]
			req := request{path: paths[rng.IntN(len(paths))], method: methods[rng.IntN(2)], header: hdrs[rng.IntN(len(hdrs))], query: queries[rng.IntN(len(queries))]}
			want, wantMM := -1, false
			var groupKey string
			for _, r := range order {
				if !hostMatches(r, host) || !pathMatches(r, req.path) || !r.condsHold(&req) {
					continue
				}
				key := r.host
				if groupKey != "" && key != groupKey {
					break // a later host group
				}
				groupKey = key
				if r.admits(req.method) {
					want = r.index
					break
				}
				wantMM = true
			}
			if want >= 0 {
				wantMM = false
			}
			v, ok, allow := tab.LookupRequest(host, req.path, req.method, req.header, req.query)
			got := -1
			if ok {
				got = v
			}
			if got != want || (allow != nil) != wantMM {
				t.Fatalf("round %d: %s %s %s %v %q: got rule %d (405 %v), compare says %d (405 %v)\nrules: %+v", round, host, req.method, req.path, req.header, req.query, got, allow != nil, want, wantMM, rs)
			}
		}
	}
}

func hostMatches[T any](r *rule[T], host string) bool {
	switch r.hostClass {
	case hostAny:
		return true
	case hostWildcard:
		return len(host) > len(r.host)-1 && strings.HasSuffix(host, r.host[1:])
	}
	return host == r.host
}

func pathMatches[T any](r *rule[T], path string) bool {
	switch r.kind {
	case kindExact:
		return path == r.path
	case kindTemplate:
		return r.tmpl.Match(path)
	case kindRegex:
		return r.re.MatchString(path)
	}
	if !strings.HasPrefix(path, r.path) {
		return false
	}
	rest := path[len(r.path):]
	return rest == "" || rest[0] == '/' || strings.HasSuffix(r.path, "/")
}

// TestLookupKindsDoNotAllocate: exact paths, prefixes, templates and
// header conditions allocate nothing per lookup, and a repeated 405 with a
// computed Allow value neither.
func TestLookupKindsDoNotAllocate(t *testing.T) {
	tab := NewTable(kindRules)
	hdr := http.Header{"X-Canary": {"1"}}
	for _, c := range []struct{ path, method string }{
		{"/v1/products/special", "GET"}, {"/v1/products/7/x", "GET"}, {"/v1/products/7", "GET"}, {"/v2/x", "GET"},
	} {
		if n := testing.AllocsPerRun(100, func() { tab.LookupRequest("x.test", c.path, c.method, hdr, "a=1") }); n != 0 {
			t.Errorf("LookupRequest(%q) allocates %v times", c.path, n)
		}
	}
	mixed := NewTable([]Rule[string]{
		{Path: "/m", Methods: []string{"GET"}, Value: "a"},
		{PathTemplate: "/{x}", Methods: []string{"PUT"}, Value: "b"},
		{PathPrefix: "/", Methods: []string{"DELETE"}, Headers: []Cond{{Name: "X-A", Kind: CondPresent}}, Value: "c"},
	})
	_, _, allow := mixed.LookupRequest("x", "/m", "POST", http.Header{"X-A": {""}}, "")
	if strings.Join(allow, "|") != "DELETE, GET, PUT" {
		t.Errorf("Allow = %q", allow)
	}
	if n := testing.AllocsPerRun(100, func() { mixed.LookupRequest("x", "/m", "POST", nil, "") }); n != 0 {
		t.Errorf("a repeated 405 allocates %v times", n)
	}
}

func FuzzParseTemplate(f *testing.F) {
	for _, s := range []string{"/v1/products/{id}", "/a/{b:int}/c", "/{x}", "/a//b", "/{a}/{a}", "/{a:int", "/é/{ü}"} {
		f.Add(s, "/v1/products/12")
	}
	f.Fuzz(func(t *testing.T, tmpl, path string) {
		tp, err := ParseTemplate(tmpl)
		if err != nil {
			return
		}
		if len(tp.segs) > MaxTemplateSegments || len(tmpl) > MaxTemplateLen {
			t.Fatalf("%q: bounds not kept", tmpl)
		}
		// A template matches its own shape's instances: fill the captures.
		var b strings.Builder
		for _, s := range tp.segs {
			b.WriteByte('/')
			switch s.kind {
			case segLiteral:
				b.WriteString(s.lit)
			case segInt:
				b.WriteString("12")
			default:
				b.WriteString("v")
			}
		}
		if !tp.Match(b.String()) {
			t.Fatalf("%q does not match %q", tmpl, b.String())
		}
		vals := tp.Values(path)
		if tp.Match(path) != (vals != nil) || (vals != nil && len(vals) != len(tp.Names())) {
			t.Fatalf("%q on %q: Match and Values disagree: %q", tmpl, path, vals)
		}
		// Reparsing the canonical form gives the same shape.
		again, err := ParseTemplate(tp.String())
		if err != nil || again.Shape() != tp.Shape() {
			t.Fatalf("%q: reparse: %v", tmpl, err)
		}
	})
}

func FuzzQueryCond(f *testing.F) {
	f.Add("a=1&b=2", "b")
	f.Add("%zz=1&a=%41", "a")
	f.Add("a+b=c&a%20b=d", "a b")
	f.Fuzz(func(t *testing.T, query, name string) {
		v, found := firstQuery(query, name)
		if !found && v != "" {
			t.Fatalf("not found but value %q", v)
		}
		if !strings.ContainsAny(query, "%+") && found && !strings.Contains(query, name+"="+v) && !strings.Contains(query, name) {
			t.Fatalf("%q in %q: found %q", name, query, v)
		}
	})
}

func BenchmarkLookupKinds(b *testing.B) {
	tab := NewTable(kindRules)
	hdr := http.Header{"X-Canary": {"1"}, "Accept": {"*/*"}}
	for _, c := range []struct{ name, path string }{
		{"exact", "/v1/products/special"}, {"prefix", "/v1/products/7/x"}, {"template", "/v1/products/7"}, {"regex", "/v2/x"},
	} {
		b.Run(c.name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				tab.LookupRequest("x.test", c.path, "GET", hdr, "")
			}
		})
	}
}
