//go:build !race

package gateway

import (
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/levee-gw/levee/internal/testsvc"
)

// TestClusterDataAPIPublishPropagation (a wall-clock test, run by `make
// load`; issue 29's speed figure): three levee gateways on one real etcd
// and a real SQLite database; 100 rounds, each adding a version of one
// data API on a node (not timed) and publishing it there (the nodes take
// turns), timed from the publish call until all three nodes serve the new
// version (each polled every millisecond through its data listener; the
// figure includes the publish call itself). The
// 99th percentile must be within 1 s; p50, p99 and the slowest are
// logged.
func TestClusterDataAPIPublishPropagation(t *testing.T) {
	e := testsvc.StartEtcd(t)
	dbPath, _ := sqliteOrders(t)
	nodes := make([]*instance, 3)
	for i := range nodes {
		nodes[i] = launch(t, dataNode(t, i+1, e.Endpoint, dbPath, false), "")
	}
	defer func() {
		for _, n := range nodes {
			n.stop()
		}
	}()
	for i, n := range nodes {
		waitFor(t, fmt.Sprintf("node %d reaching etcd", i+1), func() bool { return etcdUp(t, n) })
	}
	const path = "/v1/speed"
	nodes[0].expectAPI("POST", "/api/v1/data-apis", `{"name": "speed", `+versionDef(path, 1)[1:], 201, "")
	const rounds = 100
	took := make([]time.Duration, 0, rounds)
	for round := range rounds {
		n := nodes[round%3]
		v := round + 2
		n.expectAPI("POST", "/api/v1/data-apis/speed/versions", versionDef(path, v), 201, "")
		start := time.Now()
		n.expectAPI("POST", "/api/v1/data-apis/speed/publish", fmt.Sprintf(`{"version": %d}`, v), 200, "")
		// Each node polled every millisecond (a fixed interval, so the
		// figure is not rounded up by a growing one), for at most 10 s.
		deadline := start.Add(10 * time.Second)
		for i, m := range nodes {
			for {
				if got, _ := m.served(path); got == v {
					break
				}
				if time.Now().After(deadline) {
					t.Fatalf("round %d: node %d does not serve version %d within 10 s", round, i+1, v)
				}
				time.Sleep(time.Millisecond) // polling for the state, bounded by deadline
			}
		}
		took = append(took, time.Since(start))
	}
	slices.Sort(took)
	p50, p99, worst := took[rounds/2], took[rounds*99/100-1], took[rounds-1]
	t.Logf("%d publishes (nodes taking turns) served by all three nodes after: p50 %v, p99 %v, max %v", rounds, p50, p99, worst)
	if p99 > time.Second {
		t.Errorf("p99 %v from a publish to all three nodes serving it, want within 1 s", p99)
	}
}
