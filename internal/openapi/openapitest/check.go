// Package openapitest is a test oracle for OpenAPI documents: Check holds
// a document to the structural rules of OpenAPI 3.1.0. Tests only: no
// package of levee's may import it (the architecture table lists it in
// no row's imports, and archtest's TestOraclesOnlyInTests says so).
package openapitest

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"regexp"
	"sort"
	"strings"
)

// Check verifies doc against the rules of OpenAPI 3.1.0 that hold without
// its JSON Schema: the fixed fields of the objects levee writes (document,
// info, path item, operation, parameter, response, header, media type,
// security scheme, tag; anything else must be an x- extension), path keys,
// response codes, operationIds unique, parameters unique per (name, in)
// with exactly one of schema and content, every security requirement
// naming a declared scheme, component names, and every $ref resolving
// inside the document. It returns every problem found, joined.
func Check(doc []byte) error {
	dec := json.NewDecoder(bytes.NewReader(doc))
	dec.UseNumber()
	var root map[string]any
	if err := dec.Decode(&root); err != nil {
		return fmt.Errorf("not a JSON object: %w", err)
	}
	if dec.More() {
		return errors.New("trailing data after the document")
	}
	c := checker{root: root, ids: map[string]string{}}
	c.document()
	return errors.Join(c.errs...)
}

type checker struct {
	root map[string]any
	ids  map[string]string // operationId → where
	errs []error
}

func (c *checker) fail(where, format string, args ...any) {
	c.errs = append(c.errs, fmt.Errorf("%s: %s", where, fmt.Sprintf(format, args...)))
}

// fields checks that o has only the fixed fields given (and x- ones) and
// every required one.
func (c *checker) fields(where string, o map[string]any, fixed []string, required ...string) {
	for _, k := range sortedKeys(o) {
		if !strings.HasPrefix(k, "x-") && !contains(fixed, k) {
			c.fail(where, "field %q is not an OpenAPI 3.1 field here", k)
		}
	}
	for _, k := range required {
		if _, ok := o[k]; !ok {
			c.fail(where, "required field %q missing", k)
		}
	}
}

func (c *checker) object(where string, v any) map[string]any {
	o, ok := v.(map[string]any)
	if !ok {
		c.fail(where, "want an object, got %T", v)
	}
	return o
}

func (c *checker) str(where string, v any) string {
	s, ok := v.(string)
	if !ok || s == "" {
		c.fail(where, "want a non-empty string, got %v", v)
	}
	return s
}

func (c *checker) document() {
	c.fields("document", c.root, []string{"openapi", "info", "jsonSchemaDialect", "servers", "paths", "webhooks", "components", "security", "tags", "externalDocs"}, "openapi", "info")
	if v, _ := c.root["openapi"].(string); v != "3.1.0" {
		c.fail("openapi", "want 3.1.0, got %v", c.root["openapi"])
	}
	info := c.object("info", c.root["info"])
	c.fields("info", info, []string{"title", "summary", "description", "termsOfService", "contact", "license", "version"}, "title", "version")
	c.str("info.title", info["title"])
	c.str("info.version", info["version"])
	if _, ok := c.root["paths"]; !ok {
		if _, ok := c.root["components"]; !ok {
			c.fail("document", "needs paths, components or webhooks")
		}
	}
	if tags, ok := c.root["tags"].([]any); ok {
		seen := map[string]bool{}
		for i, t := range tags {
			where := fmt.Sprintf("tags[%d]", i)
			to := c.object(where, t)
			c.fields(where, to, []string{"name", "description", "externalDocs"}, "name")
			name := c.str(where+".name", to["name"])
			if seen[name] {
				c.fail(where, "tag %q twice", name)
			}
			seen[name] = true
		}
	}
	comps := map[string]any{}
	if v, ok := c.root["components"]; ok {
		comps = c.object("components", v)
		c.fields("components", comps, []string{"schemas", "responses", "parameters", "examples", "requestBodies", "headers", "securitySchemes", "links", "callbacks", "pathItems"})
		for _, kind := range sortedKeys(comps) {
			m, _ := comps[kind].(map[string]any)
			for _, name := range sortedKeys(m) {
				if !componentName(name) {
					c.fail("components."+kind, "name %q does not match ^[a-zA-Z0-9.\\-_]+$", name)
				}
			}
		}
	}
	schemes, _ := comps["securitySchemes"].(map[string]any)
	for _, name := range sortedKeys(schemes) {
		c.scheme("components.securitySchemes."+name, c.object(name, schemes[name]))
	}
	paths, _ := c.root["paths"].(map[string]any)
	shapes := map[string]string{}
	for _, p := range sortedKeys(paths) {
		if !strings.HasPrefix(p, "/") {
			c.fail("paths", "key %q does not start with /", p)
		}
		names, ok := templateNames(p)
		if !ok {
			c.fail("paths", "key %q: a brace that is not a whole {name} segment, or a name twice", p)
		}
		if len(names) > 0 {
			shape := templateShape(p)
			if prev, dup := shapes[shape]; dup {
				c.fail("paths", "keys %q and %q are the same templated path", prev, p)
			}
			shapes[shape] = p
		}
		item := c.object(p, paths[p])
		c.pathItem("paths."+p, item, schemes)
		c.pathParams("paths."+p, item, names)
	}
	c.refs("#", c.root)
}

var operationKeys = []string{"get", "put", "post", "delete", "options", "head", "patch", "trace"}

func (c *checker) pathItem(where string, item map[string]any, schemes map[string]any) {
	c.fields(where, item, append([]string{"$ref", "summary", "description", "servers", "parameters"}, operationKeys...))
	for _, m := range operationKeys {
		if v, ok := item[m]; ok {
			c.operation(where+"."+m, c.object(where+"."+m, v), schemes)
		}
	}
}

func (c *checker) operation(where string, op map[string]any, schemes map[string]any) {
	c.fields(where, op, []string{"tags", "summary", "description", "externalDocs", "operationId", "parameters", "requestBody", "responses", "callbacks", "deprecated", "security", "servers"})
	if id, ok := op["operationId"]; ok {
		s := c.str(where+".operationId", id)
		if prev, dup := c.ids[s]; dup {
			c.fail(where, "operationId %q already used by %s", s, prev)
		}
		c.ids[s] = where
	}
	resp, ok := op["responses"].(map[string]any)
	if !ok || len(resp) == 0 {
		c.fail(where, "responses: want a non-empty object")
	}
	for _, code := range sortedKeys(resp) {
		if !responseCode(code) {
			c.fail(where+".responses", "key %q is not default, a status code or nXX", code)
		}
		c.response(where+".responses."+code, c.object(code, resp[code]))
	}
	params, _ := op["parameters"].([]any)
	seen := map[string]bool{}
	for i, p := range params {
		pw := fmt.Sprintf("%s.parameters[%d]", where, i)
		po := c.object(pw, p)
		if _, isRef := po["$ref"]; isRef {
			continue
		}
		c.fields(pw, po, []string{"name", "in", "description", "required", "deprecated", "allowEmptyValue", "style", "explode", "allowReserved", "schema", "example", "examples", "content"}, "name", "in")
		name, in := c.str(pw+".name", po["name"]), c.str(pw+".in", po["in"])
		if seen[name+"\x00"+in] {
			c.fail(pw, "parameter %q in %s twice", name, in)
		}
		seen[name+"\x00"+in] = true
		styles := map[string][]string{"query": {"form", "spaceDelimited", "pipeDelimited", "deepObject"}, "header": {"simple"},
			"path": {"matrix", "label", "simple"}, "cookie": {"form"}}
		allowed, ok := styles[in]
		if !ok {
			c.fail(pw, "in %q is not query, header, path or cookie", in)
		}
		if st, ok := po["style"].(string); ok && !contains(allowed, st) {
			c.fail(pw, "style %q not allowed in %s", st, in)
		}
		if req, _ := po["required"].(bool); in == "path" && !req {
			c.fail(pw, "a path parameter must be required")
		}
		_, hasSchema := po["schema"]
		_, hasContent := po["content"]
		if hasSchema == hasContent {
			c.fail(pw, "exactly one of schema and content")
		}
		if s, ok := po["schema"].(map[string]any); ok {
			c.schema(pw+".schema", s)
		}
	}
	sec, _ := op["security"].([]any)
	for i, req := range sec {
		rw := fmt.Sprintf("%s.security[%d]", where, i)
		for _, name := range sortedKeys(c.object(rw, req)) {
			if _, ok := schemes[name]; !ok {
				c.fail(rw, "security scheme %q is not declared in components.securitySchemes", name)
			}
		}
	}
}

func responseCode(code string) bool {
	if code == "default" {
		return true
	}
	if len(code) != 3 || code[0] < '1' || code[0] > '5' {
		return false
	}
	if code[1:] == "XX" {
		return true
	}
	return '0' <= code[1] && code[1] <= '9' && '0' <= code[2] && code[2] <= '9'
}

func (c *checker) response(where string, r map[string]any) {
	if _, isRef := r["$ref"]; isRef {
		return
	}
	c.fields(where, r, []string{"description", "headers", "content", "links"}, "description")
	c.str(where+".description", r["description"])
	headers, _ := r["headers"].(map[string]any)
	for _, h := range sortedKeys(headers) {
		hw := where + ".headers." + h
		if strings.EqualFold(h, "Content-Type") {
			c.fail(hw, "a Content-Type header definition is ignored by OpenAPI")
		}
		ho := c.object(hw, headers[h])
		c.fields(hw, ho, []string{"description", "required", "deprecated", "style", "explode", "schema", "example", "examples", "content"})
		_, hasSchema := ho["schema"]
		_, hasContent := ho["content"]
		if hasSchema == hasContent {
			c.fail(hw, "exactly one of schema and content")
		}
		if s, ok := ho["schema"].(map[string]any); ok {
			c.schema(hw+".schema", s)
		}
	}
	content, _ := r["content"].(map[string]any)
	for _, mt := range sortedKeys(content) {
		mw := where + ".content." + mt
		if !strings.Contains(mt, "/") {
			c.fail(mw, "not a media type")
		}
		mo := c.object(mw, content[mt])
		c.fields(mw, mo, []string{"schema", "example", "examples", "encoding"})
		if s, ok := mo["schema"].(map[string]any); ok {
			c.schema(mw+".schema", s)
		}
	}
}

// schema checks the JSON Schema keywords levee writes for their types.
func (c *checker) schema(where string, s map[string]any) {
	types := []string{"object", "array", "string", "number", "integer", "boolean", "null"}
	switch t := s["type"].(type) {
	case nil:
	case string:
		if !contains(types, t) {
			c.fail(where, "type %q", t)
		}
	case []any:
		for _, e := range t {
			if es, _ := e.(string); !contains(types, es) {
				c.fail(where, "type %v", e)
			}
		}
	default:
		c.fail(where, "type must be a string or an array")
	}
	for _, k := range []string{"minimum", "maximum"} {
		if v, ok := s[k]; ok {
			if _, num := v.(json.Number); !num {
				c.fail(where, "%s must be a number, got %v", k, v)
			}
		}
	}
	for _, k := range []string{"maxLength", "minItems", "maxItems"} {
		if v, ok := s[k]; ok {
			n, num := v.(json.Number)
			if i, err := n.Int64(); !num || err != nil || i < 0 {
				c.fail(where, "%s must be a non-negative integer, got %v", k, v)
			}
		}
	}
	if t, _ := s["type"].(string); t == "array" {
		if _, ok := s["items"].(map[string]any); !ok {
			c.fail(where, "an array schema without items")
		}
	}
	if props, ok := s["properties"].(map[string]any); ok {
		for _, k := range sortedKeys(props) {
			c.schema(where+".properties."+k, c.object(k, props[k]))
		}
	}
	if req, ok := s["required"].([]any); ok {
		props, _ := s["properties"].(map[string]any)
		for _, r := range req {
			name, _ := r.(string)
			if _, ok := props[name]; !ok && s["$ref"] == nil {
				c.fail(where, "required %v is not a property", r)
			}
		}
	}
	if items, ok := s["items"].(map[string]any); ok {
		c.schema(where+".items", items)
	}
}

func (c *checker) scheme(where string, s map[string]any) {
	c.fields(where, s, []string{"type", "description", "name", "in", "scheme", "bearerFormat", "flows", "openIdConnectUrl"}, "type")
	switch s["type"] {
	case "apiKey":
		if c.str(where+".name", s["name"]); !contains([]string{"query", "header", "cookie"}, fmt.Sprint(s["in"])) {
			c.fail(where, "apiKey in %v", s["in"])
		}
	case "http":
		c.str(where+".scheme", s["scheme"])
	case "mutualTLS", "oauth2", "openIdConnect":
	default:
		c.fail(where, "type %v", s["type"])
	}
}

// refs checks that every $ref (a string member named $ref) points at a
// value in the document.
func (c *checker) refs(where string, v any) {
	switch x := v.(type) {
	case map[string]any:
		for _, k := range sortedKeys(x) {
			if r, ok := x[k].(string); ok && k == "$ref" {
				if !c.resolves(r) {
					c.fail(where, "$ref %q does not resolve in the document", r)
				}
				continue
			}
			c.refs(where+"/"+k, x[k])
		}
	case []any:
		for i, e := range x {
			c.refs(fmt.Sprintf("%s/%d", where, i), e)
		}
	}
}

func (c *checker) resolves(ref string) bool {
	rest, ok := strings.CutPrefix(ref, "#/")
	if !ok {
		return false
	}
	var cur any = c.root
	for _, tok := range strings.Split(rest, "/") {
		tok = strings.ReplaceAll(strings.ReplaceAll(tok, "~1", "/"), "~0", "~")
		m, ok := cur.(map[string]any)
		if !ok {
			return false
		}
		if cur, ok = m[tok]; !ok {
			return false
		}
	}
	return true
}

func sortedKeys(m map[string]any) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}

func contains(list []string, s string) bool {
	for _, e := range list {
		if e == s {
			return true
		}
	}
	return false
}

// componentKey is the rule OpenAPI 3.1.0 gives components' keys (written
// from the specification, apart from the renderer's own check).
var componentKey = regexp.MustCompile(`^[a-zA-Z0-9.\-_]+$`)

func componentName(s string) bool { return componentKey.MatchString(s) }

// templateNames returns the {name} segments of a path key (OpenAPI's
// path templating, one whole segment each in levee's documents); ok is
// false for a brace elsewhere or a name twice.
func templateNames(key string) (names []string, ok bool) {
	for _, seg := range strings.Split(key, "/") {
		if !strings.ContainsAny(seg, "{}") {
			continue
		}
		if len(seg) < 3 || seg[0] != '{' || seg[len(seg)-1] != '}' || strings.Count(seg, "{")+strings.Count(seg, "}") != 2 {
			return nil, false
		}
		name := seg[1 : len(seg)-1]
		if contains(names, name) {
			return nil, false
		}
		names = append(names, name)
	}
	return names, true
}

// templateShape is key with each template expression written {}: OpenAPI
// counts two keys of one shape as the same path (invalid twice).
func templateShape(key string) string {
	segs := strings.Split(key, "/")
	for i, s := range segs {
		if strings.HasPrefix(s, "{") {
			segs[i] = "{}"
		}
	}
	return strings.Join(segs, "/")
}

// pathParams checks that every operation of a path item declares exactly
// the key's template names as in: path parameters (the item's own
// parameters count for each operation).
func (c *checker) pathParams(where string, item map[string]any, names []string) {
	declared := func(params any) []string {
		var out []string
		list, _ := params.([]any)
		for _, p := range list {
			if po, ok := p.(map[string]any); ok && po["in"] == "path" {
				if n, ok := po["name"].(string); ok {
					out = append(out, n)
				}
			}
		}
		return out
	}
	shared := declared(item["parameters"])
	for _, m := range operationKeys {
		op, ok := item[m].(map[string]any)
		if !ok {
			continue
		}
		got := append(append([]string(nil), shared...), declared(op["parameters"])...)
		for _, n := range names {
			if !contains(got, n) {
				c.fail(where+"."+m, "template name %q has no in: path parameter", n)
			}
		}
		for _, n := range got {
			if !contains(names, n) {
				c.fail(where+"."+m, "path parameter %q is not in the path's template", n)
			}
		}
	}
}
