// Package route is levee's request router: it maps a request's host, path
// and method to the value the caller attached to a rule (in levee, a
// *proxy.Route). It is pure code with no I/O and imports nothing internal;
// it is generic over the value so that it stays a leaf.
//
// # Algorithm
//
// NewTable sorts the rules once into host groups:
//
//   - exact:    map from host ("api.example.com") to its group;
//   - wildcard: map from suffix (".example.com" for "*.example.com") to its group;
//   - any-host: one group for rules with Host "".
//
// Each group is a radix tree over PathPrefix (see prefixTree), which yields
// the group's rules in match order: longest prefix first, then rules that
// list methods before rules that list none, then input order.
//
// Lookup walks the groups in precedence order: the exact group of the host,
// then the wildcard groups of the host's proper dot-suffixes, longest suffix
// first (one map lookup per dot), then the any-host group. In each group it
// returns the first rule, in match order, whose prefix is a prefix of the
// path and whose methods admit the method. A group in which no prefix
// matches the path is skipped; a group in which some prefix matched but no
// method did ends the search with a method mismatch.
//
// Work per call: O(len(host)) to strip and lower-case the host; at most
// 1 + (dots in the host) map lookups plus the any-host group; in each group
// visited, O(len(path)) to walk the tree plus the method check of each rule
// on the matched prefix chain. The number of rules in the table does not
// enter, except through the rules that share a matching prefix. No
// allocation, as long as no rule Host is longer than 255 bytes (see
// maxStackHost).
//
// Locking: none. A Table is immutable after NewTable, so any number of
// goroutines may call Match and Lookup at once; a new configuration means a
// new Table, published by the caller (for example with atomic.Pointer).
package route

import (
	"slices"
	"strings"
)

// maxStackHost is the size of the stack buffer Lookup lower-cases a request
// host into. No DNS name is longer (RFC 1035 section 2.3.4). Only with a rule
// Host longer than this, and a request host as long with upper case in it,
// does Lookup lower-case on the heap instead.
const maxStackHost = 255

// Rule is one route's match conditions, already validated by the caller.
type Rule[T any] struct {
	// Host is the host the rule serves, lower-case, without a port:
	//   - "" matches any host;
	//   - "api.example.com" matches that host exactly;
	//   - "*.example.com" matches any host ending in ".example.com" with at
	//     least one byte before it: "a.example.com" and "a.b.example.com",
	//     not "example.com".
	// NewTable lower-cases it, drops one trailing dot and the brackets of an
	// IPv6 literal ("[::1]" is stored as "::1"), so those spellings are
	// equivalent.
	Host string
	// PathPrefix is matched as a plain string prefix of the raw request path
	// (see Table.Lookup). It starts with "/"; "" means "/".
	PathPrefix string
	// Methods lists the upper-case method tokens the rule accepts, compared
	// case-sensitively as RFC 9110 section 9.1 requires. Empty accepts any
	// method. HEAD is not implied by GET: list it if the route serves it.
	Methods []string
	// Value is what Match and Lookup return when this rule is chosen.
	Value T
}

// Table is an immutable routing table. It is safe for concurrent use, and
// Match and Lookup allocate nothing. The zero value and a nil *Table match
// nothing.
type Table[T any] struct {
	exact    map[string]*prefixTree[T] // by canonical host
	wildcard map[string]*prefixTree[T] // by suffix with its leading dot: ".example.com"
	anyHost  *prefixTree[T]            // rules with Host ""; nil when there are none
	maxExact int                       // longest key in exact
	maxWild  int                       // longest key in wildcard
	n        int                       // rules in the table
}

// NewTable builds a Table from rules, which it does not retain: later changes
// to the slice or to a rule's Methods do not affect the Table. When two rules
// have the same host and prefix, both list methods or both list none, and
// both admit a request, the earlier one in rules wins.
func NewTable[T any](rules []Rule[T]) *Table[T] {
	t := &Table[T]{n: len(rules)}
	for _, r := range rules {
		host := canonicalRuleHost(r.Host)
		var g *prefixTree[T]
		switch {
		case host == "":
			if t.anyHost == nil {
				t.anyHost = &prefixTree[T]{}
			}
			g = t.anyHost
		case strings.HasPrefix(host, "*."):
			g = treeFor(&t.wildcard, host[1:])
			t.maxWild = max(t.maxWild, len(host)-1)
		default:
			g = treeFor(&t.exact, host)
			t.maxExact = max(t.maxExact, len(host))
		}
		prefix := r.PathPrefix
		if prefix == "" {
			prefix = "/"
		}
		var methods []string
		if len(r.Methods) > 0 {
			methods = slices.Clone(r.Methods)
		}
		g.insert(prefix, rule[T]{methods: methods, value: r.Value})
	}
	for _, g := range t.exact {
		g.finish()
	}
	for _, g := range t.wildcard {
		g.finish()
	}
	if t.anyHost != nil {
		t.anyHost.finish()
	}
	return t
}

func treeFor[T any](m *map[string]*prefixTree[T], key string) *prefixTree[T] {
	if *m == nil {
		*m = make(map[string]*prefixTree[T])
	}
	g := (*m)[key]
	if g == nil {
		g = &prefixTree[T]{}
		(*m)[key] = g
	}
	return g
}

// canonicalRuleHost lower-cases a rule host (ASCII only, as Lookup does) and
// strips what hostOnly strips from a request host, so that both sides are
// spelled the same way.
func canonicalRuleHost(h string) string {
	b := []byte(h)
	for i, c := range b {
		if 'A' <= c && c <= 'Z' {
			b[i] = c + 'a' - 'A'
		}
	}
	h = string(b)
	if len(h) >= 2 && h[0] == '[' && h[len(h)-1] == ']' {
		h = h[1 : len(h)-1]
	}
	return strings.TrimSuffix(h, ".")
}

// Len returns the number of rules the table was built from.
func (t *Table[T]) Len() int {
	if t == nil {
		return 0
	}
	return t.n
}

// Match returns the Value of the rule chosen for a request, and ok=false when
// no rule matches. It is Lookup without the method-mismatch report; see
// Lookup for the matching rules.
func (t *Table[T]) Match(host, path, method string) (v T, ok bool) {
	v, ok, _ = t.Lookup(host, path, method)
	return v, ok
}

// Lookup returns the Value of the rule chosen for a request. ok is false when
// no rule matches; methodMismatch is then true if the search stopped at a
// host group with a rule matching the path but none admitting the method, so
// the caller can answer 405 Method Not Allowed instead of 404 Not Found.
// methodMismatch is false whenever ok is true.
//
// host is the request's Host as received, in any case, with or without a
// port: "API.Example.com:8080", "[::1]:80" and "[::1]" are understood, and
// one trailing dot is ignored ("api.example.com." is "api.example.com").
// Letters are folded as ASCII only, so no non-ASCII byte ever equals an
// ASCII one. A bracket-less host with more than one colon is taken as a bare
// IPv6 address with no port.
//
// Host groups are tried in this order, each at most once:
//  1. the rules whose Host equals the host;
//  2. the wildcard rules whose suffix the host ends with, longest suffix
//     first ("*.a.example.com" before "*.example.com");
//  3. the rules with Host "".
//
// Within a group, the rule with the longest PathPrefix that is a prefix of
// path and whose Methods admit method wins; between rules with the same
// prefix, one that lists the method beats one that lists no methods, and then
// the earlier rule wins. A longer prefix whose Methods exclude the method does
// not hide a shorter one in the same group: with "/api/admin" for GET and
// "/api" for any method, POST /api/admin/x goes to "/api".
//
// Prefixes are plain string prefixes of the raw path, as in an NGINX prefix
// location: "/video/" matches "/video/" and "/video/x"; "/video" matches
// "/video", "/video/x" and also "/videos". No cleaning or decoding is done:
// the caller passes the path it will forward. An empty path is taken as "/"
// (RFC 9112 section 3.2.1); "*" matches no rule.
//
// Fall-through: a group none of whose prefixes match the path is skipped and
// the next group is tried, so a host that routes only /a does not hide the
// any-host rule for /b. A group that has a prefix matching the path but no
// rule admitting the method ends the search (methodMismatch): one host's
// method restrictions are never bypassed by a less specific host's rules.
func (t *Table[T]) Lookup(host, path, method string) (v T, ok, methodMismatch bool) {
	v, ok, allow := t.LookupAllow(host, path, method)
	return v, ok, allow != nil
}

// LookupAllow is Lookup reporting a method mismatch by the value of the
// Allow header a 405 answer carries (RFC 9110 section 15.5.6): the methods
// of every rule in the host group that ended the search whose prefix
// matches path (the rules a request with another method could have
// reached), sorted, distinct and joined with ", ", as a one-element slice.
// The slice is computed once when the table is built and shared: callers
// may put it into a header map as is but must not modify it. allow is nil
// whenever ok is true or no rule's prefix matched.
func (t *Table[T]) LookupAllow(host, path, method string) (v T, ok bool, allow []string) {
	if t == nil {
		return v, false, nil
	}
	if path == "" {
		path = "/"
	}
	h := hostOnly(host)
	n := len(h)

	// Exact hosts and wildcard suffixes can only equal the last keyLen
	// bytes of h or less. Lower-case those into a stack buffer, unless
	// they are lower-case already (the common case).
	keyLen := min(n, max(t.maxExact, t.maxWild))
	k := hostKey{h: h, off: n - keyLen}
	if hasUpper(h[k.off:]) {
		var buf [maxStackHost]byte
		if keyLen <= len(buf) {
			k.low = buf[:keyLen]
		} else {
			k.low = make([]byte, keyLen) // only for a rule host longer than any DNS name
		}
		for i := range keyLen {
			c := h[k.off+i]
			if 'A' <= c && c <= 'Z' {
				c += 'a' - 'A'
			}
			k.low[i] = c
		}
	}

	if n > 0 && n <= t.maxExact { // then k.off == 0
		if g := treeAt(t.exact, &k, 0); g != nil {
			if v, ok, allow := g.match(path, method); ok || allow != nil {
				return v, ok, allow
			}
		}
	}
	if t.maxWild > 0 {
		// Proper suffixes starting at a dot, longest first. The dot must
		// have at least one byte before it, and the suffix must be no
		// longer than the longest wildcard key (so i >= k.off).
		for i := max(1, n-t.maxWild); i < n; i++ {
			if h[i] != '.' {
				continue
			}
			if g := treeAt(t.wildcard, &k, i); g != nil {
				if v, ok, allow := g.match(path, method); ok || allow != nil {
					return v, ok, allow
				}
			}
		}
	}
	if t.anyHost != nil {
		if v, ok, allow := t.anyHost.match(path, method); ok || allow != nil {
			return v, ok, allow
		}
	}
	return v, false, nil
}

// hostKey yields the lower-cased suffixes of a request host as map keys
// without allocating. With low nil the host has no upper case and the keys
// are substrings of h; otherwise low is the lower-cased copy of h[off:].
type hostKey struct {
	h   string
	low []byte
	off int
}

// treeAt looks up the suffix of the host starting at byte i (i >= k.off).
// The string conversion in the map index does not allocate.
func treeAt[T any](m map[string]*prefixTree[T], k *hostKey, i int) *prefixTree[T] {
	if k.low == nil {
		return m[k.h[i:]]
	}
	return m[string(k.low[i-k.off:])]
}

func hasUpper(s string) bool {
	for i := 0; i < len(s); i++ {
		if 'A' <= s[i] && s[i] <= 'Z' {
			return true
		}
	}
	return false
}

// hostOnly strips the port, the brackets of an IPv6 literal and one trailing
// dot from a request host, without allocating:
//
//	"api.example.com:8080" -> "api.example.com"
//	"api.example.com."     -> "api.example.com"
//	"[::1]:80", "[::1]"    -> "::1"
//	"::1"                  -> "::1" (more than one colon: a bare IPv6 address)
func hostOnly(h string) string {
	if len(h) > 0 && h[0] == '[' {
		if end := strings.IndexByte(h, ']'); end > 0 {
			return h[1:end]
		}
		return h // unbalanced bracket: match it as written
	}
	if i := strings.IndexByte(h, ':'); i >= 0 && strings.IndexByte(h[i+1:], ':') < 0 {
		h = h[:i]
	}
	return strings.TrimSuffix(h, ".")
}
