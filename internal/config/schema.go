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
func blockSchema(b *engine.Block, omit []string) map[string]any {
	props := make(map[string]any, len(b.Fields))
	var required []string
	for i := range b.Fields {
		f := &b.Fields[i]
		if slices.Contains(omit, f.Name) {
			continue
		}
		s := fieldSchema(f)
		if f.Required {
			required = append(required, f.Name)
		} else {
			nullable(s) // null reads as omitted
		}
		props[f.Name] = s
	}
	s := map[string]any{"type": "object", "properties": props, "additionalProperties": false}
	if len(required) > 0 {
		s["required"] = required
	}
	return s
}

// fieldSchema returns the schema of f's value, null not allowed.
func fieldSchema(f *engine.Field) map[string]any {
	var s map[string]any
	switch f.Kind {
	case engine.KindString:
		s = map[string]any{"type": "string"}
		if f.Required || f.NonEmpty {
			s["minLength"] = 1
		}
		if f.Pattern != "" {
			s["pattern"] = f.Pattern
		}
	case engine.KindEnum:
		s = map[string]any{"type": "string", "enum": f.Enum}
	case engine.KindInt:
		s = map[string]any{"type": "integer", "minimum": f.Lo, "maximum": f.Hi}
	case engine.KindNumber:
		s = map[string]any{"type": "number", "minimum": f.Flo, "maximum": f.Fhi}
	case engine.KindFraction:
		s = map[string]any{"type": "number", "exclusiveMinimum": 0, "maximum": 1}
	case engine.KindBool:
		s = map[string]any{"type": "boolean"}
	case engine.KindDuration:
		s = map[string]any{"type": "string", "pattern": engine.DurationPattern}
	case engine.KindSize:
		n := map[string]any{"type": "integer", "minimum": f.Lo}
		if f.Hi != engine.MaxSize {
			n["maximum"] = f.Hi
		}
		s = map[string]any{"anyOf": []any{n, map[string]any{"type": "string", "pattern": engine.SizePattern}}}
	case engine.KindBlock:
		s = blockSchema(f.Sub, f.Omit)
	case engine.KindMap:
		// Keys are names (f.pattern when set); values are blocks (sub)
		// or items (item).
		keys, values := namePattern, map[string]any(nil)
		if f.Pattern != "" {
			keys = f.Pattern
		}
		if f.Sub != nil {
			values = blockSchema(f.Sub, nil)
		} else {
			values = fieldSchema(f.Item)
		}
		s = map[string]any{
			"type":                 "object",
			"propertyNames":        map[string]any{"pattern": keys},
			"additionalProperties": values,
		}
		if f.MinItems > 0 {
			s["minProperties"] = f.MinItems
		}
		if f.MaxItems > 0 {
			s["maxProperties"] = f.MaxItems
		}
	case engine.KindList:
		s = map[string]any{"type": "array", "items": fieldSchema(f.Item)}
		if f.MinItems > 0 {
			s["minItems"] = f.MinItems
		}
		if f.MaxItems > 0 {
			s["maxItems"] = f.MaxItems
		}
	case engine.KindEither:
		forms := make([]any, len(f.Either))
		for i := range f.Either {
			forms[i] = fieldSchema(&f.Either[i])
		}
		s = map[string]any{"anyOf": forms}
	default:
		panic(fmt.Sprintf("config: field %q has no kind", f.Name))
	}
	if f.Doc != "" {
		s["description"] = f.Doc
	}
	if d, ok := jsonDefault(f.Def); ok {
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
