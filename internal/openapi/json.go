package openapi

import (
	"strconv"
	"unicode/utf8"
)

// The document is built as a tree of these values and written by
// writeJSON, so the key order is the order of construction and the output
// is the same bytes for the same description (encoding/json would sort
// map keys, losing the order OpenAPI readers expect: openapi, info,
// paths, components).

// obj is a JSON object whose members keep their order.
type obj []member

type member struct {
	key string
	val any
}

// set appends key: val, or replaces key's value when it is there.
func (o *obj) set(key string, val any) {
	for i := range *o {
		if (*o)[i].key == key {
			(*o)[i].val = val
			return
		}
	}
	*o = append(*o, member{key, val})
}

// get returns key's value, nil when absent.
func (o obj) get(key string) any {
	for _, m := range o {
		if m.key == key {
			return m.val
		}
	}
	return nil
}

// number is a JSON number written as its text (bounds and defaults are
// kept exactly as the configuration wrote them, int64 beyond 2^53 too).
type number string

// writeJSON appends v, indented by two spaces per level, to b. v is made
// of obj, []any, []string, string, number, bool, int, int64 and nil.
func writeJSON(b []byte, v any, indent int) []byte {
	switch x := v.(type) {
	case nil:
		return append(b, "null"...)
	case bool:
		return strconv.AppendBool(b, x)
	case int:
		return strconv.AppendInt(b, int64(x), 10)
	case int64:
		return strconv.AppendInt(b, x, 10)
	case number:
		return append(b, x...)
	case string:
		return appendString(b, x)
	case []string:
		if len(x) == 0 {
			return append(b, "[]"...)
		}
		b = append(b, '[')
		for i, s := range x {
			if i > 0 {
				b = append(b, ", "...)
			}
			b = appendString(b, s)
		}
		return append(b, ']')
	case []any:
		if len(x) == 0 {
			return append(b, "[]"...)
		}
		b = append(b, '[')
		for i, e := range x {
			if i > 0 {
				b = append(b, ',')
			}
			b = newline(b, indent+1)
			b = writeJSON(b, e, indent+1)
		}
		b = newline(b, indent)
		return append(b, ']')
	case obj:
		if len(x) == 0 {
			return append(b, "{}"...)
		}
		b = append(b, '{')
		for i, m := range x {
			if i > 0 {
				b = append(b, ',')
			}
			b = newline(b, indent+1)
			b = appendString(b, m.key)
			b = append(b, ": "...)
			b = writeJSON(b, m.val, indent+1)
		}
		b = newline(b, indent)
		return append(b, '}')
	}
	panic("openapi: writeJSON: unsupported value") // a bug of this package: every value is built here
}

func newline(b []byte, indent int) []byte {
	b = append(b, '\n')
	for range indent {
		b = append(b, "  "...)
	}
	return b
}

// appendString appends s as a JSON string; invalid UTF-8 becomes U+FFFD.
func appendString(b []byte, s string) []byte {
	const hex = "0123456789abcdef"
	b = append(b, '"')
	for i := 0; i < len(s); {
		c := s[i]
		if c < utf8.RuneSelf {
			switch {
			case c == '"' || c == '\\':
				b = append(b, '\\', c)
			case c == '\n':
				b = append(b, `\n`...)
			case c == '\t':
				b = append(b, `\t`...)
			case c < 0x20 || c == 0x7f:
				b = append(b, '\\', 'u', '0', '0', hex[c>>4], hex[c&15])
			default:
				b = append(b, c)
			}
			i++
			continue
		}
		r, n := utf8.DecodeRuneInString(s[i:])
		switch {
		case r == utf8.RuneError && n == 1:
			b = append(b, `\ufffd`...)
		case r == '\u2028' || r == '\u2029':
			b = append(b, `\u202`...)
			b = append(b, hex[r&15])
		default:
			b = append(b, s[i:i+n]...)
		}
		i += n
	}
	return append(b, '"')
}
