package config

import (
	"gopkg.in/yaml.v3"

	"github.com/levee-gw/levee/internal/config/engine"
)

// The checks that several blocks' fields share (a field's own rule, run
// by the engine's bind after its value was read: Field.Check).

// The checks that several fields share.
var (
	checkListen = engine.CheckStr(func(p *engine.Parser, path string, n *yaml.Node, s *string) bool {
		return (&parser{p}).address(path, n, *s, true)
	})
	checkEndpoint = engine.CheckStr(func(p *engine.Parser, path string, n *yaml.Node, s *string) bool {
		return (&parser{p}).address(path, n, *s, false)
	})
	checkName = engine.ProblemOf(func(s string) string {
		if validName(s) {
			return ""
		}
		return nameRule
	})
	checkZone = engine.CheckStr(func(p *engine.Parser, path string, n *yaml.Node, s *string) bool {
		return (&parser{p}).zone(path, n, *s)
	})
	// checkReadable refuses a file levee cannot read (checkReadableFile).
	checkReadable = engine.CheckStr(func(p *engine.Parser, path string, n *yaml.Node, s *string) bool {
		if problem := checkReadableFile(*s); problem != "" {
			p.Add(n, path, "%s", problem)
			return false
		}
		return true
	})
)
