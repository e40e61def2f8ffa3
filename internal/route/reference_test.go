// The reference matcher (a plain linear scan of the rules) and the tests
// that hold the table to it: FuzzMatch and TestAgainstReference.

package route

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"
)

// reference is the matching rule of Table.Lookup written as plainly as
// possible: score every rule, group by host key, take groups in order. It is
// what FuzzMatch and TestAgainstReference compare the Table with.
// It returns the index of the chosen rule, or -1, and on a method mismatch
// the Allow value: the methods of every rule of the group whose prefix
// matches the path.
func reference[T any](rs []Rule[T], host, path, method string) (idx int, methodMismatch bool, allow string) {
	h := host
	if strings.HasPrefix(h, "[") {
		if end := strings.Index(h, "]"); end > 0 {
			h = h[1:end]
		}
	} else {
		if strings.Count(h, ":") == 1 {
			h, _, _ = strings.Cut(h, ":")
		}
		h = strings.TrimSuffix(h, ".")
	}
	h = asciiLower(h)
	if path == "" {
		path = "/"
	}

	// rank orders host groups: exact (0), wildcards by longest suffix
	// (1, then -suffix length), any-host (2). ok=false: not this host.
	type rank struct{ class, negSuffix int }
	rankOf := func(ruleHost string) (rank, bool) {
		rh := asciiLower(ruleHost)
		if strings.HasPrefix(rh, "[") && strings.HasSuffix(rh, "]") {
			rh = rh[1 : len(rh)-1]
		}
		rh = strings.TrimSuffix(rh, ".")
		switch {
		case rh == "":
			return rank{2, 0}, true
		case strings.HasPrefix(rh, "*."):
			suffix := rh[1:]
			return rank{1, -len(suffix)}, len(h) > len(suffix) && strings.HasSuffix(h, suffix)
		default:
			return rank{0, 0}, rh == h
		}
	}
	less := func(a, b rank) bool {
		return a.class < b.class || a.class == b.class && a.negSuffix < b.negSuffix
	}

	// Visit host groups in order: repeatedly pick the smallest rank not
	// yet visited.
	visited := map[rank]bool{}
	for {
		var cur rank
		found := false
		for _, r := range rs {
			rk, ok := rankOf(r.Host)
			if ok && !visited[rk] && (!found || less(rk, cur)) {
				cur, found = rk, true
			}
		}
		if !found {
			return -1, false, ""
		}
		visited[cur] = true

		best, bestLen, bestListed, pathMatched := -1, -1, false, false
		var methods []string
		for i, r := range rs {
			if rk, ok := rankOf(r.Host); !ok || rk != cur {
				continue
			}
			prefix := r.PathPrefix
			if prefix == "" {
				prefix = "/"
			}
			if !strings.HasPrefix(path, prefix) {
				continue
			}
			// Segment boundaries: the path ends at the prefix, goes on
			// with "/", or the prefix ends in "/".
			if rest := path[len(prefix):]; rest != "" && rest[0] != '/' && !strings.HasSuffix(prefix, "/") {
				continue
			}
			pathMatched = true
			methods = append(methods, r.Methods...)
			listed := false
			for _, m := range r.Methods {
				listed = listed || m == method
			}
			if len(r.Methods) > 0 && !listed {
				continue
			}
			if len(prefix) > bestLen || len(prefix) == bestLen && listed && !bestListed {
				best, bestLen, bestListed = i, len(prefix), listed
			}
		}
		if best >= 0 {
			return best, false, ""
		}
		if pathMatched {
			slices.Sort(methods)
			return -1, true, strings.Join(slices.Compact(methods), ", ")
		}
	}
}

func asciiLower(s string) string {
	b := []byte(s)
	for i, c := range b {
		if 'A' <= c && c <= 'Z' {
			b[i] = c + 'a' - 'A'
		}
	}
	return string(b)
}

// indexed returns rs with each Value replaced by the rule's index, so that
// Lookup's answer can be compared with reference's.
func indexed[T any](rs []Rule[T]) []Rule[int] {
	out := make([]Rule[int], len(rs))
	for i, r := range rs {
		out[i] = Rule[int]{Host: r.Host, PathPrefix: r.PathPrefix, Methods: r.Methods, Value: i}
	}
	return out
}

// diffReference returns "" when tab answers a request as reference does
// for rs, and a description of the difference otherwise.
func diffReference(rs []Rule[int], tab *Table[int], host, path, method string) string {
	wantIdx, wantMM, wantAllow := reference(rs, host, path, method)
	v, ok, mm := tab.Lookup(host, path, method)
	gotIdx := -1
	if ok {
		gotIdx = v
	} else if v != 0 {
		return fmt.Sprintf("Lookup(%q, %q, %q) returned value %d with ok=false", host, path, method, v)
	}
	if gotIdx != wantIdx || mm != wantMM {
		return fmt.Sprintf("Lookup(%q, %q, %q) = rule %d, methodMismatch=%v; reference says rule %d, methodMismatch=%v",
			host, path, method, gotIdx, mm, wantIdx, wantMM)
	}
	_, _, allow := tab.LookupAllow(host, path, method)
	if got := strings.Join(allow, "|"); got != wantAllow || len(allow) > 1 || mm != (allow != nil) {
		return fmt.Sprintf("LookupAllow(%q, %q, %q) allow = %q; reference says %q", host, path, method, allow, wantAllow)
	}
	if mv, mok := tab.Match(host, path, method); mv != v || mok != ok {
		return fmt.Sprintf("Match(%q, %q, %q) = %d, %v; Lookup = %d, %v", host, path, method, mv, mok, v, ok)
	}
	return ""
}

// fuzzRules is the fixed table FuzzMatch probes: short hosts and prefixes
// that mutation finds easily, overlapping in every way the precedence rules
// care about.
var fuzzRules = indexed([]Rule[struct{}]{
	{Host: "a.b", PathPrefix: "/"},
	{Host: "a.b", PathPrefix: "/x", Methods: []string{"GET"}},
	{Host: "a.b", PathPrefix: "/x"},
	{Host: "a.b", PathPrefix: "/x/", Methods: []string{"PUT", "POST"}},
	{Host: "c.b", PathPrefix: "/y"},
	{Host: "c.b", PathPrefix: "/y", Methods: []string{"GET"}},
	{Host: "m.b", PathPrefix: "/m", Methods: []string{"GET"}},
	{Host: "*.b", PathPrefix: "/x"},
	{Host: "*.b", PathPrefix: "/z", Methods: []string{"DELETE"}},
	{Host: "*.c.b", PathPrefix: "/"},
	{Host: "*.d.c.b", PathPrefix: "/q", Methods: []string{"GET"}},
	{Host: "::1", PathPrefix: "/"},
	{Host: "1.2", PathPrefix: "/v"},
	{Host: "", PathPrefix: "/y/"},
	{Host: "", PathPrefix: "/w", Methods: []string{"GET"}},
	{Host: "", PathPrefix: "/w"},
	{Host: "", PathPrefix: "/m"},
	{Host: "", PathPrefix: "/p", Methods: []string{"POST"}},
})

func FuzzMatch(f *testing.F) {
	for _, s := range []struct{ host, path, method string }{
		{"a.b", "/x/1", "GET"},
		{"A.B:80", "/x/", "POST"},
		{"a.b.", "/", "GET"},
		{"c.b", "/y", "PUT"},
		{"m.b", "/m", "POST"},
		{"z.b", "/z", "GET"},
		{"e.d.c.b", "/q", "PUT"},
		{"x.y.c.b", "/anything", "GET"},
		{"[::1]:443", "/", "GET"},
		{"::1", "/", "GET"},
		{"1.2:3", "/vv", "GET"},
		{"", "/w", "HEAD"},
		{"nowhere", "/p", "GET"},
		{"[a.b]", "", "GET"},
		{".b", "/x", "GET"},
		{"A.B.:", "/X", "get"},
	} {
		f.Add(s.host, s.path, s.method)
	}
	tab := NewTable(fuzzRules)
	f.Fuzz(func(t *testing.T, host, path, method string) {
		if d := diffReference(fuzzRules, tab, host, path, method); d != "" {
			t.Fatal(d)
		}
	})
}

// TestAgainstReference compares Table with reference on random tables and
// random requests drawn from the same small alphabet, so that hosts,
// prefixes and methods collide often.
func TestAgainstReference(t *testing.T) {
	rng := rand.New(rand.NewPCG(7, 11))
	labels := []string{"a", "b", "c", "A", "B"}
	pick := func(xs []string) string { return xs[rng.IntN(len(xs))] }
	name := func(maxLabels int) string {
		n := 1 + rng.IntN(maxLabels)
		parts := make([]string, n)
		for i := range parts {
			parts[i] = pick(labels)
		}
		return strings.Join(parts, ".")
	}
	segs := []string{"/", "/a", "/a/", "/ab", "/b", "/a/b", ""}
	methods := []string{"GET", "POST", "PUT", "get"}
	for range 300 {
		var rs []Rule[int]
		for i := range 1 + rng.IntN(12) {
			var r Rule[int]
			switch rng.IntN(4) {
			case 0:
				r.Host = ""
			case 1:
				r.Host = "*." + name(2)
			default:
				r.Host = name(3)
			}
			r.Host = strings.ToLower(r.Host)
			r.PathPrefix = pick(segs)
			for range rng.IntN(3) {
				r.Methods = append(r.Methods, pick(methods[:3]))
			}
			r.Value = i
			rs = append(rs, r)
		}
		tab := NewTable(rs)
		for range 200 {
			host := name(4)
			switch rng.IntN(4) {
			case 0:
				host += ":8080"
			case 1:
				host += "."
			}
			path := pick(segs) + pick([]string{"", "b", "/c"})
			method := pick(methods)
			if d := diffReference(rs, tab, host, path, method); d != "" {
				t.Fatalf("%s\nrules: %+v", d, rs)
			}
		}
	}
}

// generateRules returns n rules spread the way a large deployment spreads
// them: a quarter on exact hosts, a quarter on wildcards, the rest on the
// any-host group, with a few prefixes and methods each.
func generateRules(rng *rand.Rand, n int) []Rule[string] {
	rs := make([]Rule[string], 0, n)
	for i := range n {
		var host string
		switch i % 4 {
		case 0:
			host = fmt.Sprintf("h%d.example.test", rng.IntN(n/8+1))
		case 1:
			host = fmt.Sprintf("*.w%d.example.test", rng.IntN(n/8+1))
		}
		prefix := fmt.Sprintf("/p%d/", rng.IntN(n/4+1))
		if i%4 > 1 {
			prefix = fmt.Sprintf("/svc%d/p%d/", i, rng.IntN(8))
		}
		var methods []string
		if rng.IntN(3) == 0 {
			methods = []string{"GET", "HEAD"}
		}
		rs = append(rs, Rule[string]{Host: host, PathPrefix: prefix, Methods: methods, Value: fmt.Sprint(i)})
	}
	return rs
}

// requestFor returns a host and path that r matches, upper-cased and with a
// port when loud is set.
func requestFor[T any](r Rule[T], loud bool) (host, path string) {
	host = strings.Replace(r.Host, "*.", "a.b.", 1)
	if host == "" {
		host = "nowhere.test"
	}
	if loud {
		host = strings.ToUpper(host) + ":8443"
	}
	return host, r.PathPrefix + "x"
}
