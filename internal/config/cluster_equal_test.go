package config

import (
	"reflect"
	"testing"
	"time"
)

func TestClusterEqual(t *testing.T) {
	base := func() *Cluster {
		return &Cluster{NodeID: "a",
			Redis: &ClusterRedis{Address: "r:6379", PasswordFile: "/p", Timeout: time.Second, OnFailure: "local", Prefix: "levee:", BreakerFailures: 3, NodeTTL: 5 * time.Second},
			Etcd:  &ClusterEtcd{Endpoints: []string{"e1:2379", "e2:2379"}, Prefix: "/levee/", LeaseTTL: 5 * time.Second, DialTimeout: time.Second, OpTimeout: time.Second}}
	}
	var nilC *Cluster
	if !nilC.Equal(nil) || nilC.Equal(base()) || base().Equal(nil) || !base().Equal(base()) {
		t.Fatal("nil or identical blocks compare wrong")
	}
	changes := []func(c *Cluster){
		func(c *Cluster) { c.NodeID = "b" },
		func(c *Cluster) { c.Redis = nil },
		func(c *Cluster) { c.Etcd = nil },
		func(c *Cluster) { c.Redis.Address = "x:1" },
		func(c *Cluster) { c.Redis.PasswordFile = "" },
		func(c *Cluster) { c.Redis.Timeout++ },
		func(c *Cluster) { c.Redis.OnFailure = "deny" },
		func(c *Cluster) { c.Redis.Prefix = "x:" },
		func(c *Cluster) { c.Redis.BreakerFailures++ },
		func(c *Cluster) { c.Redis.NodeTTL++ },
		func(c *Cluster) { c.Etcd.Endpoints = []string{"e2:2379", "e1:2379"} },
		func(c *Cluster) { c.Etcd.Endpoints = c.Etcd.Endpoints[:1] },
		func(c *Cluster) { c.Etcd.Prefix = "/x/" },
		func(c *Cluster) { c.Etcd.LeaseTTL++ },
		func(c *Cluster) { c.Etcd.DialTimeout++ },
		func(c *Cluster) { c.Etcd.OpTimeout++ },
	}
	for i, change := range changes {
		c := base()
		change(c)
		if c.Equal(base()) || base().Equal(c) {
			t.Errorf("change %d not seen by Equal", i)
		}
	}
	// One change per field above (Redis and Etcd: set to nil), plus a
	// second for the endpoints' order: a field added to the block needs
	// its comparison in cluster_equal.go and its line here.
	fields := 0
	for _, v := range []any{Cluster{}, ClusterRedis{}, ClusterEtcd{}} {
		fields += reflect.TypeOf(v).NumField()
	}
	if len(changes) != fields+1 {
		t.Errorf("%d changes tested for %d fields: update cluster_equal.go and this test", len(changes), fields)
	}
}
