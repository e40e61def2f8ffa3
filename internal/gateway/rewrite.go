package gateway

import (
	"fmt"
	"regexp"

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
