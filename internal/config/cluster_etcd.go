package config

import (
	"time"

	"github.com/levee-gw/levee/internal/config/engine"
	"gopkg.in/yaml.v3"
)

// ClusterEtcd is `cluster.etcd`: where the nodes share apps, keys, grants
// and their membership (docs/cluster.md).
type ClusterEtcd struct {
	// Endpoints are the etcd members to dial (`endpoints`, required, 1 to
	// 16 distinct items), each "host:port", "http://host:port" or
	// "https://host:port", as for discovery.etcd.endpoints.
	Endpoints []string
	// Prefix starts every key levee writes (`prefix`, default "/levee/"):
	// it starts and ends with "/", so that clusters can share one etcd.
	Prefix string
	// LeaseTTL is the lease of this node's membership key (`lease_ttl`,
	// default 5s, 2s to 1m): a node that dies leaves the list within it
	// (etcd rounds a lease up to whole seconds).
	LeaseTTL time.Duration
	// DialTimeout bounds connecting to etcd (`dial_timeout`, default 2s,
	// 100ms to 1m); OpTimeout bounds each read or write (`op_timeout`,
	// default 2s, 100ms to 1m): an admin write that etcd does not take
	// within it answers 503 store_unavailable.
	DialTimeout, OpTimeout time.Duration
}

// Defaults of cluster.etcd.
const (
	DefaultClusterEtcdPrefix      = "/levee/"
	DefaultClusterEtcdLeaseTTL    = 5 * time.Second
	DefaultClusterEtcdDialTimeout = 2 * time.Second
	DefaultClusterEtcdOpTimeout   = 2 * time.Second
)

// Bounds of cluster.etcd's durations.
const (
	minClusterEtcdTimeout = 100 * time.Millisecond
	maxClusterEtcdTimeout = time.Minute
)

func defaultClusterEtcd() *ClusterEtcd {
	return engine.WithDefaults(clusterEtcdBlock, &ClusterEtcd{})
}

var clusterEtcdBlock = engine.NewBlock(
	engine.Field{Name: "endpoints", Kind: engine.KindList, Required: true, MinItems: 1, MaxItems: maxEtcdEndpoints, Item: &engine.Field{Kind: engine.KindString},
		Doc:   "etcd members: host:port or http(s)://host:port, distinct",
		Check: checkEtcdEndpoints, Bind: engine.At(func(e *ClusterEtcd) *[]string { return &e.Endpoints })},
	engine.Field{Name: "prefix", Kind: engine.KindString, Pattern: "^/(.*/)?$", Def: DefaultClusterEtcdPrefix,
		Doc: `start of every key levee writes, starting and ending with "/"`, Check: checkEtcdPrefix,
		Bind: engine.At(func(e *ClusterEtcd) *string { return &e.Prefix })},
	engine.Field{Name: "lease_ttl", Kind: engine.KindDuration, Def: DefaultClusterEtcdLeaseTTL, Doc: "lease of this node's membership key, 2s to 1m",
		Check: checkDurationIn(minClusterNodeTTL, maxClusterNodeTTL), Bind: engine.At(func(e *ClusterEtcd) *time.Duration { return &e.LeaseTTL })},
	engine.Field{Name: "dial_timeout", Kind: engine.KindDuration, Def: DefaultClusterEtcdDialTimeout, Doc: "time to connect to etcd, 100ms to 1m",
		Check: checkDurationIn(minClusterEtcdTimeout, maxClusterEtcdTimeout), Bind: engine.At(func(e *ClusterEtcd) *time.Duration { return &e.DialTimeout })},
	engine.Field{Name: "op_timeout", Kind: engine.KindDuration, Def: DefaultClusterEtcdOpTimeout, Doc: "each etcd read or write, 100ms to 1m; past it an admin write answers 503",
		Check: checkDurationIn(minClusterEtcdTimeout, maxClusterEtcdTimeout), Bind: engine.At(func(e *ClusterEtcd) *time.Duration { return &e.OpTimeout })},
)

// checkEtcdEndpoints reads a list of etcd members as
// discovery.etcd.endpoints is read (p.etcdEndpoints).
func checkEtcdEndpoints(p *engine.Parser, path string, n *yaml.Node, ptr any) bool {
	before := p.Count()
	*ptr.(*[]string) = (&parser{p}).etcdEndpoints(path, n, n)
	return p.Count() == before
}
