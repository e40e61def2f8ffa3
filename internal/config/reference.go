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
func walkTables(fn func(path string, b *block, f *field) bool) {
	var walk func(b *block, path string, omit []string, depth int)
	walk = func(b *block, path string, omit []string, depth int) {
		if depth > maxTableDepth {
			panic("config: field tables nest deeper than " + strconv.Itoa(maxTableDepth) + " at " + path)
		}
		for i := range b.fields {
			f := &b.fields[i]
			if containsString(omit, f.name) {
				continue
			}
			p := engine.Key(path, f.name)
			if !fn(p, b, f) {
				continue
			}
			switch {
			case f.sub != nil && f.kind == kindMap:
				walk(f.sub, p+".*", f.omit, depth+1)
			case f.sub != nil:
				walk(f.sub, p, f.omit, depth+1)
			case f.item != nil && f.item.sub != nil:
				walk(f.item.sub, p+"[]", f.item.omit, depth+1)
			}
			for j := range f.either {
				if f.either[j].sub != nil {
					walk(f.either[j].sub, p, nil, depth+1)
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
	walkTables(func(path string, b *block, f *field) bool {
		rule := reloadCell(path, f, restarts)
		if f.reload == restart {
			restarts = append(restarts, path)
		}
		fmt.Fprintf(&buf, "| `%s` | %s | %s | %s | %s |\n", path, kindCell(f), defaultCell(f), rule, docCell(f.doc))
		return true
	})
	buf.WriteString("\n" + FieldReferenceEnd + "\n")
	return buf.Bytes()
}

// reloadCell is what a reload does with a change to the field at path:
// its own rule, or a restart when it lies in a block marked restart (one
// of restarts, which walkTables visits before their fields).
func reloadCell(path string, f *field, restarts []string) string {
	for _, r := range restarts {
		if strings.HasPrefix(path, r+".") || strings.HasPrefix(path, r+"[") {
			return "restart (all of `" + r + "`)"
		}
	}
	return f.reload.describe()
}

// docCell is a doc line as a table cell: "|" escaped, "required" added by
// kindCell rather than here.
func docCell(doc string) string {
	return strings.ReplaceAll(doc, "|", `\|`)
}

// kindCell describes what a field's value is written as, with its bounds.
func kindCell(f *field) string {
	s := kindName(f)
	if f.required {
		s += ", required"
	}
	return strings.ReplaceAll(s, "|", `\|`)
}

func kindName(f *field) string {
	switch f.kind {
	case kindString:
		return "string"
	case kindEnum:
		return "one of " + strings.Join(f.enum, ", ")
	case kindInt:
		return fmt.Sprintf("integer %d to %d", f.lo, f.hi)
	case kindNumber:
		return fmt.Sprintf("number %s to %s", engine.FormatNumber(f.flo), engine.FormatNumber(f.fhi))
	case kindFraction:
		return "number > 0, at most 1"
	case kindBool:
		return "true or false"
	case kindDuration:
		return "duration > 0"
	case kindSize:
		return fmt.Sprintf("size %s to %s", engine.FormatSize(f.lo), engine.FormatSize(f.hi))
	case kindBlock:
		return "block"
	case kindMap:
		return "map of blocks"
	case kindList:
		if f.item != nil && f.item.kind != kindList {
			return "list of " + kindName(f.item)
		}
		return "list"
	case kindEither:
		forms := make([]string, len(f.either))
		for i := range f.either {
			forms[i] = kindName(&f.either[i])
		}
		return strings.Join(forms, " or ")
	}
	return "?"
}

// defaultCell is a field's table default as the file would write it; "—"
// without one (required, none, or one that depends on other fields, which
// the doc line then states).
func defaultCell(f *field) string {
	if f.def == nil {
		return "—"
	}
	switch v := f.def.(type) {
	case string:
		return "`" + strconv.Quote(v) + "`"
	case time.Duration:
		return "`" + formatDuration(v) + "`"
	case int64:
		if f.kind == kindSize {
			return "`" + engine.FormatSize(v) + "`"
		}
	case float64:
		return "`" + engine.FormatNumber(v) + "`"
	}
	return fmt.Sprintf("`%v`", f.def)
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
