package config

import (
	"time"

	"github.com/levee-gw/levee/internal/config/engine"
	"gopkg.in/yaml.v3"
)

// The limits block (`limits`, an upstream's or a data source's):
// admission control, its concurrency limit and queue.

// limitRule is the rule for `max_concurrency`, as error messages state it.
const limitRule = `a whole number from 1 to 100000 or "adaptive"`

// limits reads an upstream's `limits`. max_concurrency is required; min
// and max apply only to an adaptive limit, and max_queue's default
// depends on which kind of limit it is.
func (p *parser) limits(path string, n *yaml.Node) *Limits {
	f, ok := p.Block(path, n, limitsBlock)
	if !ok {
		return defaultLimits(1, false)
	}
	// kindOK is false when max_concurrency is missing or invalid: min and
	// max are then range-checked but not paired with the limit's kind.
	n0, adaptive, kindOK := 1, false, false
	mcp := engine.Key(path, "max_concurrency")
	switch v := f["max_concurrency"]; {
	case v == nil:
		p.Add(n, mcp, "required, %s", limitRule)
	case v.Kind == yaml.AliasNode:
	case v.Kind == yaml.ScalarNode && v.ShortTag() == "!!str" && v.Value == adaptiveLimit:
		adaptive, kindOK = true, true
	default:
		var i int64
		if v.Kind != yaml.ScalarNode || v.ShortTag() != "!!int" || v.Decode(&i) != nil || i < 1 || i > maxConcurrencyCap {
			p.Add(v, mcp, "must be %s, got %s", limitRule, engine.Describe(v))
			break
		}
		n0, kindOK = int(i), true
	}
	l := defaultLimits(n0, adaptive)
	if !kindOK {
		l.MaxConcurrency, l.MaxQueue = 0, 0
	}

	if kindOK && !adaptive {
		for _, name := range []string{"min", "max"} {
			if f[name] != nil {
				p.Add(firstKey(n, name), engine.Key(path, name), "only applies with max_concurrency: %s; max_concurrency is %d", adaptiveLimit, n0)
				delete(f, name)
			}
		}
	}
	// min and max (left out above unless adaptive or unknown), max_queue,
	// queue_timeout and max_per_consumer.
	bad := p.Bind(f, n, path, limitsBlock, l)
	if minNode, maxNode := f["min"], f["max"]; adaptive && !bad["min"] && !bad["max"] && l.Min > l.Max {
		switch {
		case maxNode == nil:
			p.Add(minNode, engine.Key(path, "min"), "must be at most max (%d, the default), got %s", l.Max, engine.Describe(minNode))
		case minNode == nil:
			p.Add(maxNode, engine.Key(path, "max"), "must be at least min (%d, the default), got %s", l.Min, engine.Describe(maxNode))
		default:
			p.Add(maxNode, engine.Key(path, "max"), "must be at least min (%d), got %s", l.Min, engine.Describe(maxNode))
		}
	}
	return l
}

var limitsBlock = engine.NewBlock(
	engine.Field{Name: "max_concurrency", Kind: engine.KindEither, Required: true, Doc: limitRule, Either: []engine.Field{
		{Kind: engine.KindInt, Lo: 1, Hi: maxConcurrencyCap}, {Kind: engine.KindEnum, Enum: []string{adaptiveLimit}}}},
	engine.Field{Name: "min", Kind: engine.KindInt, Lo: 1, Hi: maxConcurrencyCap, Doc: "lowest adaptive limit",
		Bind: engine.At(func(l *Limits) *int { return &l.Min })},
	engine.Field{Name: "max", Kind: engine.KindInt, Lo: 1, Hi: maxConcurrencyCap, Doc: "highest adaptive limit",
		Bind: engine.At(func(l *Limits) *int { return &l.Max })},
	engine.Field{Name: "max_queue", Kind: engine.KindInt, Lo: 0, Hi: maxQueueCap, Doc: "requests waiting at once; twice a static limit, or 256 with adaptive",
		Bind: engine.At(func(l *Limits) *int { return &l.MaxQueue })},
	engine.Field{Name: "queue_timeout", Kind: engine.KindDuration, Def: DefaultLimitsQueueTimeout, Doc: "longest wait in the queue",
		Bind: engine.At(func(l *Limits) *time.Duration { return &l.QueueTimeout })},
	engine.Field{Name: "max_per_consumer", Kind: engine.KindInt, Lo: 0, Hi: maxMaxConnections, Def: DefaultLimitsMaxPerConsumer,
		Doc:  "requests one consumer may have in flight; 0 is half the limit",
		Bind: engine.At(func(l *Limits) *int { return &l.MaxPerConsumer })},
)

// Limits is the admission control of one upstream (`limits`): how many
// requests may be in flight to it at once, and how the rest wait in a
// bounded queue that is fair between consumers. See "Admission control"
// in docs/configuration.md.
type Limits struct {
	// MaxConcurrency is the static limit on requests in flight to the
	// upstream (`max_concurrency`, required: a whole number 1 to 100000,
	// or the string "adaptive"). There is no default. It is 0 exactly
	// when Adaptive is true.
	MaxConcurrency int
	// Adaptive is true when `max_concurrency: adaptive`: the limit is
	// found from measured latency and kept from Min to Max.
	Adaptive bool
	// Min is the lowest limit the adaptive algorithm may set (`min`, a
	// whole number from 1 to Max). Default DefaultLimitsAdaptiveMin (4)
	// when Adaptive; 0 with a static limit, where `min` is an error.
	Min int
	// Max is the highest limit the adaptive algorithm may set (`max`, a
	// whole number from Min to 100000). Default DefaultLimitsAdaptiveMax (1000) when Adaptive; 0
	// with a static limit, where `max` is an error.
	Max int
	// MaxQueue caps the requests waiting for a slot (`max_queue`, a whole
	// number 0 to 1000000). Default twice MaxConcurrency for a static
	// limit, DefaultLimitsAdaptiveMaxQueue (256) for an adaptive one. 0
	// means no queue: a request over the limit is refused at once, 503
	// concurrency_limit. A request arriving to a full queue gets 503
	// queue_full.
	MaxQueue int
	// QueueTimeout is the longest a request waits in the queue before it
	// is refused, 503 queue_timeout (`queue_timeout`, a duration greater
	// than 0). Default DefaultLimitsQueueTimeout (50ms).
	QueueTimeout time.Duration
	// MaxPerConsumer caps the requests one consumer (the authenticated
	// app when there is one, else the client IP) may have in flight to
	// the upstream at once; a request over it is refused, 429
	// consumer_limit (`max_per_consumer`, a whole number 0 or more).
	// Default DefaultLimitsMaxPerConsumer (0), which means automatic: the
	// current limit plus half of max_queue (one consumer may use every slot
	// nobody else wants, but never more than half the queue).
	MaxPerConsumer int
}

// Defaults of this file's fields, each the def of its table entry.
const (
	// DefaultLimitsAdaptiveMin is Limits.Min when omitted with an
	// adaptive limit.
	DefaultLimitsAdaptiveMin = 4
	// DefaultLimitsAdaptiveMax is Limits.Max when omitted with an
	// adaptive limit.
	DefaultLimitsAdaptiveMax = 1000
	// DefaultLimitsAdaptiveMaxQueue is Limits.MaxQueue when omitted with
	// an adaptive limit.
	DefaultLimitsAdaptiveMaxQueue = 256
	// DefaultLimitsQueueTimeout is Limits.QueueTimeout when omitted.
	DefaultLimitsQueueTimeout = 50 * time.Millisecond
	// DefaultLimitsMaxPerConsumer is Limits.MaxPerConsumer when omitted:
	// 0, automatic (half the limit, at least 1).
	DefaultLimitsMaxPerConsumer = 0
)

// Bounds of this file's fields, used by their table entries and readers.
const (
	maxConcurrencyCap = 100000
	maxQueueCap       = 1000000
)

// adaptiveLimit is the string value of `max_concurrency` that asks for an
// adaptive limit.
const adaptiveLimit = "adaptive"

// defaultLimits returns the Limits of a `limits` block that sets nothing
// but max_concurrency: a static limit of n, or an adaptive one when
// adaptive.
func defaultLimits(n int, adaptive bool) *Limits {
	l := engine.WithDefaults(limitsBlock, &Limits{MaxConcurrency: n, MaxQueue: 2 * n})
	if adaptive {
		l.MaxConcurrency = 0
		l.Adaptive = true
		l.Min, l.Max = DefaultLimitsAdaptiveMin, DefaultLimitsAdaptiveMax
		l.MaxQueue = DefaultLimitsAdaptiveMaxQueue
	}
	return l
}
