package gateway

import "github.com/levee-gw/levee/internal/loadgen"

// The load tests' client is internal/loadgen (lean on purpose, so that on
// a 2-core machine the load generator leaves the CPU to levee); these names
// keep the tests short.
type (
	openLoop = loadgen.Open
	shot     = loadgen.Shot
)

var (
	sequentialLatencies = loadgen.Sequential
	percentile          = loadgen.Percentile
)
