// Package engine is the generic part of reading levee's configuration
// file, which package config's block files use. A block is described by a
// table (Block of Field: name, kind, bounds, default, reload rule, doc
// line, where the value is stored), and everything generic is driven by
// the tables: decoding one YAML document with bounded depth and no aliases
// (Decode, Problems.Scan); reading a block's keys ("did you mean", Suggest)
// and every bound field by its kind and bounds (Parser: Block, Bind, Str,
// Integer, ...); collecting every problem with its field path and position
// (Problems, FieldError, Errors); applying defaults (WithDefaults); the
// JSON Schema (Schema); rendering the effective configuration (Renderer);
// the reload rule (Renderer.ReloadRefusals); and the docs' field reference
// (Reference, Walk). It knows none of levee's blocks and imports no levee
// package.
package engine

import (
	"cmp"
	"fmt"
	"slices"
	"strings"
)

// FieldError is one problem in a configuration: the path of the field it
// concerns and what is wrong with it.
type FieldError struct {
	// Path locates the field: mapping keys joined with "." and sequence
	// items as "[i]", as in "routes[2].match.methods[0]". A Key that is not
	// made of letters, digits, "_", "." and "-" is written quoted in
	// brackets: `upstreams["my video"]`. Path is empty for a problem with
	// the file as a whole, such as a YAML syntax error.
	Path string
	// Message says what is wrong and shows the offending value, strings
	// quoted and numbers bare.
	Message string
	// Line and Column locate the problem in the file, from 1: the node of
	// the offending value (or key), the mapping that lacks a required key,
	// the place of a YAML syntax error (Line only: the YAML library gives
	// no column for those: Column 0). Both are 0 when the problem has no
	// place in the file (a file that cannot be read, or an empty one).
	Line, Column int
}

// Error returns "Path: Message"; a problem with the file as a whole
// (Path empty) is "(file): Message", with its position when it has one
// ("(file):2: Message"). Located adds the position to every problem.
func (e FieldError) Error() string {
	if e.Path == "" {
		return e.Located("(file)")
	}
	return e.Path + ": " + e.Message
}

// Located returns the problem as a compiler's message: "file:line:col:
// Path: Message" ("file:line:" without a column, "file:" without a line;
// the path is left out for a problem with the file as a whole), as
// `levee validate` and `levee run` print it.
func (e FieldError) Located(file string) string {
	var b strings.Builder
	b.WriteString(file)
	if e.Line > 0 {
		fmt.Fprintf(&b, ":%d", e.Line)
		if e.Column > 0 {
			fmt.Fprintf(&b, ":%d", e.Column)
		}
	}
	b.WriteString(": ")
	if e.Path != "" {
		b.WriteString(e.Path + ": ")
	}
	b.WriteString(e.Message)
	return b.String()
}

// Errors is every problem found in one configuration, in the order they
// appear in the file; problems without a position in the file (a required
// field that is missing from an empty file) keep the order they were found.
// Parse and Load return it as *Errors, never empty.
type Errors []FieldError

// Error returns one line per problem, each formatted by FieldError.Error.
func (e *Errors) Error() string {
	if e == nil {
		return "<nil>"
	}
	lines := make([]string, len(*e))
	for i, fe := range *e {
		lines[i] = fe.Error()
	}
	return strings.Join(lines, "\n")
}

// FileError returns an *Errors holding one problem with the whole file.
func FileError(msg string) *Errors {
	return &Errors{{Message: msg}}
}

// Parser reads one file's YAML nodes into Go values as the field tables
// (Block, Field) describe them, collecting every problem (Problems). A
// client's readers of the blocks with rules across their fields embed it
// and call its readers (Block, Bind, Str, ...). Used for one file.
type Parser struct {
	Problems
}

// Problems collects every problem found while reading one file, each
// with its path and position, instead of stopping at the first. The zero
// value is ready to use; a Problems is used for one Parse call.
type Problems struct {
	errs []FieldError
}

// Count returns how many problems were added so far (a reader compares
// it before and after a step to learn whether the step found any).
func (p *Problems) Count() int { return len(p.errs) }

// Result returns the collected problems sorted by position, or nil if
// there are none. Beyond MaxErrors, the rest are summarised in one line.
func (p *Problems) Result() *Errors {
	if len(p.errs) == 0 {
		return nil
	}
	slices.SortStableFunc(p.errs, func(a, b FieldError) int {
		return cmp.Or(cmp.Compare(a.Line, b.Line), cmp.Compare(a.Column, b.Column))
	})
	n := min(len(p.errs), MaxErrors)
	out := make(Errors, 0, n+1)
	out = append(out, p.errs[:n]...)
	if extra := len(p.errs) - n; extra > 0 {
		out = append(out, FieldError{Message: fmt.Sprintf("too many errors: %d more not shown", extra)})
	}
	return &out
}
