package clusterlimit

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"sync"
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

// prefixes gives each Limiter of a test run its own key prefix.
var prefixes atomic.Int64

// newLimiter returns a started Limiter (decisions go through the
// senders, batch.go) whose first heartbeat has run; its later beats come
// every hour, and its timeout is 2 s (under the race detector, with
// hundreds of goroutines, 50 ms is sometimes exceeded and the decision
// falls back), unless mod says otherwise.
func newLimiter(t testing.TB, addr string, mod func(*Options)) *Limiter {
	t.Helper()
	o := Options{Address: addr, Heartbeat: time.Hour, Timeout: 2 * time.Second,
		Prefix: fmt.Sprintf("t%d:", prefixes.Add(1)), Registerer: prometheus.NewRegistry()}
	if mod != nil {
		mod(&o)
	}
	l, err := New(o)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { l.Close() })
	l.Start(fmt.Sprintf("node-%d", prefixes.Add(1)))
	waitFor(t, "the first heartbeat", func() bool { return l.lastErr.Load() != nil })
	return l
}

func mustRate(t testing.TB, perSecond float64, burst int64) ratelimit.Rate {
	t.Helper()
	r, err := ratelimit.NewRate(perSecond, burst)
	if err != nil {
		t.Fatal(err)
	}
	return r
}

// TestScriptMatchesInProcessLimiter is the property test of the Lua
// script: for any policies (one key, or an app × route key then the
// app's, each with a rate, a quota or both) and any sequence of request
// times, the script in a real Redis decides exactly as the in-process
// limiter (DecideLocal over ratelimit.Limiter) with the same inputs: the
// same admissions and refusals, and the same Limit, Remaining, Reset,
// RetryAfter and kind; whether each request is its own script call or
// several go in one (batches of 1 to 8). Time is stepped, not waited for: the script takes
// now from its test-only arguments (seconds, microseconds) instead of
// TIME, with Redis's own microsecond resolution, so both sides see the
// same instants.
func TestScriptMatchesInProcessLimiter(t *testing.T) {
	r := testsvc.StartRedis(t)
	l := newLimiter(t, r.Address, nil)
	ctx := context.Background()
	rapid.Check(t, func(rt *rapid.T) {
		policy := func(label string) ratelimit.Policy {
			var p ratelimit.Policy
			kind := rapid.IntRange(0, 2).Draw(rt, label+"_kind") // rate, quota, both
			if kind != 1 {
				iv := rapid.Int64Range(1000, int64(2*time.Second)).Draw(rt, label+"_interval_ns")
				burst := rapid.Int64Range(1, 20).Draw(rt, label+"_burst")
				p.Rate = mustRate(t, 1e9/float64(iv), burst)
			}
			if kind != 0 {
				n := rapid.Int64Range(1, 30).Draw(rt, label+"_quota")
				perUS := rapid.Int64Range(1_000_000, 10_000_000).Draw(rt, label+"_per_us")
				q, err := ratelimit.NewQuota(n, time.Duration(perUS)*time.Microsecond)
				if err != nil {
					rt.Fatal(err)
				}
				p.Quota = q
			}
			return p
		}
		run := strconv.FormatInt(prefixes.Add(1), 10)
		checks := []ratelimit.Check{{Key: "app" + run, Policy: policy("app")}}
		if rapid.Bool().Draw(rt, "route_limit") {
			checks = []ratelimit.Check{{Key: "route" + run, Policy: policy("route")}, checks[0]}
		}
		local, err := ratelimit.New[string](ratelimit.Options{Capacity: 16})
		if err != nil {
			rt.Fatal(err)
		}
		// A recent instant, so that seconds and nanoseconds since 1970 are
		// as large as in production.
		us := rapid.Int64Range(1_700_000_000_000_000, 1_900_000_000_000_000).Draw(rt, "start_us")
		gaps := rapid.SliceOfN(rapid.Int64Range(0, 3_000_000), 1, 60).Draw(rt, "gaps_us")
		// Alone (a batch of one, as a request alone in flight), or in
		// batches of up to 8 in one script call, as the senders send them.
		batch := rapid.IntRange(1, 8).Draw(rt, "batch")
		for i := 0; i < len(gaps); i += batch {
			var calls []*call
			var wants []ratelimit.Decision
			for j := i; j < min(i+batch, len(gaps)); j++ {
				us += gaps[j]
				wants = append(wants, DecideLocal(local, checks, time.UnixMicro(us)))
				keys, args := l.scriptArgs(checks, nil, &testNow{sec: us / 1e6, usec: us % 1e6})
				calls = append(calls, &call{keys: keys, args: args, done: make(chan struct{})})
			}
			if batch == 1 {
				calls[0].v, calls[0].err = l.runLimit(ctx, calls[0].keys, calls[0].args)
			} else {
				l.sendBatch(calls)
			}
			for j, c := range calls {
				if c.err != nil {
					rt.Fatalf("request %d: script failed: %v", i+j, c.err)
				}
				got, replayed, err := parseDecision(c.v)
				if err != nil || replayed {
					rt.Fatalf("request %d: %v (replayed %v)", i+j, err, replayed)
				}
				if got != wants[j] {
					rt.Fatalf("request %d (batches of %d): script decided %+v, in-process %+v", i+j, batch, got, wants[j])
				}
			}
		}
	})
}

// TestDecideUsesRedisTime: without a test time the script reads TIME, and
// a decision is shared by two Limiters (two nodes): the second node sees
// the first node's admissions.
func TestDecideIsSharedBetweenNodes(t *testing.T) {
	r := testsvc.StartRedis(t)
	a := newLimiter(t, r.Address, func(o *Options) { o.Prefix = "shared:" })
	b := newLimiter(t, r.Address, func(o *Options) { o.Prefix = "shared:" })
	p := ratelimit.Policy{Rate: mustRate(t, 0.001, 4)} // one per 1000 s: nothing refills during the test
	checks := []ratelimit.Check{{Key: "app", Policy: p}}
	ctx := context.Background()
	admitted := 0
	for i := range 10 {
		n := a
		if i%2 == 1 {
			n = b
		}
		d, _ := n.Decide(ctx, checks, nil, time.Now())
		if d.Allowed {
			admitted++
		}
	}
	if admitted != 4 {
		t.Fatalf("two nodes admitted %d requests of a burst of 4, want 4", admitted)
	}
	d, _ := b.Decide(ctx, checks, nil, time.Now())
	if d.Allowed || d.Limit != 4 || d.Remaining != 0 || d.RetryAfterSeconds() < 990 {
		t.Fatalf("refusal = %+v, want limit 4, remaining 0, Retry-After about 1000s", d)
	}
}

// TestSignatureRememberedOnceForTheCluster: a signature used on one node
// is refused as replayed on another, and the replay records nothing (the
// limit's state is untouched).
func TestSignatureRememberedOnceForTheCluster(t *testing.T) {
	r := testsvc.StartRedis(t)
	a := newLimiter(t, r.Address, func(o *Options) { o.Prefix = "sig:" })
	b := newLimiter(t, r.Address, func(o *Options) { o.Prefix = "sig:" })
	p := ratelimit.Policy{Rate: mustRate(t, 0.001, 2)}
	checks := []ratelimit.Check{{Key: "app", Policy: p}}
	sig := [32]byte{1, 2, 3}
	ctx := context.Background()
	d, replayed := a.Decide(ctx, checks, &sig, time.Now())
	if replayed || !d.Allowed || d.Remaining != 1 {
		t.Fatalf("first use: %+v replayed=%v, want admitted with 1 remaining", d, replayed)
	}
	if _, replayed = b.Decide(ctx, checks, &sig, time.Now()); !replayed {
		t.Fatal("the same signature on another node was not refused as replayed")
	}
	other := [32]byte{4}
	d, replayed = b.Decide(ctx, checks, &other, time.Now())
	if replayed || !d.Allowed || d.Remaining != 0 {
		t.Fatalf("a new signature: %+v replayed=%v, want admitted with 0 remaining (the replay took nothing)", d, replayed)
	}
	// Remembered for twice the default skew, not longer.
	c := redis.NewClient(&redis.Options{Addr: r.Address})
	defer c.Close()
	ttl, err := c.PTTL(ctx, "sig:s:"+fmt.Sprintf("%x", sig[:])).Result()
	if err != nil || ttl <= 9*time.Minute || ttl > replayTTL {
		t.Fatalf("signature key PTTL = %v (%v), want just under %v", ttl, err, replayTTL)
	}
}

// TestKeysExpire: every key the script writes has a TTL, the time its
// state matters plus a second, so Redis's memory is bounded by the keys in
// use.
func TestKeysExpire(t *testing.T) {
	r := testsvc.StartRedis(t)
	l := newLimiter(t, r.Address, func(o *Options) { o.Prefix = "exp:" })
	q, err := ratelimit.NewQuota(100, time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	l.Decide(ctx, []ratelimit.Check{{Key: "rate", Policy: ratelimit.Policy{Rate: mustRate(t, 10, 5)}}}, nil, time.Now())
	l.Decide(ctx, []ratelimit.Check{{Key: "quota", Policy: ratelimit.Policy{Quota: q}}}, nil, time.Now())
	c := redis.NewClient(&redis.Options{Addr: r.Address})
	defer c.Close()
	if ttl, err := c.PTTL(ctx, "exp:l:rate").Result(); err != nil || ttl <= 0 || ttl > 1100*time.Millisecond {
		t.Fatalf("rate key PTTL = %v (%v), want 0.1 s ahead + 1 s", ttl, err)
	}
	if ttl, err := c.PTTL(ctx, "exp:l:quota").Result(); err != nil || ttl <= time.Second || ttl > time.Hour+time.Second {
		t.Fatalf("quota key PTTL = %v (%v), want until the hour's end + 1 s", ttl, err)
	}
}

// TestOneRoundTripPerDecision counts, after the script is loaded, the
// commands the client sends (a go-redis hook) and Redis's own command
// statistics: each decision (two keys and a signature) is one EVALSHA and
// nothing else; every other command Redis counts ran inside the script.
func TestOneRoundTripPerDecision(t *testing.T) {
	r := testsvc.StartRedis(t)
	l := newLimiter(t, r.Address, nil)
	ctx := context.Background()
	checks := []ratelimit.Check{
		{Key: "route", Policy: ratelimit.Policy{Rate: mustRate(t, 1000, 1000)}},
		{Key: "app", Policy: ratelimit.Policy{Rate: mustRate(t, 1000, 1000)}},
	}
	sent, c := countFromHere(t, l, r, checks)
	const n = 50
	for i := range n {
		sig := [32]byte{byte(i)}
		if d, replayed := l.Decide(ctx, checks, &sig, time.Now()); !d.Allowed || replayed {
			t.Fatalf("decision %d: %+v replayed=%v", i, d, replayed)
		}
	}
	if got := sent.Load(); got != n {
		t.Fatalf("the client sent %d commands for %d decisions, want %d", got, n, n)
	}
	calls := commandCalls(t, c)
	inScript := map[string]bool{"time": true, "hmget": true, "hset": true, "pexpire": true, "set": true, "config|resetstat": true}
	for cmd, k := range calls {
		if cmd == "evalsha" && k != n || cmd != "evalsha" && !inScript[cmd] {
			t.Fatalf("commands after %d decisions: %v, want %d evalsha and only the script's own", n, calls, n)
		}
	}
}

// countFromHere makes one decision of checks (loading the script), then
// starts counting: the round trips l's client makes (the returned
// counter) and Redis's command statistics (reset; read them through the
// returned client).
func countFromHere(t *testing.T, l *Limiter, r *testsvc.Redis, checks []ratelimit.Check) (*atomic.Int64, *redis.Client) {
	t.Helper()
	ctx := context.Background()
	l.Decide(ctx, checks, nil, time.Now())
	sent := new(atomic.Int64)
	l.client.AddHook(countHook{sent})
	c := redis.NewClient(&redis.Options{Addr: r.Address})
	t.Cleanup(func() { c.Close() })
	if err := c.ConfigResetStat(ctx).Err(); err != nil {
		t.Fatal(err)
	}
	return sent, c
}

// countHook counts the round trips a go-redis client makes: a command, or
// a pipeline of them.
type countHook struct{ n *atomic.Int64 }

func (countHook) DialHook(next redis.DialHook) redis.DialHook { return next }
func (h countHook) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		h.n.Add(1)
		return next(ctx, cmd)
	}
}
func (h countHook) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []redis.Cmder) error {
		h.n.Add(1) // one round trip, however many commands
		return next(ctx, cmds)
	}
}

// commandCalls reads INFO commandstats: calls per command.
func commandCalls(t testing.TB, c *redis.Client) map[string]int {
	t.Helper()
	info, err := c.Info(context.Background(), "commandstats").Result()
	if err != nil {
		t.Fatal(err)
	}
	calls := map[string]int{}
	for _, line := range strings.Split(info, "\n") {
		name, rest, ok := strings.Cut(strings.TrimSpace(line), ":calls=")
		if !ok {
			continue
		}
		n, _, _ := strings.Cut(rest, ",")
		v, err := strconv.Atoi(n)
		if err != nil {
			t.Fatalf("commandstats line %q", line)
		}
		calls[strings.TrimPrefix(name, "cmdstat_")] = v
	}
	return calls
}

// TestFallbackLocalWhileRedisDown: two nodes heartbeat (both are counted);
// Redis frozen: decisions come back within the timeout (and at once once
// the breaker is open), decided locally at half the policy (rate / 2,
// burst / 2: two live nodes); Redis killed: the same; Redis back (empty):
// the heartbeat closes the breaker and decisions are shared again.
func TestFallbackLocalWhileRedisDown(t *testing.T) {
	r := testsvc.StartRedis(t)
	opts := func(o *Options) {
		o.Prefix = "fb:"
		o.Heartbeat = 100 * time.Millisecond
		o.Timeout = 200 * time.Millisecond
	}
	reg := prometheus.NewRegistry()
	a := newLimiter(t, r.Address, func(o *Options) { opts(o); o.Registerer = reg })
	b := newLimiter(t, r.Address, opts)
	waitFor(t, "both nodes counted", func() bool { return a.Nodes() == 2 && b.Nodes() == 2 })
	if v := testutil.ToFloat64(a.m.nodes); v != 2 {
		t.Fatalf("levee_cluster_nodes = %v, want 2", v)
	}
	p := ratelimit.Policy{Rate: mustRate(t, 0.001, 10)}
	checks := []ratelimit.Check{{Key: "app", Policy: p}}
	ctx := context.Background()

	r.Freeze()
	var admitted int
	for i := range 20 {
		start := time.Now()
		d, _ := a.Decide(ctx, checks, nil, time.Now())
		// Never longer than the timeout, plus scheduling slack on a busy
		// machine (the load step's test judges the p99 tightly).
		if took := time.Since(start); took > a.o.Timeout+time.Second {
			t.Fatalf("decision %d with Redis frozen took %v, timeout %v", i, took, a.o.Timeout)
		}
		if d.Allowed {
			admitted++
		}
	}
	if admitted != 5 {
		t.Fatalf("with Redis frozen node a admitted %d of a burst of 10 over 2 nodes, want 5", admitted)
	}
	if a.Up() || testutil.ToFloat64(a.m.up) != 0 {
		t.Fatal("breaker not open after repeated timeouts")
	}
	if n := testutil.ToFloat64(a.m.fallback.WithLabelValues("local")); n != 20 {
		t.Fatalf("levee_ratelimit_fallback_total{mode=local} = %v, want 20", n)
	}
	r.Kill()
	if d, _ := a.Decide(ctx, checks, nil, time.Now()); d.Allowed {
		t.Fatal("local share exhausted, yet admitted with Redis killed")
	}
	r.Restart(t)
	waitFor(t, "shared limits again", a.Up)
	d, _ := a.Decide(ctx, checks, nil, time.Now())
	if !d.Allowed || d.Remaining != 9 {
		t.Fatalf("first decision after Redis returned (empty): %+v, want admitted by the shared burst of 10 (9 remaining)", d)
	}
	waitFor(t, "node b sharing again", b.Up)
	if d, _ := b.Decide(ctx, checks, nil, time.Now()); !d.Allowed || d.Remaining != 8 {
		t.Fatalf("node b after Redis returned: %+v, want the shared state (8 remaining)", d)
	}
}

// TestConcurrentDecisionsShareRoundTrips: decisions made at once share
// script calls (fewer round trips and EVALSHA than decisions: one
// EVALSHA decides a batch), a key the batch's decisions share is read and
// written once per batch (one HMGET per EVALSHA here, one key), and the
// shared limit stays exact: 400 concurrent requests against a burst of 50
// (nothing refills) admit exactly 50.
func TestConcurrentDecisionsShareRoundTrips(t *testing.T) {
	r := testsvc.StartRedis(t)
	l := newLimiter(t, r.Address, nil)
	checks := []ratelimit.Check{{Key: "app", Policy: ratelimit.Policy{Rate: mustRate(t, 0.001, 50)}}}
	ctx := context.Background()
	sent, c := countFromHere(t, l, r, checks)
	const n = 400
	var admitted atomic.Int64
	var wg sync.WaitGroup
	start := make(chan struct{})
	for range n {
		wg.Go(func() {
			<-start
			if d, _ := l.Decide(ctx, checks, nil, time.Now()); d.Allowed {
				admitted.Add(1)
			}
		})
	}
	close(start)
	wg.Wait()
	if !l.Up() {
		t.Fatalf("decisions fell back: %s", l.LastError())
	}
	if got := admitted.Load(); got != 49 { // the script's first use took one
		t.Errorf("%d concurrent requests admitted %d of the 49 left, want 49", n, got)
	}
	calls := commandCalls(t, c)
	if calls["hmget"] != calls["evalsha"] || calls["hset"] > calls["evalsha"] || calls["pexpire"] > calls["evalsha"] {
		t.Errorf("Redis read the key %d times, wrote it %d times and set its expiry %d times in %d script calls, want at most once each per call (%v)",
			calls["hmget"], calls["hset"], calls["pexpire"], calls["evalsha"], calls)
	}
	t.Logf("%d concurrent decisions in %d round trips, %d EVALSHA", n, sent.Load(), calls["evalsha"])
	if calls["evalsha"] >= n || sent.Load() >= n {
		t.Errorf("%d round trips and %d EVALSHA for %d concurrent decisions: none shared", sent.Load(), calls["evalsha"], n)
	}
}

// TestFailureModesAllowAndDeny: with Redis unreachable, allow admits and
// deny refuses (Retry-After 1 s), both without waiting.
func TestFailureModesAllowAndDeny(t *testing.T) {
	r := testsvc.StartRedis(t)
	addr := r.Address
	r.Kill()
	p := ratelimit.Policy{Rate: mustRate(t, 1, 1)}
	checks := []ratelimit.Check{{Key: "app", Policy: p}}
	for _, mode := range []FailureMode{Allow, Deny} {
		l := newLimiter(t, addr, func(o *Options) { o.OnFailure = mode })
		for i := range 5 {
			d, replayed := l.Decide(context.Background(), checks, nil, time.Now())
			if replayed || d.Allowed != (mode == Allow) || d.Limit != 1 {
				t.Fatalf("%v, decision %d: %+v", mode, i, d)
			}
			if mode == Deny && d.RetryAfterSeconds() != 1 {
				t.Fatalf("deny: Retry-After %d s, want 1", d.RetryAfterSeconds())
			}
		}
	}
}

func TestNewRefusesBadOptions(t *testing.T) {
	if _, err := New(Options{}); err == nil || !strings.Contains(err.Error(), "Address") {
		t.Fatalf("New(empty) = %v, want an error naming Address", err)
	}
	if _, err := New(Options{Address: "x:1", Timeout: -1}); err == nil {
		t.Fatal("a negative timeout was accepted")
	}
}

// waitFor polls cond every 10 ms until it holds, failing after 10 s.
func waitFor(t testing.TB, what string, cond func() bool) {
	t.Helper()
	testkit.Until(t, 10*time.Second, what, cond)
}

// TestNodesFromMembership: with Options.Nodes (cluster.etcd's membership)
// the live count is its answer, not Redis's set, and follows it; while it
// answers 0 (no membership yet) Redis's count stands.
func TestNodesFromMembership(t *testing.T) {
	r := testsvc.StartRedis(t)
	var members atomic.Int64
	l := newLimiter(t, r.Address, func(o *Options) {
		o.Heartbeat = 20 * time.Millisecond
		o.Nodes = func() int { return int(members.Load()) }
	})
	l.Start("node-a")
	waitFor(t, "Redis's count while the membership says nothing", func() bool { return l.Nodes() == 1 })
	members.Store(3)
	waitFor(t, "the membership's count of 3", func() bool { return l.Nodes() == 3 && testutil.ToFloat64(l.m.nodes) == 3 })
	members.Store(2)
	waitFor(t, "the membership's count of 2", func() bool { return l.Nodes() == 2 })
}

// TestMembershipFollowedWhileRedisDown: with Redis unreachable (a port
// nobody listens on; the breaker open), the live count still follows
// Options.Nodes (cluster.etcd's membership) at every heartbeat, and the
// local fallback divides by it: at one instant of a stepped clock a node
// of 3 admits burst / 3 of a 90/s burst 90 policy; once the membership
// says 2 (a node died during the outage), burst / 2, and rate / 2 a second
// later: the cluster's limit split across the nodes alive now, not the
// count seen when Redis went away.
func TestMembershipFollowedWhileRedisDown(t *testing.T) {
	var members atomic.Int64
	members.Store(3)
	l := newLimiter(t, "127.0.0.1:1", func(o *Options) {
		o.Heartbeat = 20 * time.Millisecond
		o.Timeout = 200 * time.Millisecond
		o.Nodes = func() int { return int(members.Load()) }
	})
	waitFor(t, "the breaker open with 3 nodes counted", func() bool { return !l.Up() && l.Nodes() == 3 })
	checks := []ratelimit.Check{{Key: "app", Policy: ratelimit.Policy{Rate: mustRate(t, 90, 90)}}}
	admitted := func(at time.Time) int {
		n := 0
		for range 100 {
			if d, _ := l.Decide(context.Background(), checks, nil, at); d.Allowed {
				n++
			}
		}
		return n
	}
	now := time.Unix(1_000_000, 0)
	if got := admitted(now); got != 30 {
		t.Fatalf("3 live nodes, Redis down: admitted %d at one instant, want burst / 3 = 30", got)
	}
	members.Store(2)
	waitFor(t, "the membership's count of 2 with Redis still down", func() bool {
		return l.Nodes() == 2 && testutil.ToFloat64(l.m.nodes) == 2 && !l.Up()
	})
	now = now.Add(time.Second) // the share of 3's bucket is whole again (30 at 30/s)
	if got := admitted(now); got != 45 {
		t.Fatalf("2 live nodes, Redis down: admitted %d at one instant, want burst / 2 = 45", got)
	}
	now = now.Add(time.Second)
	if got := admitted(now); got != 45 {
		t.Fatalf("2 live nodes, Redis down: admitted %d one second later, want rate / 2 = 45", got)
	}
}
