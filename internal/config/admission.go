package config

import (
	"gopkg.in/yaml.v3"
)

// This file reads the admission-control blocks: `memory` and an
// upstream's `limits`. Server's connection caps and Route.Priority are
// read with the rest of their blocks in walk.go.

// memory reads `memory`, whose limit is required; the soft watermark must
// be below the hard one, whichever of them the file sets.
func (p *parser) memory(path string, n *yaml.Node) *Memory {
	m := defaultMemory()
	f, ok := p.block(path, n, memoryBlock)
	if !ok {
		return m
	}
	bad := p.bind(f, n, path, memoryBlock, m)
	if bad["soft_watermark"] || bad["hard_watermark"] || m.SoftWatermark < m.HardWatermark {
		return m
	}
	soft, hard := f["soft_watermark"], f["hard_watermark"]
	switch {
	case hard == nil:
		p.add(soft, key(path, "soft_watermark"), "must be less than hard_watermark (%s, the default), got %s",
			formatNumber(m.HardWatermark), describe(soft))
	case soft == nil:
		p.add(hard, key(path, "hard_watermark"), "must be greater than soft_watermark (%s, the default), got %s",
			formatNumber(m.SoftWatermark), describe(hard))
	default:
		p.add(soft, key(path, "soft_watermark"), "must be less than hard_watermark (%s), got %s",
			formatNumber(m.HardWatermark), describe(soft))
	}
	return m
}

// limitRule is the rule for `max_concurrency`, as error messages state it.
const limitRule = `a whole number from 1 to 100000 or "adaptive"`

// limits reads an upstream's `limits`. max_concurrency is required; min
// and max apply only to an adaptive limit, and max_queue's default
// depends on which kind of limit it is.
func (p *parser) limits(path string, n *yaml.Node) *Limits {
	f, ok := p.block(path, n, limitsBlock)
	if !ok {
		return defaultLimits(1, false)
	}
	// kindOK is false when max_concurrency is missing or invalid: min and
	// max are then range-checked but not paired with the limit's kind.
	n0, adaptive, kindOK := 1, false, false
	mcp := key(path, "max_concurrency")
	switch v := f["max_concurrency"]; {
	case v == nil:
		p.add(n, mcp, "required, %s", limitRule)
	case v.Kind == yaml.AliasNode:
	case v.Kind == yaml.ScalarNode && v.ShortTag() == "!!str" && v.Value == adaptiveLimit:
		adaptive, kindOK = true, true
	default:
		var i int64
		if v.Kind != yaml.ScalarNode || v.ShortTag() != "!!int" || v.Decode(&i) != nil || i < 1 || i > maxConcurrencyCap {
			p.add(v, mcp, "must be %s, got %s", limitRule, describe(v))
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
				p.add(firstKey(n, name), key(path, name), "only applies with max_concurrency: %s; max_concurrency is %d", adaptiveLimit, n0)
				delete(f, name)
			}
		}
	}
	// min and max (left out above unless adaptive or unknown), max_queue,
	// queue_timeout and max_per_consumer.
	bad := p.bind(f, n, path, limitsBlock, l)
	if minNode, maxNode := f["min"], f["max"]; adaptive && !bad["min"] && !bad["max"] && l.Min > l.Max {
		switch {
		case maxNode == nil:
			p.add(minNode, key(path, "min"), "must be at most max (%d, the default), got %s", l.Max, describe(minNode))
		case minNode == nil:
			p.add(maxNode, key(path, "max"), "must be at least min (%d, the default), got %s", l.Min, describe(maxNode))
		default:
			p.add(maxNode, key(path, "max"), "must be at least min (%d), got %s", l.Min, describe(maxNode))
		}
	}
	return l
}
