package gateway

import (
	"fmt"
	"testing"

	"github.com/levee-gw/levee/internal/testsvc"
)

// clusterRedisBlock starts a Redis for t and returns a cluster block
// that uses it, for the metric catalogue tests: cluster.redis registers
// the cluster families (docs/metrics.md, "Cluster").
func clusterRedisBlock(t *testing.T) string {
	t.Helper()
	r := testsvc.StartRedis(t)
	return fmt.Sprintf("cluster: {node_id: catalogue, redis: {address: %q}}\n", r.Address)
}
