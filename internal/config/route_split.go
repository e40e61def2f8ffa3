package config

import (
	"net/textproto"
	"strconv"
	"strings"

	"github.com/levee-gw/levee/internal/config/engine"
	"gopkg.in/yaml.v3"
)

// A route's `split` and `split_sticky`: the route's requests shared
// across upstreams by weight (canaries, blue/green), optionally sticky by
// a header or cookie. A split only picks the upstream; each side then
// runs as a plain route to that upstream (its health, admission, retry
// budget and metrics).
//
// The shape is a list plus a sibling block, `split: [{upstream, weight}]`
// and `split_sticky: {header | cookie}`, rather than a nested
// `split: {sides, sticky}`: the list is what the issue and most gateways
// write (Envoy's weighted_clusters, NGINX's split_clients), the common
// case (no stickiness) stays one level deep, and the admin API's
// `PUT /api/v1/routes/{name}/split` takes the same list.

// Bounds of a split.
const (
	// MaxSplitSides bounds split's items.
	MaxSplitSides = 16
	// MaxSplitWeightSum bounds the sum of a split's weights: weights are
	// shares, and 10000 allows percentages with two decimals.
	MaxSplitWeightSum = 10000
)

// The field tables of this file's blocks.
var (
	splitSideBlock = engine.NewBlock(
		engine.Field{Name: "upstream", Kind: engine.KindString, Required: true, Pattern: namePattern, Doc: "the upstream this side sends to",
			Bind: engine.At(func(s *SplitSide) *string { return &s.Upstream })},
		engine.Field{Name: "weight", Kind: engine.KindInt, Required: true, Lo: 0, Hi: MaxSplitWeightSum, Doc: "this side's share, 0 to 10000; the sum over the sides at most 10000, at least one above 0",
			Bind: engine.At(func(s *SplitSide) *int { return &s.Weight })},
	)
	splitStickyBlock = engine.NewBlock(
		engine.Field{Name: "header", Kind: engine.KindString, Pattern: tokenPattern, Doc: "the request header whose value keeps a client on one side",
			Bind: engine.At(func(s *SplitSticky) *string { return &s.Header })},
		engine.Field{Name: "cookie", Kind: engine.KindString, Pattern: tokenPattern, Doc: "the cookie whose value keeps a client on one side",
			Bind: engine.At(func(s *SplitSticky) *string { return &s.Cookie })},
	)
)

// SplitSide is one item of a route's `split`.
type SplitSide struct {
	// Upstream names the side's upstream (`upstream`, required; declared
	// in `upstreams`, at most once per split).
	Upstream string
	// Weight is the side's share (`weight`, required, 0 to
	// MaxSplitWeightSum). 0 sends the side nothing while another side is
	// healthy.
	Weight int
}

// SplitSticky is a route's `split_sticky`: exactly one of Header and
// Cookie. A request carrying it goes to the side a consistent hash of its
// value picks; one without it gets a weighted pick.
type SplitSticky struct {
	// Header is the request header (`header`, stored canonical).
	Header string
	// Cookie is the cookie's name (`cookie`).
	Cookie string
}

// routeSplit reads a route's `split` and `split_sticky` (f is the route's
// fields). Upstream names are checked against the declared ones by
// splitUpstreams, which the routes reader calls.
func (p *parser) routeSplit(r *Route, path string, f map[string]*yaml.Node) {
	sp := engine.Key(path, "split")
	if v := f["split_sticky"]; v != nil {
		if f["split"] == nil {
			p.Add(v, engine.Key(path, "split_sticky"), "only allowed with split")
		} else {
			r.SplitSticky = p.splitSticky(engine.Key(path, "split_sticky"), v)
		}
	}
	n := f["split"]
	if n == nil {
		return
	}
	for _, k := range []string{"upstream", "data"} {
		if f[k] != nil {
			p.Add(n, sp, "a route has exactly one of upstream, split, data, redirect and respond, got %s and split", k)
			return
		}
	}
	items, ok := p.Sequence(sp, n)
	if !ok {
		return
	}
	if len(items) < 2 || len(items) > MaxSplitSides {
		p.Add(n, sp, "must list 2 to %d sides, got %d", MaxSplitSides, len(items))
		return
	}
	sides := make([]SplitSide, 0, len(items))
	first := make(map[string]int, len(items))
	valid := true
	for i, item := range items {
		ip := engine.Index(sp, i)
		s := SplitSide{}
		if engine.IsNull(item) || item.Kind != yaml.MappingNode {
			p.Add(item, ip, "must be a mapping such as {upstream: blue, weight: 90}, got %s", engine.Describe(item))
			valid = false
			continue
		}
		sf, ok := p.Block(ip, item, splitSideBlock)
		if !ok || len(p.Bind(sf, item, ip, splitSideBlock, &s)) > 0 {
			valid = false
			continue
		}
		if j, dup := first[s.Upstream]; dup {
			p.Add(sf["upstream"], engine.Key(ip, "upstream"), "duplicate upstream %s (first at split[%d])", engine.Quote(s.Upstream), j)
			valid = false
			continue
		}
		first[s.Upstream] = i
		sides = append(sides, s)
	}
	if !valid {
		return
	}
	if problem := CheckSplitWeights(sides); problem != "" {
		p.Add(n, sp, "%s", problem)
		return
	}
	r.Split = sides
}

// CheckSplitWeights returns what is wrong with a split's weights (their
// sum above MaxSplitWeightSum, or every one 0), or "". The admin API's
// weight changes pass it too.
func CheckSplitWeights(sides []SplitSide) string {
	sum := 0
	for _, s := range sides {
		if s.Weight < 0 || s.Weight > MaxSplitWeightSum {
			return "weight of " + engine.Quote(s.Upstream) + " must be 0 to 10000"
		}
		sum += s.Weight
	}
	switch {
	case sum > MaxSplitWeightSum:
		return "weights must sum to at most 10000, got " + strconv.Itoa(sum)
	case sum == 0:
		return "at least one weight must be above 0"
	}
	return ""
}

// splitSticky reads a route's `split_sticky`.
func (p *parser) splitSticky(path string, n *yaml.Node) *SplitSticky {
	s := &SplitSticky{}
	f, ok := p.Block(path, n, splitStickyBlock)
	if !ok {
		return nil
	}
	if len(p.Bind(f, n, path, splitStickyBlock, s)) > 0 {
		return nil
	}
	switch {
	case (s.Header == "") == (s.Cookie == ""):
		p.Add(n, path, "must set exactly one of header and cookie")
		return nil
	case s.Header != "" && strings.IndexByte(s.Header, '_') >= 0:
		p.Add(f["header"], engine.Key(path, "header"), "must be a header field name (a token without \"_\"), got %s", engine.Quote(s.Header))
		return nil
	}
	if s.Header != "" {
		s.Header = textproto.CanonicalMIMEHeaderKey(s.Header)
	}
	return s
}

// splitUpstreams reports each side of route rp's split whose upstream is
// not declared (n is the route's node).
func (p *parser) splitUpstreams(r *Route, rp string, n *yaml.Node, declared map[string]bool, names []string) {
	if len(r.Split) == 0 || n.Kind != yaml.MappingNode {
		return
	}
	var items []*yaml.Node
	for i := 0; i+1 < len(n.Content); i += 2 {
		if n.Content[i].Value == "split" {
			items = n.Content[i+1].Content
		}
	}
	for i, s := range r.Split {
		if declared[s.Upstream] {
			continue
		}
		at := n
		if i < len(items) {
			at = items[i]
		}
		p.Add(at, engine.Key(engine.Index(engine.Key(rp, "split"), i), "upstream"), "unknown upstream %s%s", engine.Quote(s.Upstream), engine.Suggest(s.Upstream, names))
	}
}
