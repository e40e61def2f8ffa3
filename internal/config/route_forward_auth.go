package config

import (
	"net/textproto"
	"net/url"
	"strings"
	"time"

	"github.com/levee-gw/levee/internal/config/engine"
	"gopkg.in/yaml.v3"
)

// A route's `forward_auth`, with `auth: forward`: levee asks an
// authorization service about each request (package fwdauth); a 2xx lets
// it through, anything else is the client's answer.

const (
	DefaultForwardAuthTimeout     = 2 * time.Second
	MaxForwardAuthTimeout         = 30 * time.Second
	DefaultForwardAuthMaxInFlight = 64
	MaxForwardAuthMaxInFlight     = 10000
	MaxForwardAuthCacheTTL        = time.Hour
	// ForwardAuthAllow and ForwardAuthDeny are on_error's values.
	ForwardAuthAllow = "allow"
	ForwardAuthDeny  = "deny"
	// maxForwardAuthHeaders bounds copy_request_headers and
	// copy_response_headers.
	maxForwardAuthHeaders = 32
)

// DefaultForwardAuthRequestHeaders is copy_request_headers when omitted
// (a new slice each call): the usual credentials.
func DefaultForwardAuthRequestHeaders() []string { return []string{"Authorization", "Cookie"} }

var forwardAuthBlock = engine.NewBlock(
	engine.Field{Name: "url", Kind: engine.KindString, Required: true, Doc: "the authorization service's http:// or https:// URL, asked with a GET for each request",
		Check: checkForwardAuthURL, Bind: engine.At(func(c *RouteForwardAuth) *string { return &c.URL })},
	engine.Field{Name: "timeout", Kind: engine.KindDuration, Def: DefaultForwardAuthTimeout, Doc: "longest wait for the service's whole answer; 10ms to 30s",
		Check: engine.CheckDurationWithin(10*time.Millisecond, MaxForwardAuthTimeout), Bind: engine.At(func(c *RouteForwardAuth) *time.Duration { return &c.Timeout })},
	engine.Field{Name: "copy_request_headers", Kind: engine.KindList, MaxItems: maxForwardAuthHeaders, Item: &engine.Field{Kind: engine.KindString, Pattern: tokenPattern},
		Doc: "request headers sent to the service (the credentials; the cache key); [Authorization, Cookie] when omitted"},
	engine.Field{Name: "copy_response_headers", Kind: engine.KindList, MaxItems: maxForwardAuthHeaders, Item: &engine.Field{Kind: engine.KindString, Pattern: tokenPattern},
		Doc: "headers of the service's 2xx answer added to the request sent upstream; none when omitted"},
	engine.Field{Name: "cache_ttl", Kind: engine.KindDuration, Doc: "how long a 2xx, 401 or 403 answer is reused for the same credentials; no cache when omitted; up to 1h",
		Check: engine.CheckDurationWithin(time.Millisecond, MaxForwardAuthCacheTTL), Bind: engine.At(func(c *RouteForwardAuth) *time.Duration { return &c.CacheTTL })},
	engine.Field{Name: "on_error", Kind: engine.KindEnum, Enum: []string{ForwardAuthDeny, ForwardAuthAllow}, Def: ForwardAuthDeny,
		Doc:  "when the service fails (timeout, down, 5xx is not a failure): deny answers 503 auth_unavailable, allow lets the request through",
		Bind: engine.At(func(c *RouteForwardAuth) *string { return &c.OnError })},
	engine.Field{Name: "max_in_flight", Kind: engine.KindInt, Lo: 1, Hi: MaxForwardAuthMaxInFlight, Def: int64(DefaultForwardAuthMaxInFlight),
		Doc:  "calls to the service at once from this route; beyond, 503 auth_busy",
		Bind: engine.At(func(c *RouteForwardAuth) *int64 { return &c.MaxInFlight })},
)

// RouteForwardAuth is a route's `forward_auth`.
type RouteForwardAuth struct {
	// URL is the authorization service (`url`, required, http or https).
	URL string
	// Timeout bounds each call (`timeout`, 10ms to 30s).
	Timeout time.Duration
	// CopyRequestHeaders are sent to the service and key the cache
	// (`copy_request_headers`, canonical).
	CopyRequestHeaders []string
	// CopyResponseHeaders of a 2xx are added upstream
	// (`copy_response_headers`, canonical).
	CopyResponseHeaders []string
	// CacheTTL is how long an answer is reused; 0: no cache.
	CacheTTL time.Duration
	// OnError is ForwardAuthDeny or ForwardAuthAllow.
	OnError string
	// MaxInFlight bounds the calls at once.
	MaxInFlight int64
}

var checkForwardAuthURL = engine.ProblemOf(func(s string) string {
	u, err := url.Parse(s)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return "must be an http:// or https:// URL"
	}
	if u.User != nil {
		return "must not carry user:password (send credentials with copy_request_headers)"
	}
	if u.Fragment != "" {
		return "must not have a #fragment"
	}
	return ""
})

// routeForwardAuth reads a route's `forward_auth` and checks it goes with
// `auth: forward` (authBad: the auth field was refused already).
func (p *parser) routeForwardAuth(r *Route, path string, n *yaml.Node, f map[string]*yaml.Node, authBad bool) {
	v := f["forward_auth"]
	if v == nil {
		if !authBad && r.Auth == AuthForward {
			p.Add(n, engine.Key(path, "forward_auth"), "required with auth: forward")
		}
		return
	}
	if !authBad && r.Auth != AuthForward {
		p.Add(v, engine.Key(path, "forward_auth"), "only allowed with auth: forward, got auth %s", engine.Quote(r.Auth))
		return
	}
	fp := engine.Key(path, "forward_auth")
	c := engine.WithDefaults(forwardAuthBlock, &RouteForwardAuth{})
	c.CopyRequestHeaders = DefaultForwardAuthRequestHeaders()
	fb, ok := p.Block(fp, v, forwardAuthBlock)
	if !ok {
		return
	}
	p.Bind(fb, v, fp, forwardAuthBlock, c)
	header := func(s string) (string, string) {
		if !validToken(s) || strings.IndexByte(s, '_') >= 0 {
			return "", "must be a header field name (a token without \"_\")"
		}
		return textproto.CanonicalMIMEHeaderKey(s), ""
	}
	if h := fb["copy_request_headers"]; h != nil {
		c.CopyRequestHeaders = p.tokenList(engine.Key(fp, "copy_request_headers"), h, header)
	}
	if h := fb["copy_response_headers"]; h != nil {
		c.CopyResponseHeaders = p.tokenList(engine.Key(fp, "copy_response_headers"), h, func(s string) (string, string) {
			k, problem := header(s)
			if problem == "" && isHopByHop(k) {
				return "", "must not be a hop-by-hop or framing header"
			}
			return k, problem
		})
	}
	r.ForwardAuth = c
}

// isHopByHop reports whether canonical header k describes one connection
// or the message's framing (never copied from the service's answer).
func isHopByHop(k string) bool {
	switch k {
	case "Connection", "Keep-Alive", "Proxy-Connection", "Te", "Trailer", "Transfer-Encoding", "Upgrade", "Content-Length", "Host":
		return true
	}
	return false
}
