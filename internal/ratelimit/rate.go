package ratelimit

import (
	"errors"
	"fmt"
	"sync/atomic"
	"time"

	"github.com/levee-gw/levee/internal/limits"
)

// maxBurst caps Rate's burst, and limits.MaxBurstWindow caps b·T, so that
// b·T and now + b·T cannot overflow an int64 of nanoseconds before the year
// 2200. The bounds are limits', which validation applies too: a policy the
// configuration or the admin API accepted is never refused here.
const maxBurst = limits.MaxBurst

// maxInterval caps T (one request per ~11.6 days) for the same reason.
const maxInterval = int64(limits.MaxInterval)

// maxCASAttempts bounds the compare-and-swap loop of one decision; see the
// package documentation for why it is never reached in practice.
const maxCASAttempts = 128

// Rate is a validated GCRA policy: a sustained rate and a burst. It is a
// small value, safe to copy and to share; the zero Rate is invalid (its
// decisions refuse everything), use NewRate.
type Rate struct {
	interval int64 // T: nanoseconds between requests at the sustained rate
	limit    int64 // L = burst·T: how far TAT may run ahead of now
	burst    int64
}

// NewRate returns the policy "perSecond requests per second, with bursts of
// up to burst requests". It accepts exactly what limits.CheckRate and
// limits.CheckBurst accept: perSecond finite, above 0, at most 1e9 and at
// least one request per 1e6 seconds; burst 1 to 1e9 with burst/perSecond
// at most 1e9 seconds. The emission interval 1/perSecond is rounded to the
// nearest nanosecond, so very high rates lose a little precision (1e6/s is
// exact).
func NewRate(perSecond float64, burst int64) (Rate, error) {
	var errs []error
	if p := limits.CheckRate(perSecond); p != "" {
		errs = append(errs, fmt.Errorf("rate %s", p))
	}
	if p := limits.CheckBurst(perSecond, burst); p != "" {
		errs = append(errs, fmt.Errorf("burst %s", p))
	}
	if len(errs) > 0 {
		return Rate{}, errors.Join(errs...)
	}
	interval := int64(limits.Interval(perSecond))
	return Rate{interval: interval, limit: burst * interval, burst: burst}, nil
}

// Interval is the emission interval T = 1/rate.
func (r Rate) Interval() time.Duration { return time.Duration(r.interval) }

// Burst is the number of requests admitted at once from rest.
func (r Rate) Burst() int64 { return r.burst }

// Cell is the state of one key under a Rate: its theoretical arrival time.
// The zero Cell is a key at rest (a full burst available) for any now after
// 1970. Safe for concurrent use; it must not be copied after first use.
type Cell struct {
	tat atomic.Int64 // Unix nanoseconds
}

// Allow decides one request at now against r and, if it is admitted,
// records it. Lock-free; at most maxCASAttempts compare-and-swaps.
func (c *Cell) Allow(r Rate, now time.Time) Decision {
	return c.allow(r, now.UnixNano())
}

func (c *Cell) allow(r Rate, now int64) Decision {
	if r.interval == 0 {
		return Decision{RetryAfter: time.Duration(maxInterval)} // the zero Rate refuses
	}
	for range maxCASAttempts {
		old := c.tat.Load()
		tat := max(old, now)
		next := tat + r.interval
		if next-now > r.limit {
			return r.refusal(tat, next, now)
		}
		if c.tat.CompareAndSwap(old, next) {
			ahead := next - now
			return Decision{
				Allowed:   true,
				Limit:     r.burst,
				Remaining: (r.limit - ahead) / r.interval,
				Reset:     time.Duration(ahead),
			}
		}
	}
	contended.Add(1)
	return Decision{Limit: r.burst, RetryAfter: time.Duration(r.interval), Reset: time.Duration(r.limit)}
}

// refusal describes a refused request: tat = max(TAT, now), next = tat + T.
// It waits until next − now' ≤ L, that is now' = next − L; the cell is full
// again when TAT ≤ now'. Remaining is 0 by construction (clamped, for a now
// that went backwards).
func (r Rate) refusal(tat, next, now int64) Decision {
	return Decision{
		Limit:      r.burst,
		Remaining:  max(0, (r.limit-(tat-now))/r.interval),
		Reset:      time.Duration(tat - now),
		RetryAfter: time.Duration(next - r.limit - now),
	}
}

// Peek reports what Allow would decide at now without recording anything.
func (c *Cell) Peek(r Rate, now time.Time) Decision {
	if r.interval == 0 {
		return Decision{RetryAfter: time.Duration(maxInterval)}
	}
	n := now.UnixNano()
	tat := max(c.tat.Load(), n)
	next := tat + r.interval
	if next-n > r.limit {
		return r.refusal(tat, next, n)
	}
	return Decision{Allowed: true, Limit: r.burst, Remaining: (r.limit - (tat - n)) / r.interval, Reset: time.Duration(tat - n)}
}

// idle reports whether the cell is at rest at now: evicting it loses
// nothing, since a fresh cell decides exactly the same.
func (c *Cell) idle(now int64) bool { return c.tat.Load() <= now }

// rank orders busy cells for eviction: the lowest TAT becomes idle first.
func (c *Cell) rank() int64 { return c.tat.Load() }

// contended counts decisions refused because the CAS bound was reached.
var contended atomic.Uint64

// Contended returns how many rate decisions, process-wide, were refused
// because maxCASAttempts compare-and-swaps failed in a row. Expected 0.
func Contended() uint64 { return contended.Load() }
