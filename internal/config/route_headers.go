package config

import (
	"net/textproto"
	"strings"

	"github.com/levee-gw/levee/internal/config/engine"
	"gopkg.in/yaml.v3"
)

// A route's `headers`: the header fields levee sets, adds or removes on
// what it forwards (request) and on the upstream's answer (response).
// Values are templates over a small fixed set of variables (HeaderVars),
// checked here; internal/proxy expands them per request.

// The field tables of this file's blocks.
var (
	headerChangesBlock = engine.NewBlock(
		engine.Field{Name: "set", Kind: engine.KindMap, Pattern: tokenPattern, MaxItems: maxHeaderChanges, Item: &engine.Field{Kind: engine.KindString},
			Doc: "fields set, replacing any value: name -> value (variables ${client_ip}, ${request_id}, ${route}, ${app}, ${host}, ${tls_client_subject})"},
		engine.Field{Name: "add", Kind: engine.KindMap, Pattern: tokenPattern, MaxItems: maxHeaderChanges, Item: &engine.Field{Kind: engine.KindString},
			Doc: "fields added beside any value already there: name -> value (variables as in set)"},
		engine.Field{Name: "remove", Kind: engine.KindList, MaxItems: maxHeaderChanges, Item: &engine.Field{Kind: engine.KindString, Pattern: tokenPattern},
			Doc: "field names removed"},
	)
	routeHeadersBlock = engine.NewBlock(
		engine.Field{Name: "request", Kind: engine.KindBlock, Sub: headerChangesBlock, Doc: "changes to the request forwarded (after auth; never what auth read)"},
		engine.Field{Name: "response", Kind: engine.KindBlock, Sub: headerChangesBlock, Doc: "changes to the upstream's answer and to a redirect or respond answer (never to levee's refusals)"},
	)
)

// RouteHeaders is a route's `headers`.
type RouteHeaders struct {
	// Request changes the request levee forwards (`request`), after
	// authentication: auth reads the request as the client sent it. nil:
	// none.
	Request *HeaderChanges
	// Response changes the upstream's answer, and a redirect's or a
	// respond's (`response`); levee's own refusals are never changed.
	// nil: none.
	Response *HeaderChanges
}

// HeaderChanges is one direction's changes, applied in the order remove,
// set, add.
type HeaderChanges struct {
	// Set replaces each field's values with one value (`set`, canonical
	// name -> value as written: a template whose variables, ${name} of
	// HeaderVars, are expanded per request).
	Set map[string]string
	// Add appends a value to each field (`add`, name -> value, as Set).
	Add map[string]string
	// Remove deletes each field (`remove`, a list of names, canonical).
	Remove []string
}

// maxHeaderChanges bounds set, add and remove each (and maxHeaderValue a
// value's length): a route's changes cost work on every request.
const (
	maxHeaderChanges = 32
	maxHeaderValue   = 4096
)

// HeaderVars are the variables a header value may use: the client's
// address, the request id levee answers with, the route's name, the
// calling app's id ("" on a route without auth), the request's host and
// the subject of the client's TLS certificate ("" without one).
var HeaderVars = []string{"client_ip", "request_id", "route", "app", "host", "tls_client_subject"}

// forbiddenHeaderChange are the fields no `headers` block may change:
// framing and connection, routing, and what levee sets or vouches for.
// Canonical names; the prefixes below add families.
var forbiddenHeaderChange = map[string]bool{
	"Host": true, "Content-Length": true, "Transfer-Encoding": true, "Connection": true,
	"Upgrade": true, "Te": true, "Trailer": true, "Keep-Alive": true, "Http2-Settings": true,
	"X-Request-Id": true, "Forwarded": true, "X-Real-Ip": true,
	// credentials: the file is shown by GET /api/v1/config, so it carries
	// none; remove is allowed (see checkHeaderName)
	"Authorization": true, "Cookie": true, "X-Api-Key": true,
}

var forbiddenHeaderPrefixes = []string{"Proxy-", "Levee-", "X-Forwarded-"}

// removableCredentials may be removed though they may not be set.
var removableCredentials = map[string]bool{"Authorization": true, "Cookie": true, "X-Api-Key": true}

// ForbiddenHeaderChange reports why the canonical name c may not be
// changed in direction dir ("request" or "response") by op ("set", "add"
// or "remove"), or "" when it may.
func ForbiddenHeaderChange(c, dir, op string) string {
	if forbiddenHeaderChange[c] {
		if op == "remove" && removableCredentials[c] {
			return ""
		}
		if removableCredentials[c] {
			return "carries a credential, which the file may not hold (remove is allowed)"
		}
		return "frames, routes or identifies the request and is levee's to write"
	}
	for _, p := range forbiddenHeaderPrefixes {
		if strings.HasPrefix(c, p) {
			return "frames, routes or identifies the request and is levee's to write"
		}
	}
	if dir == "response" && strings.HasPrefix(c, "Access-Control-") {
		return "is written by the route's cors block"
	}
	return ""
}

// routeHeaders reads a route's `headers`.
func (p *parser) routeHeaders(path string, n *yaml.Node) *RouteHeaders {
	h := &RouteHeaders{}
	f, ok := p.Block(path, n, routeHeadersBlock)
	if !ok {
		return h
	}
	if v := f["request"]; v != nil {
		h.Request = p.headerChanges(engine.Key(path, "request"), "request", v)
	}
	if v := f["response"]; v != nil {
		h.Response = p.headerChanges(engine.Key(path, "response"), "response", v)
	}
	return h
}

// headerChanges reads one direction's set, add and remove. A name both
// set and removed, or set and added, is an error: the result would
// depend on an order the file does not show.
func (p *parser) headerChanges(path, dir string, n *yaml.Node) *HeaderChanges {
	c := &HeaderChanges{}
	f, ok := p.Block(path, n, headerChangesBlock)
	if !ok {
		return c
	}
	where := map[string]string{} // canonical name -> the op that named it first
	for _, op := range []string{"set", "add"} {
		v := f[op]
		if v == nil {
			continue
		}
		op, opPath := op, engine.Key(path, op)
		if v.Kind != yaml.MappingNode {
			p.Add(v, opPath, "must be a mapping of field names to values, got %s", engine.Describe(v))
			continue
		}
		pairs := p.Pairs(opPath, v)
		if len(pairs) > maxHeaderChanges {
			p.Add(v, opPath, "at most %d fields, got %d", maxHeaderChanges, len(pairs))
			continue
		}
		for _, kv := range pairs {
			kp := engine.Key(opPath, kv.Key)
			name, okName := p.headerName(kv.K, kp, kv.Key, dir, op, where)
			s, okVal := p.Str(kp, kv.V)
			if !okName || !okVal {
				continue
			}
			if problem := checkHeaderValue(s); problem != "" {
				p.Add(kv.V, kp, "%s, got %s", problem, engine.Quote(s))
				continue
			}
			dst := &c.Set
			if op == "add" {
				dst = &c.Add
			}
			if *dst == nil {
				*dst = make(map[string]string, len(pairs))
			}
			(*dst)[name] = s
		}
	}
	if v := f["remove"]; v != nil {
		rp := engine.Key(path, "remove")
		items, ok := p.Sequence(rp, v)
		if ok && len(items) > maxHeaderChanges {
			p.Add(v, rp, "at most %d fields, got %d", maxHeaderChanges, len(items))
			ok = false
		}
		for i, item := range items {
			if !ok {
				break
			}
			ip := engine.Index(rp, i)
			s, sok := p.Str(ip, item)
			if !sok {
				continue
			}
			if name, nok := p.headerName(item, ip, s, dir, "remove", where); nok {
				c.Remove = append(c.Remove, name)
			}
		}
	}
	return c
}

// headerName checks one field name of op and returns it canonical.
func (p *parser) headerName(n *yaml.Node, path, s, dir, op string, where map[string]string) (string, bool) {
	if !validToken(s) || strings.IndexByte(s, '_') >= 0 {
		p.Add(n, path, "must be a header field name (a token without \"_\"), got %s", engine.Quote(s))
		return "", false
	}
	c := textproto.CanonicalMIMEHeaderKey(s)
	if why := ForbiddenHeaderChange(c, dir, op); why != "" {
		p.Add(n, path, "%s cannot be changed: it %s", engine.Quote(c), why)
		return "", false
	}
	if first, dup := where[c]; dup {
		if first == op {
			p.Add(n, path, "duplicate field %s in %s", engine.Quote(c), op)
		} else {
			p.Add(n, path, "%s is also in %s: a field is set, added or removed, once", engine.Quote(c), first)
		}
		return "", false
	}
	where[c] = op
	return c, true
}

// checkHeaderValue returns what is wrong with a header value template, or
// "": at most maxHeaderValue bytes of field-value characters (RFC 9110
// section 5.5: visible ASCII, obs-text, space and tab; never CR, LF or
// NUL), no leading or trailing white space, and each "${" opening a known
// variable closed by "}".
func checkHeaderValue(s string) string {
	if len(s) > maxHeaderValue {
		return "must be at most 4096 bytes"
	}
	for i := 0; i < len(s); i++ {
		if c := s[i]; (c < ' ' && c != '\t') || c == 0x7f {
			return "must hold only field-value characters (no CR, LF, NUL or other control)"
		}
	}
	if strings.TrimSpace(s) != s {
		return "must not begin or end with white space"
	}
	_, problem := HeaderTemplate(s)
	return problem
}

// HeaderTemplate splits a header value template over HeaderVars
// (splitTemplate): "a${route}b" is ["a", "route", "b"].
func HeaderTemplate(s string) (parts []string, problem string) {
	return splitTemplate(s, HeaderVars, strings.Join(HeaderVars, ", "))
}
