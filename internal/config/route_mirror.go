package config

import (
	"math"
	"time"

	"github.com/levee-gw/levee/internal/config/engine"
	"gopkg.in/yaml.v3"
)

// A route's `mirror` block: a copy of a share of the route's requests is
// sent to a shadow upstream and its answer discarded (docs/configuration.md
// "Mirroring"). Only on a route with an upstream; the shadow must be
// another declared upstream.

var mirrorBlock = engine.NewBlock(
	engine.Field{Name: "upstream", Kind: engine.KindString, Required: true, Pattern: namePattern,
		Doc:  "the shadow upstream the copies go to: a declared upstream other than the route's",
		Bind: engine.At(func(m *RouteMirror) *string { return &m.Upstream })},
	engine.Field{Name: "percent", Kind: engine.KindNumber, Flo: MirrorPercentStep, Fhi: 100, Def: DefaultMirrorPercent,
		Doc:   "share of the route's forwarded requests copied, 0.01 to 100 in steps of 0.01 (exactly that many of every 10000)",
		Check: checkMirrorPercent, Bind: engine.At(func(m *RouteMirror) *float64 { return &m.Percent })},
	engine.Field{Name: "max_in_flight", Kind: engine.KindInt, Lo: 1, Hi: MaxMirrorInFlight, Def: DefaultMirrorMaxInFlight,
		Doc:  "copies in flight at once; a request beyond it is not copied",
		Bind: engine.At(func(m *RouteMirror) *int { return &m.MaxInFlight })},
	engine.Field{Name: "timeout", Kind: engine.KindDuration, Def: DefaultMirrorTimeout,
		Doc:   "deadline of each copy, from sending it to the end of reading its answer; 10ms to 1m",
		Check: engine.CheckDurationWithin(10*time.Millisecond, time.Minute), Bind: engine.At(func(m *RouteMirror) *time.Duration { return &m.Timeout })},
)

// RouteMirror is a route's `mirror`: a copy of a share of the requests the
// route forwards goes to a shadow upstream, on its own, and the shadow's
// answer is read (up to a bound) and dropped. The copy never delays,
// fails or changes the route's own answer.
type RouteMirror struct {
	// Upstream is the shadow upstream (`upstream`, required): a key of
	// Config.Upstreams other than the route's own Upstream.
	Upstream string
	// Percent is the share of the route's forwarded requests copied
	// (`percent`, 0.01 to 100 in steps of MirrorPercentStep; default
	// DefaultMirrorPercent, 100). The choice is a counter, not a coin:
	// exactly Percent*100 of every 10000 requests are chosen, spread
	// evenly.
	Percent float64
	// MaxInFlight caps the copies in flight at once (`max_in_flight`, 1
	// to MaxMirrorInFlight; default DefaultMirrorMaxInFlight, 16): a
	// request chosen while the cap is reached is not copied.
	MaxInFlight int
	// Timeout bounds each copy, from sending it to the end of reading its
	// answer (`timeout`, 10ms to 1m; default DefaultMirrorTimeout, 5s).
	Timeout time.Duration
}

// Defaults and bounds of mirror's fields.
const (
	DefaultMirrorPercent     = 100.0
	DefaultMirrorMaxInFlight = 16
	DefaultMirrorTimeout     = 5 * time.Second
	// MirrorPercentStep is mirror.percent's granularity (one request in
	// 10000).
	MirrorPercentStep = 0.01
	// MaxMirrorInFlight bounds mirror.max_in_flight.
	MaxMirrorInFlight = 10000
)

// checkMirrorPercent accepts a percent that is a whole number of steps.
func checkMirrorPercent(p *engine.Parser, path string, n *yaml.Node, ptr any) bool {
	v := *ptr.(*float64)
	if s := v / MirrorPercentStep; math.Abs(s-math.Round(s)) > 1e-6 {
		p.Add(n, path, "must be a multiple of 0.01 (one request in 10000), got %s", engine.Describe(n))
		return false
	}
	return true
}

// MirrorPerTenThousand is m's percent as requests copied of every 10000.
func (m *RouteMirror) MirrorPerTenThousand() int {
	return int(math.Round(m.Percent / MirrorPercentStep))
}

// mirror reads a route's `mirror`; r is the route read so far (its
// upstream, data, redirect or respond decide whether a mirror is allowed).
func (p *parser) mirror(path string, n *yaml.Node, r *Route, f map[string]*yaml.Node) *RouteMirror {
	m := engine.WithDefaults(mirrorBlock, &RouteMirror{})
	mf, ok := p.Block(path, n, mirrorBlock)
	if !ok {
		return nil
	}
	bad := p.Bind(mf, n, path, mirrorBlock, m)
	for _, k := range []string{"data", "redirect", "respond"} {
		if f[k] != nil {
			p.Add(n, path, "only a route with an upstream is mirrored, this one has %s", k)
			return nil
		}
	}
	if !bad["upstream"] && f["upstream"] != nil && m.Upstream == r.Upstream {
		p.Add(mf["upstream"], engine.Key(path, "upstream"), "must differ from the route's upstream, got %s", engine.Quote(m.Upstream))
		return nil
	}
	if len(bad) > 0 {
		return nil
	}
	return m
}

// mirrorUpstreams reports each route whose mirror names an upstream that
// is not declared (routes calls it when the upstreams were read).
func (p *parser) mirrorUpstreams(routes []Route, items []*yaml.Node, declared map[string]bool, names []string) {
	for i := range routes {
		m := routes[i].Mirror
		if m == nil || declared[m.Upstream] || i >= len(items) || items[i].Kind != yaml.MappingNode {
			continue
		}
		node := items[i]
		if v := valueOf(items[i], "mirror"); v != nil {
			node = v
			if u := valueOf(v, "upstream"); u != nil {
				node = u
			}
		}
		p.Add(node, engine.Key(engine.Key(engine.Index("routes", i), "mirror"), "upstream"), "unknown upstream %s%s", engine.Quote(m.Upstream), engine.Suggest(m.Upstream, names))
	}
}

// valueOf is the value of key k in mapping n, or nil.
func valueOf(n *yaml.Node, k string) *yaml.Node {
	if n.Kind != yaml.MappingNode {
		return nil
	}
	for i := 0; i+1 < len(n.Content); i += 2 {
		if n.Content[i].Value == k {
			return n.Content[i+1]
		}
	}
	return nil
}
