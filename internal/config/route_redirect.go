package config

import (
	"net/url"
	"strings"

	"github.com/levee-gw/levee/internal/config/engine"
	"gopkg.in/yaml.v3"
)

// A route's `redirect` and `respond`: answers levee gives itself, on a
// route with neither upstream nor data (still behind the route's auth and
// limits).

// The field tables of this file's blocks.
var (
	redirectBlock = engine.NewBlock(
		engine.Field{Name: "to", Kind: engine.KindString, Doc: `where to: an absolute http(s) URL or a path starting with "/", with ${path} and ${host} expanded; the request's own when omitted (with https)`,
			Bind: engine.At(func(r *RouteRedirect) *string { return &r.To })},
		engine.Field{Name: "status", Kind: engine.KindInt, Lo: 301, Hi: 308, Def: DefaultRedirectStatus, Doc: "301, 302, 303, 307 or 308",
			Check: checkRedirectStatus, Bind: engine.At(func(r *RouteRedirect) *int { return &r.Status })},
		engine.Field{Name: "https", Kind: engine.KindBool, Doc: "redirect to https:// on the request's host (without its port)",
			Bind: engine.At(func(r *RouteRedirect) *bool { return &r.HTTPS })},
		engine.Field{Name: "strip_query", Kind: engine.KindBool, Doc: "drop the request's query; by default it is kept when to has none",
			Bind: engine.At(func(r *RouteRedirect) *bool { return &r.StripQuery })},
	)
	respondBlock = engine.NewBlock(
		engine.Field{Name: "status", Kind: engine.KindInt, Lo: 200, Hi: 599, Def: DefaultRespondStatus, Doc: "the answer's status, 200 to 599",
			Bind: engine.At(func(r *RouteRespond) *int { return &r.Status })},
		engine.Field{Name: "body", Kind: engine.KindString, Doc: "the answer's body, at most 64 KiB; empty when omitted",
			Bind: engine.At(func(r *RouteRespond) *string { return &r.Body })},
		engine.Field{Name: "content_type", Kind: engine.KindString, Def: DefaultRespondContentType, Doc: "the answer's Content-Type",
			NonEmpty: true, Check: engine.ProblemOf(checkContentType), Bind: engine.At(func(r *RouteRespond) *string { return &r.ContentType })},
	)
)

// RouteRedirect is a route's `redirect`: every request it takes is
// answered with a redirect, built from the route's configuration and
// only the request's validated path, host and query.
type RouteRedirect struct {
	// To is where the redirect points (`to`): an absolute http or https
	// URL, or a path starting with "/" (not "//"), in which ${path} (the
	// request's normalised path, escaped) and ${host} (the request's
	// host, as routed) are expanded. Empty, the default, is the request's
	// own path (then https must be set).
	To string
	// Status is the redirect's status (`status`): 301 (the default,
	// DefaultRedirectStatus), 302, 303, 307 or 308.
	Status int
	// HTTPS points the redirect at https:// on the request's host, without
	// its port (`https`). With a path To, the Location is absolute.
	HTTPS bool
	// StripQuery drops the request's query (`strip_query`). Otherwise the
	// query is appended when To has none.
	StripQuery bool
}

// RouteRespond is a route's `respond`: every request it takes gets this
// fixed answer.
type RouteRespond struct {
	// Status (`status`, 200 to 599; default DefaultRespondStatus, 200).
	// 204 and 304 take no body.
	Status int
	// Body (`body`, at most MaxRespondBody bytes; default empty).
	Body string
	// ContentType (`content_type`, default DefaultRespondContentType).
	ContentType string
}

// Defaults of this file's fields.
const (
	// DefaultRedirectStatus is RouteRedirect.Status when omitted.
	DefaultRedirectStatus = 301
	// DefaultRespondStatus is RouteRespond.Status when omitted.
	DefaultRespondStatus = 200
	// DefaultRespondContentType is RouteRespond.ContentType when omitted.
	DefaultRespondContentType = "text/plain; charset=utf-8"
)

// MaxRespondBody bounds respond.body: it is held in memory for the
// configuration's life.
const MaxRespondBody = 64 << 10

// RedirectVars are the variables redirect.to may use.
var RedirectVars = []string{"path", "host"}

// checkRedirectStatus accepts the redirect statuses.
func checkRedirectStatus(p *engine.Parser, path string, n *yaml.Node, ptr any) bool {
	switch s := *ptr.(*int); s {
	case 301, 302, 303, 307, 308:
		return true
	default:
		p.Add(n, path, "must be one of 301, 302, 303, 307 or 308, got %d", s)
		return false
	}
}

// checkContentType accepts a media type without control characters.
func checkContentType(s string) string {
	if strings.TrimSpace(s) != s || !strings.Contains(s, "/") {
		return "must be a media type such as \"text/plain\""
	}
	for i := 0; i < len(s); i++ {
		if s[i] < ' ' || s[i] == 0x7f {
			return "must hold no control characters"
		}
	}
	return ""
}

// redirect reads a route's `redirect`.
func (p *parser) redirect(path string, n *yaml.Node) *RouteRedirect {
	r := engine.WithDefaults(redirectBlock, &RouteRedirect{})
	f, ok := p.Block(path, n, redirectBlock)
	if !ok {
		return r
	}
	bad := p.Bind(f, n, path, redirectBlock, r)
	if bad["to"] {
		return r
	}
	tp := engine.Key(path, "to")
	switch problem := checkRedirectTo(r.To, r.HTTPS); {
	case problem != "":
		p.Add(f["to"], tp, "%s, got %s", problem, engine.Quote(r.To))
	case r.To == "" && !r.HTTPS:
		p.Add(n, tp, "required unless https is true")
	}
	return r
}

// checkRedirectTo returns what is wrong with redirect.to, or "".
func checkRedirectTo(to string, https bool) string {
	if to == "" {
		return ""
	}
	for i := 0; i < len(to); i++ {
		if c := to[i]; c <= ' ' || c == 0x7f || c >= 0x80 {
			return "must hold no white space, control or non-ASCII characters (escape them)"
		}
	}
	if len(to) > maxHeaderValue {
		return "must be at most 4096 bytes"
	}
	parts, problem := redirectTemplate(to)
	if problem != "" {
		return problem
	}
	if strings.HasPrefix(to, "/") {
		if strings.HasPrefix(to, "//") || strings.HasPrefix(to, "/\\") {
			return "must be an absolute URL or a path starting with a single \"/\""
		}
		return ""
	}
	// An absolute URL: its scheme and host are fixed (never a variable),
	// so a request cannot send the redirect to another site.
	literal := parts[0]
	u, err := url.Parse(literal)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" || u.User != nil {
		return "must be an absolute http(s) URL with a fixed host (variables only after it), or a path starting with \"/\""
	}
	if len(parts) > 1 && parts[1] != "path" && !strings.Contains(strings.TrimPrefix(literal, u.Scheme+"://"), "/") {
		// ${path} always starts with "/"; anything else there would
		// extend the host.
		return "must be an absolute http(s) URL with a fixed host (variables only after it), or a path starting with \"/\""
	}
	if https && u.Scheme == "http" {
		return "is an http:// URL while https is true"
	}
	return ""
}

// redirectTemplate splits redirect.to like HeaderTemplate, over
// RedirectVars.
func redirectTemplate(s string) (parts []string, problem string) {
	return splitTemplate(s, RedirectVars, "${path}, ${host}")
}

// respond reads a route's `respond`.
func (p *parser) respond(path string, n *yaml.Node) *RouteRespond {
	r := engine.WithDefaults(respondBlock, &RouteRespond{})
	f, ok := p.Block(path, n, respondBlock)
	if !ok {
		return r
	}
	bad := p.Bind(f, n, path, respondBlock, r)
	if !bad["body"] && len(r.Body) > MaxRespondBody {
		p.Add(f["body"], engine.Key(path, "body"), "must be at most 64 KiB, got %d bytes", len(r.Body))
	}
	if !bad["status"] && !bad["body"] && r.Body != "" && (r.Status == 204 || r.Status == 304) {
		p.Add(f["body"], engine.Key(path, "body"), "must be empty with status %d", r.Status)
	}
	return r
}
