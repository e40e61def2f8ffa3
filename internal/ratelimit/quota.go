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
	requests int64 // 0: requests not counted (rows or bytes are)
	rows     int64 // 0: no row quota
	bytes    int64 // 0: no byte quota
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

// NewUsageQuota returns the policy "requests, rows and bytes per window of
// per", each count 0 for none but at least one set: rows and bytes are of
// answers as they stream (charged with QuotaCell.Take); a key whose rows
// or bytes of the window are used up is refused like one out of requests.
// Bounds as NewQuota's, rows 1 to limits.MaxQuotaRows, bytes 1 to
// limits.MaxQuotaBytes.
func NewUsageQuota(requests, rows, bytes int64, per time.Duration) (Quota, error) {
	if rows == 0 && bytes == 0 {
		return NewQuota(requests, per)
	}
	var errs []error
	if p := limits.CheckQuotaRequests(requests); requests != 0 && p != "" {
		errs = append(errs, fmt.Errorf("quota requests %s", p))
	}
	if p := limits.CheckQuotaRows(rows); rows != 0 && p != "" {
		errs = append(errs, fmt.Errorf("quota rows %s", p))
	}
	if p := limits.CheckQuotaBytes(bytes); bytes != 0 && p != "" {
		errs = append(errs, fmt.Errorf("quota bytes %s", p))
	}
	if p := limits.CheckQuotaPer(per); p != "" {
		errs = append(errs, fmt.Errorf("quota window %s", p))
	}
	if len(errs) > 0 {
		return Quota{}, errors.Join(errs...)
	}
	return Quota{requests: requests, rows: rows, bytes: bytes, per: int64(per)}, nil
}

// Requests is the number of requests allowed per window (0: not counted).
func (q Quota) Requests() int64 { return q.requests }

// Rows and Bytes are the rows and bytes of answers allowed per window (0:
// none counted).
func (q Quota) Rows() int64  { return q.rows }
func (q Quota) Bytes() int64 { return q.bytes }

// Usage reports whether q counts rows or bytes: its answers must then be
// charged as they stream (QuotaCell.Take).
func (q Quota) Usage() bool { return q.rows != 0 || q.bytes != 0 }

// Per is the window's length.
func (q Quota) Per() time.Duration { return time.Duration(q.per) }

// WindowEnd returns the end of the window holding now, in Unix
// nanoseconds: the same instant on every node.
func (q Quota) WindowEnd(now time.Time) int64 { return q.windowEnd(now.UnixNano()) }

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
	rows  int64 // rows charged in the window (Take)
	bytes int64 // bytes charged in the window (Take)
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
	count, rows, bytes := c.count, c.rows, c.bytes
	if c.end != end {
		count, rows, bytes = 0, 0, 0
	}
	limit, used := q.requests, count
	if limit == 0 { // rows or bytes only: the headers tell the first counted
		limit, used = q.rows, rows
		if limit == 0 {
			limit, used = q.bytes, bytes
		}
	}
	if (q.requests != 0 && count >= q.requests) || (q.rows != 0 && rows >= q.rows) || (q.bytes != 0 && bytes >= q.bytes) {
		return Decision{Limit: limit, Reset: time.Duration(end - now), RetryAfter: time.Duration(end - now), Quota: true}
	}
	if record {
		count++
		if q.requests != 0 {
			used = count
		}
		c.end, c.count, c.rows, c.bytes = end, count, rows, bytes
	}
	return Decision{Allowed: true, Limit: limit, Remaining: limit - used, Reset: time.Duration(end - now), Quota: true}
}

// Take charges rows and bytes of an answer to the window holding now and
// reports whether they fit q's row and byte counts (a count q does not
// have always fits). When they do not, nothing is charged and the count
// they would pass is marked used up, so that the key's next request is
// refused until the window ends: an answer that crosses its quota ends
// there, and so does the key's window.
func (c *QuotaCell) Take(q Quota, rows, bytes int64, now time.Time) bool {
	if q.per == 0 {
		return false
	}
	end := q.windowEnd(now.UnixNano())
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.end != end {
		c.end, c.count, c.rows, c.bytes = end, 0, 0, 0
	}
	fits := true
	if q.rows != 0 && c.rows+rows > q.rows {
		c.rows, fits = q.rows, false
	}
	if q.bytes != 0 && c.bytes+bytes > q.bytes {
		c.bytes, fits = q.bytes, false
	}
	if fits {
		c.rows += rows
		c.bytes += bytes
	}
	return fits
}

// Room returns how many more bytes fit q's byte count in the window
// holding now (-1: q counts no bytes).
func (c *QuotaCell) Room(q Quota, now time.Time) int64 {
	if q.bytes == 0 {
		return -1
	}
	_, b := c.Used(q, now)
	return max(0, q.bytes-b)
}

// Used returns the rows and bytes charged in the window holding now.
func (c *QuotaCell) Used(q Quota, now time.Time) (rows, bytes int64) {
	if q.per == 0 {
		return 0, 0
	}
	end := q.windowEnd(now.UnixNano())
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.end != end {
		return 0, 0
	}
	return c.rows, c.bytes
}

// idle reports whether the cell holds no count that still matters at now:
// evicting it loses nothing. A cell locked by a decision is busy.
func (c *QuotaCell) idle(now int64) bool {
	if !c.mu.TryLock() {
		return false
	}
	defer c.mu.Unlock()
	return (c.count == 0 && c.rows == 0 && c.bytes == 0) || c.end <= now
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
