package openapi

import (
	"fmt"
	"strings"

	"github.com/levee-gw/levee/internal/dataquery"
)

// A path template's captures as OpenAPI path parameters: the route's
// template "/v1/products/{id:int}" is keyed "/v1/products/{id}", and each
// capture is a required `in: path` parameter, its schema the declared
// parameter's (a data route) or the capture's type (int64 for {name:int},
// any one segment otherwise).

// capture is one {name} or {name:int} segment of a template.
type capture struct {
	name  string
	isInt bool
}

// maxCaptures bounds the captures read from one template (the
// configuration allows 32 segments).
const maxCaptures = 64

// templateKey returns template t in OpenAPI's form ({name:int} written
// {name}) and its captures; ok is false when t is not a template levee
// accepts (then it is keyed with its braces escaped, as any other path).
func templateKey(t string) (key string, caps []capture, ok bool) {
	if !strings.HasPrefix(t, "/") || strings.ContainsAny(t, "?#") {
		return "", nil, false
	}
	segs := strings.Split(t[1:], "/")
	if len(segs) > maxCaptures {
		return "", nil, false
	}
	var b strings.Builder
	for _, seg := range segs {
		b.WriteByte('/')
		if !strings.ContainsAny(seg, "{}") {
			if seg == "" {
				return "", nil, false
			}
			b.WriteString(seg)
			continue
		}
		if len(seg) < 3 || seg[0] != '{' || seg[len(seg)-1] != '}' || strings.Count(seg, "{") != 1 || strings.Count(seg, "}") != 1 {
			return "", nil, false
		}
		name, typ, typed := strings.Cut(seg[1:len(seg)-1], ":")
		if !captureName(name) || typed && typ != "int" {
			return "", nil, false
		}
		for _, c := range caps {
			if c.name == name {
				return "", nil, false
			}
		}
		caps = append(caps, capture{name: name, isInt: typed})
		b.WriteString("{" + name + "}")
	}
	return b.String(), caps, len(caps) > 0
}

// captureName reports whether s is a capture name: 1 to 64 of a-z, 0-9
// and _, not starting with a digit (package route's rule).
func captureName(s string) bool {
	if s == "" || len(s) > 64 || '0' <= s[0] && s[0] <= '9' {
		return false
	}
	for i := 0; i < len(s); i++ {
		if c := s[i]; !('a' <= c && c <= 'z' || '0' <= c && c <= '9' || c == '_') {
			return false
		}
	}
	return true
}

// templateShape is key with each {name} written {}: two keys of one
// shape are the same path to OpenAPI, which a document may not hold twice.
func templateShape(key string) string {
	var b strings.Builder
	for i, seg := range strings.Split(key, "/") {
		if i > 0 {
			b.WriteByte('/')
		}
		if strings.HasPrefix(seg, "{") {
			seg = "{}"
		}
		b.WriteString(seg)
	}
	return b.String()
}

// pathParams are the path parameters of captures; d, when not nil, is
// the data route whose declared parameters type them.
func pathParams(captures []capture, d *Data) []any {
	out := make([]any, 0, len(captures))
	for _, c := range captures {
		desc := fmt.Sprintf("The path segment captured by {%s}", c.name)
		s := obj{{"type", "string"}, {"pattern", "^[^/]+$"}}
		if c.isInt {
			desc += ` (a decimal integer that fits an int64: "-" and 1 to 19 digits; any other segment matches no route, 404 no_route)`
			s = obj{{"type", "integer"}, {"format", "int64"}}
		}
		var p *dataquery.Param
		if d != nil {
			for i := range d.Params {
				if d.Params[i].Name == c.name {
					p = &d.Params[i]
				}
			}
		}
		if p != nil {
			qp := param(*p)
			s, _ = qp.get("schema").(obj)
			s = slicesDeleteDefault(s)
			desc += fmt.Sprintf(", bound as the query's parameter %s (%s). A value it refuses (not of its type, out of its bounds) is answered 400 invalid_parameter naming it; "+
				"the query string may not give it too.", c.name, strings.TrimSuffix(qp.get("description").(string), "."))
		} else {
			desc += "."
		}
		o := obj{{"name", c.name}, {"in", "path"}, {"required", true}, {"description", desc}, {"schema", s}}
		if p != nil && p.List {
			o.set("style", "simple")
			o.set("explode", false)
		}
		out = append(out, o)
	}
	return out
}

// slicesDeleteDefault is s without its "default" (a path parameter is
// always given).
func slicesDeleteDefault(s obj) obj {
	out := make(obj, 0, len(s))
	for _, m := range s {
		if m.key != "default" {
			out = append(out, m)
		}
	}
	return out
}
