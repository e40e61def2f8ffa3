package config

import (
	"reflect"
	"strings"
	"testing"
	"time"
)

func TestClusterEtcd(t *testing.T) {
	cfg, err := Parse([]byte(head + upstreams + routes + "cluster:\n  etcd: {endpoints: [http://127.0.0.1:2379]}\n"))
	if err != nil {
		t.Fatal(err)
	}
	want := &ClusterEtcd{Endpoints: []string{"http://127.0.0.1:2379"}, Prefix: "/levee/", LeaseTTL: 5 * time.Second,
		DialTimeout: 2 * time.Second, OpTimeout: 2 * time.Second}
	if !reflect.DeepEqual(cfg.Cluster.Etcd, want) {
		t.Fatalf("cluster.etcd = %+v, want %+v", cfg.Cluster.Etcd, want)
	}
	cfg, err = Parse([]byte(head + upstreams + routes + "cluster:\n  etcd: {endpoints: [127.0.0.1:2379, 127.0.0.2:2379], prefix: /gw1/, lease_ttl: 3s, dial_timeout: 1s, op_timeout: 500ms}\n"))
	if err != nil {
		t.Fatal(err)
	}
	want = &ClusterEtcd{Endpoints: []string{"127.0.0.1:2379", "127.0.0.2:2379"}, Prefix: "/gw1/", LeaseTTL: 3 * time.Second,
		DialTimeout: time.Second, OpTimeout: 500 * time.Millisecond}
	if !reflect.DeepEqual(cfg.Cluster.Etcd, want) {
		t.Fatalf("cluster.etcd = %+v, want %+v", cfg.Cluster.Etcd, want)
	}
	for _, tc := range []struct{ yaml, want string }{
		{"cluster:\n  etcd: {}\n", "cluster.etcd.endpoints: required"},
		{"cluster:\n  etcd: {endpoints: []}\n", "cluster.etcd.endpoints: must list 1 to 16 etcd endpoints, got 0"},
		{"cluster:\n  etcd: {endpoints: [nowhere]}\n", `cluster.etcd.endpoints[0]: invalid etcd endpoint "nowhere"`},
		{"cluster:\n  etcd: {endpoints: [127.0.0.1:2379, 127.0.0.1:2379]}\n", "cluster.etcd.endpoints[1]: duplicate etcd endpoint"},
		{"cluster:\n  etcd: {endpoints: [127.0.0.1:2379], prefix: levee}\n", `cluster.etcd.prefix: must start and end with "/"`},
		{"cluster:\n  etcd: {endpoints: [127.0.0.1:2379], lease_ttl: 1s}\n", `cluster.etcd.lease_ttl: must be from 2s to 1m0s, got "1s"`},
		{"cluster:\n  etcd: {endpoints: [127.0.0.1:2379], op_timeout: 10ms}\n", `cluster.etcd.op_timeout: must be from 100ms to 1m0s, got "10ms"`},
		{"cluster:\n  etcd: {endpoints: [127.0.0.1:2379], dial_timeout: 2m}\n", `cluster.etcd.dial_timeout: must be from 100ms to 1m0s`},
		{"cluster:\n  etcd: {endpoints: [127.0.0.1:2379], watch: true}\n", "cluster.etcd.watch: unknown field"},
	} {
		_, err := Parse([]byte(head + upstreams + routes + tc.yaml))
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%q: err = %v, want %q", tc.yaml, err, tc.want)
		}
	}
}
