package gateway

import (
	"context"
	"net"
	"path/filepath"
	"sync/atomic"
	"time"

	"github.com/levee-gw/levee/internal/admin"
	"github.com/levee-gw/levee/internal/apps"
	"github.com/levee-gw/levee/internal/clusterlimit"
	"github.com/levee-gw/levee/internal/clusterstore"
	"github.com/levee-gw/levee/internal/config"
)

// This file wires cluster.etcd: the shared app store (clusterstore), this
// node's membership and GET /api/v1/cluster.

// sharedAppsFile is the last shared app state, under state_dir: what a
// node serves when etcd does not answer at start.
const sharedAppsFile = "cluster-apps.json"

// etcdState is the gateway's etcd store, open from Start to Shutdown.
type etcdState struct {
	store  atomic.Pointer[clusterstore.Store]
	pushes clusterstore.PushFollower // the shared pushes followed (cluster_push.go)
}

// openSharedApps opens the etcd app store of cluster.etcd (it does not
// wait longer than dial_timeout for etcd; without it, the last state
// saved under state_dir serves).
func (g *Gateway) openSharedApps(cfg *config.Config) (apps.Backend, error) {
	e := cfg.Cluster.Etcd
	s, err := clusterstore.Open(clusterstore.Options{
		Endpoints: e.Endpoints, Prefix: e.Prefix, LeaseTTL: e.LeaseTTL, DialTimeout: e.DialTimeout, OpTimeout: e.OpTimeout,
		StateFile: filepath.Join(cfg.StateDir, sharedAppsFile),
		OnChange:  g.publishApps,
		Logger:    g.logger.With("store", "etcd"),
	})
	if err != nil {
		return nil, err
	}
	g.etcd.store.Store(s)
	g.publishApps(s.Current())
	ctx, cancel := context.WithTimeout(context.Background(), seedTimeout)
	defer cancel()
	g.seedApps(ctx, s, cfg)
	return closingStore{s, g}, nil
}

// closingStore forgets the gateway's pointer to the store it closes.
type closingStore struct {
	*clusterstore.Store
	g *Gateway
}

func (c closingStore) Close() error {
	c.g.etcd.store.CompareAndSwap(c.Store, nil)
	return c.Store.Close()
}

// joinEtcd adds this node to the membership once the admin listener's
// address is known.
func (g *Gateway) joinEtcd(cfg *config.Config, adminLn net.Listener) {
	if s := g.etcd.store.Load(); s != nil {
		g.setFleetNode(nodeID(cfg, adminLn))
		s.Join(clusterstore.Node{ID: nodeID(cfg, adminLn), Version: g.self.Version(), Admin: adminLn.Addr().String(), Since: time.Now().UTC()})
	}
}

// etcdNodes is the live-node count the Redis limiter divides by when
// cluster.etcd lists the nodes (nil without it: Redis counts them).
func (g *Gateway) etcdNodes(cfg *config.Config) func() int {
	if cfg.Cluster == nil || cfg.Cluster.Etcd == nil {
		return nil
	}
	return func() int {
		if s := g.etcd.store.Load(); s != nil {
			return s.Nodes()
		}
		return 0
	}
}

// registerStoreCollector registers levee_cluster_store_up and
// levee_cluster_nodes (clusterlimit declares both) for the stores of
// cluster.redis (l, nil without) and cluster.etcd.
func (g *Gateway) registerStoreCollector(cfg *config.Config, l *clusterlimit.Limiter) error {
	if cfg.Cluster == nil {
		return nil
	}
	o := clusterlimit.StoreOptions{Redis: l}
	if cfg.Cluster.Etcd != nil {
		o.EtcdUp = func() bool {
			s := g.etcd.store.Load()
			up := false
			if s != nil {
				up, _ = s.Up()
			}
			return up
		}
		o.EtcdNodes = func() int {
			if s := g.etcd.store.Load(); s != nil {
				return s.Nodes()
			}
			return 1
		}
	}
	return g.registry.Register(clusterlimit.NewStoreCollector(o))
}

// clusterView answers GET /api/v1/cluster: the nodes from etcd (listed
// without cluster.etcd, none), Redis's and etcd's state.
func (g *Gateway) clusterView(ctx context.Context) admin.ClusterView {
	v := admin.ClusterView{Redis: admin.StoreState{Error: "not configured"}, Etcd: admin.StoreState{Error: "not configured"}}
	if l := g.cluster; l != nil {
		v.Redis = admin.StoreState{Up: l.Up(), Error: l.LastError()}
	}
	s := g.etcd.store.Load()
	if s == nil {
		return v
	}
	up, msg := s.Up()
	v.Etcd = admin.StoreState{Up: up, Error: msg}
	g.mu.Lock()
	timeout := g.cfg.Cluster.Etcd.OpTimeout
	g.mu.Unlock()
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	nodes, err := s.Members(ctx)
	if err != nil {
		v.Etcd = admin.StoreState{Up: false, Error: err.Error()}
		return v
	}
	for _, n := range nodes {
		v.Nodes = append(v.Nodes, admin.ClusterNode(n))
	}
	return v
}
