package route

import (
	"slices"
	"strings"
)

// prefixTree holds the prefix rules of one host group in a radix tree keyed
// by PathPrefix, so that finding the rules whose prefix matches a path costs
// O(len(path)) rather than O(rules in the group).
//
// Every prefix ends at a node (edges are split on insert). The prefixes that
// are string prefixes of a path are exactly the nodes with rules on the
// walk from the root along the path; they form a chain, longest last, and
// each node links to the nearest ancestor with rules (up), so the chain can
// be read longest first without a stack. Of those, a prefix matches only on
// a segment boundary: the path ends there, or the next byte is "/", or the
// prefix itself ends in "/" (node.depth says where). Within a node, rules
// are sorted by compare. Reading the chain that way visits rules in
// precedence order.
//
// Work per match: one child lookup (binary search over at most 256 children
// by first byte) and one label comparison per edge walked, so O(len(path)
// + log(fan-out) per edge), plus the checks of each rule on the matched
// chain. Immutable after build; no locking.
type prefixTree[T any] struct {
	root node[T]
}

type node[T any] struct {
	label    string     // bytes on the edge from the parent; "" at the root
	depth    int        // length of the prefix this node ends
	children []*node[T] // sorted by label[0]; labels are non-empty
	rules    []*rule[T] // rules whose prefix ends here, sorted by compare
	up       *node[T]   // nearest proper ancestor with rules; nil if none
}

// insert adds r under prefix. Build only.
func (t *prefixTree[T]) insert(prefix string, r *rule[T]) {
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

// finish orders each node's rules and sets the depths and up links. Build
// only.
func (t *prefixTree[T]) finish() {
	var walk func(n, up *node[T], depth int)
	walk = func(n, up *node[T], depth int) {
		n.depth = depth + len(n.label)
		n.up = up
		slices.SortFunc(n.rules, compare[T])
		n.rules = slices.Clip(n.rules)
		n.children = slices.Clip(n.children)
		if len(n.rules) > 0 {
			up = n
		}
		for _, c := range n.children {
			walk(c, up, n.depth)
		}
	}
	walk(&t.root, nil, 0)
}

// match returns the value of the first rule, longest prefix first, whose
// prefix matches path on a segment boundary, whose conditions hold and
// whose methods admit the method; the methods of those that do not admit
// it go into mm.
func (t *prefixTree[T]) match(req *request, mm *mismatch) (v T, ok bool) {
	path := req.path
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
		if d := m.depth; d < len(path) && path[d] != '/' && path[d-1] != '/' {
			continue // "/v1/products" is not a prefix of "/v1/productsXYZ"
		}
		for _, r := range m.rules {
			if r.condsHold(req) {
				if r.admits(req.method) {
					return r.value, true
				}
				mm.add(r.methods)
			}
		}
	}
	return v, false
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

func commonPrefixLen(a, b string) int {
	n := min(len(a), len(b))
	for i := range n {
		if a[i] != b[i] {
			return i
		}
	}
	return n
}
