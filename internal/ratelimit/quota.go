package ratelimit

import (
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/levee-gw/levee/internal/limits"
)

// maxQuotaWindow bounds a Quota's window so that window arithmetic stays
// far from int64 overflow; it is limits', which validation applies too.
const maxQuotaWindow = limits.MaxQuotaPer

// Quota is a validated fixed-window policy: at most n requests per window
// of length per, windows aligned to the Unix epoch. A small value, safe to
// copy and share; the zero Quota is invalid (its decisions refuse), use
// NewQuota.
type Quota struct {
	requests int64
	per      int64 // nanoseconds
}

// NewQuota returns the policy "requests per window of per". It accepts
// exactly what limits.CheckQuotaRequests and limits.CheckQuotaPer accept:
// requests 1 to 1e12; per from 1s to 366 days. Windows start at multiples of
// per since 1970-01-01T00:00:00Z: per = 24h resets at 00:00 UTC, per = 1h
// on the hour.
func NewQuota(requests int64, per time.Duration) (Quota, error) {
	var errs []error
	if p := limits.CheckQuotaRequests(requests); p != "" {
		errs = append(errs, fmt.Errorf("quota requests %s", p))
	}
	if p := limits.CheckQuotaPer(per); p != "" {
		errs = append(errs, fmt.Errorf("quota window %s", p))
	}
	if len(errs) > 0 {
		return Quota{}, errors.Join(errs...)
	}
	return Quota{requests: requests, per: int64(per)}, nil
}

// Requests is the number of requests allowed per window.
func (q Quota) Requests() int64 { return q.requests }

// Per is the window's length.
func (q Quota) Per() time.Duration { return time.Duration(q.per) }

// windowEnd returns the end of the window holding now, (⌊now/per⌋+1)·per
// (floor division, so instants before 1970 work too).
func (q Quota) windowEnd(now int64) int64 {
	id := now / q.per
	if now%q.per < 0 {
		id--
	}
	return (id + 1) * q.per
}

// QuotaCell is the state of one key under a Quota: the end of the window
// it last counted in and its count there. Keeping the end rather than the
// window's index lets eviction tell a finished window without knowing the
// policy. The zero QuotaCell has used nothing. Safe for concurrent use; it
// must not be copied after first use.
type QuotaCell struct {
	mu    sync.Mutex
	end   int64 // Unix nanoseconds
	count int64
}

// Allow decides one request at now against q and, if admitted, counts it.
// A cell last used under another window length starts afresh in its
// current window.
func (c *QuotaCell) Allow(q Quota, now time.Time) Decision {
	return c.allow(q, now.UnixNano(), true)
}

// Peek reports what Allow would decide at now without counting anything;
// Remaining is then what is left before this request.
func (c *QuotaCell) Peek(q Quota, now time.Time) Decision {
	return c.allow(q, now.UnixNano(), false)
}

func (c *QuotaCell) allow(q Quota, now int64, record bool) Decision {
	if q.per == 0 {
		return Decision{RetryAfter: maxQuotaWindow, Quota: true}
	}
	end := q.windowEnd(now)
	c.mu.Lock()
	defer c.mu.Unlock()
	count := c.count
	if c.end != end {
		count = 0
	}
	if count >= q.requests {
		return Decision{Limit: q.requests, Reset: time.Duration(end - now), RetryAfter: time.Duration(end - now), Quota: true}
	}
	if record {
		count++
		c.end, c.count = end, count
	}
	return Decision{Allowed: true, Limit: q.requests, Remaining: q.requests - count, Reset: time.Duration(end - now), Quota: true}
}

// idle reports whether the cell holds no count that still matters at now:
// evicting it loses nothing. A cell locked by a decision is busy.
func (c *QuotaCell) idle(now int64) bool {
	if !c.mu.TryLock() {
		return false
	}
	defer c.mu.Unlock()
	return c.count == 0 || c.end <= now
}

// rank orders busy cells for eviction: the window that ends first goes
// first (it forgives the fewest future refusals).
func (c *QuotaCell) rank() int64 {
	if !c.mu.TryLock() {
		return 1<<63 - 1
	}
	defer c.mu.Unlock()
	return c.end
}
