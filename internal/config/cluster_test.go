package config

import (
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"
)

func TestClusterDefaults(t *testing.T) {
	cfg, err := Parse([]byte(head + upstreams + routes + "cluster:\n  redis: {address: 127.0.0.1:6379}\n"))
	if err != nil {
		t.Fatal(err)
	}
	want := &Cluster{Redis: &ClusterRedis{Address: "127.0.0.1:6379", Timeout: 50 * time.Millisecond, OnFailure: "local",
		Prefix: "levee:", BreakerFailures: 3, NodeTTL: 5 * time.Second}}
	if !reflect.DeepEqual(cfg.Cluster, want) {
		t.Fatalf("cluster = %+v / %+v, want %+v / %+v", cfg.Cluster, cfg.Cluster.Redis, want, want.Redis)
	}
	cfg, err = Parse([]byte(head + upstreams + routes))
	if err != nil || cfg.Cluster != nil {
		t.Fatalf("no cluster block: %+v, %v; want nil", cfg.Cluster, err)
	}
	pass := filepath.Join(t.TempDir(), "redis.pass")
	if err := os.WriteFile(pass, []byte("secret\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	cfg, err = Parse([]byte(head + upstreams + routes + "cluster:\n  node_id: node-a\n  redis:\n    address: 127.0.0.1:6379\n    password_file: " + pass +
		"\n    timeout: 20ms\n    on_failure: deny\n    prefix: \"gw1:\"\n    breaker_failures: 5\n    node_ttl: 10s\n"))
	if err != nil {
		t.Fatal(err)
	}
	want = &Cluster{NodeID: "node-a", Redis: &ClusterRedis{Address: "127.0.0.1:6379", PasswordFile: pass, Timeout: 20 * time.Millisecond,
		OnFailure: "deny", Prefix: "gw1:", BreakerFailures: 5, NodeTTL: 10 * time.Second}}
	if !reflect.DeepEqual(cfg.Cluster, want) {
		t.Fatalf("cluster = %+v / %+v, want %+v / %+v", cfg.Cluster, cfg.Cluster.Redis, want, want.Redis)
	}
}

// TestClusterRejects: every error names the field's path and the value.
func TestClusterRejects(t *testing.T) {
	empty := filepath.Join(t.TempDir(), "empty.pass")
	if err := os.WriteFile(empty, []byte("\nsecret\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct{ yaml, want string }{
		{"cluster:\n  redis: {}\n", "cluster.redis.address: required"},
		{"cluster:\n  redis: {address: nowhere}\n", `cluster.redis.address: invalid address "nowhere"`},
		{"cluster:\n  redis: {address: 127.0.0.1:6379, timeout: 0s}\n", "cluster.redis.timeout:"},
		{"cluster:\n  redis: {address: 127.0.0.1:6379, timeout: 11s}\n", "cluster.redis.timeout: must be from 1ms to 10s, got \"11s\""},
		{"cluster:\n  redis: {address: 127.0.0.1:6379, on_failure: open}\n", `cluster.redis.on_failure: must be one of "local", "allow", "deny", got "open"`},
		{"cluster:\n  redis: {address: 127.0.0.1:6379, password_file: /nonexistent/redis.pass}\n", `cluster.redis.password_file: file not found: "/nonexistent/redis.pass"`},
		{"cluster:\n  redis: {address: 127.0.0.1:6379, password_file: " + empty + "}\n", "cluster.redis.password_file: \"" + empty + "\" holds no password on its first line"},
		{"cluster:\n  redis: {address: 127.0.0.1:6379, prefix: \"a b\"}\n", `cluster.redis.prefix: must be 1 to 64 printable ASCII characters without spaces, got "a b"`},
		{"cluster:\n  redis: {address: 127.0.0.1:6379, breaker_failures: 0}\n", "cluster.redis.breaker_failures:"},
		{"cluster:\n  redis: {address: 127.0.0.1:6379, node_ttl: 1s}\n", "cluster.redis.node_ttl: must be from 2s to 1m0s, got \"1s\""},
		{"cluster:\n  node_id: \"\"\n", "cluster.node_id: must not be empty"},
		{"cluster:\n  node_id: \"node a\"\n", `cluster.node_id: must be 1 to 128 printable ASCII characters without spaces, got "node a"`},
		{"cluster:\n  redis: {address: 127.0.0.1:6379, adress: x}\n", "cluster.redis.adress:"},
	} {
		_, err := Parse([]byte(head + upstreams + routes + tc.yaml))
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%q: error %v, want it to contain %q", tc.yaml, err, tc.want)
		}
	}
}
