//go:build !race

package gateway

import "testing"

// TestIncidentCPUPerRequest is TestIncidentReplayed with its wall-clock
// half: the same incident, and CPU per request after the poisoned update
// within 3x of before. CPU per request is judged on the wall clock, so it
// runs in the load step (Makefile LOAD_TEST_NAMES), without the race
// detector and with nothing else competing for the cores.
func TestIncidentCPUPerRequest(t *testing.T) {
	for _, kind := range []string{"file", "etcd"} {
		t.Run(kind, func(t *testing.T) { replayIncident(t, kind, true) })
	}
}
