// Package route is levee's request router: it maps a request's host, path,
// method, headers and query to the value the caller attached to a rule (in
// levee, a *proxy.Route). It is pure code with no I/O and imports nothing
// internal; it is generic over the value so that it stays a leaf.
//
// # Precedence
//
// One function, compare (precedence.go), orders the rules; Lookup returns
// the first rule in that order whose conditions all hold, with one twist
// for methods (below). The order, most specific first:
//
//  1. host: an exact host, then wildcard hosts by longest suffix
//     ("*.a.example.com" before "*.example.com"), then rules with no host;
//  2. path kind: an exact path, then a template, then a prefix, then a
//     regex;
//  3. within a kind: templates segment by segment (a literal before an
//     {x:int} capture before an {x} capture), prefixes longest first;
//     regexes are not ordered among themselves (see 6);
//  4. more header and query conditions first;
//  5. a rule that lists methods before one that lists none;
//  6. the earlier rule in the input. Callers refuse two rules that tie on
//     1 to 5 and can match one request (Conflicts), so this decides only
//     between different regexes at one host: the one place the input
//     order matters, as validation cannot decide whether two regexes
//     overlap.
//
// Methods: the search stops at the first host group (1) in which some
// rule's path and conditions hold. If none of that group's such rules
// admits the method, the result is a method mismatch (405) with the Allow
// value of their methods: one host's method restrictions are never bypassed
// by a less specific host's rules. Within a group, a more specific rule
// whose methods exclude the request's does not hide a less specific one
// that admits it.
//
// # Algorithm
//
// NewTable sorts the rules once into host groups:
//
//   - exact:    map from host ("api.example.com") to its group;
//   - wildcard: map from suffix (".example.com" for "*.example.com") to its group;
//   - any-host: one group for rules with Host "".
//
// In a group, exact paths are a map from path to rules, prefixes a radix
// tree (prefixTree), templates and regexes slices in precedence order.
//
// Work per call: O(len(host)) to strip and lower-case the host; at most
// 1 + (dots in the host) map lookups plus the any-host group; in each group
// visited, one map lookup for exact paths, O(len(path)) per template and
// regex of the group, O(len(path)) to walk the prefix tree, plus the
// condition and method checks of the rules whose path matched. No
// allocation for host, path and method matching as long as no rule Host is
// longer than 255 bytes (see maxStackHost); a query condition decodes a
// %-escaped parameter on the heap; a method mismatch's Allow value is built
// once and then served from a bounded cache (allowCache).
//
// Locking: a Table is immutable after NewTable, but for its Allow cache
// (allowCache, a mutex held only on a method mismatch), so any number of
// goroutines may call Match and Lookup at once; a new configuration means
// a new Table, published by the caller (for example with atomic.Pointer).
package route

import (
	"strings"
)

// maxStackHost is the size of the stack buffer Lookup lower-cases a request
// host into. No DNS name is longer (RFC 1035 section 2.3.4). Only with a rule
// Host longer than this, and a request host as long with upper case in it,
// does Lookup lower-case on the heap instead.
const maxStackHost = 255

// Rule is one route's match conditions, already validated by the caller
// (ParseTemplate, CompileRegex). At most one of Path, PathTemplate, PathRegex and PathPrefix
// is set; with none, the rule matches every path (PathPrefix "/").
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
	// Path, when set, is matched exactly against the request path.
	Path string
	// PathTemplate, when set, is a template (see ParseTemplate) the whole
	// request path must match.
	PathTemplate string
	// PathRegex, when set, is an RE2 pattern the whole request path must
	// match (NewTable anchors it; see CompileRegex).
	PathRegex string
	// PathPrefix is matched on segment boundaries: "/v1/products" matches
	// "/v1/products" and "/v1/products/..." but not "/v1/productsXYZ"; a
	// prefix ending in "/" matches any path starting with it ("/video/"
	// matches "/video/" and "/video/x", not "/video"). It starts with "/";
	// "" means "/".
	PathPrefix string
	// Headers and Query are conditions that must all hold (see Cond).
	Headers []Cond
	Query   []Cond
	// Methods lists the upper-case method tokens the rule accepts, compared
	// case-sensitively as RFC 9110 section 9.1 requires. Empty accepts any
	// method. HEAD is not implied by GET: list it if the route serves it.
	Methods []string
	// Value is what Match and Lookup return when this rule is chosen.
	Value T
}

// Table is an immutable routing table (but for its bounded Allow cache). It
// is safe for concurrent use, and its lookups allocate nothing, except to
// decode a %-escaped query parameter a query condition tests. The zero
// value and a nil *Table match nothing.
type Table[T any] struct {
	exact    map[string]*group[T] // by canonical host
	wildcard map[string]*group[T] // by suffix with its leading dot: ".example.com"
	anyHost  *group[T]            // rules with Host ""; nil when there are none
	maxExact int                  // longest key in exact
	maxWild  int                  // longest key in wildcard
	n        int                  // rules in the table
	allow    *allowCache
}

// NewTable builds a Table from rules, which it does not retain: later changes
// to the slice or to a rule's slices do not affect the Table. A template or
// regex that does not parse (which the caller's validation refuses) matches
// no request; with more than one path kind set, the first of Path,
// PathTemplate, PathRegex and PathPrefix counts.
func NewTable[T any](rules []Rule[T]) *Table[T] {
	t := &Table[T]{n: len(rules), allow: newAllowCache()}
	for i := range rules {
		r := newRule(i, &rules[i])
		var g *group[T]
		switch {
		case r.host == "":
			if t.anyHost == nil {
				t.anyHost = &group[T]{}
			}
			g = t.anyHost
		case r.hostClass == hostWildcard:
			g = groupFor(&t.wildcard, r.host[1:])
			t.maxWild = max(t.maxWild, len(r.host)-1)
		default:
			g = groupFor(&t.exact, r.host)
			t.maxExact = max(t.maxExact, len(r.host))
		}
		g.add(r)
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

func groupFor[T any](m *map[string]*group[T], key string) *group[T] {
	if *m == nil {
		*m = make(map[string]*group[T])
	}
	g := (*m)[key]
	if g == nil {
		g = &group[T]{}
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

// Lookup returns the Value of the rule chosen for a request with no
// headers and no query (LookupRequest). ok is false when no rule matches;
// methodMismatch is then true if the search stopped at a host group with a
// rule matching the path but none admitting the method, so the caller can
// answer 405 Method Not Allowed instead of 404 Not Found. methodMismatch is
// false whenever ok is true.
func (t *Table[T]) Lookup(host, path, method string) (v T, ok, methodMismatch bool) {
	v, ok, allow := t.LookupRequest(host, path, method, nil, "")
	return v, ok, allow != nil
}

// LookupAllow is LookupRequest for a request with no headers and no query.
func (t *Table[T]) LookupAllow(host, path, method string) (v T, ok bool, allow []string) {
	return t.LookupRequest(host, path, method, nil, "")
}

// LookupRequest returns the Value of the rule chosen for a request: the
// first rule in precedence order (see the package comment) whose host,
// path, header and query conditions hold and whose methods admit method.
// ok is false when no rule matches; allow is then, on a method mismatch,
// the value of the Allow header a 405 answer carries (RFC 9110 section
// 15.5.6): the methods of every rule of the host group that ended the
// search whose path and conditions hold, sorted, distinct and joined with
// ", ", as a one-element slice. The slice is shared: callers may put it
// into a header map as is but must not modify it. allow is nil whenever ok
// is true or no rule's path and conditions held.
//
// host is the request's Host as received, in any case, with or without a
// port: "API.Example.com:8080", "[::1]:80" and "[::1]" are understood, and
// one trailing dot is ignored ("api.example.com." is "api.example.com").
// Letters are folded as ASCII only, so no non-ASCII byte ever equals an
// ASCII one. A bracket-less host with more than one colon is taken as a bare
// IPv6 address with no port.
//
// path is matched as given: no cleaning or decoding is done here (levee
// passes its normal, decoded form). An empty path is taken as "/" (RFC 9112
// section 3.2.1); "*" matches no rule. header has canonical keys, as
// net/http keeps them (nil: none); rawQuery is the query as received,
// without "?".
//
// Fall-through: a group none of whose rules' paths and conditions hold is
// skipped and the next group is tried, so a host that routes only /a does
// not hide the any-host rule for /b.
func (t *Table[T]) LookupRequest(host, path, method string, header map[string][]string, rawQuery string) (v T, ok bool, allow []string) {
	if t == nil {
		return v, false, nil
	}
	if path == "" {
		path = "/"
	}
	req := request{path: path, method: method, header: header, query: rawQuery}
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

	var mm mismatch
	if n > 0 && n <= t.maxExact { // then k.off == 0
		if g := groupAt(t.exact, &k, 0); g != nil {
			if v, ok := g.match(&req, &mm); ok || mm.n > 0 {
				return v, ok, t.allowOf(ok, &mm)
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
			if g := groupAt(t.wildcard, &k, i); g != nil {
				if v, ok := g.match(&req, &mm); ok || mm.n > 0 {
					return v, ok, t.allowOf(ok, &mm)
				}
			}
		}
	}
	if t.anyHost != nil {
		if v, ok := t.anyHost.match(&req, &mm); ok || mm.n > 0 {
			return v, ok, t.allowOf(ok, &mm)
		}
	}
	return v, false, nil
}

// allowOf is the Allow value of a mismatch, nil when there is none or the
// lookup matched.
func (t *Table[T]) allowOf(ok bool, mm *mismatch) []string {
	if ok || mm.n == 0 {
		return nil
	}
	return t.allow.get(mm)
}

// hostKey yields the lower-cased suffixes of a request host as map keys
// without allocating. With low nil the host has no upper case and the keys
// are substrings of h; otherwise low is the lower-cased copy of h[off:].
type hostKey struct {
	h   string
	low []byte
	off int
}

// groupAt looks up the suffix of the host starting at byte i (i >= k.off).
// The string conversion in the map index does not allocate.
func groupAt[T any](m map[string]*group[T], k *hostKey, i int) *group[T] {
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
