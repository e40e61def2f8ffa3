package gateway

import (
	"fmt"
	"regexp"

	"github.com/levee-gw/levee/internal/admin"
	"github.com/levee-gw/levee/internal/config"
	"github.com/levee-gw/levee/internal/proxy"
)

// proxyRewrite turns a route's `rewrite` into the request path's; nil when
// the route has none. The pattern was checked by config; compiling it again
// here is the build's own backstop.
func proxyRewrite(rc *config.Route) (*proxy.Rewrite, error) {
	c := rc.Rewrite
	if c == nil {
		return nil, nil
	}
	rw := &proxy.Rewrite{StripPrefix: c.StripPrefix, Host: c.Host}
	if c.ReplacePrefix != "" {
		rw.ReplacePrefix = &proxy.PrefixReplace{From: rc.Match.PathPrefix, To: c.ReplacePrefix}
	}
	if c.PathRegex != nil {
		re, err := regexp.Compile(c.PathRegex.Pattern)
		if err != nil {
			return nil, fmt.Errorf("path_regex.pattern: %w", err)
		}
		rw.Regex, rw.Substitution = re, c.PathRegex.Substitution
	}
	return rw, nil
}

// matchView is a route's match as GET /api/v1/routes shows it.
func matchView(m *config.Match) admin.MatchView {
	return admin.MatchView{Host: m.Host, Path: m.Path, PathPrefix: m.Prefix(), PathTemplate: m.PathTemplate,
		PathRegex: m.PathRegex, Methods: m.Methods, Headers: condViews(m.Headers), Query: condViews(m.Query), RawPath: m.RawPath}
}

func condViews(cs []config.MatchCond) []admin.CondView {
	if len(cs) == 0 {
		return nil
	}
	out := make([]admin.CondView, len(cs))
	for i, c := range cs {
		v := admin.CondView{Name: c.Name}
		switch {
		case c.Present:
			v.Test = "present"
		case c.Absent:
			v.Test = "absent"
		case c.Prefix != "":
			v.Test, v.Value = "prefix", c.Prefix
		case c.Regex != "":
			v.Test, v.Value = "regex", c.Regex
		default:
			v.Test, v.Value = "exact", c.Exact
		}
		out[i] = v
	}
	return out
}

// rewriteView is a route's rewrite as GET /api/v1/routes shows it; nil
// for none.
func rewriteView(rw *config.Rewrite) *admin.RewriteView {
	if rw == nil {
		return nil
	}
	v := &admin.RewriteView{StripPrefix: rw.StripPrefix, ReplacePrefix: rw.ReplacePrefix, Host: rw.Host}
	if rw.PathRegex != nil {
		v.PathRegex, v.Substitution = rw.PathRegex.Pattern, rw.PathRegex.Substitution
	}
	return v
}
