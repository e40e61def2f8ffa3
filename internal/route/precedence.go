package route

import (
	"regexp"
	"slices"
	"strings"
)

// The rules of one table in their build form, the one precedence order
// (compare), the host group that holds them, and the check for rules of
// equal precedence (Conflicts).

type hostClass uint8

const (
	hostExact hostClass = iota
	hostWildcard
	hostAny
)

type pathKind uint8

// The path kinds in precedence order.
const (
	kindExact pathKind = iota
	kindTemplate
	kindPrefix
	kindRegex
)

// rule is a Rule ready to match.
type rule[T any] struct {
	index     int // in the input: the last tie-break
	host      string
	hostClass hostClass
	kind      pathKind
	path      string // the exact path, the prefix, the template or the pattern as given
	tmpl      *Template
	re        *regexp.Regexp
	headers   []cond
	query     []cond
	methods   []string // nil: any method
	value     T
}

func newRule[T any](i int, r *Rule[T]) *rule[T] {
	x := &rule[T]{index: i, host: canonicalRuleHost(r.Host), value: r.Value}
	switch {
	case x.host == "":
		x.hostClass = hostAny
	case strings.HasPrefix(x.host, "*."):
		x.hostClass = hostWildcard
	}
	switch {
	case r.Path != "":
		x.kind, x.path = kindExact, r.Path
	case r.PathTemplate != "":
		x.kind, x.path = kindTemplate, r.PathTemplate
		t, err := ParseTemplate(r.PathTemplate)
		if err != nil {
			x.kind, x.re = kindRegex, neverRegex // refused by validation: match nothing
		}
		x.tmpl = t
	case r.PathRegex != "":
		x.kind, x.path = kindRegex, r.PathRegex
		re, err := CompileRegex(r.PathRegex)
		if err != nil {
			re = neverRegex
		}
		x.re = re
	default:
		x.kind, x.path = kindPrefix, r.PathPrefix
		if x.path == "" {
			x.path = "/"
		}
	}
	x.headers = newConds(r.Headers, true)
	x.query = newConds(r.Query, false)
	if len(r.Methods) > 0 {
		x.methods = slices.Clone(r.Methods)
	}
	return x
}

// compare is THE precedence of levee's routes (the package comment says it
// in words; docs/configuration.md "Route precedence" for operators): it
// returns a negative number when rule a is tried before rule b. Lookup
// visits rules in exactly this order (the host groups, then in each group
// the path kinds, each kind's rules sorted by compare), and
// TestLookupFollowsCompare holds it to that.
func compare[T any](a, b *rule[T]) int {
	// 1. Host: exact, then wildcards by longest suffix, then any.
	if a.hostClass != b.hostClass {
		return int(a.hostClass) - int(b.hostClass)
	}
	if a.hostClass == hostWildcard && len(a.host) != len(b.host) {
		return len(b.host) - len(a.host)
	}
	// 2. Path kind.
	if a.kind != b.kind {
		return int(a.kind) - int(b.kind)
	}
	// 3. Within a kind.
	switch a.kind {
	case kindTemplate:
		if a.tmpl != nil && b.tmpl != nil {
			if c := compareTemplates(a.tmpl, b.tmpl); c != 0 {
				return c
			}
		}
	case kindPrefix:
		if len(a.path) != len(b.path) {
			return len(b.path) - len(a.path)
		}
	}
	// 4. More conditions first.
	if na, nb := len(a.headers)+len(a.query), len(b.headers)+len(b.query); na != nb {
		return nb - na
	}
	// 5. Listing methods first.
	if la, lb := len(a.methods) > 0, len(b.methods) > 0; la != lb {
		if la {
			return -1
		}
		return 1
	}
	// 6. Input order.
	return a.index - b.index
}

// group holds the rules of one host (or wildcard suffix, or any host).
type group[T any] struct {
	exact     map[string][]*rule[T] // by path, each sorted by compare
	templates []*rule[T]            // sorted by compare
	prefix    prefixTree[T]
	hasPrefix bool
	regexes   []*rule[T] // sorted by compare: input order once conditions and methods tie
}

func (g *group[T]) add(r *rule[T]) {
	switch r.kind {
	case kindExact:
		if g.exact == nil {
			g.exact = make(map[string][]*rule[T])
		}
		g.exact[r.path] = append(g.exact[r.path], r)
	case kindTemplate:
		g.templates = append(g.templates, r)
	case kindPrefix:
		g.prefix.insert(r.path, r)
		g.hasPrefix = true
	default:
		g.regexes = append(g.regexes, r)
	}
}

func (g *group[T]) finish() {
	for p, rs := range g.exact {
		slices.SortFunc(rs, compare[T])
		g.exact[p] = slices.Clip(rs)
	}
	slices.SortFunc(g.templates, compare[T])
	slices.SortFunc(g.regexes, compare[T])
	g.templates, g.regexes = slices.Clip(g.templates), slices.Clip(g.regexes)
	if g.hasPrefix {
		g.prefix.finish()
	}
}

// request is what a lookup matches against.
type request struct {
	path, method string
	header       map[string][]string
	query        string
}

// match returns the first rule of the group, in precedence order, whose
// path and conditions hold and whose methods admit the request's; the
// methods of those that do not admit it go into mm.
func (g *group[T]) match(req *request, mm *mismatch) (v T, ok bool) {
	if g.exact != nil {
		for _, r := range g.exact[req.path] {
			if r.condsHold(req) {
				if r.admits(req.method) {
					return r.value, true
				}
				mm.add(r.methods)
			}
		}
	}
	for _, r := range g.templates {
		if r.tmpl.Match(req.path) && r.condsHold(req) {
			if r.admits(req.method) {
				return r.value, true
			}
			mm.add(r.methods)
		}
	}
	if g.hasPrefix {
		if v, ok := g.prefix.match(req, mm); ok {
			return v, true
		}
	}
	for _, r := range g.regexes {
		if r.re.MatchString(req.path) && r.condsHold(req) {
			if r.admits(req.method) {
				return r.value, true
			}
			mm.add(r.methods)
		}
	}
	return v, false
}

func (r *rule[T]) condsHold(req *request) bool {
	for i := range r.headers {
		if !r.headers[i].headerHolds(req.header) {
			return false
		}
	}
	for i := range r.query {
		if !r.query[i].queryHolds(req.query) {
			return false
		}
	}
	return true
}

func (r *rule[T]) admits(method string) bool {
	if len(r.methods) == 0 {
		return true
	}
	for _, m := range r.methods {
		if m == method {
			return true
		}
	}
	return false
}

// Conflicts calls report(i, j, method) for each rule i that ties with an
// earlier rule j on every step of the precedence but the input order and
// can therefore take the same requests: the same host, the same path kind
// and value (templates by Shape, so capture names do not count), the same
// set of header and query conditions, and methods that overlap (method is
// one they share) or are both unlisted (method ""). A rule that lists
// methods never conflicts with one that lists none: the listing one comes
// first. Two different regexes never conflict here (whether they overlap
// is not decided); the earlier is tried first. Linear in the rules and
// their methods and conditions.
func Conflicts[T any](rules []Rule[T], report func(i, j int, method string)) {
	type bucket struct {
		any      int            // first rule without methods, or -1
		byMethod map[string]int // method -> first rule listing it
	}
	buckets := make(map[string]*bucket)
	for i := range rules {
		key := conflictKey(&rules[i])
		b := buckets[key]
		if b == nil {
			b = &bucket{any: -1, byMethod: map[string]int{}}
			buckets[key] = b
		}
		ms := rules[i].Methods
		if len(ms) == 0 {
			if b.any >= 0 {
				report(i, b.any, "")
			} else {
				b.any = i
			}
			continue
		}
		dup, dupMethod := -1, ""
		for _, m := range ms {
			if j, ok := b.byMethod[m]; ok && (dup < 0 || j < dup) {
				dup, dupMethod = j, m
			}
		}
		if dup >= 0 {
			report(i, dup, dupMethod)
			continue
		}
		for _, m := range ms {
			b.byMethod[m] = i
		}
	}
}

// conflictKey is a string equal for two rules exactly when they tie on
// host, path and conditions.
func conflictKey[T any](r *Rule[T]) string {
	var b strings.Builder
	b.WriteString(canonicalRuleHost(r.Host))
	b.WriteByte(0)
	switch {
	case r.Path != "":
		b.WriteString("exact\x00" + r.Path)
	case r.PathTemplate != "":
		if t, err := ParseTemplate(r.PathTemplate); err == nil {
			b.WriteString("template\x00" + t.Shape())
		} else {
			b.WriteString("template\x00" + r.PathTemplate)
		}
	case r.PathRegex != "":
		b.WriteString("regex\x00" + r.PathRegex)
	default:
		p := r.PathPrefix
		if p == "" {
			p = "/"
		}
		b.WriteString("prefix\x00" + p)
	}
	conds := make([]string, 0, len(r.Headers)+len(r.Query))
	for _, c := range newConds(r.Headers, true) {
		conds = append(conds, "h\x00"+c.name+"\x00"+string(rune('0'+c.kind))+"\x00"+c.value)
	}
	for _, c := range r.Query {
		conds = append(conds, "q\x00"+c.Name+"\x00"+string(rune('0'+c.Kind))+"\x00"+c.Value)
	}
	slices.Sort(conds)
	for _, c := range slices.Compact(conds) {
		b.WriteByte(1)
		b.WriteString(c)
	}
	return b.String()
}
