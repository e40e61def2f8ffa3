// Package clusterlimit makes rate limits, quotas and the HMAC replay cache
// one for a cluster of levee nodes, kept in Redis: each request is decided
// by one Lua script in one round trip (EVALSHA; the script is loaded with
// SCRIPT LOAD the first time Redis answers NOSCRIPT), on Redis's clock.
//
// When Redis does not answer within Options.Timeout, refuses connections,
// or has failed Options.BreakerFailures times in a row (the breaker is
// then open, and a background heartbeat probes Redis every
// Options.Heartbeat until it answers), a decision is taken without it, as
// Options.OnFailure says: Local enforces each policy's share for one of
// the live nodes (ratelimit.Policy.Share) in memory, Allow admits, Deny
// refuses. The live nodes are counted in Redis too: every node adds
// itself to a sorted set scored by Redis's time at each heartbeat, and the
// last count seen is what Local divides by while Redis is away.
//
// Every wait is bounded by Options.Timeout (dial, pool, read and write);
// go-redis retries nothing.
package clusterlimit

import (
	"context"
	"crypto/sha1"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/redis/go-redis/v9"
	"github.com/redis/go-redis/v9/maintnotifications"

	"github.com/levee-gw/levee/internal/ratelimit"
	"github.com/levee-gw/levee/internal/rawsock"
)

// FailureMode is what a decision does when Redis cannot take it.
type FailureMode uint8

const (
	// Local enforces, on each node alone, rate / live nodes and burst /
	// live nodes (quotas: requests / live nodes), counted in memory.
	Local FailureMode = iota
	// Allow admits every request.
	Allow
	// Deny refuses every limited request (429, Retry-After 1 s).
	Deny
)

// String is the mode's configuration name.
func (m FailureMode) String() string {
	switch m {
	case Allow:
		return "allow"
	case Deny:
		return "deny"
	}
	return "local"
}

// Defaults of Options.
const (
	DefaultTimeout         = 50 * time.Millisecond
	DefaultBreakerFailures = 3
	DefaultHeartbeat       = time.Second
	DefaultNodeTTL         = 5 * time.Second
	DefaultPrefix          = "levee:"
	// localCapacity bounds the keys the Local fallback holds (as the
	// proxy's own app limiter: idle keys evicted first).
	localCapacity = 1 << 20
	// maxChecks is the most keys one decision takes (an app × route
	// limit and the app's).
	maxChecks = 2
)

// Options configure a Limiter.
type Options struct {
	// Address is Redis's host:port. Required.
	Address string
	// Password authenticates to Redis (AUTH); empty: none.
	Password string
	// Timeout bounds every operation (dial, pool wait, write, read); past
	// it the decision falls back. 0: DefaultTimeout.
	Timeout time.Duration
	// OnFailure is what a decision does without Redis.
	OnFailure FailureMode
	// Prefix starts every key levee writes. "": DefaultPrefix.
	Prefix string
	// BreakerFailures is how many failed operations in a row open the
	// breaker (a batch of decisions sent in one script call is one
	// operation). 0: DefaultBreakerFailures.
	BreakerFailures int
	// Heartbeat is how often the node records itself alive (and, with the
	// breaker open, probes Redis). 0: DefaultHeartbeat.
	Heartbeat time.Duration
	// NodeTTL is how long a node not heard from still counts as live.
	// 0: DefaultNodeTTL.
	NodeTTL time.Duration
	// Nodes, when set and answering more than 0, is the count of live
	// nodes (cluster.etcd's membership), used instead of the heartbeat's
	// own count in Redis; the heartbeat still probes Redis.
	Nodes func() int
	// Registerer receives the metrics; nil: none registered.
	Registerer prometheus.Registerer
	// Logger receives state changes (Redis down, back); nil: discarded.
	Logger *slog.Logger

	// clock, set only by the package's tests, is the scripts' time instead
	// of Redis's TIME (a fake clock they step).
	clock func() time.Time
	// reconcileCapacity, set only by the package's tests, replaces
	// DefaultReconcileCapacity.
	reconcileCapacity int
}

// Limiter decides requests against limits shared through Redis. Safe for
// concurrent use. New builds it without I/O; Start begins the heartbeat;
// Close stops it and closes the connections.
type Limiter struct {
	o      Options
	client *redis.Client
	limit  script
	beat   script
	recon  script
	nodes  string // the live-node set's key

	local *ratelimit.Limiter[string]

	failures atomic.Int32
	open     atomic.Bool
	live     atomic.Int64 // last node count seen, at least 1
	lastErr  atomic.Pointer[string]

	m metrics

	rec reconciler // quota counts made locally, for Redis (reconcile.go)

	batch    batcher     // decisions queued for the senders (batch.go)
	batching atomic.Bool // the senders run: from Start to Close

	mu              sync.Mutex // guards started and closed
	started, closed bool
	nodeID          string // set by Start, before the heartbeat runs
	stop, done      chan struct{}
}

// dialRaw dials Redis and wraps the connection in rawsock, so that a
// decision's write and read are raw system calls: an ordinary one wakes
// the runtime's monitor thread whenever every P had gone idle, which a
// node answering short requests does between most of them (rawsock's
// package comment; docs/performance.md).
func dialRaw(ctx context.Context, network, addr string) (net.Conn, error) {
	var d net.Dialer
	c, err := d.DialContext(ctx, network, addr)
	if err != nil {
		return nil, err
	}
	return rawsock.Wrap(c), nil
}

// quietRedis silences go-redis's own logger (process-wide, once): it
// logs every failed dial, which with Redis down is every request; the
// Limiter reports state changes and counts failures itself.
var quietRedis sync.Once

type discardLogger struct{}

func (discardLogger) Printf(context.Context, string, ...any) {}

// script is a Lua script run by its SHA-1.
type script struct {
	src, sha string
}

func newScript(src string) script {
	sum := sha1.Sum([]byte(src))
	return script{src: src, sha: hex.EncodeToString(sum[:])}
}

// New validates o and returns a Limiter. It does not connect.
func New(o Options) (*Limiter, error) {
	var errs []error
	if o.Address == "" {
		errs = append(errs, errors.New("clusterlimit: Address is required"))
	}
	if o.OnFailure > Deny {
		errs = append(errs, fmt.Errorf("clusterlimit: unknown failure mode %d", o.OnFailure))
	}
	if o.Timeout < 0 || o.BreakerFailures < 0 || o.Heartbeat < 0 || o.NodeTTL < 0 {
		errs = append(errs, errors.New("clusterlimit: Timeout, BreakerFailures, Heartbeat and NodeTTL must not be negative"))
	}
	if len(errs) > 0 {
		return nil, errors.Join(errs...)
	}
	if o.Timeout == 0 {
		o.Timeout = DefaultTimeout
	}
	if o.BreakerFailures == 0 {
		o.BreakerFailures = DefaultBreakerFailures
	}
	if o.Heartbeat == 0 {
		o.Heartbeat = DefaultHeartbeat
	}
	if o.NodeTTL == 0 {
		o.NodeTTL = DefaultNodeTTL
	}
	if o.Prefix == "" {
		o.Prefix = DefaultPrefix
	}
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	quietRedis.Do(func() { redis.SetLogger(discardLogger{}) })
	local, err := ratelimit.New[string](ratelimit.Options{Capacity: localCapacity})
	if err != nil {
		return nil, err
	}
	l := &Limiter{
		o: o,
		client: redis.NewClient(&redis.Options{
			Addr:     o.Address,
			Password: o.Password,
			Dialer:   dialRaw,
			// RESP2, no client name, no maintenance notifications: no
			// command on a new connection but AUTH (when a password is set).
			Protocol:                 2,
			DisableIdentity:          true,
			MaintNotificationsConfig: &maintnotifications.Config{Mode: maintnotifications.ModeDisabled},
			DialTimeout:              o.Timeout,
			DialerRetries:            1,
			ReadTimeout:              o.Timeout,
			WriteTimeout:             o.Timeout,
			PoolTimeout:              o.Timeout,
			ContextTimeoutEnabled:    true,
			MaxRetries:               -1, // a retry would wait past Timeout
		}),
		limit: newScript(limitScript),
		beat:  newScript(heartbeatScript),
		recon: newScript(reconcileScript),
		nodes: o.Prefix + "nodes",
		local: local,
		stop:  make(chan struct{}),
		done:  make(chan struct{}),
	}
	if o.reconcileCapacity == 0 {
		o.reconcileCapacity = DefaultReconcileCapacity
	}
	l.o.reconcileCapacity = o.reconcileCapacity
	l.rec = newReconciler(o.reconcileCapacity)
	l.live.Store(1)
	l.m = newMetrics(o.OnFailure)
	if o.Registerer != nil {
		if err := l.m.register(o.Registerer); err != nil {
			l.client.Close()
			return nil, err
		}
	}
	l.m.up.Set(1)
	l.m.nodes.Set(1)
	return l, nil
}

// Start begins the heartbeat, at once and then every Options.Heartbeat,
// with nodeID naming this node in the live set (the gateway knows its
// admin port, part of the default id, only once it listens).
func (l *Limiter) Start(nodeID string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.started || l.closed {
		return
	}
	l.started = true
	l.nodeID = nodeID
	l.startSenders()
	go l.heartbeat()
}

// Close stops the heartbeat (each beat is bounded by Timeout), removes this
// node from the live set (within Timeout) and closes the connections.
func (l *Limiter) Close() error {
	l.mu.Lock()
	if l.closed {
		l.mu.Unlock()
		return nil
	}
	l.closed = true
	started := l.started
	l.mu.Unlock()
	close(l.stop)
	if started {
		<-l.done
		l.stopSenders()
	}
	if started && !l.open.Load() {
		ctx, cancel := context.WithTimeout(context.Background(), l.o.Timeout)
		l.client.ZRem(ctx, l.nodes, l.nodeID)
		cancel()
	}
	return l.client.Close()
}

// Up reports whether decisions go to Redis (the breaker is closed).
func (l *Limiter) Up() bool { return !l.open.Load() }

// LastError is the last failure's message ("" after a success).
func (l *Limiter) LastError() string {
	if p := l.lastErr.Load(); p != nil {
		return *p
	}
	return ""
}

// Nodes is the last count of live nodes seen, at least 1.
func (l *Limiter) Nodes() int { return int(l.live.Load()) }

// OnFailure is the configured failure mode.
func (l *Limiter) OnFailure() FailureMode { return l.o.OnFailure }

// Decide applies checks, in order, to one request at now and records it;
// with signature non-nil it first records the signature's MAC as used,
// and reports replayed (nothing else recorded) when some node had already
// used it. At most maxChecks checks. now is used only without Redis.
func (l *Limiter) Decide(ctx context.Context, checks []ratelimit.Check, signature *[32]byte, now time.Time) (d ratelimit.Decision, replayed bool) {
	if len(checks) > maxChecks {
		checks = checks[:maxChecks]
	}
	if len(checks) == 0 && signature == nil {
		return ratelimit.Decision{Allowed: true}, false
	}
	if l.open.Load() {
		return l.fallback(checks, now), false
	}
	d, replayed, err := l.decideShared(ctx, checks, signature, l.scriptNow())
	if err != nil {
		// A batch's failure was counted once, by its sender: one failed
		// operation, however many decisions it carried.
		if !errors.As(err, new(batchError)) {
			l.failed(err)
		}
		return l.fallback(checks, now), false
	}
	l.succeeded()
	return d, replayed
}

// testNow, when set, is the time the script uses instead of TIME: only
// the package's tests set it (decideShared's at), to step time.
type testNow struct{ sec, usec int64 }

// decideShared runs the limit script for one request, alone or in a
// batch (batch.go): one EVALSHA, or on NOSCRIPT (a restarted Redis)
// SCRIPT LOAD and EVALSHA again, all within Timeout.
func (l *Limiter) decideShared(ctx context.Context, checks []ratelimit.Check, signature *[32]byte, at *testNow) (ratelimit.Decision, bool, error) {
	keys, args := l.scriptArgs(checks, signature, at)
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), l.o.Timeout)
	defer cancel()
	start := time.Now()
	v, err := l.runLimit(ctx, keys, args)
	l.m.limitLatency.Observe(time.Since(start).Seconds())
	if err != nil {
		return ratelimit.Decision{}, false, err
	}
	return parseDecision(v)
}

// scriptArgs are the limit script's keys and arguments for one request,
// as a batch of one (limitScript).
func (l *Limiter) scriptArgs(checks []ratelimit.Check, signature *[32]byte, at *testNow) ([]string, []any) {
	keys := make([]string, 0, len(checks)+1)
	args := make([]any, 0, 5+5*len(checks))
	args = append(args, 1) // a batch of one (sendBatch replaces it)
	if at != nil {
		args = append(args, at.sec, at.usec)
	} else {
		args = append(args, "", "")
	}
	for _, c := range checks {
		keys = append(keys, l.o.Prefix+"l:"+c.Key)
	}
	if signature != nil {
		keys = append(keys, l.o.Prefix+"s:"+hex.EncodeToString(signature[:]))
		args = append(args, replayTTL.Milliseconds())
	} else {
		args = append(args, "")
	}
	args = append(args, len(checks))
	for _, c := range checks {
		iv, lim := c.Policy.Rate.Window()
		var qn, qper int64
		if q := c.Policy.Quota; q.Requests() != 0 {
			qn, qper = q.Requests(), max(1, q.Per().Microseconds())
		}
		args = append(args, iv, lim, c.Policy.Rate.Burst(), qn, qper)
	}
	return keys, args
}

// parseAnswers is the script's answer to a batch of one.
func parseAnswers(v any) (any, error) {
	a, ok := v.([]any)
	if !ok || len(a) != 1 {
		return nil, fmt.Errorf("clusterlimit: unexpected script answer %v", v)
	}
	return a[0], nil
}

// run calls s by its SHA; if Redis does not have it (first use, or
// restarted), loads it and calls it again.
func (l *Limiter) run(ctx context.Context, s script, keys []string, args []any) (any, error) {
	cmd := l.client.EvalSha(ctx, s.sha, keys, args...)
	if err := cmd.Err(); err != nil && redis.HasErrorPrefix(err, "NOSCRIPT") {
		if err = l.client.ScriptLoad(ctx, s.src).Err(); err != nil {
			return nil, err
		}
		cmd = l.client.EvalSha(ctx, s.sha, keys, args...)
	}
	return result(cmd)
}

// parseDecision reads the script's answer.
func parseDecision(v any) (ratelimit.Decision, bool, error) {
	a, ok := v.([]any)
	if !ok || len(a) == 0 {
		return ratelimit.Decision{}, false, fmt.Errorf("clusterlimit: unexpected script answer %T", v)
	}
	n := make([]int64, len(a))
	for i, x := range a {
		if n[i], ok = x.(int64); !ok {
			return ratelimit.Decision{}, false, fmt.Errorf("clusterlimit: unexpected script answer %v", v)
		}
	}
	if n[0] == 1 {
		return ratelimit.Decision{}, true, nil
	}
	if len(n) != 7 {
		return ratelimit.Decision{}, false, fmt.Errorf("clusterlimit: unexpected script answer %v", v)
	}
	return ratelimit.Decision{
		Allowed:    n[1] == 1,
		Limit:      n[2],
		Remaining:  n[3],
		Reset:      time.Duration(n[4]),
		RetryAfter: time.Duration(n[5]),
		Quota:      n[6] == 1,
	}, false, nil
}

// replayTTL is how long a signature is remembered: twice the verifier's
// default skew (auth.DefaultSkew, 5 min), as its own replay cache does.
// The proxy verifies signatures with the default skew.
const replayTTL = 10 * time.Minute

// failed counts a failed operation; BreakerFailures in a row open the
// breaker until a heartbeat succeeds.
func (l *Limiter) failed(err error) {
	msg := err.Error()
	l.lastErr.Store(&msg)
	if int(l.failures.Add(1)) >= l.o.BreakerFailures && !l.open.Swap(true) {
		l.m.up.Set(0)
		l.o.Logger.Warn("redis unreachable: limits decided without it", "on_failure", l.o.OnFailure.String(),
			"live_nodes", l.live.Load(), "error", msg)
	}
}

// succeeded resets the failure count.
func (l *Limiter) succeeded() {
	if l.failures.Load() != 0 {
		l.failures.Store(0)
	}
}

// heartbeat records the node alive every Heartbeat; a success closes an
// open breaker.
func (l *Limiter) heartbeat() {
	defer close(l.done)
	t := time.NewTicker(l.o.Heartbeat)
	defer t.Stop()
	for {
		l.beatOnce()
		select {
		case <-l.stop:
			return
		case <-t.C:
		}
	}
}

func (l *Limiter) beatOnce() {
	ctx, cancel := context.WithTimeout(context.Background(), l.o.Timeout)
	defer cancel()
	start := time.Now()
	external := 0
	if l.o.Nodes != nil {
		if external = l.o.Nodes(); external > 0 {
			l.live.Store(int64(external))
			l.m.nodes.Set(float64(external))
		}
	}
	v, err := l.run(ctx, l.beat, []string{l.nodes}, []any{l.nodeID, l.o.NodeTTL.Milliseconds()})
	l.m.latency.WithLabelValues("heartbeat").Observe(time.Since(start).Seconds())
	if err == nil && external == 0 {
		n, ok := v.(int64)
		if !ok {
			err = fmt.Errorf("clusterlimit: unexpected heartbeat answer %v", v)
		} else {
			l.live.Store(max(1, n))
			l.m.nodes.Set(float64(max(1, n)))
		}
	}
	if err != nil {
		l.failed(err)
		return
	}
	// Counts made locally go to Redis before the breaker closes, so the
	// first shared decisions already see them; a failure leaves them for
	// the next beat and does not keep the breaker open (the limit script
	// worked: shared decisions are better than local ones).
	if err := l.reconcile(); err != nil {
		l.o.Logger.Warn("quota counts made without redis not reconciled yet: retried at the next heartbeat", "error", err.Error())
	}
	l.failures.Store(0)
	empty := ""
	l.lastErr.Store(&empty)
	if l.open.Swap(false) {
		l.m.up.Set(1)
		l.o.Logger.Info("redis reachable again: limits shared", "live_nodes", l.live.Load())
	}
}

// fallback decides without Redis, as OnFailure says.
func (l *Limiter) fallback(checks []ratelimit.Check, now time.Time) ratelimit.Decision {
	l.m.fallback.WithLabelValues(l.o.OnFailure.String()).Inc()
	switch l.o.OnFailure {
	case Allow:
		lim := limitOf(checks)
		return ratelimit.Decision{Allowed: true, Limit: lim, Remaining: lim}
	case Deny:
		if len(checks) == 0 {
			return ratelimit.Decision{Allowed: true}
		}
		return ratelimit.Decision{Limit: limitOf(checks), Reset: time.Second, RetryAfter: time.Second}
	}
	var shared [maxChecks]ratelimit.Check
	n := int(l.live.Load())
	for i, c := range checks {
		shared[i] = ratelimit.Check{Key: c.Key, Policy: c.Policy.Share(n)}
	}
	d, admitted := decideLocal(l.local, shared[:len(checks)], now)
	l.countLocal(checks, admitted, now)
	return d
}

// limitOf is the size of the last check's policy (the app's own), for
// the RateLimit-Limit of a decision taken without state.
func limitOf(checks []ratelimit.Check) int64 {
	if len(checks) == 0 {
		return 0
	}
	p := checks[len(checks)-1].Policy
	if b := p.Rate.Burst(); b != 0 {
		return b
	}
	return p.Quota.Requests()
}

// DecideLocal applies checks in order with in-process state, as the
// script does in Redis and as the proxy does without a cluster: a refusal
// stops there; of the admitting decisions, the one with the fewest
// remaining is reported.
func DecideLocal(l *ratelimit.Limiter[string], checks []ratelimit.Check, now time.Time) ratelimit.Decision {
	d, _ := decideLocal(l, checks, now)
	return d
}

// decideLocal is DecideLocal, also reporting how many checks, from the
// first, admitted the request (and so counted it in their quotas).
func decideLocal(l *ratelimit.Limiter[string], checks []ratelimit.Check, now time.Time) (ratelimit.Decision, int) {
	d := ratelimit.Decision{Allowed: true}
	for i, c := range checks {
		di := l.Allow(c.Key, c.Policy, now)
		if !di.Allowed {
			return di, i
		}
		if i == 0 || di.Remaining < d.Remaining {
			d = di
		}
	}
	return d, len(checks)
}
