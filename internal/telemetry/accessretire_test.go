package telemetry

import (
	"fmt"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
)

// TestAccessLogRetire: a log retired for a successor (a reload changed
// log.access) writes every line queued before Retire to its own writer;
// a line logged to it afterwards (a request that loaded it before the
// swap and ends after) is written by the successor; a log retired with
// no successor (turned off) writes nothing more. Both logs share one
// dropped counter, registered once.
func TestAccessLogRetire(t *testing.T) {
	reg := prometheus.NewRegistry()
	dropped, err := NewAccessLogDropped(reg)
	if err != nil {
		t.Fatal(err)
	}
	var oldOut, newOut syncBuffer
	old, err := NewAccessLog(AccessOptions{Writer: &oldOut, Sample2xx: 1, Dropped: dropped}, nil)
	if err != nil {
		t.Fatal(err)
	}
	next, err := NewAccessLog(AccessOptions{Writer: &newOut, Sample2xx: 1, Dropped: dropped}, nil)
	if err != nil {
		t.Fatal(err)
	}
	go old.Run()
	go next.Run()
	const before = 500
	for i := range before {
		old.Log(&AccessEntry{RequestID: fmt.Sprintf("before-%d", i), Status: 200})
	}
	old.Retire(next)
	if got := strings.Count(oldOut.String(), "\n"); got != before {
		t.Errorf("retired log wrote %d lines, want the %d queued before Retire", got, before)
	}
	old.Log(&AccessEntry{RequestID: "straggler", Status: 200})
	next.Log(&AccessEntry{RequestID: "after", Status: 200})
	next.Close()
	if got := newOut.String(); strings.Count(got, "\n") != 2 || !strings.Contains(got, `"straggler"`) || !strings.Contains(got, `"after"`) {
		t.Errorf("successor wrote %q, want the straggler's and its own line", got)
	}
	if strings.Contains(oldOut.String(), "straggler") {
		t.Error("the retired log wrote a line logged after Retire")
	}
	next.Log(&AccessEntry{RequestID: "off", Status: 200}) // closed, no successor: not written, not counted
	if strings.Contains(newOut.String(), `"off"`) || testutil.ToFloat64(dropped) != 0 {
		t.Errorf("a line logged after Close was written or counted as dropped")
	}
	if n, err := testutil.GatherAndCount(reg, "levee_access_log_dropped_total"); err != nil || n != 1 {
		t.Errorf("levee_access_log_dropped_total: %d series (%v), want 1", n, err)
	}
}
