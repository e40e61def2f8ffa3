package gateway

import (
	"fmt"
	"net"
	"slices"

	"github.com/levee-gw/levee/internal/clusterlimit"
	"github.com/levee-gw/levee/internal/config"
	"github.com/levee-gw/levee/internal/proxy"
)

// newClusterLimiter builds the shared limiter of cluster.redis, or returns
// nil without one. It reads password_file; it does not connect.
func (g *Gateway) newClusterLimiter(cfg *config.Config) (*clusterlimit.Limiter, error) {
	if cfg.Cluster == nil || cfg.Cluster.Redis == nil {
		return nil, g.registerStoreCollector(cfg, nil)
	}
	r := cfg.Cluster.Redis
	password := ""
	if r.PasswordFile != "" {
		var err error
		if password, err = config.ReadPasswordFile(r.PasswordFile); err != nil {
			return nil, fmt.Errorf("cluster.redis.password_file: %w", err)
		}
	}
	mode := clusterlimit.Local
	switch r.OnFailure {
	case "allow":
		mode = clusterlimit.Allow
	case "deny":
		mode = clusterlimit.Deny
	}
	l, err := clusterlimit.New(clusterlimit.Options{
		Address:         r.Address,
		Password:        password,
		Timeout:         r.Timeout,
		OnFailure:       mode,
		Prefix:          r.Prefix,
		BreakerFailures: r.BreakerFailures,
		NodeTTL:         r.NodeTTL,
		Nodes:           g.etcdNodes(cfg),
		Registerer:      g.registry,
		Logger:          g.logger.With("store", "redis"),
	})
	if err != nil {
		return nil, fmt.Errorf("cluster.redis: %w", err)
	}
	if err := g.registerStoreCollector(cfg, l); err != nil {
		_ = l.Close()
		return nil, err
	}
	return l, nil
}

// sharedLimits is the proxy's view of g.cluster: nil (not a nil pointer in
// an interface) without one.
func (g *Gateway) sharedLimits() proxy.SharedLimits {
	if g.cluster == nil {
		return nil
	}
	return g.cluster
}

// startCluster starts the heartbeat, once the admin listener's port (part
// of the default node id) is known.
func (g *Gateway) startCluster(cfg *config.Config, adminLn net.Listener) {
	if g.cluster != nil {
		g.cluster.Start(nodeID(cfg, adminLn))
	}
	g.joinEtcd(cfg, adminLn)
	g.syncPushes()
}

// closeCluster stops the heartbeat, leaves the live-node set and closes the
// Redis connections (at Shutdown, after the data plane drained; or when
// New fails after building the limiter).
func (g *Gateway) closeCluster() {
	if g.cluster == nil {
		return
	}
	if err := g.cluster.Close(); err != nil {
		g.logger.Error("closing the Redis connections", "error", err)
	}
}

// nodeID is cluster.node_id, or the host name and the admin listener's
// port once it listens.
func nodeID(cfg *config.Config, adminLn net.Listener) string {
	if cfg.Cluster != nil && cfg.Cluster.NodeID != "" {
		return cfg.Cluster.NodeID
	}
	return clusterlimit.DefaultNodeID(adminLn.Addr())
}

// clusterNotes are /readyz's notes on cluster mode (ready, but
// degraded): Redis's and etcd's while either does not answer.
func (g *Gateway) clusterNotes() []string {
	var notes []string
	if l := g.cluster; l != nil {
		notes = append(notes, l.ReadyNote())
	}
	if s := g.etcd.store.Load(); s != nil {
		notes = append(notes, s.ReadyNote())
	}
	return slices.DeleteFunc(notes, func(n string) bool { return n == "" })
}
