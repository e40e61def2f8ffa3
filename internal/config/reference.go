package config

import (
	"bytes"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/levee-gw/levee/internal/config/engine"
)

// docs/configuration.md's "Field reference" section is FieldReference's
// output between the two markers below; TestFieldReferenceFresh fails when
// it is stale, and this rewrites it.
//go:generate go test -run ^TestFieldReferenceFresh$ -update .

// The markers around the generated field reference in
// docs/configuration.md.
const (
	FieldReferenceBegin = "<!-- BEGIN FIELD REFERENCE: generated from internal/config's field tables by `go generate ./internal/config`; do not edit -->"
	FieldReferenceEnd   = "<!-- END FIELD REFERENCE -->"
)

// walkTables calls fn for every field of every block reachable from the
// root, in the tables' order, with its path in the reference's form: map
// keys are "*", list items "[]" (upstreams.*.retry.attempts,
// routes[].match.host). A block used in two places (retry, limits) is
// visited at each, less the fields that place omits (a route's retry has
// no budget). fn returns false to skip the field's sub-blocks.
func walkTables(fn func(path string, b *engine.Block, f *engine.Field) bool) {
	var walk func(b *engine.Block, path string, omit []string, depth int)
	walk = func(b *engine.Block, path string, omit []string, depth int) {
		if depth > maxTableDepth {
			panic("config: field tables nest deeper than " + strconv.Itoa(maxTableDepth) + " at " + path)
		}
		for i := range b.Fields {
			f := &b.Fields[i]
			if containsString(omit, f.Name) {
				continue
			}
			p := engine.Key(path, f.Name)
			if !fn(p, b, f) {
				continue
			}
			switch {
			case f.Sub != nil && f.Kind == engine.KindMap:
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
	walk(rootBlock, "", nil, 0)
}

// maxTableDepth bounds walkTables: the tables are a few levels deep, and
// a block that contained itself would be a bug.
const maxTableDepth = 16

func containsString(list []string, s string) bool {
	for _, v := range list {
		if v == s {
			return true
		}
	}
	return false
}

// FieldReference returns docs/configuration.md's field reference: one
// Markdown table row per field of the file, generated from the field
// tables (path, kind and bounds, default, what a reload does with a
// change, and the table's doc line, the field's one description).
func FieldReference() []byte {
	var buf bytes.Buffer
	buf.WriteString(FieldReferenceBegin + "\n\n")
	buf.WriteString("| Field | Kind | Default | On reload | Description |\n")
	buf.WriteString("|---|---|---|---|---|\n")
	var restarts []string // the blocks marked restart: all of each needs one
	walkTables(func(path string, b *engine.Block, f *engine.Field) bool {
		rule := reloadCell(path, f, restarts)
		if f.Reload == engine.Restart {
			restarts = append(restarts, path)
		}
		fmt.Fprintf(&buf, "| `%s` | %s | %s | %s | %s |\n", path, kindCell(f), defaultCell(f), rule, docCell(f.Doc))
		return true
	})
	buf.WriteString("\n" + FieldReferenceEnd + "\n")
	return buf.Bytes()
}

// reloadCell is what a reload does with a change to the field at path:
// its own rule, or a restart when it lies in a block marked restart (one
// of restarts, which walkTables visits before their fields).
func reloadCell(path string, f *engine.Field, restarts []string) string {
	for _, r := range restarts {
		if strings.HasPrefix(path, r+".") || strings.HasPrefix(path, r+"[") {
			return "restart (all of `" + r + "`)"
		}
	}
	return f.Reload.Describe()
}

// docCell is a doc line as a table cell: "|" escaped, "required" added by
// kindCell rather than here.
func docCell(doc string) string {
	return strings.ReplaceAll(doc, "|", `\|`)
}

// kindCell describes what a field's value is written as, with its bounds.
func kindCell(f *engine.Field) string {
	s := kindName(f)
	if f.Required {
		s += ", required"
	}
	return strings.ReplaceAll(s, "|", `\|`)
}

func kindName(f *engine.Field) string {
	switch f.Kind {
	case engine.KindString:
		return "string"
	case engine.KindEnum:
		return "one of " + strings.Join(f.Enum, ", ")
	case engine.KindInt:
		return fmt.Sprintf("integer %d to %d", f.Lo, f.Hi)
	case engine.KindNumber:
		return fmt.Sprintf("number %s to %s", engine.FormatNumber(f.Flo), engine.FormatNumber(f.Fhi))
	case engine.KindFraction:
		return "number > 0, at most 1"
	case engine.KindBool:
		return "true or false"
	case engine.KindDuration:
		return "duration > 0"
	case engine.KindSize:
		return fmt.Sprintf("size %s to %s", engine.FormatSize(f.Lo), engine.FormatSize(f.Hi))
	case engine.KindBlock:
		return "block"
	case engine.KindMap:
		return "map of blocks"
	case engine.KindList:
		if f.Item != nil && f.Item.Kind != engine.KindList {
			return "list of " + kindName(f.Item)
		}
		return "list"
	case engine.KindEither:
		forms := make([]string, len(f.Either))
		for i := range f.Either {
			forms[i] = kindName(&f.Either[i])
		}
		return strings.Join(forms, " or ")
	}
	return "?"
}

// defaultCell is a field's table default as the file would write it; "—"
// without one (required, none, or one that depends on other fields, which
// the doc line then states).
func defaultCell(f *engine.Field) string {
	if f.Def == nil {
		return "—"
	}
	switch v := f.Def.(type) {
	case string:
		return "`" + strconv.Quote(v) + "`"
	case time.Duration:
		return "`" + formatDuration(v) + "`"
	case int64:
		if f.Kind == engine.KindSize {
			return "`" + engine.FormatSize(v) + "`"
		}
	case float64:
		return "`" + engine.FormatNumber(v) + "`"
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
