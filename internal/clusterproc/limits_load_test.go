//go:build !race

package clusterproc

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

// load offers perNode requests/s of GET /api/x with goodKey to each node
// for d, all at once, and returns every node's shots (Due relative to a
// common start).
func load(nodes []*Node, perNode int, d time.Duration) [][]loadgen.Shot {
	out := make([][]loadgen.Shot, len(nodes))
	var wg sync.WaitGroup
	for i, n := range nodes {
		wg.Go(func() {
			out[i] = loadgen.Open{Addr: n.Data, Path: "/api/x", Rate: perNode,
				Total: int(d.Seconds() * float64(perNode)), Timeout: 5 * time.Second, Workers: 32,
				Header: []string{"X-Api-Key: " + goodKey}}.Run()
		})
	}
	wg.Wait()
	return out
}

// limitCalls reads INFO commandstats: the reads of limit keys (HMGET
// calls: the limit script reads a key once per script call that uses it,
// and no other script reads a hash outside an outage's reconciliation) and the
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

// waitCounting waits until every node counts n live nodes (bounded).
func waitCounting(t *testing.T, nodes []*Node, n int) {
	t.Helper()
	for _, x := range nodes {
		waitFor(t, fmt.Sprintf("%s counting %d nodes", x.Name, n), 10*time.Second,
			func() bool { return metric(t, x, "levee_cluster_nodes") == float64(n) })
	}
}

// TestProcsSharedLimitAccuracy: three levee processes sharing one Redis,
// one app at 100/s burst 100, 600 requests/s spread evenly over the nodes
// for 5 s: the cluster admits burst + rate × 5 s = 600 within ±10 % (each
// node alone would admit about 3×: 1800). Every request is decided at most
// once in Redis (exactly once unless it fell back), in fewer script calls
// than requests when concurrent ones share a call. The store timeout is
// 250 ms, not the default 50 ms: on 2 busy cores a 50 ms read sometimes
// times out and that request is decided locally (TestProcsRedisOutage
// covers the fallback); this test measures the shared decision.
func TestProcsSharedLimitAccuracy(t *testing.T) {
	r := testsvc.StartRedis(t)
	nodes, _ := startNodes(t, 3, cluster{redis: r.Address, redisTimeout: 250 * time.Millisecond})
	waitCounting(t, nodes, 3)
	rc := redis.NewClient(&redis.Options{Addr: r.Address})
	defer rc.Close()
	beforeDecisions, beforeCalls := limitCalls(t, rc)
	const d = 5 * time.Second
	shots := load(nodes, 200, d)
	accepted, refused, total := 0, 0, 0
	perNode := make([]int, len(nodes))
	for i, s := range shots {
		for _, x := range s {
			total++
			switch x.Status {
			case 200:
				accepted++
				perNode[i]++
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
		fallbacks += metric(t, n, `levee_ratelimit_fallback_total{mode="local"}`)
	}
	want := 100 + 100*d.Seconds()
	t.Logf("offered %d over 3 processes in %v: accepted %d (per node %v; want %.0f ± 10%%), refused %d; Redis key reads %d, limit EVALSHA calls %d (%.3f per request), fallbacks %.0f",
		total, d, accepted, perNode, want, refused, decisions, calls, float64(calls)/float64(total), fallbacks)
	if float64(accepted) < 0.9*want || float64(accepted) > 1.1*want {
		t.Errorf("accepted %d, want %.0f ± 10%%", accepted, want)
	}
	if calls > total || decisions > calls {
		t.Errorf("Redis ran %d limit script calls reading the app's key %d times for %d requests, want at most one call per request and one read per call", calls, decisions, total)
	}
	if fallbacks > float64(total)/100 {
		t.Errorf("%.0f of %d requests fell back to local limits, want Redis to decide (nearly) all", fallbacks, total)
	}
}

// TestProcsRedisOutage: three levee processes under 600 requests/s for
// 12 s, one app at 100/s burst 100, store timeout 50 ms (the default). At
// 2 s Redis is frozen (SIGSTOP), at 4 s killed (SIGKILL), at 7 s started
// again (empty). No request fails for it (every answer 200 or 429), the
// cluster admits at most 1.5× the app's limit while Redis is away (and at
// least half of it: the fallback is a limit, not a wall), the p99 latency
// of the requests due then stays under the store timeout plus 25 ms, and
// within 5 s of Redis's return every node decides through it again.
func TestProcsRedisOutage(t *testing.T) {
	const (
		freezeAt  = 2 * time.Second
		killAt    = 4 * time.Second
		restartAt = 7 * time.Second
		runFor    = 12 * time.Second
		timeout   = 50 * time.Millisecond
	)
	r := testsvc.StartRedis(t)
	nodes, _ := startNodes(t, 3, cluster{redis: r.Address, redisTimeout: timeout})
	waitCounting(t, nodes, 3)
	begin := time.Now()
	var (
		shots    [][]loadgen.Shot
		loadDone = make(chan struct{})
	)
	go func() {
		defer close(loadDone)
		shots = load(nodes, 200, runFor)
	}()
	<-time.After(time.Until(begin.Add(freezeAt)))
	r.Freeze()
	<-time.After(time.Until(begin.Add(killAt)))
	r.Kill()
	<-time.After(time.Until(begin.Add(restartAt)))
	r.Restart(t)
	restarted := time.Now()
	for _, n := range nodes {
		waitFor(t, n.Name+" sharing again", 10*time.Second,
			func() bool { return metric(t, n, `levee_cluster_store_up{store="redis"}`) == 1 })
	}
	backWithin := time.Since(restarted)
	backAt := time.Since(begin)
	var fallbacks []float64
	for _, n := range nodes {
		fallbacks = append(fallbacks, metric(t, n, `levee_ratelimit_fallback_total{mode="local"}`))
	}
	<-loadDone

	var lat []time.Duration // of the requests due while Redis was away
	outage, total, after := 0, 0, 0
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
			if x.Due >= backAt {
				after++
			}
		}
	}
	for _, ph := range []struct{ from, to time.Duration }{{0, freezeAt}, {freezeAt, killAt}, {killAt, restartAt}, {restartAt, runFor}} {
		var l []time.Duration
		ok := 0
		for _, s := range shots {
			for _, x := range s {
				if x.Due >= ph.from && x.Due < ph.to {
					l = append(l, x.Latency)
					if x.Status == 200 {
						ok++
					}
				}
			}
		}
		slices.Sort(l)
		t.Logf("phase %v-%v: n %d accepted %d p50 %v p99 %v max %v", ph.from, ph.to, len(l), ok, l[len(l)/2], l[len(l)*99/100], l[len(l)-1])
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
	// machine (and that request fall back); the breaker stays closed.
	for i, n := range nodes {
		f := metric(t, n, `levee_ratelimit_fallback_total{mode="local"}`) - fallbacks[i]
		if up := metric(t, n, `levee_cluster_store_up{store="redis"}`); up != 1 || f > float64(after)/100 {
			t.Errorf("node %d after Redis was back: store up %v, %v of about %d requests decided without it", i+1, up, f, after/3)
		}
	}
}
