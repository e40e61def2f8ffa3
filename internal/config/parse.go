package config

import "github.com/levee-gw/levee/internal/config/engine"

// parser walks a YAML node tree into a Config, collecting every problem
// instead of stopping at the first. A parser is used for one Parse call.
type parser struct {
	*engine.Parser
}

const (
	// maxFileBytes, maxDepth and maxErrors bound the work Parse does on
	// hostile input.
	maxFileBytes = 4 << 20
)
