package engine

import (
	"fmt"
	"strconv"
	"strings"
	"unicode/utf8"

	"gopkg.in/yaml.v3"
)

// How a value and its place in the file are written in an error message
// (paths, quoted strings, YAML nodes), and the "did you mean" suggestion.

// FormatNumber writes f in the shortest decimal form, without exponent.
func FormatNumber(f float64) string {
	return strconv.FormatFloat(f, 'f', -1, 64)
}

// QuotedList returns the strings quoted and joined with ", ".
func QuotedList(list []string) string {
	quoted := make([]string, len(list))
	for i, a := range list {
		quoted[i] = strconv.Quote(a)
	}
	return strings.Join(quoted, ", ")
}

// IsNull reports whether n is absent or an explicit YAML null.
func IsNull(n *yaml.Node) bool {
	return n == nil || (n.Kind == yaml.ScalarNode && n.ShortTag() == "!!null")
}

// Key returns the path of mapping Key k under path. Keys made only of
// letters, digits, "_", "." and "-" are joined with "."; others are
// written quoted in brackets so that the path stays readable.
func Key(path, k string) string {
	plain := k != ""
	for i := 0; i < len(k) && plain; i++ {
		c := k[i]
		plain = c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '_' || c == '.' || c == '-'
	}
	switch {
	case !plain:
		return path + "[" + Quote(k) + "]"
	case path == "":
		return k
	default:
		return path + "." + k
	}
}

// Index returns the path of item i of the sequence at path.
func Index(path string, i int) string {
	return path + "[" + strconv.Itoa(i) + "]"
}

// MaxShown bounds how much of a value an error message repeats.
const MaxShown = 64

// Quote returns s quoted in Go syntax, shortened to about MaxShown bytes.
func Quote(s string) string {
	return QuoteMax(s, MaxShown)
}

// QuoteMax returns s quoted in Go syntax, cut after at most limit bytes
// (at a character boundary) and marked with "…" if cut.
func QuoteMax(s string, limit int) string {
	if len(s) > limit {
		cut := limit
		for cut > 0 && !utf8.RuneStart(s[cut]) {
			cut--
		}
		s = s[:cut] + "…"
	}
	return strconv.Quote(s)
}

// Describe returns n as an error message shows it: strings quoted, other
// scalars as written (numbers bare), collections by kind.
func Describe(n *yaml.Node) string {
	if n == nil {
		return "nothing"
	}
	switch n.Kind {
	case yaml.ScalarNode:
		tag := n.ShortTag()
		switch {
		case tag == "!!str":
			return Quote(n.Value)
		case tag == "!!null":
			return "null"
		case !strings.HasPrefix(tag, "!!"):
			return tag + " " + Quote(n.Value)
		case n.Value == "" || len(n.Value) > MaxShown || strings.ContainsFunc(n.Value, func(r rune) bool { return r <= ' ' || r == 0x7f }):
			return Quote(n.Value)
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

// MaxSuggestKeyLen is the longest name Suggest looks for a near match of:
// the longest name the file may give (limits.MaxIDLen, which config
// checks it equals); a longer key is no misspelt name.
const MaxSuggestKeyLen = 64

// MaxSuggest bounds the candidates Suggest compares against, so that a
// file with many unknown names costs linear, not quadratic, time.
const MaxSuggest = 256

// Suggest returns ` (did you mean "x"?)` for the known name closest to k
// within an edit distance of 2, or "".
func Suggest(k string, known []string) string {
	if len(k) > MaxSuggestKeyLen || len(known) > MaxSuggest {
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
