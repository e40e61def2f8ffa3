package config

import (
	"net/textproto"
	"net/url"
	"strings"
	"time"

	"github.com/levee-gw/levee/internal/config/engine"
	"gopkg.in/yaml.v3"
)

// A route's `cors`: levee answers CORS preflights for the route itself and
// adds the CORS headers to every answer of the route (the upstream's and
// levee's own refusals alike).

// The field table of this file's block.
var corsBlock = engine.NewBlock(
	engine.Field{Name: "allow_origins", Kind: engine.KindList, MinItems: 1, MaxItems: maxCORSItems, Item: &engine.Field{Kind: engine.KindString},
		Doc: `origins allowed: "scheme://host[:port]" exactly, "https://*.example.com" (any subdomain), or "*"; required`},
	engine.Field{Name: "allow_methods", Kind: engine.KindList, MinItems: 1, MaxItems: maxCORSItems, Item: &engine.Field{Kind: engine.KindString, Pattern: tokenPattern},
		Doc: "methods a preflight may ask for; GET, HEAD and POST when omitted"},
	engine.Field{Name: "allow_headers", Kind: engine.KindList, MaxItems: maxCORSItems, Item: &engine.Field{Kind: engine.KindString, Pattern: tokenPattern},
		Doc: "request headers a preflight may ask for; none beyond the CORS-safelisted ones when omitted"},
	engine.Field{Name: "expose_headers", Kind: engine.KindList, MaxItems: maxCORSItems, Item: &engine.Field{Kind: engine.KindString, Pattern: tokenPattern},
		Doc: "answer headers a page may read beyond the CORS-safelisted ones"},
	engine.Field{Name: "max_age", Kind: engine.KindDuration, Def: DefaultCORSMaxAge, Doc: "how long a browser may cache a preflight's answer, 1s to 24h",
		Check: engine.CheckDurationWithin(time.Second, 24*time.Hour), Bind: engine.At(func(c *RouteCORS) *time.Duration { return &c.MaxAge })},
	engine.Field{Name: "allow_credentials", Kind: engine.KindBool, Doc: `let pages send cookies and credentials; never with "*"`, NotSecret: "a flag",
		Bind: engine.At(func(c *RouteCORS) *bool { return &c.AllowCredentials })},
)

// RouteCORS is a route's `cors`.
type RouteCORS struct {
	// AllowOrigins are the origins whose pages may call the route
	// (`allow_origins`, required): each "scheme://host[:port]" (stored
	// lower-case, the default port of the scheme dropped), matched
	// exactly; "scheme://*.domain[:port]", any origin of that scheme and
	// port whose host ends in ".domain"; or "*", any origin (never with
	// AllowCredentials).
	AllowOrigins []string
	// AllowMethods are the methods a preflight may ask for
	// (`allow_methods`, stored upper-case). Default DefaultCORSMethods.
	AllowMethods []string
	// AllowHeaders are the request headers a preflight may ask for
	// (`allow_headers`, canonical). nil: only the CORS-safelisted ones.
	AllowHeaders []string
	// ExposeHeaders are the answer headers a page may read
	// (`expose_headers`, canonical). nil: only the CORS-safelisted ones.
	ExposeHeaders []string
	// MaxAge is how long a browser may cache a preflight's answer
	// (`max_age`, 1s to 24h). Default DefaultCORSMaxAge.
	MaxAge time.Duration
	// AllowCredentials lets pages send cookies and HTTP credentials
	// (`allow_credentials`).
	AllowCredentials bool
}

// DefaultCORSMaxAge is RouteCORS.MaxAge when omitted.
const DefaultCORSMaxAge = 10 * time.Minute

// DefaultCORSMethods is RouteCORS.AllowMethods when omitted (a new slice
// each call).
func DefaultCORSMethods() []string { return []string{"GET", "HEAD", "POST"} }

// maxCORSItems bounds each list of a cors block.
const maxCORSItems = 64

// routeCORS reads a route's `cors`.
func (p *parser) routeCORS(path string, n *yaml.Node) *RouteCORS {
	c := engine.WithDefaults(corsBlock, &RouteCORS{})
	f, ok := p.Block(path, n, corsBlock)
	if !ok {
		return c
	}
	p.Bind(f, n, path, corsBlock, c)
	star := false
	if v := f["allow_origins"]; v != nil {
		c.AllowOrigins = p.tokenList(engine.Key(path, "allow_origins"), v, func(s string) (string, string) {
			o, problem := NormalizeOrigin(s)
			star = star || o == "*"
			return o, problem
		})
	} else {
		p.Add(n, engine.Key(path, "allow_origins"), "required")
	}
	if star && len(c.AllowOrigins) > 1 {
		p.Add(f["allow_origins"], engine.Key(path, "allow_origins"), "\"*\" allows every origin and stands alone")
	}
	if star && c.AllowCredentials {
		p.Add(f["allow_credentials"], engine.Key(path, "allow_credentials"), "must not be true with allow_origins \"*\": browsers refuse credentials with a wildcard origin; list the origins")
	}
	c.AllowMethods = DefaultCORSMethods()
	if v := f["allow_methods"]; v != nil {
		c.AllowMethods = p.tokenList(engine.Key(path, "allow_methods"), v, func(s string) (string, string) {
			if !validToken(s) {
				return "", "must be an HTTP method such as \"GET\""
			}
			return strings.ToUpper(s), ""
		})
	}
	for _, key := range []string{"allow_headers", "expose_headers"} {
		v := f[key]
		if v == nil {
			continue
		}
		list := p.tokenList(engine.Key(path, key), v, func(s string) (string, string) {
			if !validToken(s) || strings.IndexByte(s, '_') >= 0 {
				return "", "must be a header field name (a token without \"_\")"
			}
			return textproto.CanonicalMIMEHeaderKey(s), ""
		})
		if key == "allow_headers" {
			c.AllowHeaders = list
		} else {
			c.ExposeHeaders = list
		}
	}
	return c
}

// tokenList reads a list of distinct strings, each normalised (or
// refused) by norm.
func (p *parser) tokenList(path string, n *yaml.Node, norm func(string) (string, string)) []string {
	items, ok := p.Sequence(path, n)
	if !ok {
		return nil
	}
	if len(items) == 0 {
		p.Add(n, path, "must not be empty; omit it for the default")
		return nil
	}
	if len(items) > maxCORSItems {
		p.Add(n, path, "at most %d items, got %d", maxCORSItems, len(items))
		return nil
	}
	out, _ := distinctStrings(p.Parser, path, items, "", func(s string) (string, string) {
		v, problem := norm(s)
		if problem != "" {
			return "", problem + ", got " + engine.Quote(s)
		}
		return v, ""
	})
	return out
}

// NormalizeOrigin returns an allow_origins entry in the form browsers send
// in Origin (scheme://host[:port], lower-case, the scheme's default port
// dropped), or what is wrong with it. "*" stays "*"; a host whose first
// label is "*" is a subdomain wildcard.
func NormalizeOrigin(s string) (string, string) {
	if s == "*" {
		return s, ""
	}
	const want = "must be \"*\" or an origin such as \"https://app.example.com\" (scheme://host[:port], no path)"
	u, err := url.Parse(strings.ToLower(s))
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" || u.User != nil ||
		(u.Path != "" && u.Path != "/") || u.RawQuery != "" || u.Fragment != "" || u.Opaque != "" {
		return "", want
	}
	host, port := u.Hostname(), u.Port()
	if rest, wild := strings.CutPrefix(host, "*."); wild {
		if rest == "" || strings.Contains(rest, "*") || !strings.Contains(rest, ".") {
			return "", "must have its wildcard as the whole first label of a domain of at least two labels, as \"https://*.example.com\""
		}
	} else if strings.Contains(host, "*") {
		return "", "must have its wildcard as the whole first label, as \"https://*.example.com\""
	}
	if (u.Scheme == "http" && port == "80") || (u.Scheme == "https" && port == "443") {
		port = ""
	}
	out := u.Scheme + "://" + u.Host
	if port == "" {
		out = u.Scheme + "://" + strings.TrimSuffix(u.Host, ":"+u.Port())
	}
	return out, ""
}
