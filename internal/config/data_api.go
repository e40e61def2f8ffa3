package config

import (
	"encoding/json"
	"fmt"
	"regexp"
	"slices"

	"github.com/levee-gw/levee/internal/config/engine"
	"gopkg.in/yaml.v3"
)

// This file is config's side of the data-API lifecycle (docs/data-apis.md,
// "Lifecycle"): a data API created through the admin API is one route
// definition, the route as an item of `routes` writes it, checked by the
// same walker and rules as a file route with a `data` block
// (ParseDataAPI); definitions are kept and compared as canonical JSON
// (DefinitionJSON, Config.DataDefinition); and the routes that would
// serve together are checked for names and matches that collide
// (RouteConflicts).

// MaxDefinitionBytes caps one data-API definition, YAML or JSON.
const MaxDefinitionBytes = 256 << 10

// DataDefinition returns the definition of the file's data route name as
// canonical JSON (DefinitionJSON's form), or nil when the file has no data
// route of that name. It is what the data-API store seeds from.
func (c *Config) DataDefinition(name string) []byte { return c.dataDefs[name] }

// keepDefinition records the data route at path (node n) in
// c.dataDefs, for DataDefinition, reporting what JSON cannot hold.
func (p *parser) keepDefinition(c *Config, path string, n *yaml.Node, name string) {
	def, ok := p.definitionJSON(path, n)
	if !ok {
		return
	}
	if c.dataDefs == nil {
		c.dataDefs = map[string][]byte{}
	}
	c.dataDefs[name] = def
}

// DefinitionJSON reads one route definition (YAML or JSON: a mapping, as
// an item of `routes` writes it) and returns it as canonical JSON: no
// insignificant space, keys in the order written (the order of params and
// column_types means something), `name` left out (a data API's name is
// its key, not part of a version). Scalars keep their YAML meaning and
// text: plain numbers and booleans stay JSON numbers and booleans, null
// stays null, everything else is a string; so ParseDataAPI reads the JSON
// exactly as it would the YAML. A number JSON cannot write as it is
// written (0x10, 1_000, .5, .inf) is refused, here and in a file's data
// routes alike: write it in decimal. It also returns the definition's
// name when it has one (a string). Only the shape is checked here; errors
// are *Errors.
func DefinitionJSON(def []byte) ([]byte, string, error) {
	root, p, errs := decodeDefinition(def)
	if errs != nil {
		return nil, "", errs
	}
	out, ok := p.definitionJSON("", root)
	if !ok {
		return nil, "", p.Result()
	}
	name := ""
	if k := firstKey(root, "name"); k != nil {
		if v := mappingValue(root, k); engine.IsString(v) {
			name = v.Value
		}
	}
	return out, name, nil
}

// decodeDefinition parses def as one YAML document holding a mapping,
// with the file's limits (size, depth, no aliases or merge keys).
func decodeDefinition(def []byte) (*yaml.Node, *parser, *Errors) {
	p := &parser{&engine.Parser{}}
	if len(def) > MaxDefinitionBytes {
		return nil, p, engine.FileError(fmt.Sprintf("the definition is larger than the %s limit", engine.FormatSize(MaxDefinitionBytes)))
	}
	root, errs := engine.Decode(def)
	if errs != nil {
		return nil, p, errs
	}
	if !p.Scan(root, "", 0) {
		return nil, p, p.Result()
	}
	if root == nil || root.Kind != yaml.MappingNode {
		p.Add(root, "", "the definition must be a mapping with match and data, got %s", engine.Describe(root))
		return nil, p, p.Result()
	}
	return root, p, nil
}

// definitionJSON renders mapping n (the route at path) as canonical JSON
// without its name, reporting what JSON cannot hold.
func (p *parser) definitionJSON(path string, n *yaml.Node) ([]byte, bool) {
	before := p.Count()
	v := p.nodeValue(path, n, 0)
	if p.Count() > before {
		return nil, false
	}
	m, _ := v.(jsonObject)
	m = slices.DeleteFunc(m, func(kv jsonMember) bool { return kv.key == "name" })
	out, err := json.Marshal(m)
	if err != nil {
		p.Add(n, path, "cannot be written as JSON: %v", err)
		return nil, false
	}
	return out, true
}

// jsonObject is a JSON object whose members keep their order.
type jsonObject []jsonMember

type jsonMember struct {
	key   string
	value any
}

// MarshalJSON writes the members in order.
func (o jsonObject) MarshalJSON() ([]byte, error) {
	b := []byte{'{'}
	for i, m := range o {
		if i > 0 {
			b = append(b, ',')
		}
		k, _ := json.Marshal(m.key) // a string cannot fail
		v, err := json.Marshal(m.value)
		if err != nil {
			return nil, err
		}
		b = append(append(append(b, k...), ':'), v...)
	}
	return append(b, '}'), nil
}

// jsonNumber is the grammar of a JSON number (RFC 8259 section 6).
var jsonNumber = regexp.MustCompile(`^-?(0|[1-9][0-9]*)(\.[0-9]+)?([eE][+-]?[0-9]+)?$`)

// nodeValue turns n (at path) into JSON values, reporting what JSON
// cannot hold; its depth is bounded by maxDepth (scan refused deeper
// trees before).
func (p *parser) nodeValue(path string, n *yaml.Node, depth int) any {
	if depth > engine.MaxDepth {
		p.Add(n, path, "nesting deeper than %d levels is not allowed", engine.MaxDepth)
		return nil
	}
	switch n.Kind {
	case yaml.MappingNode:
		m := make(jsonObject, 0, len(n.Content)/2)
		for i := 0; i+1 < len(n.Content); i += 2 {
			k := n.Content[i]
			if k.Kind != yaml.ScalarNode {
				p.Add(k, path, "keys must be strings, got %s", engine.Describe(k))
				continue
			}
			m = append(m, jsonMember{k.Value, p.nodeValue(engine.Key(path, k.Value), n.Content[i+1], depth+1)})
		}
		return m
	case yaml.SequenceNode:
		s := make([]any, 0, len(n.Content))
		for i, c := range n.Content {
			s = append(s, p.nodeValue(engine.Index(path, i), c, depth+1))
		}
		return s
	case yaml.ScalarNode:
		switch n.ShortTag() {
		case "!!null":
			return nil
		case "!!bool":
			var b bool
			if err := n.Decode(&b); err != nil {
				p.Add(n, path, "%v", err)
			}
			return b
		case "!!int", "!!float":
			if !jsonNumber.MatchString(n.Value) {
				p.Add(n, path, "the number %s is not written as JSON writes numbers; write it in decimal (a data route is kept as JSON)", n.Value)
				return nil
			}
			return json.Number(n.Value)
		}
		return n.Value
	}
	p.Add(n, path, "aliases are not allowed")
	return nil
}

// ParseDataAPI reads def, the definition of data API name, as the data
// route it is: one route as an item of `routes` writes it (YAML or JSON),
// with `match`, `auth`, the optional route fields that apply to a data
// route, and `data`; `name` may be left out and, when given, must be
// name. It is checked by the same walker and rules as a file route, against
// c's data_sources (and c's cursor-free compile of its query), so the
// admin API refuses exactly what `levee validate` would. name must not be
// a route of c other than a data route: route names are one namespace
// (a file data route of that name is the same data API). Errors are
// *Errors whose paths are relative to the definition ("data.sql").
func ParseDataAPI(c *Config, name string, def []byte) (*Route, error) {
	root, p, errs := decodeDefinition(def)
	if errs != nil {
		return nil, errs
	}
	if !validName(name) {
		p.Add(nil, "name", "name %s, got %s", nameRule, engine.Quote(name))
		return nil, p.Result()
	}
	n := root
	if k := firstKey(root, "name"); k != nil {
		if v := mappingValue(root, k); !engine.IsString(v) || v.Value != name {
			p.Add(v, "name", "must be the data API's name %s (or be left out), got %s", engine.Quote(name), engine.Describe(v))
		}
	} else {
		// The walker requires a name: give it the API's.
		n = &yaml.Node{Kind: yaml.MappingNode, Tag: "!!map", Line: root.Line, Column: root.Column,
			Content: append([]*yaml.Node{
				{Kind: yaml.ScalarNode, Tag: "!!str", Value: "name"},
				{Kind: yaml.ScalarNode, Tag: "!!str", Value: name},
			}, root.Content...)}
	}
	if k := firstKey(root, "upstream"); k != nil {
		p.Add(k, "upstream", "a data API answers from a data source: give data, not upstream")
	}
	if firstKey(root, "data") == nil {
		p.Add(root, "data", "required: a data API is a route with a data block")
	}
	for _, r := range c.Routes {
		if r.Name == name && r.Data == nil {
			p.Add(nil, "name", "%s is the name of a route of the configuration file that is not a data route; route names are one namespace", engine.Quote(name))
		}
	}
	if p.Count() > 0 {
		return nil, p.Result()
	}
	scratch := *c
	scratch.dataDefs = nil
	r, _, _, _ := p.route(&scratch, "", n) // keeps the definition, checking that JSON holds it
	if errs := p.Result(); errs != nil {
		return nil, errs
	}
	return &r, nil
}

// mappingValue returns the value node of key node k in mapping n.
func mappingValue(n, k *yaml.Node) *yaml.Node {
	for i := 0; i+1 < len(n.Content); i += 2 {
		if n.Content[i] == k {
			return n.Content[i+1]
		}
	}
	return nil
}

// RouteConflict is one conflict RouteConflicts found: route Route
// duplicates the earlier route Other.
type RouteConflict struct {
	Route, Other int
	Message      string
}

// RouteConflicts checks routes that are to serve together (the file's and
// the published data APIs') as a file's routes are checked: names unique,
// and no two with the same host and path prefix and overlapping methods.
// Each conflict names both routes; none when they may serve together.
func RouteConflicts(routes []Route) []RouteConflict {
	var out []RouteConflict
	byName := make(map[string]int, len(routes))
	for i, r := range routes {
		if j, dup := byName[r.Name]; dup {
			out = append(out, RouteConflict{i, j, fmt.Sprintf("route name %s is used twice", engine.Quote(r.Name))})
			continue
		}
		byName[r.Name] = i
	}
	seen := make([]routeSeen, len(routes))
	for i := range seen {
		seen[i].matchOK = true
	}
	overlapsBy(routes, seen, func(i, j int, what string) {
		out = append(out, RouteConflict{i, j, fmt.Sprintf("route %s duplicates route %s (%s)", engine.Quote(routes[i].Name), engine.Quote(routes[j].Name), what)})
	})
	return out
}
