package engine

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"regexp"
	"strconv"

	"gopkg.in/yaml.v3"
)

// Decode parses data as exactly one YAML document and returns its root
// node, or nil for a file that holds no document (empty, or only
// comments). A panic inside the YAML library is turned into an error, so
// that hostile input cannot crash the caller.
func Decode(data []byte) (root *yaml.Node, errs *Errors) {
	defer func() {
		if r := recover(); r != nil {
			root, errs = nil, FileError(fmt.Sprintf("yaml: cannot parse: %v", r))
		}
	}()
	dec := yaml.NewDecoder(bytes.NewReader(data))
	var doc yaml.Node
	if err := dec.Decode(&doc); err != nil {
		if errors.Is(err, io.EOF) {
			return nil, nil
		}
		return nil, syntaxError(err)
	}
	var next yaml.Node
	switch err := dec.Decode(&next); {
	case errors.Is(err, io.EOF):
	case err != nil:
		return nil, syntaxError(err)
	default:
		return nil, &Errors{{Message: "found a second YAML document; a config file holds exactly one", Line: next.Line, Column: next.Column}}
	}
	if doc.Kind != yaml.DocumentNode || len(doc.Content) == 0 {
		return nil, nil
	}
	return doc.Content[0], nil
}

// Add records a problem at path, positioned at node n (nil: no position).
func (p *Problems) Add(n *yaml.Node, path, format string, args ...any) {
	var line, col int
	if n != nil {
		line, col = n.Line, n.Column
	}
	p.errs = append(p.errs, FieldError{Path: path, Message: fmt.Sprintf(format, args...), Line: line, Column: col})
}

// Scan visits every node once, before the typed walk, reporting each alias
// (the typed walk then skips aliases silently) and refusing nesting deeper
// than MaxDepth. It returns false when the tree is too deep; its recursion
// is bounded by MaxDepth.
func (p *Problems) Scan(n *yaml.Node, path string, depth int) bool {
	if n == nil {
		return true
	}
	switch n.Kind {
	case yaml.AliasNode:
		p.Add(n, path, "aliases are not allowed (*%s)", n.Value)
	case yaml.SequenceNode:
		if depth++; depth > MaxDepth {
			p.Add(n, path, "nesting deeper than %d levels is not allowed", MaxDepth)
			return false
		}
		for i, c := range n.Content {
			if !p.Scan(c, Index(path, i), depth) {
				return false
			}
		}
	case yaml.MappingNode:
		if depth++; depth > MaxDepth {
			p.Add(n, path, "nesting deeper than %d levels is not allowed", MaxDepth)
			return false
		}
		for i := 0; i+1 < len(n.Content); i += 2 {
			k, v := n.Content[i], n.Content[i+1]
			kp := path
			if k.Kind == yaml.ScalarNode {
				kp = Key(path, k.Value)
			}
			if !p.Scan(k, kp, depth) || !p.Scan(v, kp, depth) {
				return false
			}
		}
	}
	return true
}

// MaxDepth and MaxErrors bound the work reading a file does on hostile
// input: nesting, and the problems reported (the rest are counted).
const (
	MaxDepth  = 64
	MaxErrors = 1000
)

// yamlLine is how the YAML library places a syntax error in its message:
// "yaml: line 12: did not find expected key".
var yamlLine = regexp.MustCompile(`^yaml: line (\d+): `)

// syntaxError turns the YAML library's error into a problem with the
// file at the line it names, the line taken out of the message (the
// library gives a line, not a column).
func syntaxError(err error) *Errors {
	msg := err.Error()
	m := yamlLine.FindStringSubmatchIndex(msg)
	if m == nil {
		return FileError(msg)
	}
	line, convErr := strconv.Atoi(msg[m[2]:m[3]])
	if convErr != nil || line < 1 {
		return FileError(msg)
	}
	return &Errors{{Message: "yaml: " + msg[m[1]:], Line: line}}
}
