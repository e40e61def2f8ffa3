package config

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"math"
	"slices"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"gopkg.in/yaml.v3"
)

// decode parses data as exactly one YAML document and returns its root
// node, or nil for a file that holds no document (empty, or only
// comments). A panic inside the YAML library is turned into an error, so
// that hostile input cannot crash the caller.
func decode(data []byte) (root *yaml.Node, errs *Errors) {
	defer func() {
		if r := recover(); r != nil {
			root, errs = nil, fileError(fmt.Sprintf("yaml: cannot parse: %v", r))
		}
	}()
	dec := yaml.NewDecoder(bytes.NewReader(data))
	var doc yaml.Node
	if err := dec.Decode(&doc); err != nil {
		if errors.Is(err, io.EOF) {
			return nil, nil
		}
		return nil, fileError(err.Error())
	}
	var next yaml.Node
	switch err := dec.Decode(&next); {
	case errors.Is(err, io.EOF):
	case err != nil:
		return nil, fileError(err.Error())
	default:
		return nil, fileError(fmt.Sprintf("found a second YAML document at line %d; a config file holds exactly one", next.Line))
	}
	if doc.Kind != yaml.DocumentNode || len(doc.Content) == 0 {
		return nil, nil
	}
	return doc.Content[0], nil
}

// parser walks a YAML node tree into a Config, collecting every problem
// instead of stopping at the first. A parser is used for one Parse call.
type parser struct {
	errs []posError
}

// add records a problem at path, positioned at node n (nil: no position).
func (p *parser) add(n *yaml.Node, path, format string, args ...any) {
	var line, col int
	if n != nil {
		line, col = n.Line, n.Column
	}
	p.errs = append(p.errs, posError{line: line, col: col, FieldError: FieldError{Path: path, Message: fmt.Sprintf(format, args...)}})
}

// scan visits every node once, before the typed walk, reporting each alias
// (the typed walk then skips aliases silently) and refusing nesting deeper
// than maxDepth. It returns false when the tree is too deep; its recursion
// is bounded by maxDepth.
func (p *parser) scan(n *yaml.Node, path string, depth int) bool {
	if n == nil {
		return true
	}
	switch n.Kind {
	case yaml.AliasNode:
		p.add(n, path, "aliases are not allowed (*%s)", n.Value)
	case yaml.SequenceNode:
		if depth++; depth > maxDepth {
			p.add(n, path, "nesting deeper than %d levels is not allowed", maxDepth)
			return false
		}
		for i, c := range n.Content {
			if !p.scan(c, index(path, i), depth) {
				return false
			}
		}
	case yaml.MappingNode:
		if depth++; depth > maxDepth {
			p.add(n, path, "nesting deeper than %d levels is not allowed", maxDepth)
			return false
		}
		for i := 0; i+1 < len(n.Content); i += 2 {
			k, v := n.Content[i], n.Content[i+1]
			kp := path
			if k.Kind == yaml.ScalarNode {
				kp = key(path, k.Value)
			}
			if !p.scan(k, kp, depth) || !p.scan(v, kp, depth) {
				return false
			}
		}
	}
	return true
}

// pair is one entry of a YAML mapping.
type pair struct {
	key  string
	k, v *yaml.Node
}

// pairs returns the entries of mapping n in file order. Entries whose key
// is not a scalar, is a merge key (<<) or an alias, or repeats an earlier
// key are reported (aliases already were, by scan) and left out.
func (p *parser) pairs(path string, n *yaml.Node) []pair {
	first := make(map[string]int, len(n.Content)/2)
	out := make([]pair, 0, len(n.Content)/2)
	for i := 0; i+1 < len(n.Content); i += 2 {
		k, v := n.Content[i], n.Content[i+1]
		switch {
		case k.Kind == yaml.AliasNode:
			continue
		case k.Kind != yaml.ScalarNode:
			p.add(k, path, "keys must be strings, got %s", describe(k))
			continue
		case k.ShortTag() == "!!merge":
			p.add(k, path, "merge keys (<<) are not allowed")
			continue
		}
		kp := key(path, k.Value)
		if line, dup := first[k.Value]; dup {
			p.add(k, kp, "duplicate key (first at line %d)", line)
			continue
		}
		first[k.Value] = k.Line
		out = append(out, pair{key: k.Value, k: k, v: v})
	}
	return out
}

// fields checks that n is a mapping whose keys are unique and all in
// known; null counts as an empty mapping. It returns the value node of
// each known key whose value is not null, and false when n is not a
// mapping at all (reported, unless n is an alias).
func (p *parser) fields(path string, n *yaml.Node, known ...string) (map[string]*yaml.Node, bool) {
	if isNull(n) {
		return nil, true
	}
	if n.Kind == yaml.AliasNode {
		return nil, false
	}
	if n.Kind != yaml.MappingNode {
		p.add(n, path, "must be a mapping, got %s", describe(n))
		return nil, false
	}
	set := make(map[string]*yaml.Node, len(known))
	for _, kv := range p.pairs(path, n) {
		if !slices.Contains(known, kv.key) {
			p.add(kv.k, key(path, kv.key), "unknown field%s", suggest(kv.key, known))
			continue
		}
		if !isNull(kv.v) {
			set[kv.key] = kv.v
		}
	}
	return set, true
}

// sequence returns the items of n, reporting n if it is not a sequence.
// Callers have already handled null.
func (p *parser) sequence(path string, n *yaml.Node) ([]*yaml.Node, bool) {
	if n.Kind == yaml.AliasNode {
		return nil, false
	}
	if n.Kind != yaml.SequenceNode {
		p.add(n, path, "must be a sequence, got %s", describe(n))
		return nil, false
	}
	return n.Content, true
}

// str returns the value of a string scalar. Numbers, booleans and other
// scalars are not strings: quote them.
func (p *parser) str(path string, n *yaml.Node) (string, bool) {
	if n.Kind == yaml.AliasNode {
		return "", false
	}
	if !isString(n) {
		p.add(n, path, "must be a string, got %s", describe(n))
		return "", false
	}
	return n.Value, true
}

// isString reports whether n is a string scalar (what str accepts).
func isString(n *yaml.Node) bool {
	return n.Kind == yaml.ScalarNode && n.ShortTag() == "!!str"
}

// integer returns a whole number from lo to hi. Anything else, including
// floats and quoted numbers, is reported with the value as written.
func (p *parser) integer(path string, n *yaml.Node, lo, hi int64) (int64, bool) {
	if n.Kind == yaml.AliasNode {
		return 0, false
	}
	var v int64
	if n.Kind != yaml.ScalarNode || n.ShortTag() != "!!int" || n.Decode(&v) != nil || v < lo || v > hi {
		if hi == maxMaxConnections {
			p.add(n, path, "must be a number from %d up, got %s", lo, describe(n))
		} else {
			p.add(n, path, "must be a number from %d to %d, got %s", lo, hi, describe(n))
		}
		return 0, false
	}
	return v, true
}

// number returns a YAML integer or float from lo to hi. Strings (quoted
// numbers included), NaN and infinities are refused.
func (p *parser) number(path string, n *yaml.Node, lo, hi float64) (float64, bool) {
	if n.Kind == yaml.AliasNode {
		return 0, false
	}
	var v float64
	tag := n.ShortTag()
	if n.Kind != yaml.ScalarNode || (tag != "!!int" && tag != "!!float") || n.Decode(&v) != nil ||
		math.IsNaN(v) || v < lo || v > hi {
		p.add(n, path, "must be a number from %s to %s, got %s", formatNumber(lo), formatNumber(hi), describe(n))
		return 0, false
	}
	return v, true
}

// formatNumber writes f in the shortest decimal form, without exponent.
func formatNumber(f float64) string {
	return strconv.FormatFloat(f, 'f', -1, 64)
}

// boolean returns true or false; "yes", "on" and quoted "true" are not
// booleans.
func (p *parser) boolean(path string, n *yaml.Node) (bool, bool) {
	if n.Kind == yaml.AliasNode {
		return false, false
	}
	var b bool
	if n.Kind != yaml.ScalarNode || n.ShortTag() != "!!bool" || n.Decode(&b) != nil {
		p.add(n, path, "must be true or false, got %s", describe(n))
		return false, false
	}
	return b, true
}

// duration returns a duration written as a string in Go syntax ("250ms",
// "1m30s"). Every duration in the config must be greater than 0.
func (p *parser) duration(path string, n *yaml.Node) (time.Duration, bool) {
	if n.Kind == yaml.AliasNode {
		return 0, false
	}
	if n.Kind != yaml.ScalarNode || n.ShortTag() != "!!str" {
		p.add(n, path, `must be a duration such as "1s", got %s`, describe(n))
		return 0, false
	}
	d, err := time.ParseDuration(n.Value)
	if err != nil {
		p.add(n, path, `must be a duration such as "1s", got %s`, describe(n))
		return 0, false
	}
	if d <= 0 {
		p.add(n, path, "must be greater than 0, got %s", describe(n))
		return 0, false
	}
	return d, true
}

// size returns a byte count from lo to hi, written as a non-negative
// integer or a string with a unit (see parseSize).
func (p *parser) size(path string, n *yaml.Node, lo, hi int64) (int64, bool) {
	if n.Kind == yaml.AliasNode {
		return 0, false
	}
	var v int64
	ok := false
	if n.Kind == yaml.ScalarNode {
		switch n.ShortTag() {
		case "!!int":
			ok = n.Decode(&v) == nil && v >= 0
		case "!!str":
			v, ok = parseSize(n.Value)
		}
	}
	if !ok {
		p.add(n, path, `must be a size such as 65536 or "64KiB" (units %s), got %s`, sizeUnitList, describe(n))
		return 0, false
	}
	if v < lo || v > hi {
		if hi == maxSize {
			p.add(n, path, "must be at least %s, got %s", formatSize(lo), describe(n))
		} else {
			p.add(n, path, "must be from %s to %s, got %s", formatSize(lo), formatSize(hi), describe(n))
		}
		return 0, false
	}
	return v, true
}

// quotedList returns the strings quoted and joined with ", ".
func quotedList(list []string) string {
	quoted := make([]string, len(list))
	for i, a := range list {
		quoted[i] = strconv.Quote(a)
	}
	return strings.Join(quoted, ", ")
}

// isNull reports whether n is absent or an explicit YAML null.
func isNull(n *yaml.Node) bool {
	return n == nil || (n.Kind == yaml.ScalarNode && n.ShortTag() == "!!null")
}

// key returns the path of mapping key k under path. Keys made only of
// letters, digits, "_", "." and "-" are joined with "."; others are
// written quoted in brackets so that the path stays readable.
func key(path, k string) string {
	plain := k != ""
	for i := 0; i < len(k) && plain; i++ {
		c := k[i]
		plain = c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '_' || c == '.' || c == '-'
	}
	switch {
	case !plain:
		return path + "[" + quote(k) + "]"
	case path == "":
		return k
	default:
		return path + "." + k
	}
}

// index returns the path of item i of the sequence at path.
func index(path string, i int) string {
	return path + "[" + strconv.Itoa(i) + "]"
}

// maxShown bounds how much of a value an error message repeats.
const maxShown = 64

// quote returns s quoted in Go syntax, shortened to about maxShown bytes.
func quote(s string) string {
	return quoteMax(s, maxShown)
}

// quoteMax returns s quoted in Go syntax, cut after at most limit bytes
// (at a character boundary) and marked with "…" if cut.
func quoteMax(s string, limit int) string {
	if len(s) > limit {
		cut := limit
		for cut > 0 && !utf8.RuneStart(s[cut]) {
			cut--
		}
		s = s[:cut] + "…"
	}
	return strconv.Quote(s)
}

// describe returns n as an error message shows it: strings quoted, other
// scalars as written (numbers bare), collections by kind.
func describe(n *yaml.Node) string {
	if n == nil {
		return "nothing"
	}
	switch n.Kind {
	case yaml.ScalarNode:
		tag := n.ShortTag()
		switch {
		case tag == "!!str":
			return quote(n.Value)
		case tag == "!!null":
			return "null"
		case !strings.HasPrefix(tag, "!!"):
			return tag + " " + quote(n.Value)
		case n.Value == "" || len(n.Value) > maxShown || strings.ContainsFunc(n.Value, func(r rune) bool { return r <= ' ' || r == 0x7f }):
			return quote(n.Value)
		default:
			return n.Value
		}
	case yaml.MappingNode:
		return "a mapping"
	case yaml.SequenceNode:
		return "a sequence"
	case yaml.AliasNode:
		return "an alias"
	}
	return "nothing"
}

// maxSuggest bounds the candidates suggest compares against, so that a
// file with many unknown names costs linear, not quadratic, time.
const maxSuggest = 256

// suggest returns ` (did you mean "x"?)` for the known name closest to k
// within an edit distance of 2, or "".
func suggest(k string, known []string) string {
	if len(k) > maxNameLen || len(known) > maxSuggest {
		return ""
	}
	best, bestDist := "", 3
	for _, c := range known {
		if d := editDistance(k, c); d < bestDist {
			best, bestDist = c, d
		}
	}
	if best == "" {
		return ""
	}
	return fmt.Sprintf(" (did you mean %q?)", best)
}

// editDistance is the Levenshtein distance between a and b, by bytes.
// O(len(a)*len(b)) time, O(len(b)) space.
func editDistance(a, b string) int {
	prev := make([]int, len(b)+1)
	cur := make([]int, len(b)+1)
	for j := range prev {
		prev[j] = j
	}
	for i := 1; i <= len(a); i++ {
		cur[0] = i
		for j := 1; j <= len(b); j++ {
			cost := 1
			if a[i-1] == b[j-1] {
				cost = 0
			}
			cur[j] = min(prev[j]+1, cur[j-1]+1, prev[j-1]+cost)
		}
		prev, cur = cur, prev
	}
	return prev[len(b)]
}

const (
	// maxFileBytes, maxDepth and maxErrors bound the work Parse does on
	// hostile input.
	maxFileBytes = 4 << 20
	maxDepth     = 64
	maxErrors    = 1000
)
