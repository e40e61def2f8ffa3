package clusterlimit

import (
	"context"
	"strconv"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/redis/go-redis/v9"
	"pgregory.net/rapid"

	"github.com/levee-gw/levee/internal/ratelimit"
	"github.com/levee-gw/levee/internal/testkit"
	"github.com/levee-gw/levee/internal/testsvc"
)

// fakeClock is testkit's Clock, a time the test steps; safe for
// concurrent use (the heartbeat reads it).
type fakeClock = testkit.Clock

func newFakeClock(t time.Time) *fakeClock { return testkit.NewClock(t) }

func hourQuota(t testing.TB, n int64) ratelimit.Quota { return mustQuota(t, n, time.Hour) }

func mustQuota(t testing.TB, n int64, per time.Duration) ratelimit.Quota {
	t.Helper()
	q, err := ratelimit.NewQuota(n, per)
	if err != nil {
		t.Fatal(err)
	}
	return q
}

// clockLimiter is newLimiter with the key prefix prefix and clock as the
// scripts' time; mod, when set, changes more options.
func clockLimiter(t *testing.T, addr, prefix string, clock *fakeClock, mod func(*Options)) *Limiter {
	t.Helper()
	return newLimiter(t, addr, func(o *Options) {
		o.Prefix = prefix
		o.clock = clock.Now
		if mod != nil {
			mod(o)
		}
	})
}

// sharedCount is the quota count Redis holds for key in the window ending
// at end (0 when it holds another window or none).
func sharedCount(t testing.TB, c *redis.Client, key string, end time.Time) int64 {
	t.Helper()
	v, err := c.HMGet(context.Background(), key, "qe", "qc").Result()
	if err != nil {
		t.Fatal(err)
	}
	if v[0] == nil || v[0].(string) != strconv.FormatInt(end.UnixMicro(), 10) {
		return 0
	}
	n, err := strconv.ParseInt(v[1].(string), 10, 64)
	if err != nil {
		t.Fatal(err)
	}
	return n
}

// TestQuotaReconciledWhenRedisReturns: a quota of 20 an hour shared by
// two nodes; Redis killed; the nodes admit 11 requests locally (6 and 5,
// each within its local share of 10); Redis back (empty): each node's
// heartbeat adds its counts to the shared counter of the same hour, which
// then holds 11, and the cluster admits exactly the 9 left of the hour,
// then refuses (quota). Time is a fake clock for the decisions and the
// scripts alike.
func TestQuotaReconciledWhenRedisReturns(t *testing.T) {
	r := testsvc.StartRedis(t)
	clock := newFakeClock(time.Date(2026, 12, 2, 5, 10, 0, 0, time.UTC))
	var regs [2]*prometheus.Registry
	var nodes [2]*Limiter
	for i := range nodes {
		regs[i] = prometheus.NewRegistry()
		nodes[i] = clockLimiter(t, r.Address, "rec:", clock, func(o *Options) {
			o.Heartbeat = 50 * time.Millisecond
			o.Timeout = 500 * time.Millisecond
			o.Registerer = regs[i]
		})
	}
	waitFor(t, "both nodes counted", func() bool { return nodes[0].Nodes() == 2 && nodes[1].Nodes() == 2 })
	const n, k = 20, 11
	checks := []ratelimit.Check{{Key: "app", Policy: ratelimit.Policy{Quota: hourQuota(t, n)}}}
	ctx := context.Background()

	r.Kill()
	for i := range k {
		clock.Advance(time.Second)
		node := nodes[i%2]
		if d, _ := node.Decide(ctx, checks, nil, clock.Now()); !d.Allowed {
			t.Fatalf("local decision %d refused: %+v (local share is %d)", i, d, n/2)
		}
	}
	for _, node := range nodes {
		if node.Up() {
			t.Fatal("breaker still closed with Redis killed")
		}
	}
	r.Restart(t)
	for i, node := range nodes {
		waitFor(t, "shared limits again", node.Up)
		want := float64((k + 1 - i) / 2) // node 0 admitted 6, node 1 5
		if got := testutil.ToFloat64(node.m.reconciled); got != want {
			t.Fatalf("node %d: levee_ratelimit_reconciled_total = %v, want %v", i, got, want)
		}
	}
	c := redis.NewClient(&redis.Options{Addr: r.Address})
	defer c.Close()
	end := time.Date(2026, 12, 2, 6, 0, 0, 0, time.UTC)
	if got := sharedCount(t, c, "rec:l:app", end); got != k {
		t.Fatalf("shared counter after reconciliation = %d, want the %d admitted locally", got, k)
	}
	t.Logf("shared counter after Redis returned: %d (nodes reconciled 6 + 5)", k)
	admitted := 0
	for i := range 2 * n {
		clock.Advance(time.Second)
		d, _ := nodes[i%2].Decide(ctx, checks, nil, clock.Now())
		if d.Allowed {
			admitted++
			continue
		}
		if !d.Quota || d.Limit != n || admitted != n-k {
			t.Fatalf("decision %d refused %+v after %d admitted, want a quota refusal after %d", i, d, admitted, n-k)
		}
	}
	if admitted != n-k {
		t.Fatalf("the cluster admitted %d more after reconciliation, want %d", admitted, n-k)
	}
	if !nodes[0].Up() || !nodes[1].Up() {
		t.Fatal("decisions after Redis returned fell back")
	}
}

// TestReconcileDropsEndedWindows: counts made in a window that has ended
// (by the scripts' clock) when Redis returns are dropped, counted as
// stale, and the new window starts from 0.
func TestReconcileDropsEndedWindows(t *testing.T) {
	r := testsvc.StartRedis(t)
	clock := newFakeClock(time.Date(2026, 12, 2, 5, 59, 0, 0, time.UTC))
	l := clockLimiter(t, r.Address, "recend:", clock, func(o *Options) {
		o.Heartbeat = 50 * time.Millisecond
		o.Timeout = 500 * time.Millisecond
	})
	checks := []ratelimit.Check{{Key: "app", Policy: ratelimit.Policy{Quota: hourQuota(t, 10)}}}
	r.Kill()
	for range 4 {
		l.Decide(context.Background(), checks, nil, clock.Now())
	}
	clock.Set(time.Date(2026, 12, 2, 6, 0, 1, 0, time.UTC))
	r.Restart(t)
	waitFor(t, "shared limits again", l.Up)
	if got := testutil.ToFloat64(l.m.reconDropped.WithLabelValues("stale")); got != 4 {
		t.Fatalf("dropped as stale: %v, want 4", got)
	}
	if got := testutil.ToFloat64(l.m.reconciled); got != 0 {
		t.Fatalf("reconciled %v requests of an ended window, want 0", got)
	}
	d, _ := l.Decide(context.Background(), checks, nil, clock.Now())
	if !d.Allowed || d.Remaining != 9 {
		t.Fatalf("first decision of the new hour: %+v, want 9 remaining", d)
	}
}

// TestReconcileRetryAddsOnce: a batch sent again (its answer lost) adds
// nothing the second time and answers what it added the first time; the
// node forgets a batch only once Redis answered, so a batch that failed is
// sent again, unchanged, and counted once.
func TestReconcileRetryAddsOnce(t *testing.T) {
	r := testsvc.StartRedis(t)
	clock := newFakeClock(time.Date(2026, 12, 2, 5, 10, 0, 0, time.UTC))
	l := clockLimiter(t, r.Address, "recretry:", clock, nil)
	q := hourQuota(t, 100)
	checks := []ratelimit.Check{{Key: "route", Policy: ratelimit.Policy{Quota: q}}, {Key: "app", Policy: ratelimit.Policy{Quota: q}}}
	for range 7 {
		l.countLocal(checks, 2, clock.Now())
	}
	l.countLocal(checks, 1, clock.Now()) // refused by the app's quota: counted in the route's only
	l.rec.take()
	if len(l.rec.pending) != 1 || len(l.rec.pending[0].entries) != 2 {
		t.Fatalf("pending batches %+v, want one of two keys", l.rec.pending)
	}
	b := l.rec.pending[0]
	for try := range 3 { // the first answer "lost": sent again
		added, stale, err := l.sendBatchCounts(b, l.scriptNow())
		if err != nil || added != 15 || stale != 0 {
			t.Fatalf("try %d: added %d, stale %d, %v; want 15 added each time (the first run's answer)", try, added, stale, err)
		}
	}
	c := redis.NewClient(&redis.Options{Addr: r.Address})
	defer c.Close()
	end := time.Date(2026, 12, 2, 6, 0, 0, 0, time.UTC)
	if route, app := sharedCount(t, c, "recretry:l:route", end), sharedCount(t, c, "recretry:l:app", end); route != 8 || app != 7 {
		t.Fatalf("shared counts route %d, app %d after three sends of one batch, want 8 and 7", route, app)
	}
	// A failed send keeps the batch; the next reconcile sends it (once).
	r.Kill()
	if err := l.reconcile(); err == nil {
		t.Fatal("reconcile with Redis killed succeeded")
	}
	if len(l.rec.pending) != 1 || l.rec.pending[0].id != b.id {
		t.Fatal("the batch was forgotten although Redis never answered")
	}
	r.Restart(t) // empty: the batch's first run is lost with it
	if err := l.reconcile(); err != nil {
		t.Fatal(err)
	}
	if len(l.rec.pending) != 0 {
		t.Fatal("the batch is still pending after Redis answered")
	}
	if app := sharedCount(t, c, "recretry:l:app", end); app != 7 {
		t.Fatalf("app count in the restarted Redis = %d, want 7", app)
	}
	if err := l.reconcile(); err != nil || sharedCount(t, c, "recretry:l:app", end) != 7 {
		t.Fatalf("a reconcile with nothing held changed the count (%v)", err)
	}
	// The marker expires with the last window (plus a second).
	keys, err := c.Keys(context.Background(), "recretry:r:*").Result()
	if err != nil || len(keys) != 1 {
		t.Fatalf("markers %v (%v), want one", keys, err)
	}
	if ttl := c.PTTL(context.Background(), keys[0]).Val(); ttl <= 49*time.Minute || ttl > 51*time.Minute {
		t.Fatalf("marker PTTL %v, want the 50 min left of the hour plus a second", ttl)
	}
}

// TestReconcileCapacity: past the capacity, counts of new keys are
// dropped and counted (reason capacity); a held window that has ended
// makes room.
func TestReconcileCapacity(t *testing.T) {
	r := testsvc.StartRedis(t)
	clock := newFakeClock(time.Date(2026, 12, 2, 5, 10, 0, 0, time.UTC))
	l := clockLimiter(t, r.Address, "reccap:", clock, func(o *Options) { o.reconcileCapacity = 3 })
	minute := ratelimit.Policy{Quota: mustQuota(t, 100, time.Minute)}
	hour := ratelimit.Policy{Quota: hourQuota(t, 100)}
	count := func(key string, p ratelimit.Policy) {
		l.countLocal([]ratelimit.Check{{Key: key, Policy: p}}, 1, clock.Now())
	}
	count("m", minute)
	count("a", hour)
	count("b", hour)
	count("a", hour) // held already: counted
	count("c", hour) // full
	count("d", hour) // full
	if got := testutil.ToFloat64(l.m.reconDropped.WithLabelValues("capacity")); got != 2 {
		t.Fatalf("dropped for capacity: %v, want 2", got)
	}
	clock.Advance(time.Minute) // m's window ended: room for one
	count("e", hour)
	count("f", hour)
	if got := testutil.ToFloat64(l.m.reconDropped.WithLabelValues("capacity")); got != 3 {
		t.Fatalf("dropped for capacity after a window ended: %v, want 3", got)
	}
	l.rec.mu.Lock()
	held := len(l.rec.counts)
	_, hasE := l.rec.counts[windowKey{key: "reccap:l:e", end: time.Date(2026, 12, 2, 6, 0, 0, 0, time.UTC).UnixMicro()}]
	l.rec.mu.Unlock()
	if held != 3 || !hasE {
		t.Fatalf("held %d counts (e held: %v), want 3 with e", held, hasE)
	}
}

// TestReconcileScriptMatchesModel is the property test of the reconcile
// script: for any state of a key in Redis (no quota window, the same
// window, an ended one, another current one) and any counts, the script
// adds exactly what the model says and drops the rest as stale.
func TestReconcileScriptMatchesModel(t *testing.T) {
	r := testsvc.StartRedis(t)
	l := newLimiter(t, r.Address, func(o *Options) { o.Prefix = "recprop:" })
	c := redis.NewClient(&redis.Options{Addr: r.Address})
	defer c.Close()
	ctx := context.Background()
	var batch atomic.Int64
	rapid.Check(t, func(rt *rapid.T) {
		nowus := rapid.Int64Range(1_700_000_000_000_000, 1_900_000_000_000_000).Draw(rt, "now_us")
		per := rapid.Int64Range(1_000_000, 7_200_000_000).Draw(rt, "per_us")
		curEnd := (floorDiv(nowus, per) + 1) * per
		n := rapid.IntRange(1, 6).Draw(rt, "keys")
		var b reconBatch
		b.id = "prop:" + strconv.FormatInt(batch.Add(1), 10)
		want := map[string]int64{}
		var wantAdded, wantStale int64
		for i := range n {
			key := "recprop:l:" + b.id + ":" + strconv.Itoa(i)
			end := curEnd
			if rapid.Bool().Draw(rt, "ended") {
				end = curEnd - per*rapid.Int64Range(1, 3).Draw(rt, "windows_ago")
			}
			cnt := rapid.Int64Range(1, 1000).Draw(rt, "count")
			held := rapid.IntRange(0, 3).Draw(rt, "held") // none, same window, ended window, other current window
			qc := rapid.Int64Range(0, 1000).Draw(rt, "held_count")
			var qe int64
			switch held {
			case 1:
				qe = end
			case 2:
				qe = nowus - rapid.Int64Range(0, per).Draw(rt, "ended_ago")
			case 3:
				qe = nowus + rapid.Int64Range(1, 1e9).Draw(rt, "other_end_ahead")
				if qe == end {
					qe++
				}
			}
			if held != 0 {
				if err := c.HSet(ctx, key, "qe", qe, "qc", qc).Err(); err != nil {
					rt.Fatal(err)
				}
			}
			switch {
			case end <= nowus || held == 3:
				wantStale += cnt
				if held != 0 {
					want[key] = qc
				}
			case held == 1:
				wantAdded += cnt
				want[key] = qc + cnt
			default:
				wantAdded += cnt
				want[key] = cnt
			}
			b.entries = append(b.entries, reconEntry{windowKey{key, end}, windowCount{cnt, per}})
		}
		added, stale, err := l.sendBatchCounts(b, &testNow{sec: nowus / 1e6, usec: nowus % 1e6})
		if err != nil || added != wantAdded || stale != wantStale {
			rt.Fatalf("added %d stale %d (%v), want %d and %d", added, stale, err, wantAdded, wantStale)
		}
		for key, w := range want {
			got, err := c.HGet(ctx, key, "qc").Int64()
			if err != nil || got != w {
				rt.Fatalf("%s: count %d (%v), want %d", key, got, err, w)
			}
		}
	})
}
