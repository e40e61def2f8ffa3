package config

import (
	"github.com/levee-gw/levee/internal/config/engine"
	"gopkg.in/yaml.v3"
)

// The memory block (`memory`): the process's memory budget and the
// watermarks above which requests are shed; or `memory: off`. Omitted, the
// guard is on with an automatic limit (internal/memguard's DetectLimit).

// MemoryOff is the `memory` value that turns the memory guard off.
const MemoryOff = "off"

// memoryField is the root's `memory` entry: off, or the block.
var memoryField = engine.Field{Name: "memory", Kind: engine.KindEither, Reload: engine.Restart,
	Doc:    "memory budget and load shedding; off, or omitted for an automatic limit (GOMEMLIMIT or the cgroup's, less 10%)",
	Either: []engine.Field{{Kind: engine.KindEnum, Enum: []string{MemoryOff}}, {Kind: engine.KindBlock, Sub: memoryBlock}}}

var memoryBlock = engine.NewBlock(
	engine.Field{Name: "limit", Kind: engine.KindSize, Lo: minMemoryLimit, Hi: maxMemoryLimit, Required: true,
		Missing: `required when memory is set, a size such as "2GiB"`,
		Doc:     "the process's memory budget",
		Bind:    engine.At(func(m *Memory) *int64 { return &m.Limit })},
	engine.Field{Name: "soft_watermark", Kind: engine.KindFraction, Def: DefaultMemorySoftWatermark,
		Doc:  "share of limit above which sheddable requests are refused; below hard_watermark",
		Bind: engine.At(func(m *Memory) *float64 { return &m.SoftWatermark })},
	engine.Field{Name: "hard_watermark", Kind: engine.KindFraction, Def: DefaultMemoryHardWatermark,
		Doc:  "share of limit above which all but critical requests are refused",
		Bind: engine.At(func(m *Memory) *float64 { return &m.HardWatermark })},
)

// memory reads `memory`, whose limit is required; the soft watermark must
// be below the hard one, whichever of them the file sets.
func (p *parser) memory(path string, n *yaml.Node) *Memory {
	if n.Kind == yaml.ScalarNode && n.ShortTag() == "!!str" {
		if n.Value != MemoryOff {
			p.Add(n, path, "must be %q or a mapping (limit, soft_watermark, hard_watermark), got %s", MemoryOff, engine.Describe(n))
		}
		return &Memory{Off: true}
	}
	m := defaultMemory()
	f, ok := p.Block(path, n, memoryBlock)
	if !ok {
		return m
	}
	bad := p.Bind(f, n, path, memoryBlock, m)
	if bad["soft_watermark"] || bad["hard_watermark"] || m.SoftWatermark < m.HardWatermark {
		return m
	}
	soft, hard := f["soft_watermark"], f["hard_watermark"]
	switch {
	case hard == nil:
		p.Add(soft, engine.Key(path, "soft_watermark"), "must be less than hard_watermark (%s, the default), got %s",
			engine.FormatNumber(m.HardWatermark), engine.Describe(soft))
	case soft == nil:
		p.Add(hard, engine.Key(path, "hard_watermark"), "must be greater than soft_watermark (%s, the default), got %s",
			engine.FormatNumber(m.SoftWatermark), engine.Describe(hard))
	default:
		p.Add(soft, engine.Key(path, "soft_watermark"), "must be less than hard_watermark (%s), got %s",
			engine.FormatNumber(m.HardWatermark), engine.Describe(soft))
	}
	return m
}

// Memory guards the process against running out of memory (`memory`).
// The watermarks are fractions of Limit compared with the live heap as
// runtime/metrics reports it (/gc/heap/live:bytes) plus the bytes that
// admitted requests have reserved to buffer bodies; SoftWatermark <
// HardWatermark <= 1.
type Memory struct {
	// Off is `memory: off`: no memory guard, no runtime memory limit set
	// by levee; the other fields are zero.
	Off bool
	// Limit is the Go runtime's soft memory limit, in bytes, as
	// debug.SetMemoryLimit takes it (`limit`, a size, required when the
	// block is present): 64MiB to 1TiB. Without the block, the limit is
	// automatic (see Config.Memory).
	Limit int64
	// SoftWatermark is the share of Limit above which sheddable requests
	// are refused, 503 memory_pressure (`soft_watermark`, a number greater
	// than 0 and at most 1, less than HardWatermark). Default
	// DefaultMemorySoftWatermark (0.8).
	SoftWatermark float64
	// HardWatermark is the share of Limit above which every request but
	// a critical one is refused, 503 memory_pressure (`hard_watermark`, a
	// number greater than 0 and at most 1, greater than SoftWatermark).
	// Default DefaultMemoryHardWatermark (0.9).
	HardWatermark float64
}

// Defaults of this file's fields, each the def of its table entry.
const (
	// DefaultMemorySoftWatermark is Memory.SoftWatermark when omitted.
	DefaultMemorySoftWatermark = 0.8
	// DefaultMemoryHardWatermark is Memory.HardWatermark when omitted.
	DefaultMemoryHardWatermark = 0.9
)

// Bounds of this file's fields, used by their table entries and readers.
const (
	minMemoryLimit = 64 << 20
	maxMemoryLimit = 1 << 40
)

func defaultMemory() *Memory { return engine.WithDefaults(memoryBlock, &Memory{}) }
