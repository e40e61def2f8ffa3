package config

import (
	"errors"
	"fmt"
	"os"
	"strings"
	"time"

	"github.com/levee-gw/levee/internal/config/engine"
	"gopkg.in/yaml.v3"
)

// Cluster is cluster mode (`cluster`, optional): several levee nodes
// acting as one gateway. nil (no `cluster` block) is a single node.
// Read at start: changing it needs a restart.
type Cluster struct {
	// NodeID names this node among the others (`cluster.node_id`). ""
	// (the default) means the host name and the admin port, "host:port".
	NodeID string
	// Redis shares rate limits, quotas and the HMAC replay cache
	// (`cluster.redis`); nil means each node limits on its own.
	Redis *ClusterRedis
	// Etcd shares apps, keys and grants and lists the live nodes
	// (`cluster.etcd`, cluster_etcd.go); nil means each node keeps its
	// own app store.
	Etcd *ClusterEtcd
}

// ClusterRedis is `cluster.redis`: the store the nodes' limits live in
// (docs/cluster.md).
type ClusterRedis struct {
	// Address is Redis's host:port (`address`, required).
	Address string
	// PasswordFile is a file whose first line is Redis's password
	// (`password_file`); "" means no AUTH.
	PasswordFile string
	// Timeout bounds each Redis operation (`timeout`, default 50ms, 1ms
	// to 10s): past it, the request is decided as OnFailure says.
	Timeout time.Duration
	// OnFailure is what a decision does while Redis cannot take it
	// (`on_failure`): "local" (default) enforces each limit divided by
	// the live nodes on each node, "allow" admits, "deny" refuses (429).
	OnFailure string
	// Prefix starts every Redis key levee writes (`prefix`, default
	// "levee:"), so that clusters can share one Redis.
	Prefix string
	// BreakerFailures is how many failed operations in a row stop levee
	// from asking Redis until a background probe succeeds
	// (`breaker_failures`, default 3, 1 to 1000).
	BreakerFailures int
	// NodeTTL is how long a node not heard from still counts as live
	// (`node_ttl`, default 5s, 2s to 1m); nodes beat once a second.
	NodeTTL time.Duration
}

// Defaults of the cluster block.
const (
	DefaultClusterRedisTimeout   = 50 * time.Millisecond
	DefaultClusterOnFailure      = "local"
	DefaultClusterRedisPrefix    = "levee:"
	DefaultClusterBreakerFailure = 3
	DefaultClusterNodeTTL        = 5 * time.Second
)

// clusterFailureModes are on_failure's values.
var clusterFailureModes = []string{"local", "allow", "deny"}

// Bounds of the cluster block's fields.
const (
	minClusterTimeout    = time.Millisecond
	maxClusterTimeout    = 10 * time.Second
	minClusterNodeTTL    = 2 * time.Second
	maxClusterNodeTTL    = time.Minute
	maxBreakerFailures   = 1000
	maxClusterNodeIDLen  = 128
	maxClusterPrefixLen  = 64
	clusterNodeIDPattern = "^[!-~]{1,128}$"
	clusterPrefixPattern = "^[!-~]{1,64}$"
)

func defaultClusterRedis() *ClusterRedis {
	return engine.WithDefaults(clusterRedisBlock, &ClusterRedis{})
}

var (
	clusterRedisBlock = engine.NewBlock(
		engine.Field{Name: "address", Kind: engine.KindString, Required: true, Doc: "host:port of Redis",
			Check: checkEndpoint, Bind: engine.At(func(r *ClusterRedis) *string { return &r.Address })},
		engine.Field{Name: "password_file", Kind: engine.KindString, NonEmpty: true, Doc: "file whose first line is Redis's password; no AUTH when omitted",
			Check: checkPasswordFile, Bind: engine.At(func(r *ClusterRedis) *string { return &r.PasswordFile }), NotSecret: "a path; the password is read from the file"},
		engine.Field{Name: "timeout", Kind: engine.KindDuration, Def: DefaultClusterRedisTimeout, Doc: "each Redis operation, 1ms to 10s; past it on_failure decides",
			Check: checkDurationIn(minClusterTimeout, maxClusterTimeout), Bind: engine.At(func(r *ClusterRedis) *time.Duration { return &r.Timeout })},
		engine.Field{Name: "on_failure", Kind: engine.KindEnum, Enum: clusterFailureModes, Def: DefaultClusterOnFailure,
			Doc:  "without Redis: local (each node enforces limit / live nodes), allow or deny",
			Bind: engine.At(func(r *ClusterRedis) *string { return &r.OnFailure })},
		engine.Field{Name: "prefix", Kind: engine.KindString, NonEmpty: true, Pattern: clusterPrefixPattern, Def: DefaultClusterRedisPrefix,
			Doc:   "start of every key levee writes: 1 to 64 printable ASCII characters, no space",
			Check: checkPrintable(maxClusterPrefixLen),
			Bind:  engine.At(func(r *ClusterRedis) *string { return &r.Prefix })},
		engine.Field{Name: "breaker_failures", Kind: engine.KindInt, Lo: 1, Hi: maxBreakerFailures, Def: DefaultClusterBreakerFailure,
			Doc:  "failed operations in a row after which Redis is left alone until a background probe succeeds",
			Bind: engine.At(func(r *ClusterRedis) *int { return &r.BreakerFailures })},
		engine.Field{Name: "node_ttl", Kind: engine.KindDuration, Def: DefaultClusterNodeTTL, Doc: "how long a node not heard from still counts as live, 2s to 1m",
			Check: checkDurationIn(minClusterNodeTTL, maxClusterNodeTTL), Bind: engine.At(func(r *ClusterRedis) *time.Duration { return &r.NodeTTL })},
	)

	clusterBlock = engine.NewBlock(
		engine.Field{Name: "node_id", Kind: engine.KindString, NonEmpty: true, Pattern: clusterNodeIDPattern, Doc: "this node's name; the host name and admin port when omitted",
			Check: checkPrintable(maxClusterNodeIDLen),
			Bind:  engine.At(func(c *Cluster) *string { return &c.NodeID })},
		engine.Field{Name: "redis", Kind: engine.KindBlock, Sub: clusterRedisBlock, Doc: "share rate limits, quotas and the HMAC replay cache in Redis",
			Bind: engine.Opt(func(c *Cluster) **ClusterRedis { return &c.Redis }, defaultClusterRedis)},
		engine.Field{Name: "etcd", Kind: engine.KindBlock, Sub: clusterEtcdBlock, Doc: "share apps, keys and grants, and list the live nodes, in etcd",
			Bind: engine.Opt(func(c *Cluster) **ClusterEtcd { return &c.Etcd }, defaultClusterEtcd)},
	)
)

// maxPasswordFileBytes bounds a password file: one line of a secret.
const maxPasswordFileBytes = 4096

// ReadPasswordFile reads a password: the file's first line, without its
// line ending. A file that is not readable, larger than 4 KiB or whose first
// line is empty is refused; the gateway reads the password with this too,
// so that levee validate and levee run refuse the same files.
func ReadPasswordFile(name string) (string, error) {
	if problem := checkReadableFile(name); problem != "" {
		return "", errors.New(problem)
	}
	b, err := os.ReadFile(name)
	if err != nil {
		return "", err
	}
	if len(b) > maxPasswordFileBytes {
		return "", fmt.Errorf("%s is %d bytes; a password file holds one line of at most %d", engine.Quote(name), len(b), maxPasswordFileBytes)
	}
	line, _, _ := strings.Cut(string(b), "\n")
	if line = strings.TrimSuffix(line, "\r"); line == "" {
		return "", fmt.Errorf("%s holds no password on its first line", engine.Quote(name))
	}
	return line, nil
}

// checkPasswordFile refuses a password_file ReadPasswordFile refuses.
func checkPasswordFile(p *engine.Parser, path string, n *yaml.Node, ptr any) bool {
	if _, err := ReadPasswordFile(*ptr.(*string)); err != nil {
		p.Add(n, path, "%v", err)
		return false
	}
	return true
}

// checkDurationIn refuses a duration outside [lo, hi].
func checkDurationIn(lo, hi time.Duration) func(*engine.Parser, string, *yaml.Node, any) bool {
	return func(p *engine.Parser, path string, n *yaml.Node, ptr any) bool {
		if d := *ptr.(*time.Duration); d < lo || d > hi {
			p.Add(n, path, "must be from %v to %v, got %s", lo, hi, engine.Describe(n))
			return false
		}
		return true
	}
}

// checkPrintable refuses a string that is not 1 to max printable ASCII
// characters without spaces (the schema's [!-~]{1,max}).
func checkPrintable(max int) func(*engine.Parser, string, *yaml.Node, any) bool {
	return engine.ProblemOf(func(s string) string {
		rule := fmt.Sprintf("must be 1 to %d printable ASCII characters without spaces", max)
		if len(s) < 1 || len(s) > max {
			return rule
		}
		for i := 0; i < len(s); i++ {
			if s[i] < '!' || s[i] > '~' {
				return rule
			}
		}
		return ""
	})
}
