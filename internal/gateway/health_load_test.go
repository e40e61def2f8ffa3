//go:build !race

package gateway

import (
	"testing"
	"time"
)

// TestActiveCheckDetectionTime (issue 4, b; judged by the wall clock, so it
// runs in the load step, without -race): a backend that accepts and never
// answers is marked unhealthy within unhealthy_after × interval + timeout,
// plus 100 ms for scheduling, over real sockets. The same bound on the
// health manager's fake clock is TestManagerHangingCheckTimesOut.
func TestActiveCheckDetectionTime(t *testing.T) {
	_, _, took := hangingBackendDetected(t)
	const margin = 100 * time.Millisecond
	if bound := hangUnhealthyAfter*hangInterval + hangTimeout + margin; took > bound {
		t.Errorf("took %v, want at most %v", took, bound)
	}
}
