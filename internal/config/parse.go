package config

import (
	"math"
	"slices"
	"time"

	"github.com/levee-gw/levee/internal/config/engine"
	"gopkg.in/yaml.v3"
)

// parser walks a YAML node tree into a Config, collecting every problem
// instead of stopping at the first. A parser is used for one Parse call.
type parser struct {
	engine.Problems
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
			p.Add(k, path, "keys must be strings, got %s", engine.Describe(k))
			continue
		case k.ShortTag() == "!!merge":
			p.Add(k, path, "merge keys (<<) are not allowed")
			continue
		}
		kp := engine.Key(path, k.Value)
		if line, dup := first[k.Value]; dup {
			p.Add(k, kp, "duplicate key (first at line %d)", line)
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
	if engine.IsNull(n) {
		return nil, true
	}
	if n.Kind == yaml.AliasNode {
		return nil, false
	}
	if n.Kind != yaml.MappingNode {
		p.Add(n, path, "must be a mapping, got %s", engine.Describe(n))
		return nil, false
	}
	set := make(map[string]*yaml.Node, len(known))
	for _, kv := range p.pairs(path, n) {
		if !slices.Contains(known, kv.key) {
			p.Add(kv.k, engine.Key(path, kv.key), "unknown field%s", engine.Suggest(kv.key, known))
			continue
		}
		if !engine.IsNull(kv.v) {
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
		p.Add(n, path, "must be a sequence, got %s", engine.Describe(n))
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
		p.Add(n, path, "must be a string, got %s", engine.Describe(n))
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
			p.Add(n, path, "must be a number from %d up, got %s", lo, engine.Describe(n))
		} else {
			p.Add(n, path, "must be a number from %d to %d, got %s", lo, hi, engine.Describe(n))
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
		p.Add(n, path, "must be a number from %s to %s, got %s", engine.FormatNumber(lo), engine.FormatNumber(hi), engine.Describe(n))
		return 0, false
	}
	return v, true
}

// boolean returns true or false; "yes", "on" and quoted "true" are not
// booleans.
func (p *parser) boolean(path string, n *yaml.Node) (bool, bool) {
	if n.Kind == yaml.AliasNode {
		return false, false
	}
	var b bool
	if n.Kind != yaml.ScalarNode || n.ShortTag() != "!!bool" || n.Decode(&b) != nil {
		p.Add(n, path, "must be true or false, got %s", engine.Describe(n))
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
		p.Add(n, path, `must be a duration such as "1s", got %s`, engine.Describe(n))
		return 0, false
	}
	d, err := time.ParseDuration(n.Value)
	if err != nil {
		p.Add(n, path, `must be a duration such as "1s", got %s`, engine.Describe(n))
		return 0, false
	}
	if d <= 0 {
		p.Add(n, path, "must be greater than 0, got %s", engine.Describe(n))
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
			v, ok = engine.ParseSize(n.Value)
		}
	}
	if !ok {
		p.Add(n, path, `must be a size such as 65536 or "64KiB" (units %s), got %s`, engine.SizeUnitList, engine.Describe(n))
		return 0, false
	}
	if v < lo || v > hi {
		if hi == engine.MaxSize {
			p.Add(n, path, "must be at least %s, got %s", engine.FormatSize(lo), engine.Describe(n))
		} else {
			p.Add(n, path, "must be from %s to %s, got %s", engine.FormatSize(lo), engine.FormatSize(hi), engine.Describe(n))
		}
		return 0, false
	}
	return v, true
}

const (
	// maxFileBytes, maxDepth and maxErrors bound the work Parse does on
	// hostile input.
	maxFileBytes = 4 << 20
)
