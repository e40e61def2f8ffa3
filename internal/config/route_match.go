package config

import (
	"strings"

	"github.com/levee-gw/levee/internal/config/engine"
	"github.com/levee-gw/levee/internal/route"
	"gopkg.in/yaml.v3"
)

// A route's `match` block: host, one path kind (path, path_prefix,
// path_template or path_regex), methods, header and query conditions. The
// precedence between routes is package route's (route.Conflicts finds the
// ties the routes block refuses).

// Bounds of a route's conditions.
const (
	// MaxMatchConds bounds match.headers and match.query, each.
	MaxMatchConds = 16
	// maxCondName bounds a header or query parameter name.
	maxCondName = 256
)

var (
	matchCondBlock = engine.NewBlock(
		engine.Field{Name: "name", Kind: engine.KindString, Required: true, Doc: "the header (any case) or query parameter (exact case) tested",
			Bind: engine.At(func(c *MatchCond) *string { return &c.Name })},
		engine.Field{Name: "exact", Kind: engine.KindString, Doc: "holds when a value equals this",
			Bind: engine.At(func(c *MatchCond) *string { return &c.Exact })},
		engine.Field{Name: "prefix", Kind: engine.KindString, Doc: "holds when a value starts with this",
			Bind: engine.At(func(c *MatchCond) *string { return &c.Prefix })},
		engine.Field{Name: "regex", Kind: engine.KindString, Doc: "holds when a whole value matches this RE2 pattern (anchored; at most 1 KiB)",
			Bind: engine.At(func(c *MatchCond) *string { return &c.Regex })},
		engine.Field{Name: "present", Kind: engine.KindBool, Doc: "true: holds when the header or parameter is present, with any value",
			Bind: engine.At(func(c *MatchCond) *bool { return &c.Present })},
		engine.Field{Name: "absent", Kind: engine.KindBool, Doc: "true: holds when the header or parameter is not present",
			Bind: engine.At(func(c *MatchCond) *bool { return &c.Absent })},
	)
	matchBlock = engine.NewBlock(
		engine.Field{Name: "host", Kind: engine.KindString, Doc: `Host matched, exactly or as "*.example.com"; any when omitted`,
			Check: checkMatchHost, Bind: engine.At(func(m *Match) *string { return &m.Host })},
		engine.Field{Name: "path", Kind: engine.KindString, Doc: "path matched exactly; one of path, path_prefix, path_template and path_regex",
			Check: engine.ProblemOf(checkPathPrefix), Bind: engine.At(func(m *Match) *string { return &m.Path })},
		engine.Field{Name: "path_prefix", Kind: engine.KindString, Def: DefaultPathPrefix, Doc: `path prefix matched, on segment boundaries ("/v1/a" matches /v1/a and /v1/a/..., not /v1/ab); a prefix ending in "/" matches any path starting with it`,
			Check: engine.ProblemOf(checkPathPrefix), Bind: engine.At(func(m *Match) *string { return &m.PathPrefix })},
		engine.Field{Name: "path_template", Kind: engine.KindString, Doc: `path template matched: "/v1/products/{id}", a capture a whole segment, {name} any or {name:int} an int64`,
			Check: engine.ProblemOf(checkPathTemplate), Bind: engine.At(func(m *Match) *string { return &m.PathTemplate })},
		engine.Field{Name: "path_regex", Kind: engine.KindString, Doc: "RE2 pattern the whole path must match (anchored by levee; at most 1 KiB)",
			Check: engine.ProblemOf(checkRegex), Bind: engine.At(func(m *Match) *string { return &m.PathRegex })},
		engine.Field{Name: "methods", Kind: engine.KindList, MinItems: 1, Item: &engine.Field{Kind: engine.KindString, Pattern: tokenPattern}, Doc: "methods matched; any when omitted"},
		engine.Field{Name: "headers", Kind: engine.KindList, MaxItems: MaxMatchConds, Item: &engine.Field{Kind: engine.KindBlock, Sub: matchCondBlock},
			Doc: "header conditions, all of which must hold; each a name and one of exact, prefix, regex, present, absent"},
		engine.Field{Name: "query", Kind: engine.KindList, MaxItems: MaxMatchConds, Item: &engine.Field{Kind: engine.KindBlock, Sub: matchCondBlock},
			Doc: "query parameter conditions on the first value, all of which must hold; each a name and one of exact, prefix, regex, present, absent"},
		engine.Field{Name: "raw_path", Kind: engine.KindBool, Doc: "match the path as sent rather than normalised",
			Bind: engine.At(func(m *Match) *bool { return &m.RawPath })},
	)
)

// Match is the condition under which a route takes a request (`match`).
// All given conditions must hold. Between routes whose conditions all hold,
// the precedence in docs/configuration.md "Route precedence" (package
// route) decides; two routes that tie on it and can take the same request
// are an error.
type Match struct {
	// Host is the request host to match, without a port (`host`): an
	// exact name ("api.example.com") or a name whose whole leftmost label
	// is the wildcard ("*.example.com"); "*" appears nowhere else. Stored
	// lower-case. Empty, the default, matches any host.
	Host string
	// Path is the exact path matched (`path`); it starts with "/". At most
	// one of Path, PathPrefix (given), PathTemplate and PathRegex.
	Path string
	// PathPrefix is the prefix the request path must start with, on
	// segment boundaries (`path_prefix`): "/v1/products" matches
	// "/v1/products" and "/v1/products/...", never "/v1/productsXYZ"; a
	// prefix ending in "/" matches any path that starts with it. It
	// starts with "/". Default DefaultPathPrefix ("/"), which matches
	// every path; it stays "/" when another path kind is set, and is then
	// not used (see Prefix).
	PathPrefix string
	// PathTemplate is a path template (`path_template`, see
	// route.ParseTemplate): "/v1/products/{id:int}".
	PathTemplate string
	// PathRegex is an RE2 pattern the whole path must match
	// (`path_regex`; anchored by levee, at most route.MaxRegexLen bytes).
	PathRegex string
	// Methods lists the HTTP methods matched (`methods`), each an RFC 7230
	// token stored upper-case, no duplicates. nil, the default, matches any
	// method but CONNECT, which is refused (405) unless the route lists it
	// here. An explicit empty list is an error.
	Methods []string
	// Headers are header conditions (`headers`, at most MaxMatchConds),
	// all of which must hold.
	Headers []MatchCond
	// Query are query parameter conditions on the parameter's first value
	// (`query`, at most MaxMatchConds), all of which must hold.
	Query []MatchCond
	// RawPath forwards the request target's path bytes as received
	// instead of their normal form (`raw_path`, a boolean). Default
	// false. The route is still matched (so its auth is decided) on the
	// normal form; the backend gets the bytes as sent, so it must resolve
	// them as levee does: a risk, see "Request paths" in
	// docs/configuration.md.
	RawPath bool
}

// MatchCond is one header or query condition (`match.headers[i]`,
// `match.query[i]`): Name and exactly one of Exact, Prefix, Regex, Present
// and Absent (the booleans given as true).
type MatchCond struct {
	Name    string
	Exact   string
	Prefix  string
	Regex   string
	Present bool
	Absent  bool
}

// DefaultPathPrefix is Match.PathPrefix when no path kind is given: every
// path.
const DefaultPathPrefix = "/"

// PathKind returns the match's path kind as its field name: "path",
// "path_template", "path_regex" or "path_prefix".
func (m *Match) PathKind() string {
	switch {
	case m.Path != "":
		return "path"
	case m.PathTemplate != "":
		return "path_template"
	case m.PathRegex != "":
		return "path_regex"
	}
	return "path_prefix"
}

// Prefix returns PathPrefix when the match is by prefix, else "".
func (m *Match) Prefix() string {
	if m.PathKind() != "path_prefix" {
		return ""
	}
	return m.PathPrefix
}

// matchPrefixOmit is what the effective configuration leaves out of a
// match by another path kind than path_prefix.
var matchPrefixOmit = []string{"path_prefix"}

// Conds returns the match's header and query conditions as package route
// takes them.
func (m *Match) Conds() (headers, query []route.Cond) {
	return routeConds(m.Headers), routeConds(m.Query)
}

func routeConds(cs []MatchCond) []route.Cond {
	if len(cs) == 0 {
		return nil
	}
	out := make([]route.Cond, len(cs))
	for i, c := range cs {
		out[i] = route.Cond{Name: c.Name}
		switch {
		case c.Present:
			out[i].Kind = route.CondPresent
		case c.Absent:
			out[i].Kind = route.CondAbsent
		case c.Prefix != "":
			out[i].Kind, out[i].Value = route.CondPrefix, c.Prefix
		case c.Regex != "":
			out[i].Kind, out[i].Value = route.CondRegex, c.Regex
		default:
			out[i].Kind, out[i].Value = route.CondExact, c.Exact
		}
	}
	return out
}

// routeRule is the match as a rule of package route (value unused).
func (m *Match) routeRule() route.Rule[int] {
	h, q := m.Conds()
	return route.Rule[int]{Host: m.Host, Path: m.Path, PathTemplate: m.PathTemplate, PathRegex: m.PathRegex,
		PathPrefix: m.Prefix(), Headers: h, Query: q, Methods: m.Methods}
}

// routeRule is the route's match as package route takes it: a data route
// answers only its own path, so its path_prefix is matched exactly
// (Route.DataPath).
func (r *Route) routeRule() route.Rule[int] {
	rule := r.Match.routeRule()
	if r.Data != nil && rule.PathPrefix != "" {
		rule.Path, rule.PathPrefix = rule.PathPrefix, ""
	}
	return rule
}

// DataPath reports whether the route's path_prefix is matched as an exact
// path: on a data route, which answers only its own path (or its
// template's), never a path below it.
func (r *Route) DataPath() bool { return r.Data != nil && r.Match.Prefix() != "" }

// PathCaptures returns a path_template's capture names and a function that
// returns a matching path's captured segments in that order; nil, nil
// without a template.
func (m *Match) PathCaptures() (names []string, values func(path string) []string) {
	if m.PathTemplate == "" {
		return nil, nil
	}
	t, err := route.ParseTemplate(m.PathTemplate)
	if err != nil {
		return nil, nil // refused by the reader
	}
	return t.Names(), t.Values
}

// dataRouteMatch checks a data route's match: a path_template's captures
// are parameters of its SQL (declared in data.params), so a table-mode
// route, which has none, takes no capture.
func (p *parser) dataRouteMatch(r *Route, path string, n *yaml.Node) {
	names, _ := r.Match.PathCaptures()
	if len(names) == 0 || r.Data == nil {
		return
	}
	tp := engine.Key(engine.Key(path, "match"), "path_template")
	if r.Data.SQL == "" {
		p.Add(n, tp, "a table-mode data route takes no capture (%s); use a sql route with params", engine.Quote(names[0]))
		return
	}
	for _, name := range names {
		if r.Data.Params[name] == nil {
			p.Add(n, tp, "capture %s must be a parameter declared in data.params", engine.Quote(name))
		}
	}
}

// match reads a route's `match` and reports whether it was all valid.
func (p *parser) match(m *Match, path string, n *yaml.Node) bool {
	f, ok := p.Block(path, n, matchBlock)
	if !ok {
		return false
	}
	ok = p.Bind(f, n, path, matchBlock, m) == nil // host, the path kinds and raw_path
	if v := f["methods"]; v != nil {
		ok = p.methods(m, engine.Key(path, "methods"), v) && ok
	}
	var given []string
	for _, k := range []string{"path", "path_prefix", "path_template", "path_regex"} {
		if f[k] != nil {
			given = append(given, k)
		}
	}
	if len(given) > 1 {
		p.Add(f[given[1]], engine.Key(path, given[1]), "a route matches one of path, path_prefix, path_template and path_regex, got %s", strings.Join(given, " and "))
		ok = false
	}
	if v := f["headers"]; v != nil {
		var cok bool
		m.Headers, cok = p.matchConds(engine.Key(path, "headers"), v, true)
		ok = cok && ok
	}
	if v := f["query"]; v != nil {
		var cok bool
		m.Query, cok = p.matchConds(engine.Key(path, "query"), v, false)
		ok = cok && ok
	}
	return ok
}

// matchConds reads `match.headers` or `match.query`.
func (p *parser) matchConds(path string, n *yaml.Node, header bool) ([]MatchCond, bool) {
	items, ok := p.Sequence(path, n)
	if !ok {
		return nil, false
	}
	if len(items) > MaxMatchConds {
		p.Add(n, path, "at most %d conditions, got %d", MaxMatchConds, len(items))
		return nil, false
	}
	var out []MatchCond
	for i, item := range items {
		ip := engine.Index(path, i)
		f, fok := p.Block(ip, item, matchCondBlock)
		if !fok {
			ok = false
			continue
		}
		var c MatchCond
		if p.Bind(f, item, ip, matchCondBlock, &c) != nil {
			ok = false
			continue
		}
		switch {
		case len(c.Name) > maxCondName:
			p.Add(f["name"], engine.Key(ip, "name"), "must be at most %d bytes, got %d", maxCondName, len(c.Name))
			ok = false
			continue
		case header && !validToken(c.Name):
			p.Add(f["name"], engine.Key(ip, "name"), "must be a header name such as \"X-Canary\", got %s", engine.Quote(c.Name))
			ok = false
			continue
		case !header && c.Name == "":
			p.Add(f["name"], engine.Key(ip, "name"), "must not be empty")
			ok = false
			continue
		}
		var tests []string
		for _, k := range []string{"exact", "prefix", "regex", "present", "absent"} {
			if f[k] != nil {
				tests = append(tests, k)
			}
		}
		switch {
		case len(tests) != 1:
			p.Add(item, ip, "must have exactly one of exact, prefix, regex, present and absent, got %d", len(tests))
			ok = false
			continue
		case tests[0] == "present" && !c.Present, tests[0] == "absent" && !c.Absent:
			p.Add(f[tests[0]], engine.Key(ip, tests[0]), "must be true (for the opposite test, use %s: true)", map[string]string{"present": "absent", "absent": "present"}[tests[0]])
			ok = false
			continue
		case tests[0] == "exact" && c.Exact == "", tests[0] == "prefix" && c.Prefix == "":
			p.Add(f[tests[0]], engine.Key(ip, tests[0]), "must not be empty (to test presence, use present: true)")
			ok = false
			continue
		case tests[0] == "regex":
			if problem := checkRegex(c.Regex); problem != "" {
				p.Add(f["regex"], engine.Key(ip, "regex"), "%s, got %s", problem, engine.Quote(c.Regex))
				ok = false
				continue
			}
		}
		out = append(out, c)
	}
	return out, ok
}

// checkPathTemplate checks a route's path_template (route.ParseTemplate).
func checkPathTemplate(s string) string {
	if _, err := route.ParseTemplate(s); err != nil {
		return err.Error()
	}
	return ""
}

// checkRegex checks a path or condition regex (route.CompileRegex).
func checkRegex(s string) string {
	if _, err := route.CompileRegex(s); err != nil {
		return "must be an RE2 pattern of at most 1 KiB: " + err.Error()
	}
	return ""
}

// methods reads `methods`: a non-empty list of distinct method tokens.
func (p *parser) methods(m *Match, path string, n *yaml.Node) bool {
	items, ok := p.Sequence(path, n)
	if !ok {
		return false
	}
	if len(items) == 0 {
		p.Add(n, path, "must list at least one method; omit it to match any method")
		return false
	}
	m.Methods, ok = distinctStrings(p.Parser, path, items, "method ", func(s string) (string, string) {
		if !validToken(s) {
			return "", "must be an HTTP method such as \"GET\", got " + engine.Quote(s)
		}
		return strings.ToUpper(s), ""
	})
	return ok
}

// checkMatchHost normalises a route's `match.host` (normalizeMatchHost).
var checkMatchHost = engine.CheckStr(func(p *engine.Parser, path string, n *yaml.Node, s *string) bool {
	host, problem := normalizeMatchHost(*s)
	if problem != "" {
		p.Add(n, path, "%s, got %s", problem, engine.Quote(*s))
	}
	*s = host
	return problem == ""
})

// overlapsBy finds the routes that tie with an earlier route on the
// precedence (route.Conflicts) and calls report with route i, the earlier
// route j it duplicates, and what they share ("same host and path_prefix",
// "... and method \"GET\"").
func overlapsBy(routes []Route, seen []routeSeen, report func(i, j int, what string)) {
	idx := make([]int, 0, len(routes))
	rules := make([]route.Rule[int], 0, len(routes))
	for i := range routes {
		if seen[i].matchOK {
			idx = append(idx, i)
			rules = append(rules, routes[i].routeRule())
		}
	}
	route.Conflicts(rules, func(a, b int, method string) {
		m := &routes[idx[a]].Match
		parts := []string{"host", m.PathKind()}
		if len(m.Headers)+len(m.Query) > 0 {
			parts = append(parts, "conditions")
		}
		if method != "" {
			parts = append(parts, "method "+engine.Quote(method))
		}
		last := len(parts) - 1
		what := "same " + strings.Join(parts[:last], ", ") + " and " + parts[last]
		report(idx[a], idx[b], what)
	})
}
