package config

import (
	"net"
	"strconv"
	"strings"

	"github.com/levee-gw/levee/internal/config/engine"
	"github.com/levee-gw/levee/internal/endpoint"
	"gopkg.in/yaml.v3"
)

// A route's `rewrite` block: what changes in the request it forwards. The
// route, its auth and signatures are decided on the path as the client
// sent it (normalised); the rewritten path is normalised again at run time
// and is what the upstream gets (docs/configuration.md "Rewrites").

var (
	rewriteRegexBlock = engine.NewBlock(
		engine.Field{Name: "pattern", Kind: engine.KindString, Required: true, Doc: "RE2 pattern searched in the path (not anchored; at most 1 KiB)",
			Check: engine.ProblemOf(checkRewritePattern), Bind: engine.At(func(r *RewriteRegex) *string { return &r.Pattern })},
		engine.Field{Name: "substitution", Kind: engine.KindString, Required: true, Doc: "what each match becomes; $1 and ${name} expand (at most 1 KiB)",
			Check: engine.ProblemOf(checkSubstitution), Bind: engine.At(func(r *RewriteRegex) *string { return &r.Substitution })},
	)
	rewriteBlock = engine.NewBlock(
		engine.Field{Name: "strip_prefix", Kind: engine.KindString, Doc: `removed from the front of the forwarded path on a segment boundary ("/api": /api/x is forwarded as /x)`,
			Check: engine.ProblemOf(checkRewritePath), Bind: engine.At(func(r *Rewrite) *string { return &r.StripPrefix })},
		engine.Field{Name: "replace_prefix", Kind: engine.KindString, Doc: "replaces the route's match.path_prefix at the front of the forwarded path",
			Check: engine.ProblemOf(checkRewritePath), Bind: engine.At(func(r *Rewrite) *string { return &r.ReplacePrefix })},
		engine.Field{Name: "path_regex", Kind: engine.KindBlock, Sub: rewriteRegexBlock, Doc: "replaces each match of pattern in the forwarded path"},
		engine.Field{Name: "host", Kind: engine.KindString, Doc: "the Host sent upstream instead of the client's (a name or IP, optionally with :port)",
			Check: engine.ProblemOf(checkRewriteHost), Bind: engine.At(func(r *Rewrite) *string { return &r.Host })},
	)
)

// Rewrite changes the request a route forwards (`rewrite`). At most one of
// StripPrefix, ReplacePrefix and PathRegex; Host with any.
type Rewrite struct {
	// StripPrefix is removed from the front of the forwarded path when
	// the path starts with it on a segment boundary (`strip_prefix`).
	StripPrefix string
	// ReplacePrefix replaces the route's Match.PathPrefix at the front of
	// the forwarded path (`replace_prefix`; only with match.path_prefix).
	ReplacePrefix string
	// PathRegex replaces each match of a pattern in the forwarded path
	// (`path_regex`).
	PathRegex *RewriteRegex
	// Host is the Host header sent upstream instead of the client's
	// (`host`).
	Host string
}

// RewriteRegex is `rewrite.path_regex`.
type RewriteRegex struct {
	Pattern      string
	Substitution string
}

// maxRewriteLen bounds a rewrite's pattern and substitution.
const maxRewriteLen = 1024

// rewrite reads a route's `rewrite`. m is the route's match (already
// read), isData whether the route is a data route.
func (p *parser) rewrite(path string, n *yaml.Node, m *Match, isData bool) *Rewrite {
	f, ok := p.Block(path, n, rewriteBlock)
	if !ok {
		return nil
	}
	rw := &Rewrite{}
	bad := p.Bind(f, n, path, rewriteBlock, rw)
	if v := f["path_regex"]; v != nil {
		rp := engine.Key(path, "path_regex")
		if rf, rok := p.Block(rp, v, rewriteRegexBlock); rok {
			rr := &RewriteRegex{}
			if p.Bind(rf, v, rp, rewriteRegexBlock, rr) == nil {
				rw.PathRegex = rr
			} else {
				ok = false
			}
		} else {
			ok = false
		}
	}
	var given []string
	for _, k := range []string{"strip_prefix", "replace_prefix", "path_regex"} {
		if f[k] != nil {
			given = append(given, k)
		}
	}
	switch {
	case isData:
		p.Add(n, path, "a data route forwards nothing to rewrite")
		return nil
	case len(f) == 0:
		p.Add(n, path, "must set at least one of strip_prefix, replace_prefix, path_regex and host")
		return nil
	case len(given) > 1:
		p.Add(f[given[1]], engine.Key(path, given[1]), "a rewrite changes the path one way: one of strip_prefix, replace_prefix and path_regex, got %s", strings.Join(given, " and "))
		return nil
	case len(given) == 1 && m.RawPath:
		p.Add(f[given[0]], engine.Key(path, given[0]), "not with match.raw_path: a raw path is forwarded as sent")
		return nil
	case f["replace_prefix"] != nil && m.PathKind() != "path_prefix":
		p.Add(f["replace_prefix"], engine.Key(path, "replace_prefix"), "needs the route's match.path_prefix (the prefix it replaces), got match.%s", m.PathKind())
		return nil
	}
	if bad != nil || !ok {
		return nil
	}
	return rw
}

// checkRewritePath checks strip_prefix and replace_prefix: a path in
// normal form (no empty, "." or ".." segment), so that what is forwarded
// is what the file says.
func checkRewritePath(s string) string {
	if problem := checkPathPrefix(s); problem != "" {
		return problem
	}
	segs := strings.Split(strings.TrimSuffix(s[1:], "/"), "/")
	for i, seg := range segs {
		if seg == "." || seg == ".." || (seg == "" && !(i == 0 && len(segs) == 1)) {
			return `must be a normal path: no "//", "." or ".." segment`
		}
	}
	return ""
}

func checkRewritePattern(s string) string {
	if problem := checkRegex(s); problem != "" {
		return problem
	}
	return ""
}

func checkSubstitution(s string) string {
	switch {
	case len(s) > maxRewriteLen:
		return "must be at most 1024 bytes, got " + strconv.Itoa(len(s))
	case strings.ContainsFunc(s, func(r rune) bool { return r < ' ' || r == 0x7f }):
		return "must not contain control characters"
	}
	return ""
}

// checkRewriteHost checks rewrite.host: a DNS name or IP address, with an
// optional port.
func checkRewriteHost(s string) string {
	host := s
	if h, port, err := net.SplitHostPort(s); err == nil {
		if n, perr := strconv.Atoi(port); perr != nil || n < 1 || n > 65535 {
			return "must have a port from 1 to 65535"
		}
		host = h
	}
	if net.ParseIP(strings.Trim(host, "[]")) != nil || endpoint.ValidDNSName(strings.ToLower(host)) {
		return ""
	}
	return `must be a host name such as "api.internal" or an IP address, optionally with ":port"`
}
