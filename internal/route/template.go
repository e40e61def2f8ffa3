package route

import (
	"errors"
	"fmt"
	"strings"
)

// Path templates (`match.path_template`).
//
// Syntax: "/" followed by segments separated by "/". A segment is either
// literal text, compared byte for byte with the request path's segment
// (after levee's normalisation and decoding), or a capture that takes the
// whole segment:
//
//	{name}      any non-empty segment
//	{name:int}  a decimal integer that fits an int64: an optional "-" and
//	            1 to 19 digits ("007" is accepted; "+1", "1.0" and "" are not)
//
// A name is 1 to 64 characters from a-z, 0-9 and "_", starting with a
// letter or "_", distinct within the template. There are no multi-segment
// captures, partial-segment captures or empty segments, so a template
// matches only paths with exactly its number of segments: "/v1/products/{id}"
// matches "/v1/products/5", never "/v1/products/5/" or "/v1/products/5/x".
// Bounds: MaxTemplateLen bytes, MaxTemplateSegments segments.

// Bounds of a path template.
const (
	MaxTemplateLen      = 1024
	MaxTemplateSegments = 32
	maxCaptureName      = 64
)

// segKind is a template segment's kind, in precedence order: at one
// position a literal is more specific than an int capture, which is more
// specific than an any capture.
type segKind uint8

const (
	segLiteral segKind = iota
	segInt
	segAny
)

type tseg struct {
	kind segKind
	lit  string // segLiteral: the text
	name string // captures: the name
}

// Template is a parsed path template. Immutable; safe for concurrent use.
type Template struct {
	raw   string
	segs  []tseg
	names []string
	shape string // the template with capture names dropped: "/v1/products/{int}"
}

// ParseTemplate parses a path template (see the syntax above). The error
// names the offending segment.
func ParseTemplate(s string) (*Template, error) {
	switch {
	case len(s) > MaxTemplateLen:
		return nil, fmt.Errorf("must be at most %d bytes, got %d", MaxTemplateLen, len(s))
	case !strings.HasPrefix(s, "/"):
		return nil, errors.New(`must start with "/"`)
	case s == "/":
		return nil, errors.New(`must have at least one segment after "/" (use match.path for "/")`)
	case strings.ContainsAny(s, "?#"):
		return nil, errors.New(`must not contain "?" or "#"`)
	case strings.ContainsFunc(s, func(r rune) bool { return r <= ' ' || r == 0x7f }):
		return nil, errors.New("must not contain spaces or control characters")
	}
	t := &Template{raw: s}
	var shape strings.Builder
	rest := s[1:]
	for i := 0; ; i++ {
		if i == MaxTemplateSegments {
			return nil, fmt.Errorf("must have at most %d segments", MaxTemplateSegments)
		}
		seg, more, found := strings.Cut(rest, "/")
		shape.WriteByte('/')
		if seg == "" {
			return nil, fmt.Errorf("segment %d is empty (no \"//\" and no trailing \"/\")", i+1)
		}
		if seg[0] != '{' {
			if strings.ContainsAny(seg, "{}") {
				return nil, fmt.Errorf("segment %q: a capture must be a whole segment such as {id}", seg)
			}
			t.segs = append(t.segs, tseg{kind: segLiteral, lit: seg})
			shape.WriteString(seg)
		} else {
			if seg[len(seg)-1] != '}' || strings.Count(seg, "{") != 1 || strings.Count(seg, "}") != 1 {
				return nil, fmt.Errorf("segment %q: a capture must be a whole segment such as {id} or {id:int}", seg)
			}
			name, typ, typed := strings.Cut(seg[1:len(seg)-1], ":")
			if !validCaptureName(name) {
				return nil, fmt.Errorf("segment %q: a capture name is 1 to %d characters from a-z, 0-9 and _, not starting with a digit", seg, maxCaptureName)
			}
			for _, n := range t.names {
				if n == name {
					return nil, fmt.Errorf("segment %q: capture %q appears twice", seg, name)
				}
			}
			k := segAny
			switch {
			case !typed:
			case typ == "int":
				k = segInt
			default:
				return nil, fmt.Errorf("segment %q: unknown capture type %q (the only type is int)", seg, typ)
			}
			t.segs = append(t.segs, tseg{kind: k, name: name})
			t.names = append(t.names, name)
			if k == segInt {
				shape.WriteString("{int}")
			} else {
				shape.WriteString("{}")
			}
		}
		if !found {
			break
		}
		rest = more
	}
	t.shape = shape.String()
	return t, nil
}

func validCaptureName(s string) bool {
	if s == "" || len(s) > maxCaptureName || ('0' <= s[0] && s[0] <= '9') {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		if !('a' <= c && c <= 'z' || '0' <= c && c <= '9' || c == '_') {
			return false
		}
	}
	return true
}

// String returns the template as written.
func (t *Template) String() string { return t.raw }

// Names returns the capture names in order. The slice must not be modified.
func (t *Template) Names() []string { return t.names }

// Shape returns the template with its capture names dropped
// ("/v1/products/{int}"): two templates with one shape match the same paths.
func (t *Template) Shape() string { return t.shape }

// Match reports whether path matches the template. It does not allocate.
func (t *Template) Match(path string) bool {
	return t.walk(path, nil)
}

// Values returns the captured segments of path in the order of Names, or
// nil when path does not match.
func (t *Template) Values(path string) []string {
	vals := make([]string, 0, len(t.names))
	if !t.walk(path, &vals) {
		return nil
	}
	return vals
}

func (t *Template) walk(path string, vals *[]string) bool {
	if len(path) == 0 || path[0] != '/' {
		return false
	}
	rest := path[1:]
	for i := range t.segs {
		seg, more, found := strings.Cut(rest, "/")
		last := i == len(t.segs)-1
		if found == last || seg == "" { // a missing or an extra segment
			return false
		}
		s := &t.segs[i]
		switch s.kind {
		case segLiteral:
			if seg != s.lit {
				return false
			}
		case segInt:
			if !isInt64(seg) {
				return false
			}
			fallthrough
		default:
			if vals != nil {
				*vals = append(*vals, seg)
			}
		}
		rest = more
	}
	return true
}

// isInt64 reports whether s is an optional "-" and 1 to 19 digits within
// the int64 range.
func isInt64(s string) bool {
	d := strings.TrimPrefix(s, "-")
	if d == "" || len(d) > 19 {
		return false
	}
	for i := 0; i < len(d); i++ {
		if d[i] < '0' || d[i] > '9' {
			return false
		}
	}
	if len(d) < 19 {
		return true
	}
	limit := "9223372036854775807"
	if s[0] == '-' {
		limit = "9223372036854775808"
	}
	return d <= limit // equal lengths: byte order is numeric order
}

// compareTemplates orders two templates by specificity: segment by
// segment, a literal before an int capture before an any capture, and at
// equal kinds literals in byte order (only to be deterministic: two
// different literals never match one path). 0 when the shapes are equal.
func compareTemplates(a, b *Template) int {
	for i := range min(len(a.segs), len(b.segs)) {
		x, y := &a.segs[i], &b.segs[i]
		if x.kind != y.kind {
			return int(x.kind) - int(y.kind)
		}
		if x.kind == segLiteral && x.lit != y.lit {
			return strings.Compare(x.lit, y.lit)
		}
	}
	return len(a.segs) - len(b.segs)
}
