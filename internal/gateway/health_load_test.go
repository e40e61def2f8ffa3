//go:build !race

package gateway

import "testing"

// TestOutlierSlowStartRamp is TestOutlierEjectsRefusingEndpointAndSlowStartsItBack
// with its wall-clock half: once the refused endpoint returns, its share
// over successive batches of requests ramps from about 5 % to about a
// third during its 1 s slow start, with a batch in between. The batches
// are timed against the ramp on the wall clock, so it runs in the load
// step (Makefile LOAD_TEST_NAMES), without the race detector.
func TestOutlierSlowStartRamp(t *testing.T) {
	outlierEjectsAndSlowStarts(t, true)
}
