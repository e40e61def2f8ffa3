package route

import (
	"slices"
	"strings"
)

// prefixTree holds the rules of one host group in a radix tree keyed by
// PathPrefix, so that finding the rules whose prefix matches a path costs
// O(len(path)) rather than O(rules in the group).
//
// Every prefix ends at a node (edges are split on insert). The prefixes that
// match a path are exactly the nodes with rules on the walk from the root
// along the path; they form a chain, longest last, and each node links to
// the nearest ancestor with rules (up), so the chain can be read longest
// first without a stack. Within a node, rules that list methods come before
// rules that list none, then input order. Reading the chain that way visits
// rules in the order the matching rules in Table.Lookup define: longest
// prefix, then method-listing, then first in the input.
//
// Work per match: one child lookup (binary search over at most 256 children
// by first byte) and one label comparison per edge walked, so O(len(path)
// + log(fan-out) per edge), plus admits for each rule on the matched chain.
// Immutable after build; no locking.
type prefixTree[T any] struct {
	root node[T]
}

type node[T any] struct {
	label    string     // bytes on the edge from the parent; "" at the root
	children []*node[T] // sorted by label[0]; labels are non-empty
	rules    []rule[T]  // rules whose prefix ends here, in match order
	up       *node[T]   // nearest proper ancestor with rules; nil if none
	// allow is the Allow header value for a method mismatch ending at this
	// node: the sorted, distinct methods of every rule here and on the up
	// chain, joined with ", ", as a one-element slice the caller may put
	// into a header map as is. nil when a rule on the chain lists no
	// methods (then no method can mismatch) or the node has no rules.
	// Computed once by finish.
	allow []string
}

type rule[T any] struct {
	methods []string // nil: any method
	value   T
}

// insert adds r under prefix. Build only.
func (t *prefixTree[T]) insert(prefix string, r rule[T]) {
	n := &t.root
	rest := prefix
	for rest != "" {
		i, found := n.childIndex(rest[0])
		if !found {
			c := &node[T]{label: rest}
			n.children = slices.Insert(n.children, i, c)
			n = c
			break
		}
		c := n.children[i]
		common := commonPrefixLen(c.label, rest)
		if common < len(c.label) {
			// Split the edge: n -> mid -> c.
			mid := &node[T]{label: c.label[:common], children: []*node[T]{c}}
			c.label = c.label[common:]
			n.children[i] = mid
			c = mid
		}
		n = c
		rest = rest[common:]
	}
	n.rules = append(n.rules, r)
}

// finish orders each node's rules and sets the up links. Build only.
func (t *prefixTree[T]) finish() {
	var walk func(n, up *node[T])
	walk = func(n, up *node[T]) {
		n.up = up
		slices.SortStableFunc(n.rules, func(a, b rule[T]) int {
			// Method-listing first; SortStable keeps input order otherwise.
			return boolToInt(len(a.methods) == 0) - boolToInt(len(b.methods) == 0)
		})
		n.rules = slices.Clip(n.rules)
		n.children = slices.Clip(n.children)
		if len(n.rules) > 0 {
			n.allow = allowOf(n)
			up = n
		}
		for _, c := range n.children {
			walk(c, up)
		}
	}
	walk(&t.root, nil)
}

// allowOf returns the Allow value for n's chain (n's rules and its up
// ancestors', whose up links finish has already set), or nil when some rule
// on it admits any method.
func allowOf[T any](n *node[T]) []string {
	var methods []string
	for m := n; m != nil; m = m.up {
		for i := range m.rules {
			if len(m.rules[i].methods) == 0 {
				return nil
			}
			methods = append(methods, m.rules[i].methods...)
		}
	}
	slices.Sort(methods)
	return []string{strings.Join(slices.Compact(methods), ", ")}
}

// match returns the value of the first rule, longest prefix first, whose
// prefix is a prefix of path and whose methods admit method. pathMatched
// reports whether any rule's prefix matched path; when it did and ok is
// false, allow is the chain's Allow value (see node.allow).
func (t *prefixTree[T]) match(path, method string) (v T, ok bool, allow []string) {
	var deepest *node[T]
	n := &t.root
	rest := path
	for {
		if len(n.rules) > 0 {
			deepest = n
		}
		if rest == "" {
			break
		}
		i, found := n.childIndex(rest[0])
		if !found {
			break
		}
		c := n.children[i]
		if !strings.HasPrefix(rest, c.label) {
			break
		}
		rest = rest[len(c.label):]
		n = c
	}
	for m := deepest; m != nil; m = m.up {
		for i := range m.rules {
			if m.rules[i].admits(method) {
				return m.rules[i].value, true, nil
			}
		}
	}
	if deepest == nil {
		return v, false, nil
	}
	return v, false, deepest.allow
}

// childIndex returns the index of the child whose label starts with b, or
// where such a child would be inserted.
func (n *node[T]) childIndex(b byte) (int, bool) {
	lo, hi := 0, len(n.children)
	for lo < hi {
		mid := int(uint(lo+hi) >> 1)
		if n.children[mid].label[0] < b {
			lo = mid + 1
		} else {
			hi = mid
		}
	}
	return lo, lo < len(n.children) && n.children[lo].label[0] == b
}

func (r *rule[T]) admits(method string) bool {
	if len(r.methods) == 0 {
		return true
	}
	for _, m := range r.methods {
		if m == method {
			return true
		}
	}
	return false
}

func commonPrefixLen(a, b string) int {
	n := min(len(a), len(b))
	for i := range n {
		if a[i] != b[i] {
			return i
		}
	}
	return n
}

func boolToInt(b bool) int {
	if b {
		return 1
	}
	return 0
}
