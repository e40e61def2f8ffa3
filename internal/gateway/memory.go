package gateway

import (
	"fmt"

	"github.com/levee-gw/levee/internal/config"
	"github.com/levee-gw/levee/internal/memguard"
)

// memoryGuard makes the memory guard cfg asks for: the memory block's
// limit and watermarks; none with `memory: off`; without the block, the
// automatic limit found in env (memguard.DetectLimit: GOMEMLIMIT or the
// cgroup's limit, less a margin, else the machine's memory) with the
// block's default watermarks, none when nothing could be read. from says
// which limit is in force and where it came from, for the startup log.
func memoryGuard(m *config.Memory, env memguard.Env) (g *memguard.Guard, from string, err error) {
	switch {
	case m != nil && m.Off:
		return nil, "off (memory: off)", nil
	case m != nil:
		g, err = memguard.New(memguard.Options{Limit: m.Limit, SoftWatermark: m.SoftWatermark, HardWatermark: m.HardWatermark})
		return g, fmt.Sprintf("%d bytes from the memory block", m.Limit), err
	}
	a, err := memguard.DetectLimit(env)
	if err != nil {
		return nil, "", err
	}
	if a.Limit == 0 {
		return nil, a.String(), nil
	}
	g, err = memguard.New(memguard.Options{Limit: a.Limit, SoftWatermark: config.DefaultMemorySoftWatermark, HardWatermark: config.DefaultMemoryHardWatermark})
	return g, a.String(), err
}
