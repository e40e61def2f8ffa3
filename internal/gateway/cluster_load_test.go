//go:build !race

package gateway

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/levee-gw/levee/internal/loadgen"
	"github.com/levee-gw/levee/internal/testsvc"
)

// clusterLoadConfig is one node of a cluster whose app "good" is limited
// to 100/s with a burst of 100, shared through Redis with the given
// per-operation timeout.
func clusterLoadConfig(node, upstream, redisAddr string, timeout time.Duration) string {
	return fmt.Sprintf(`
listen: 127.0.0.1:0
admin: {listen: 127.0.0.1:0}
log: {access: false}
cluster:
  node_id: %s
  redis: {address: %s, timeout: %v}
upstreams:
  data: {endpoints: [{address: %s}]}
routes:
  - {name: api, match: {path_prefix: /}, upstream: data, auth: api_key}
apps:
  - id: good
    api_key_sha256: [%s]
    grants: [api]
    limits: {rate: 100, burst: 100}
`, node, redisAddr, timeout, upstream, keyHash(goodKey))
}

// startLoadCluster starts three nodes of clusterLoadConfig sharing r.
func startLoadCluster(t *testing.T, r *testsvc.Redis, timeout time.Duration) []*harness {
	up := hostPort(echoBackend(t))
	var nodes []*harness
	for i := range 3 {
		nodes = append(nodes, start(t, clusterLoadConfig(fmt.Sprintf("node-%d", i+1), up, r.Address, timeout)))
	}
	return nodes
}

// clusterLoad offers perNode requests/s to each node for d, all at once,
// and returns every node's shots (Due relative to a common start).
func clusterLoad(nodes []*harness, perNode int, d time.Duration) [][]loadgen.Shot {
	out := make([][]loadgen.Shot, len(nodes))
	var wg sync.WaitGroup
	for i, n := range nodes {
		wg.Go(func() {
			out[i] = loadgen.Open{Addr: strings.TrimPrefix(n.base, "http://"), Path: "/x", Rate: perNode,
				Total: int(d.Seconds() * float64(perNode)), Timeout: 5 * time.Second, Workers: 32,
				Header: []string{"X-Api-Key: " + goodKey}}.Run()
		})
	}
	wg.Wait()
	return out
}

// limitCalls reads INFO commandstats: the decisions Redis took (HMGET
// calls: the limit script reads the app's key once per decision, and no
// other script reads a hash outside an outage's reconciliation) and the
// limit script's calls (EVALSHA calls minus ZADD calls, only the heartbeat
// script makes one, once per beat, and minus SCRIPT LOAD calls, each
// following the one EVALSHA a node's first use of a script gets refused
// with NOSCRIPT). One script call decides a batch of concurrent requests.
func limitCalls(t *testing.T, c *redis.Client) (decisions, scriptCalls int) {
	t.Helper()
	info, err := c.Info(context.Background(), "commandstats").Result()
	if err != nil {
		t.Fatal(err)
	}
	calls := func(cmd string) int {
		for _, line := range strings.Split(info, "\n") {
			if rest, ok := strings.CutPrefix(strings.TrimSpace(line), "cmdstat_"+cmd+":calls="); ok {
				var n int
				fmt.Sscanf(rest, "%d", &n)
				return n
			}
		}
		return 0
	}
	return calls("hmget"), calls("evalsha") - calls("zadd") - calls("script|load")
}

// TestClusterSharedLimitAccuracy: three nodes, one app at 100/s burst 100,
// 600 requests/s spread evenly over the nodes for 5 s: the cluster admits
// burst + rate × 5 s = 600 within ±10 % (each node alone would admit about
// 3×: 1800). Every request is decided at most once in Redis (exactly once
// unless it fell back), in fewer script calls than requests when
// concurrent ones share a call. The store timeout is 250 ms here, not the default
// 50 ms: on 2 cores shared with other test processes a 50 ms read
// sometimes times out, and a fallback decides locally (TestClusterRedisOutage
// covers that); this test measures the shared decision.
func TestClusterSharedLimitAccuracy(t *testing.T) {
	r := testsvc.StartRedis(t)
	nodes := startLoadCluster(t, r, 250*time.Millisecond)
	rc := redis.NewClient(&redis.Options{Addr: r.Address})
	defer rc.Close()
	beforeDecisions, beforeCalls := limitCalls(t, rc)
	const d = 5 * time.Second
	shots := clusterLoad(nodes, 200, d)
	accepted, refused, total := 0, 0, 0
	for i, s := range shots {
		for _, x := range s {
			total++
			switch x.Status {
			case 200:
				accepted++
			case 429:
				refused++
			default:
				t.Fatalf("node %d: a request answered %d %q (%s)", i+1, x.Status, x.Reason, x.Err)
			}
		}
	}
	decisions, calls := limitCalls(t, rc)
	decisions, calls = decisions-beforeDecisions, calls-beforeCalls
	fallbacks := 0.0
	for _, n := range nodes {
		fallbacks += n.metric(`levee_ratelimit_fallback_total{mode="local"}`)
	}
	want := 100 + 100*d.Seconds()
	t.Logf("offered %d over 3 nodes in %v: accepted %d (want %.0f ± 10%%), refused %d; Redis decisions %d, limit EVALSHA calls %d (%.3f per request), fallbacks %.0f",
		total, d, accepted, want, refused, decisions, calls, float64(calls)/float64(total), fallbacks)
	if float64(accepted) < 0.9*want || float64(accepted) > 1.1*want {
		t.Errorf("accepted %d, want %.0f ± 10%%", accepted, want)
	}
	if decisions > total || float64(decisions) < float64(total)-fallbacks {
		t.Errorf("Redis decided %d times for %d requests (%.0f fell back), want once per request decided in Redis", decisions, total, fallbacks)
	}
	if calls > decisions {
		t.Errorf("Redis ran %d limit script calls for %d decisions, want at most one each", calls, decisions)
	}
}

// TestClusterRedisOutage: three nodes under 600 requests/s for 12 s, one
// app at 100/s burst 100. At 2 s Redis is frozen (SIGSTOP), at 4 s killed,
// at 7 s started again (empty). No request fails (only 200 and 429), the
// cluster admits at most 1.5× the app's limit while Redis is away, the p99
// latency of the requests due then stays under the store timeout (50 ms)
// plus 25 ms, and within 5 s of Redis's return every node decides through
// it again (and no more without it).
func TestClusterRedisOutage(t *testing.T) {
	r := testsvc.StartRedis(t)
	nodes := startLoadCluster(t, r, 50*time.Millisecond)
	for i, n := range nodes {
		waitFor(t, fmt.Sprintf("node %d counting 3 nodes", i+1), func() bool { return n.metric("levee_cluster_nodes") == 3 })
	}
	const (
		freezeAt  = 2 * time.Second
		killAt    = 4 * time.Second
		restartAt = 7 * time.Second
		runFor    = 12 * time.Second
		timeout   = 50 * time.Millisecond
	)
	begin := time.Now()
	var (
		shots      [][]loadgen.Shot
		loadDone   = make(chan struct{})
		backWithin time.Duration
		fallbacks  []float64
		backAt     time.Duration // since begin: every node sharing again
	)
	go func() {
		defer close(loadDone)
		shots = clusterLoad(nodes, 200, runFor)
	}()
	<-time.After(time.Until(begin.Add(freezeAt)))
	r.Freeze()
	<-time.After(time.Until(begin.Add(killAt)))
	r.Kill()
	<-time.After(time.Until(begin.Add(restartAt)))
	r.Restart(t)
	restarted := time.Now()
	for i, n := range nodes {
		waitFor(t, fmt.Sprintf("node %d sharing again", i+1), func() bool { return n.metric(`levee_cluster_store_up{store="redis"}`) == 1 })
	}
	backWithin = time.Since(restarted)
	backAt = time.Since(begin)
	for _, n := range nodes {
		fallbacks = append(fallbacks, n.metric(`levee_ratelimit_fallback_total{mode="local"}`))
	}
	<-loadDone

	var lat []time.Duration // of the requests due while Redis was away
	outage, total := 0, 0
	for i, s := range shots {
		for _, x := range s {
			total++
			if x.Status != 200 && x.Status != 429 {
				t.Fatalf("node %d: a request due at %v answered %d %q (err %q, timed out %v)", i+1, x.Due, x.Status, x.Reason, x.Err, x.TimedOut)
			}
			if x.Due >= freezeAt && x.Due < restartAt {
				lat = append(lat, x.Latency)
				if x.Status == 200 {
					outage++
				}
			}
		}
	}
	for _, ph := range []struct{ from, to time.Duration }{{0, freezeAt}, {freezeAt, killAt}, {killAt, restartAt}, {restartAt, runFor}} {
		var l []time.Duration
		for _, s := range shots {
			for _, x := range s {
				if x.Due >= ph.from && x.Due < ph.to {
					l = append(l, x.Latency)
				}
			}
		}
		slices.Sort(l)
		t.Logf("phase %v-%v: n %d p50 %v p99 %v max %v", ph.from, ph.to, len(l), l[len(l)/2], l[len(l)*99/100], l[len(l)-1])
	}
	slices.Sort(lat)
	p50, p99, worst := lat[len(lat)/2], lat[len(lat)*99/100], lat[len(lat)-1]
	limit := 100 * (restartAt - freezeAt).Seconds()
	t.Logf("%d requests; Redis away %v: accepted %d (limit %.0f, at most %.0f), latency p50 %v p99 %v max %v; shared again %v after restart",
		total, restartAt-freezeAt, outage, limit, 1.5*limit, p50, p99, worst, backWithin)
	if float64(outage) > 1.5*limit {
		t.Errorf("accepted %d while Redis was away, more than 1.5 × %.0f", outage, limit)
	}
	if float64(outage) < 0.5*limit {
		t.Errorf("accepted only %d while Redis was away (limit %.0f): the fallback refused far too much", outage, limit)
	}
	if p99 > timeout+25*time.Millisecond {
		t.Errorf("p99 latency %v, want under the store timeout %v + 25 ms", p99, timeout)
	}
	if backWithin > 5*time.Second {
		t.Errorf("shared limits again %v after Redis returned, want within 5 s", backWithin)
	}
	// Back means back: a lone operation may still time out on a busy
	// machine (and that request fall back), the breaker stays closed.
	after := 0
	for _, s := range shots {
		for _, x := range s {
			if x.Due >= backAt {
				after++
			}
		}
	}
	for i, n := range nodes {
		f := n.metric(`levee_ratelimit_fallback_total{mode="local"}`) - fallbacks[i]
		if up := n.metric(`levee_cluster_store_up{store="redis"}`); up != 1 || f > float64(after)/100 {
			t.Errorf("node %d after Redis was back: store up %v, %v of about %d requests decided without it", i+1, up, f, after/3)
		}
	}
}
