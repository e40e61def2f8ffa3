package config

import "slices"

// Equal reports whether c and o are the same cluster block, field by field
// (both nil is equal; nil and an empty block are not). The gateway reads
// the block at start only, so a reload that changes it is refused; this is
// that test, typed, so a field added to Cluster, ClusterRedis or
// ClusterEtcd is a compile-visible change here and not a reflect walk.
func (c *Cluster) Equal(o *Cluster) bool {
	if c == nil || o == nil {
		return c == o
	}
	return c.NodeID == o.NodeID && c.Redis.Equal(o.Redis) && c.Etcd.Equal(o.Etcd)
}

// Equal reports whether r and o are the same cluster.redis block (both
// nil is equal).
func (r *ClusterRedis) Equal(o *ClusterRedis) bool {
	if r == nil || o == nil {
		return r == o
	}
	return *r == *o // every field is comparable
}

// Equal reports whether e and o are the same cluster.etcd block (both nil
// is equal); endpoints compare in order, as written.
func (e *ClusterEtcd) Equal(o *ClusterEtcd) bool {
	if e == nil || o == nil {
		return e == o
	}
	return slices.Equal(e.Endpoints, o.Endpoints) && e.Prefix == o.Prefix && e.LeaseTTL == o.LeaseTTL &&
		e.DialTimeout == o.DialTimeout && e.OpTimeout == o.OpTimeout
}
