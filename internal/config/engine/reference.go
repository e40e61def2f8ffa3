package engine

import (
	"bytes"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"
)

// Walk calls fn for every field of every block reachable from the
// root, in the tables' order, with its path in the reference's form: map
// keys are "*", list items "[]" (upstreams.*.retry.attempts,
// routes[].match.host). A block used in two places (retry, limits) is
// visited at each, less the fields that place omits (a route's retry has
// no budget). fn returns false to skip the field's sub-blocks.
func Walk(root *Block, fn func(path string, b *Block, f *Field) bool) {
	var walk func(b *Block, path string, omit []string, depth int)
	walk = func(b *Block, path string, omit []string, depth int) {
		if depth > maxTableDepth {
			panic("config: field tables nest deeper than " + strconv.Itoa(maxTableDepth) + " at " + path)
		}
		for i := range b.Fields {
			f := &b.Fields[i]
			if slices.Contains(omit, f.Name) {
				continue
			}
			p := Key(path, f.Name)
			if !fn(p, b, f) {
				continue
			}
			switch {
			case f.Sub != nil && f.Kind == KindMap:
				walk(f.Sub, p+".*", f.Omit, depth+1)
			case f.Sub != nil:
				walk(f.Sub, p, f.Omit, depth+1)
			case f.Item != nil && f.Item.Sub != nil:
				walk(f.Item.Sub, p+"[]", f.Item.Omit, depth+1)
			}
			for j := range f.Either {
				if f.Either[j].Sub != nil {
					walk(f.Either[j].Sub, p, nil, depth+1)
				}
			}
		}
	}
	walk(root, "", nil, 0)
}

// maxTableDepth bounds Walk: the tables are a few levels deep, and
// a block that contained itself would be a bug.
const maxTableDepth = 16

// Reference returns a field reference between the lines begin and end:
// one Markdown table row per field reachable from root, generated from
// the field tables (path, kind and bounds, default, what a reload does with a
// change, and the table's doc line, the field's one description).
func Reference(root *Block, begin, end string) []byte {
	var buf bytes.Buffer
	buf.WriteString(begin + "\n\n")
	buf.WriteString("| Field | Kind | Default | On reload | Description |\n")
	buf.WriteString("|---|---|---|---|---|\n")
	var restarts []string // the blocks marked restart: all of each needs one
	Walk(root, func(path string, b *Block, f *Field) bool {
		rule := reloadCell(path, f, restarts)
		if f.Reload == Restart {
			restarts = append(restarts, path)
		}
		fmt.Fprintf(&buf, "| `%s` | %s | %s | %s | %s |\n", path, kindCell(f), DefaultCell(f), rule, DocCell(f.Doc))
		return true
	})
	buf.WriteString("\n" + end + "\n")
	return buf.Bytes()
}

// reloadCell is what a reload does with a change to the field at path:
// its own rule, or a restart when it lies in a block marked restart (one
// of restarts, which Walk visits before their fields).
func reloadCell(path string, f *Field, restarts []string) string {
	for _, r := range restarts {
		if strings.HasPrefix(path, r+".") || strings.HasPrefix(path, r+"[") {
			return "restart (all of `" + r + "`)"
		}
	}
	return f.Reload.Describe()
}

// DocCell is a doc line as a table cell: "|" escaped, "required" added by
// kindCell rather than here.
func DocCell(doc string) string {
	return strings.ReplaceAll(doc, "|", `\|`)
}

// kindCell describes what a field's value is written as, with its bounds.
func kindCell(f *Field) string {
	s := kindName(f)
	if f.Required {
		s += ", required"
	}
	return strings.ReplaceAll(s, "|", `\|`)
}

func kindName(f *Field) string {
	switch f.Kind {
	case KindString:
		return "string"
	case KindEnum:
		return "one of " + strings.Join(f.Enum, ", ")
	case KindInt:
		return fmt.Sprintf("integer %d to %d", f.Lo, f.Hi)
	case KindNumber:
		return fmt.Sprintf("number %s to %s", FormatNumber(f.Flo), FormatNumber(f.Fhi))
	case KindFraction:
		return "number > 0, at most 1"
	case KindBool:
		return "true or false"
	case KindDuration:
		return "duration > 0"
	case KindSize:
		return fmt.Sprintf("size %s to %s", FormatSize(f.Lo), FormatSize(f.Hi))
	case KindBlock:
		return "block"
	case KindMap:
		return "map of blocks"
	case KindList:
		if f.Item != nil && f.Item.Kind != KindList {
			return "list of " + kindName(f.Item)
		}
		return "list"
	case KindEither:
		forms := make([]string, len(f.Either))
		for i := range f.Either {
			forms[i] = kindName(&f.Either[i])
		}
		return strings.Join(forms, " or ")
	}
	return "?"
}

// DefaultCell is a field's table default as the file would write it; "—"
// without one (required, none, or one that depends on other fields, which
// the doc line then states).
func DefaultCell(f *Field) string {
	if f.Def == nil {
		return "—"
	}
	switch v := f.Def.(type) {
	case string:
		return "`" + strconv.Quote(v) + "`"
	case time.Duration:
		return "`" + formatDuration(v) + "`"
	case int64:
		if f.Kind == KindSize {
			return "`" + FormatSize(v) + "`"
		}
	case float64:
		return "`" + FormatNumber(v) + "`"
	}
	return fmt.Sprintf("`%v`", f.Def)
}

// formatDuration writes d as time.Duration does, less zero trailing units
// ("10m", not "10m0s").
func formatDuration(d time.Duration) string {
	s := d.String()
	if strings.HasSuffix(s, "m0s") {
		s = strings.TrimSuffix(s, "0s")
	}
	if strings.HasSuffix(s, "h0m") {
		s = strings.TrimSuffix(s, "0m")
	}
	return s
}
