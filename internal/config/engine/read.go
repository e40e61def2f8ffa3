package engine

import (
	"cmp"
	"encoding"
	"fmt"
	"math"
	"slices"
	"time"

	"gopkg.in/yaml.v3"
)

// Pair is one entry of a YAML mapping.
type Pair struct {
	Key  string
	K, V *yaml.Node
}

// Pairs returns the entries of mapping n in file order. Entries whose key
// is not a scalar, is a merge key (<<) or an alias, or repeats an earlier
// key are reported (aliases already were, by scan) and left out.
func (p *Parser) Pairs(path string, n *yaml.Node) []Pair {
	// Duplicates: a linear search of out in a small mapping (most are:
	// a route, an app), a map from firstIndex pairs on. A reload at
	// 15,000 routes and apps reads about 40,000 mappings: a map and a
	// key path each were about 10 MiB of garbage (docs/performance.md,
	// "Scale").
	const firstIndex = 16
	var first map[string]int // key -> index in out
	out := make([]Pair, 0, len(n.Content)/2)
	for i := 0; i+1 < len(n.Content); i += 2 {
		k, v := n.Content[i], n.Content[i+1]
		switch {
		case k.Kind == yaml.AliasNode:
			continue
		case k.Kind != yaml.ScalarNode:
			p.Add(k, path, "keys must be strings, got %s", Describe(k))
			continue
		case k.ShortTag() == "!!merge":
			p.Add(k, path, "merge keys (<<) are not allowed")
			continue
		}
		dup := -1
		if first != nil {
			if j, ok := first[k.Value]; ok {
				dup = j
			}
		} else {
			for j := range out {
				if out[j].Key == k.Value {
					dup = j
					break
				}
			}
		}
		if dup >= 0 {
			p.Add(k, Key(path, k.Value), "duplicate key (first at line %d)", out[dup].K.Line)
			continue
		}
		out = append(out, Pair{Key: k.Value, K: k, V: v})
		if len(out) == firstIndex {
			first = make(map[string]int, len(n.Content)/2)
			for j := range out {
				first[out[j].Key] = j
			}
		} else if first != nil {
			first[k.Value] = len(out) - 1
		}
	}
	return out
}

// Fields checks that n is a mapping whose keys are unique and all in
// known; null counts as an empty mapping. It returns the value node of
// each known key whose value is not null, and false when n is not a
// mapping at all (reported, unless n is an alias).
func (p *Parser) Fields(path string, n *yaml.Node, known ...string) (map[string]*yaml.Node, bool) {
	if IsNull(n) {
		return nil, true
	}
	if n.Kind == yaml.AliasNode {
		return nil, false
	}
	if n.Kind != yaml.MappingNode {
		p.Add(n, path, "must be a mapping, got %s", Describe(n))
		return nil, false
	}
	pairs := p.Pairs(path, n)
	set := make(map[string]*yaml.Node, min(len(known), len(pairs))) // not len(known): a route's 40 fields for the 4 it sets
	for _, kv := range pairs {
		if !slices.Contains(known, kv.Key) {
			p.Add(kv.K, Key(path, kv.Key), "unknown field%s", Suggest(kv.Key, known))
			continue
		}
		if !IsNull(kv.V) {
			set[kv.Key] = kv.V
		}
	}
	return set, true
}

// Sequence returns the items of n, reporting n if it is not a sequence.
// Callers have already handled null.
func (p *Parser) Sequence(path string, n *yaml.Node) ([]*yaml.Node, bool) {
	if n.Kind == yaml.AliasNode {
		return nil, false
	}
	if n.Kind != yaml.SequenceNode {
		p.Add(n, path, "must be a sequence, got %s", Describe(n))
		return nil, false
	}
	return n.Content, true
}

// Str returns the value of a string scalar. Numbers, booleans and other
// scalars are not strings: quote them.
func (p *Parser) Str(path string, n *yaml.Node) (string, bool) {
	if n.Kind == yaml.AliasNode {
		return "", false
	}
	if !IsString(n) {
		p.Add(n, path, "must be a string, got %s", Describe(n))
		return "", false
	}
	return n.Value, true
}

// IsString reports whether n is a string scalar (what str accepts).
func IsString(n *yaml.Node) bool {
	return n.Kind == yaml.ScalarNode && n.ShortTag() == "!!str"
}

// Integer returns a whole number from lo to hi. Anything else, including
// floats and quoted numbers, is reported with the value as written.
func (p *Parser) Integer(path string, n *yaml.Node, lo, hi int64) (int64, bool) {
	if n.Kind == yaml.AliasNode {
		return 0, false
	}
	var v int64
	if n.Kind != yaml.ScalarNode || n.ShortTag() != "!!int" || n.Decode(&v) != nil || v < lo || v > hi {
		if hi == NoUpperBound {
			p.Add(n, path, "must be a number from %d up, got %s", lo, Describe(n))
		} else {
			p.Add(n, path, "must be a number from %d to %d, got %s", lo, hi, Describe(n))
		}
		return 0, false
	}
	return v, true
}

// Number returns a YAML integer or float from lo to hi. Strings (quoted
// numbers included), NaN and infinities are refused.
func (p *Parser) Number(path string, n *yaml.Node, lo, hi float64) (float64, bool) {
	if n.Kind == yaml.AliasNode {
		return 0, false
	}
	var v float64
	tag := n.ShortTag()
	if n.Kind != yaml.ScalarNode || (tag != "!!int" && tag != "!!float") || n.Decode(&v) != nil ||
		math.IsNaN(v) || v < lo || v > hi {
		p.Add(n, path, "must be a number from %s to %s, got %s", FormatNumber(lo), FormatNumber(hi), Describe(n))
		return 0, false
	}
	return v, true
}

// Boolean returns true or false; "yes", "on" and quoted "true" are not
// booleans.
func (p *Parser) Boolean(path string, n *yaml.Node) (bool, bool) {
	if n.Kind == yaml.AliasNode {
		return false, false
	}
	var b bool
	if n.Kind != yaml.ScalarNode || n.ShortTag() != "!!bool" || n.Decode(&b) != nil {
		p.Add(n, path, "must be true or false, got %s", Describe(n))
		return false, false
	}
	return b, true
}

// Duration returns a duration written as a string in Go syntax ("250ms",
// "1m30s"). Every duration in the config must be greater than 0.
func (p *Parser) Duration(path string, n *yaml.Node) (time.Duration, bool) {
	if n.Kind == yaml.AliasNode {
		return 0, false
	}
	if n.Kind != yaml.ScalarNode || n.ShortTag() != "!!str" {
		p.Add(n, path, `must be a duration such as "1s", got %s`, Describe(n))
		return 0, false
	}
	d, err := time.ParseDuration(n.Value)
	if err != nil {
		p.Add(n, path, `must be a duration such as "1s", got %s`, Describe(n))
		return 0, false
	}
	if d <= 0 {
		p.Add(n, path, "must be greater than 0, got %s", Describe(n))
		return 0, false
	}
	return d, true
}

// Size returns a byte count from lo to hi, written as a non-negative
// integer or a string with a unit (see parseSize).
func (p *Parser) Size(path string, n *yaml.Node, lo, hi int64) (int64, bool) {
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
			v, ok = ParseSize(n.Value)
		}
	}
	if !ok {
		p.Add(n, path, `must be a size such as 65536 or "64KiB" (units %s), got %s`, SizeUnitList, Describe(n))
		return 0, false
	}
	if v < lo || v > hi {
		if hi == MaxSize {
			p.Add(n, path, "must be at least %s, got %s", FormatSize(lo), Describe(n))
		} else {
			p.Add(n, path, "must be from %s to %s, got %s", FormatSize(lo), FormatSize(hi), Describe(n))
		}
		return 0, false
	}
	return v, true
}

// Fraction returns a YAML integer or float greater than 0 and at most 1.
func (p *Parser) Fraction(path string, n *yaml.Node) (float64, bool) {
	if n.Kind == yaml.AliasNode {
		return 0, false
	}
	var v float64
	tag := n.ShortTag()
	if n.Kind != yaml.ScalarNode || (tag != "!!int" && tag != "!!float") || n.Decode(&v) != nil ||
		math.IsNaN(v) || v <= 0 || v > 1 {
		p.Add(n, path, "must be a number greater than 0 and at most 1, got %s", Describe(n))
		return 0, false
	}
	return v, true
}

// CheckStr returns a check of a string field from a rule on its value.
func CheckStr(rule func(p *Parser, path string, n *yaml.Node, s *string) bool) func(*Parser, string, *yaml.Node, any) bool {
	return func(p *Parser, path string, n *yaml.Node, ptr any) bool { return rule(p, path, n, ptr.(*string)) }
}

// ProblemOf returns a check of a string field from a function that
// returns the problem with a value ("" if none), reported as
// "<problem>, got <value>".
func ProblemOf(problem func(string) string) func(*Parser, string, *yaml.Node, any) bool {
	return CheckStr(func(p *Parser, path string, n *yaml.Node, s *string) bool {
		if pr := problem(*s); pr != "" {
			p.Add(n, path, "%s, got %s", pr, Quote(*s))
			return false
		}
		return true
	})
}

// CheckDurationWithin returns a check of a duration field: lo to hi.
func CheckDurationWithin(lo, hi time.Duration) func(*Parser, string, *yaml.Node, any) bool {
	return func(p *Parser, path string, n *yaml.Node, ptr any) bool {
		if d := *ptr.(*time.Duration); d < lo || d > hi {
			p.Add(n, path, "must be from %v to %v, got %s", lo, hi, Describe(n))
			return false
		}
		return true
	}
}

// Block checks that n is a mapping of b's keys (see fields). It returns
// the value node of each key set to a non-null value.
func (p *Parser) Block(path string, n *yaml.Node, b *Block) (map[string]*yaml.Node, bool) {
	return p.Fields(path, n, b.Keys...)
}

// Bind reads every field of b that has a bind into dst, which must be
// what b's binds take: f holds the fields set in mapping n (from
// p.block), and n positions the report of a required field that is
// omitted. A value that is invalid is reported; a value of the wrong
// kind leaves the destination as it was, one its check refuses stays
// stored. The name of each field missing or invalid is in the returned
// set, which cross-field checks consult (nil when all were valid).
func (p *Parser) Bind(f map[string]*yaml.Node, n *yaml.Node, path string, b *Block, dst any) map[string]bool {
	var bad map[string]bool
	for i := range b.Fields {
		fd := &b.Fields[i]
		if fd.Bind == nil {
			continue
		}
		v, ok := f[fd.Name], true
		if v == nil && !fd.Required {
			continue // omitted: nothing to read (and no path to build)
		}
		fp := Key(path, fd.Name)
		switch {
		case v != nil:
			ok = p.BindOne(fp, v, fd, fd.Bind(dst))
		case fd.Required:
			p.Add(n, fp, "%s", cmp.Or(fd.Missing, "required"))
			ok = false
		}
		if !ok {
			if bad == nil {
				bad = make(map[string]bool)
			}
			bad[fd.Name] = true
		}
	}
	return bad
}

// BindOne reads v as fd says into ptr, then applies fd.check, reporting
// whether it was valid.
func (p *Parser) BindOne(path string, v *yaml.Node, fd *Field, ptr any) bool {
	if !p.Read(path, v, fd, ptr) {
		return false
	}
	return fd.Check == nil || fd.Check(p, path, v, ptr)
}

// Read reads v as fd's kind says into ptr, reporting whether it was
// valid.
func (p *Parser) Read(path string, v *yaml.Node, fd *Field, ptr any) bool {
	switch fd.Kind {
	case KindEnum, KindString:
		s, ok := p.Str(path, v)
		switch {
		case !ok:
			return false
		case s == "" && (fd.Required || fd.NonEmpty):
			msg := "must not be empty"
			if fd.Required {
				msg = "required"
			}
			p.Add(v, path, "%s", cmp.Or(fd.Empty, msg))
			return false
		case fd.Kind == KindEnum && !slices.Contains(fd.Enum, s):
			p.Add(v, path, "must be one of %s, got %s", QuotedList(fd.Enum), Describe(v))
			return false
		}
		switch d := ptr.(type) {
		case *string:
			*d = s
		case encoding.TextUnmarshaler: // a typed enum (dataquery.Kind)
			if err := d.UnmarshalText([]byte(s)); err != nil {
				p.Add(v, path, "must be one of %s, got %s", QuotedList(fd.Enum), Describe(v))
				return false
			}
		default:
			panic(fmt.Sprintf("config: %s binds a %T, want *string or an encoding.TextUnmarshaler", path, ptr))
		}
		return true
	case KindInt:
		i, ok := p.Integer(path, v, fd.Lo, fd.Hi)
		if ok {
			switch d := ptr.(type) {
			case *int:
				*d = int(i)
			case *int64:
				*d = i
			case *uint32:
				*d = uint32(i)
			default:
				panic("config: bind of " + path + " is not *int, *int64 or *uint32")
			}
		}
		return ok
	case KindNumber:
		x, ok := p.Number(path, v, fd.Flo, fd.Fhi)
		if ok {
			*ptr.(*float64) = x
		}
		return ok
	case KindFraction:
		x, ok := p.Fraction(path, v)
		if ok {
			*ptr.(*float64) = x
		}
		return ok
	case KindBool:
		b, ok := p.Boolean(path, v)
		if ok {
			*ptr.(*bool) = b
		}
		return ok
	case KindDuration:
		d, ok := p.Duration(path, v)
		if ok {
			*ptr.(*time.Duration) = d
		}
		return ok
	case KindSize:
		s, ok := p.Size(path, v, fd.Lo, fd.Hi)
		if ok {
			*ptr.(*int64) = s
		}
		return ok
	case KindBlock:
		f, ok := p.Block(path, v, fd.Sub)
		if ok {
			ok = p.Bind(f, v, path, fd.Sub, ptr) == nil
		}
		return ok
	case KindList:
		// A bound list is read whole by its field's check, which bindOne
		// runs next (cluster.etcd.endpoints).
		if fd.Check == nil {
			panic("config: list " + path + " is bound without a check to read it")
		}
		return true
	}
	panic("config: field " + path + " of this kind cannot be bound")
}
