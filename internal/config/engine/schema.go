package engine

import (
	"fmt"
	"slices"
	"time"
)

// Schema returns the JSON Schema (draft 2020-12) of a mapping of root's
// fields: each field's kind, bounds, allowed values, default and doc,
// unknown keys refused in every described block. keys is the pattern a
// map's keys must match unless its field gives one.
func Schema(root *Block, keys string) map[string]any {
	return blockSchema(root, nil, keys)
}

// blockSchema returns the schema of a mapping of b's fields, less omit.
func blockSchema(b *Block, omit []string, keys string) map[string]any {
	props := make(map[string]any, len(b.Fields))
	var required []string
	for i := range b.Fields {
		f := &b.Fields[i]
		if slices.Contains(omit, f.Name) {
			continue
		}
		s := fieldSchema(f, keys)
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
func fieldSchema(f *Field, keys string) map[string]any {
	var s map[string]any
	switch f.Kind {
	case KindString:
		s = map[string]any{"type": "string"}
		if f.Required || f.NonEmpty {
			s["minLength"] = 1
		}
		if f.Pattern != "" {
			s["pattern"] = f.Pattern
		}
	case KindEnum:
		s = map[string]any{"type": "string", "enum": f.Enum}
	case KindInt:
		s = map[string]any{"type": "integer", "minimum": f.Lo, "maximum": f.Hi}
	case KindNumber:
		s = map[string]any{"type": "number", "minimum": f.Flo, "maximum": f.Fhi}
	case KindFraction:
		s = map[string]any{"type": "number", "exclusiveMinimum": 0, "maximum": 1}
	case KindBool:
		s = map[string]any{"type": "boolean"}
	case KindDuration:
		s = map[string]any{"type": "string", "pattern": DurationPattern}
	case KindSize:
		n := map[string]any{"type": "integer", "minimum": f.Lo}
		if f.Hi != MaxSize {
			n["maximum"] = f.Hi
		}
		s = map[string]any{"anyOf": []any{n, map[string]any{"type": "string", "pattern": SizePattern}}}
	case KindBlock:
		s = blockSchema(f.Sub, f.Omit, keys)
	case KindMap:
		// Keys are names (f.pattern when set); values are blocks (sub)
		// or items (item).
		mapKeys, values := keys, map[string]any(nil)
		if f.Pattern != "" {
			mapKeys = f.Pattern
		}
		if f.Sub != nil {
			values = blockSchema(f.Sub, nil, keys)
		} else {
			values = fieldSchema(f.Item, keys)
		}
		s = map[string]any{
			"type":                 "object",
			"propertyNames":        map[string]any{"pattern": mapKeys},
			"additionalProperties": values,
		}
		if f.MinItems > 0 {
			s["minProperties"] = f.MinItems
		}
		if f.MaxItems > 0 {
			s["maxProperties"] = f.MaxItems
		}
	case KindList:
		s = map[string]any{"type": "array", "items": fieldSchema(f.Item, keys)}
		if f.MinItems > 0 {
			s["minItems"] = f.MinItems
		}
		if f.MaxItems > 0 {
			s["maxItems"] = f.MaxItems
		}
	case KindEither:
		forms := make([]any, len(f.Either))
		for i := range f.Either {
			forms[i] = fieldSchema(&f.Either[i], keys)
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
