//go:build !race

package clusterproc

import (
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/levee-gw/levee/internal/loadgen"
	"github.com/levee-gw/levee/internal/testsvc"
)

// redisUp reports whether GET /api/v1/cluster on n says Redis is up.
func redisUp(t *testing.T, n *Node) bool {
	t.Helper()
	_, doc, _ := api(t, n, "GET", "/api/v1/cluster", "")
	r, _ := doc["redis"].(map[string]any)
	up, _ := r["up"].(bool)
	return up
}

// tally is what one load window got: accepted (200) of total, accepted
// per node, accepted among the requests due from steadyFrom on, and the
// sorted latencies. Any answer but 200 or 429 fails t.
type tally struct {
	accepted, total, steady int
	perNode                 []int
	lat                     []time.Duration
}

func count(t *testing.T, what string, shots [][]loadgen.Shot, steadyFrom time.Duration) tally {
	t.Helper()
	c := tally{perNode: make([]int, len(shots))}
	for i, s := range shots {
		for _, x := range s {
			c.total++
			c.lat = append(c.lat, x.Latency)
			switch x.Status {
			case 200:
				c.accepted++
				c.perNode[i]++
				if x.Due >= steadyFrom {
					c.steady++
				}
			case 429:
			default:
				t.Fatalf("%s, node %d: a request due at %v answered %d %q (err %q, timed out %v)", what, i+1, x.Due, x.Status, x.Reason, x.Err, x.TimedOut)
			}
		}
	}
	slices.Sort(c.lat)
	return c
}

func (c tally) p(q int) time.Duration { return c.lat[len(c.lat)*q/100] }

// within fails t unless got is within ±tol of want.
func within(t *testing.T, what string, got int, want, tol float64) {
	t.Helper()
	if float64(got) < (1-tol)*want || float64(got) > (1+tol)*want {
		t.Errorf("%s: accepted %d, want %.0f ± %.0f%%", what, got, want, tol*100)
	}
}

// TestProcsBothStores: three levee processes with both cluster.redis and
// cluster.etcd (the recommended topology), app "good" at 90/s burst 90
// seeded from the file into etcd, each phase 3 s of load at 3× the limit:
//
//  1. Both stores up: the key answers on every node, GET /api/v1/cluster
//     lists 3 nodes with Redis and etcd up on each, and the cluster admits
//     burst + rate × t ± 10 % (one limit, not three).
//  2. Redis killed (SIGKILL): each node enforces rate / 3 and burst / 3 (3
//     from etcd), so the cluster admits 3 × (30 + 30 × t) ± 15 %; every
//     answer 200 or 429; p99 latency under the store timeout + 25 ms.
//  3. Still without Redis, node 3 killed: within 10 s etcd's membership
//     (GET /api/v1/cluster, levee_cluster_nodes) is 2 on the survivors, and
//     their shares grow to rate / 2 and burst / 2: the two admit the whole
//     limit again (± 15 %, and the steady rate after the first second within
//     ± 20 % of 90/s), not 2/3 of it as a divisor frozen at 3 would.
//  4. Redis restarted: every survivor decides through it again within 5 s,
//     and the two admit burst + rate × t ± 10 % of the cluster's limit.
func TestProcsBothStores(t *testing.T) {
	const (
		limit   = 90 // app "good": rate per second and burst; divisible by 3 and 2
		timeout = 100 * time.Millisecond
		phase   = 3 * time.Second
		// offered is each window's load: 3× the limit over the nodes.
		offered = 3 * limit
	)
	r := testsvc.StartRedis(t)
	e := testsvc.StartEtcd(t)
	nodes, _ := startNodes(t, 3, cluster{redis: r.Address, redisTimeout: timeout, etcd: e.Endpoint, limit: limit})
	began := time.Now()
	waitCounting(t, nodes, 3)
	for _, n := range nodes {
		waitFor(t, n.Name+" admitting the file's key (seeded into etcd)", 10*time.Second, func() bool { return call(t, n, goodKey) == 200 })
		waitFor(t, n.Name+" listing 3 nodes with Redis and etcd up", 10*time.Second, func() bool {
			ids, etcdUp := clusterView(t, n)
			return len(ids) == 3 && etcdUp && redisUp(t, n)
		})
	}
	t.Logf("3 nodes counted and listed with both stores up %v after they started", time.Since(began).Round(time.Millisecond))
	// The key checks took 3 of the shared burst; it is whole again after
	// burst / rate = 1 s.
	<-time.After(time.Second)
	full := float64(limit) + limit*phase.Seconds() // burst + rate × t

	// 1. Shared.
	c1 := count(t, "both stores up", load(nodes, offered/3, phase), 0)
	t.Logf("1 both stores up: offered %d over 3 nodes in %v, accepted %d (per node %v; want %.0f ± 10%%), p50 %v p99 %v",
		c1.total, phase, c1.accepted, c1.perNode, full, c1.p(50), c1.p(99))
	within(t, "both stores up", c1.accepted, full, 0.10)

	// 2. Redis killed: local shares of N = 3 (etcd's count).
	r.Kill()
	c2 := count(t, "Redis killed", load(nodes, offered/3, phase), 0)
	ended2 := time.Now()
	share3 := 3 * (float64(limit)/3 + limit/3*phase.Seconds())
	for _, n := range nodes {
		if up, nn := metric(t, n, `levee_cluster_store_up{store="redis"}`), metric(t, n, "levee_cluster_nodes"); up != 0 || nn != 3 {
			t.Errorf("%s with Redis killed: store up %v, levee_cluster_nodes %v; want 0 and 3", n.Name, up, nn)
		}
	}
	t.Logf("2 Redis killed: offered %d over 3 nodes in %v, accepted %d (per node %v; want 3 × (30 + 30 × %v) = %.0f ± 15%%), p50 %v p99 %v max %v",
		c2.total, phase, c2.accepted, c2.perNode, phase.Seconds(), share3, c2.p(50), c2.p(99), c2.lat[len(c2.lat)-1])
	within(t, "Redis killed, 3 local shares", c2.accepted, share3, 0.15)
	if c2.p(99) > timeout+25*time.Millisecond {
		t.Errorf("Redis killed: p99 latency %v, want under the store timeout %v + 25 ms", c2.p(99), timeout)
	}

	// 3. Node 3 killed too: etcd's membership drops to 2 and the two
	// survivors' shares grow to half the limit each.
	nodes[2].Kill()
	killed := time.Now()
	survivors := nodes[:2]
	for _, n := range survivors {
		waitFor(t, n.Name+" listing 2 nodes and counting 2", 10*time.Second, func() bool {
			ids, _ := clusterView(t, n)
			return len(ids) == 2 && metric(t, n, "levee_cluster_nodes") == 2
		})
	}
	t.Logf("3 node 3 killed (SIGKILL): both survivors list and count 2 nodes %v later", time.Since(killed).Round(time.Millisecond))
	if d := time.Until(ended2.Add(time.Second)); d > 0 {
		<-time.After(d) // local buckets whole again (burst / rate = 1 s)
	}
	c3 := count(t, "Redis killed, node 3 killed", load(survivors, offered/2, phase), time.Second)
	steady := float64(c3.steady) / (phase - time.Second).Seconds()
	t.Logf("3 two survivors without Redis: offered %d in %v, accepted %d (per node %v; want 2 × (45 + 45 × %v) = %.0f ± 15%%; frozen at N = 3 would be %.0f), steady %.1f/s after the first second (want %d/s ± 20%%), p99 %v",
		c3.total, phase, c3.accepted, c3.perNode, phase.Seconds(), full, full*2/3, steady, limit, c3.p(99))
	within(t, "two survivors without Redis", c3.accepted, full, 0.15)
	if steady < 0.8*limit || steady > 1.2*limit {
		t.Errorf("two survivors without Redis: steady rate %.1f/s, want %d/s ± 20%% (the limit split across the 2 live nodes)", steady, limit)
	}

	// 4. Redis back: shared again within 5 s.
	r.Restart(t)
	restarted := time.Now()
	for _, n := range survivors {
		waitFor(t, n.Name+" sharing again", 10*time.Second, func() bool { return metric(t, n, `levee_cluster_store_up{store="redis"}`) == 1 })
	}
	back := time.Since(restarted)
	for _, n := range survivors {
		if ids, etcdUp := clusterView(t, n); len(ids) != 2 || !etcdUp || !redisUp(t, n) {
			t.Errorf("%s with Redis back: GET /api/v1/cluster lists %v, etcd up %v, redis up %v; want 2 nodes, both up", n.Name, ids, etcdUp, redisUp(t, n))
		}
	}
	c4 := count(t, "Redis back", load(survivors, offered/2, phase), 0)
	t.Logf("4 Redis back: shared again %v after its restart; offered %d over 2 nodes in %v, accepted %d (per node %v; want %.0f ± 10%%), p99 %v",
		back.Round(time.Millisecond), c4.total, phase, c4.accepted, c4.perNode, full, c4.p(99))
	if back > 5*time.Second {
		t.Errorf("shared limits again %v after Redis returned, want within 5 s", back)
	}
	within(t, "Redis back", c4.accepted, full, 0.10)
	t.Logf("whole run %v", fmt.Sprint(time.Since(began).Round(time.Millisecond)))
}
