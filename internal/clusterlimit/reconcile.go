package clusterlimit

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"strconv"
	"sync"
	"time"

	"github.com/levee-gw/levee/internal/ratelimit"
)

// Reconciliation: while decisions are taken locally (on_failure local),
// each node counts, per quota key and quota window, the requests its
// local quotas admitted; on the first successful heartbeat after that
// (Redis answers again) the heartbeat goroutine adds those counts to the
// shared counters of the same window, before it closes the breaker, so
// the cluster's quota counts every request admitted during the outage.
// Requests never wait for it: only the fallback path touches the counts
// (one map update under a mutex), and only the heartbeat sends them.
//
// Bounds: at most Options.reconcileCapacity (DefaultReconcileCapacity)
// (key, window) counts are held; a request admitted past that, with no
// held window ended to make room, is not counted for reconciliation
// (levee_ratelimit_reconcile_dropped_total{reason="capacity"}). Counts go
// to Redis in batches of reconcileBatch, one script run each; a batch
// being sent is kept apart from the counts still accumulating, so at most
// twice the capacity is held while Redis flaps.
//
// Exactly once: each batch has an id (this Limiter's random token and a
// sequence number) that the script records, in the same atomic run, with
// what it added; a batch whose answer was lost (timeout) is sent again,
// unchanged, at the next beat, and the script, finding its id, adds
// nothing and answers what it added the first time. The node forgets a
// batch only once Redis has answered for it. A count whose window has
// ended by Redis's clock is dropped (it no longer limits anything),
// counted as reason="stale", as is a count for a window Redis does not
// hold for that key (the key's window length changed: a reload during
// the outage).
const (
	// DefaultReconcileCapacity bounds the (key, window) counts held for
	// reconciliation: 65536 keys of about 100 bytes each, a few MB.
	DefaultReconcileCapacity = 1 << 16
	// reconcileBatch is the most counts one script run adds: 3 arguments
	// and a key each, well inside Redis's argument limits, a few ms of
	// Redis's time.
	reconcileBatch = 512
)

// windowKey names one quota window of one key: the key's state hash and
// the window's end in Unix µs (as the script computes it).
type windowKey struct {
	key string
	end int64
}

// windowCount is what was admitted locally in one window; per is the
// window's length in µs.
type windowCount struct {
	n, per int64
}

// reconciler holds the counts. mu guards counts and minEnd (the fallback
// path adds, the heartbeat takes); the rest belongs to the heartbeat
// goroutine.
type reconciler struct {
	mu       sync.Mutex
	counts   map[windowKey]windowCount
	minEnd   int64 // earliest window end held; 0: none held
	capacity int

	token   string       // this Limiter's, random: batch ids are unique across restarts
	seq     uint64       // the last batch's sequence number
	pending []reconBatch // batches taken, not yet answered, in order
}

type reconBatch struct {
	id      string
	entries []reconEntry
}

type reconEntry struct {
	windowKey
	windowCount
}

func newReconciler(capacity int) reconciler {
	var b [8]byte
	_, _ = rand.Read(b[:]) // never fails (crypto/rand)
	return reconciler{counts: map[windowKey]windowCount{}, capacity: capacity, token: hex.EncodeToString(b[:])}
}

// countLocal records, for the checks a local decision admitted (the
// first admitted of checks), one request in each quota's current window
// at now.
func (l *Limiter) countLocal(checks []ratelimit.Check, admitted int, now time.Time) {
	r := &l.rec
	nowus := now.UnixMicro()
	for _, c := range checks[:admitted] {
		q := c.Policy.Quota
		if q.Requests() == 0 {
			continue
		}
		per := max(1, q.Per().Microseconds())
		k := windowKey{key: l.o.Prefix + "l:" + c.Key, end: (floorDiv(nowus, per) + 1) * per}
		r.mu.Lock()
		w, ok := r.counts[k]
		if !ok && len(r.counts) >= r.capacity && r.minEnd != 0 && r.minEnd <= nowus {
			r.dropEnded(nowus)
		}
		if !ok && len(r.counts) >= r.capacity {
			r.mu.Unlock()
			l.m.reconDropped.WithLabelValues("capacity").Inc()
			continue
		}
		r.counts[k] = windowCount{n: w.n + 1, per: per}
		if r.minEnd == 0 || k.end < r.minEnd {
			r.minEnd = k.end
		}
		r.mu.Unlock()
	}
}

// dropEnded removes the counts whose window ended by nowus (the node's
// clock; the script judges by Redis's), to make room. Called with mu held,
// only when the map is full and its earliest window has ended, so its
// O(capacity) scan runs at most once per window end.
func (r *reconciler) dropEnded(nowus int64) {
	r.minEnd = 0
	for k := range r.counts {
		if k.end <= nowus {
			delete(r.counts, k)
			continue
		}
		if r.minEnd == 0 || k.end < r.minEnd {
			r.minEnd = k.end
		}
	}
}

// take moves the held counts into batches to send, when none are
// pending.
func (r *reconciler) take() {
	if len(r.pending) != 0 {
		return
	}
	r.mu.Lock()
	counts := r.counts
	if len(counts) != 0 {
		r.counts, r.minEnd = map[windowKey]windowCount{}, 0
	}
	r.mu.Unlock()
	var b []reconEntry
	for k, w := range counts {
		b = append(b, reconEntry{k, w})
		if len(b) == reconcileBatch {
			r.seq++
			r.pending = append(r.pending, reconBatch{id: r.token + ":" + strconv.FormatUint(r.seq, 10), entries: b})
			b = nil
		}
	}
	if len(b) != 0 {
		r.seq++
		r.pending = append(r.pending, reconBatch{id: r.token + ":" + strconv.FormatUint(r.seq, 10), entries: b})
	}
}

// reconcile sends the counts taken from the fallback, one script run per
// batch, each within Timeout, stopping at the first failure (the rest go
// at the next beat). Run by the heartbeat goroutine only.
func (l *Limiter) reconcile() error {
	r := &l.rec
	r.take()
	for len(r.pending) != 0 {
		b := r.pending[0]
		added, stale, err := l.sendBatchCounts(b, l.scriptNow())
		if err != nil {
			return err
		}
		r.pending[0] = reconBatch{}
		r.pending = r.pending[1:]
		l.m.reconciled.Add(float64(added))
		l.m.reconDropped.WithLabelValues("stale").Add(float64(stale))
	}
	r.pending = nil
	return nil
}

// sendBatchCounts runs the reconcile script for b: the requests it added
// and those it dropped as stale, the first time it ran for b's id; at
// is the test clock's instant, or nil.
func (l *Limiter) sendBatchCounts(b reconBatch, at *testNow) (added, stale int64, err error) {
	keys := make([]string, 0, 1+len(b.entries))
	args := make([]any, 0, 2+3*len(b.entries))
	keys = append(keys, l.o.Prefix+"r:"+b.id)
	if at != nil {
		args = append(args, at.sec, at.usec)
	} else {
		args = append(args, "", "")
	}
	for _, e := range b.entries {
		keys = append(keys, e.key)
		args = append(args, e.end, e.per, e.n)
	}
	ctx, cancel := context.WithTimeout(context.Background(), l.o.Timeout)
	defer cancel()
	start := time.Now()
	v, err := l.run(ctx, l.recon, keys, args)
	l.m.latency.WithLabelValues("reconcile").Observe(time.Since(start).Seconds())
	if err != nil {
		return 0, 0, err
	}
	a, ok := v.([]any)
	if !ok || len(a) != 2 {
		return 0, 0, fmt.Errorf("clusterlimit: unexpected reconcile answer %v", v)
	}
	added, ok1 := a[0].(int64)
	stale, ok2 := a[1].(int64)
	if !ok1 || !ok2 {
		return 0, 0, fmt.Errorf("clusterlimit: unexpected reconcile answer %v", v)
	}
	return added, stale, nil
}

// scriptNow is the test clock's instant for the scripts, nil in
// production (the scripts read TIME).
func (l *Limiter) scriptNow() *testNow {
	if l.o.clock == nil {
		return nil
	}
	us := l.o.clock().UnixMicro()
	return &testNow{sec: us / 1e6, usec: us % 1e6}
}

// floorDiv is ⌊a/b⌋ for b > 0.
func floorDiv(a, b int64) int64 {
	q := a / b
	if a%b < 0 {
		q--
	}
	return q
}

// reconcileScript adds locally counted requests to the shared quota
// counters, once per batch id.
//
// KEYS[1]: the batch's marker; KEYS[2..]: the keys' state hashes.
// ARGV[1], ARGV[2]: now (seconds, µs) for the package's tests; empty:
// TIME. Then for each key: its window's end (Unix µs), the window's
// length (µs) and the count.
//
// A count is added when its window has not ended and the key holds that
// window (qe) or none that is still current; it is dropped as stale when
// the window has ended or the key holds another current window (the
// window length changed). The key's expiry is extended to the window's
// end plus a second when shorter. The marker lives until the last
// window's end plus a second (a retry after that would add nothing
// anyway) and holds the answer.
//
// Returns {added, stale}; for a batch already applied, the first answer.
const reconcileScript = `
local done = redis.call('GET', KEYS[1])
if done then
  local a, s = string.match(done, '^(%d+):(%d+)$')
  return {tonumber(a), tonumber(s)}
end
local sec, usec
if ARGV[1] ~= '' then
  sec, usec = tonumber(ARGV[1]), tonumber(ARGV[2])
else
  local t = redis.call('TIME')
  sec, usec = tonumber(t[1]), tonumber(t[2])
end
local nowus = sec * 1000000 + usec
local function int(x) return string.format('%d', x) end
local added, stale, last = 0, 0, nowus
for i = 2, #KEYS do
  local b = 2 + (i - 2) * 3
  local wend, c = tonumber(ARGV[b + 1]), tonumber(ARGV[b + 3])
  local key = KEYS[i]
  local st = redis.call('HMGET', key, 'qe', 'qc')
  local qe, qc = tonumber(st[1]), tonumber(st[2]) or 0
  if wend <= nowus or (qe and qe ~= wend and qe > nowus) then
    stale = stale + c
  else
    if qe ~= wend then qc = 0 end
    redis.call('HSET', key, 'qe', int(wend), 'qc', int(qc + c))
    local ms = math.ceil((wend - nowus) / 1000) + 1000
    if redis.call('PTTL', key) < ms then
      redis.call('PEXPIRE', key, int(ms))
    end
    added = added + c
    if wend > last then last = wend end
  end
end
redis.call('SET', KEYS[1], int(added) .. ':' .. int(stale), 'PX', int(math.ceil((last - nowus) / 1000) + 1000))
return {added, stale}
`
