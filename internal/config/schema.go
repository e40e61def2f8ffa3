package config

import (
	"encoding/json"
	"fmt"
	"slices"
	"time"

	"github.com/levee-gw/levee/internal/config/engine"
)

// deploy/levee.schema.json is JSONSchema's output; TestSchemaFresh fails
// when it is stale, and this rewrites it.
//go:generate go test -run ^TestSchemaFresh$ -update .

// SchemaID is the $id of the generated schema.
const SchemaID = "https://github.com/levee-gw/levee/deploy/levee.schema.json"

// tokenPattern matches an HTTP token (validToken), such as a method.
const tokenPattern = "^[!#$%&'*+.^_`|~0-9A-Za-z-]+$"

// namePattern matches a valid upstream name (validName).
var namePattern = fmt.Sprintf(`^[a-z0-9_.-]{1,%d}$`, maxNameLen)

// JSONSchema returns a JSON Schema (draft 2020-12) of the config file,
// generated from the field tables (one per block; fields.go), indented and ending in a
// newline. Editors use it to complete and check a file as it is written.
// It states each field's kind, bounds, allowed values and default, and
// refuses unknown keys of every described block; it is looser than Parse
// (cross-field rules, addresses, hash_on forms and duplicates are
// Parse's alone), so `levee validate` stays the authority: a file
// Parse accepts always validates against it, not the other way round.
func JSONSchema() []byte {
	s := blockSchema(rootBlock, nil)
	s["type"] = "object"
	s["$schema"] = "https://json-schema.org/draft/2020-12/schema"
	s["$id"] = SchemaID
	s["title"] = "levee configuration"
	s["description"] = "The levee config file (docs/configuration.md). Generated from the field tables of internal/config by `go generate ./internal/config`; do not edit."
	b, err := json.MarshalIndent(s, "", "  ")
	if err != nil {
		panic("config: cannot marshal the schema: " + err.Error()) // only maps, slices, strings and numbers
	}
	return append(b, '\n')
}

// blockSchema returns the schema of a mapping of b's fields, less omit.
func blockSchema(b *block, omit []string) map[string]any {
	props := make(map[string]any, len(b.fields))
	var required []string
	for i := range b.fields {
		f := &b.fields[i]
		if slices.Contains(omit, f.name) {
			continue
		}
		s := fieldSchema(f)
		if f.required {
			required = append(required, f.name)
		} else {
			nullable(s) // null reads as omitted
		}
		props[f.name] = s
	}
	s := map[string]any{"type": "object", "properties": props, "additionalProperties": false}
	if len(required) > 0 {
		s["required"] = required
	}
	return s
}

// fieldSchema returns the schema of f's value, null not allowed.
func fieldSchema(f *field) map[string]any {
	var s map[string]any
	switch f.kind {
	case kindString:
		s = map[string]any{"type": "string"}
		if f.required || f.nonEmpty {
			s["minLength"] = 1
		}
		if f.pattern != "" {
			s["pattern"] = f.pattern
		}
	case kindEnum:
		s = map[string]any{"type": "string", "enum": f.enum}
	case kindInt:
		s = map[string]any{"type": "integer", "minimum": f.lo, "maximum": f.hi}
	case kindNumber:
		s = map[string]any{"type": "number", "minimum": f.flo, "maximum": f.fhi}
	case kindFraction:
		s = map[string]any{"type": "number", "exclusiveMinimum": 0, "maximum": 1}
	case kindBool:
		s = map[string]any{"type": "boolean"}
	case kindDuration:
		s = map[string]any{"type": "string", "pattern": engine.DurationPattern}
	case kindSize:
		n := map[string]any{"type": "integer", "minimum": f.lo}
		if f.hi != engine.MaxSize {
			n["maximum"] = f.hi
		}
		s = map[string]any{"anyOf": []any{n, map[string]any{"type": "string", "pattern": engine.SizePattern}}}
	case kindBlock:
		s = blockSchema(f.sub, f.omit)
	case kindMap:
		// Keys are names (f.pattern when set); values are blocks (sub)
		// or items (item).
		keys, values := namePattern, map[string]any(nil)
		if f.pattern != "" {
			keys = f.pattern
		}
		if f.sub != nil {
			values = blockSchema(f.sub, nil)
		} else {
			values = fieldSchema(f.item)
		}
		s = map[string]any{
			"type":                 "object",
			"propertyNames":        map[string]any{"pattern": keys},
			"additionalProperties": values,
		}
		if f.minItems > 0 {
			s["minProperties"] = f.minItems
		}
		if f.maxItems > 0 {
			s["maxProperties"] = f.maxItems
		}
	case kindList:
		s = map[string]any{"type": "array", "items": fieldSchema(f.item)}
		if f.minItems > 0 {
			s["minItems"] = f.minItems
		}
		if f.maxItems > 0 {
			s["maxItems"] = f.maxItems
		}
	case kindEither:
		forms := make([]any, len(f.either))
		for i := range f.either {
			forms[i] = fieldSchema(&f.either[i])
		}
		s = map[string]any{"anyOf": forms}
	default:
		panic(fmt.Sprintf("config: field %q has no kind", f.name))
	}
	if f.doc != "" {
		s["description"] = f.doc
	}
	if d, ok := jsonDefault(f.def); ok {
		s["default"] = d
	}
	return s
}

// nullable lets s also accept null.
func nullable(s map[string]any) {
	switch {
	case s["anyOf"] != nil:
		s["anyOf"] = append(s["anyOf"].([]any), map[string]any{"type": "null"})
	case s["type"] != nil:
		s["type"] = []string{s["type"].(string), "null"}
		if e, ok := s["enum"].([]string); ok {
			vals := make([]any, 0, len(e)+1)
			for _, v := range e {
				vals = append(vals, v)
			}
			s["enum"] = append(vals, nil)
		}
	}
}

// jsonDefault returns a default as the file writes it, and false when
// there is none (nil, or a zero duration: "none").
func jsonDefault(def any) (any, bool) {
	switch d := def.(type) {
	case nil:
		return nil, false
	case time.Duration:
		if d == 0 {
			return nil, false
		}
		return d.String(), true
	}
	return def, true
}
