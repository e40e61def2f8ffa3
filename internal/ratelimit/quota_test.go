package ratelimit

import (
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/levee-gw/levee/internal/limits"
)

func mustQuota(t testing.TB, n int64, per time.Duration) Quota {
	t.Helper()
	q, err := NewQuota(n, per)
	if err != nil {
		t.Fatal(err)
	}
	return q
}

func TestNewQuotaRejectsBadOptions(t *testing.T) {
	for _, c := range []struct {
		n   int64
		per time.Duration
	}{
		{0, time.Hour}, {-1, time.Hour}, {1, 0}, {1, time.Microsecond}, {1, time.Second - 1}, {1, maxQuotaWindow + 1},
		{limits.MaxQuotaRequests + 1, time.Hour},
	} {
		if _, err := NewQuota(c.n, c.per); err == nil {
			t.Errorf("NewQuota(%d, %v) accepted", c.n, c.per)
		}
	}
}

// TestQuotaWindowEdges: a daily quota of 3, windows aligned to 00:00 UTC.
// The last nanosecond of a day is still that day; the first of the next
// starts afresh.
func TestQuotaWindowEdges(t *testing.T) {
	q := mustQuota(t, 3, 24*time.Hour)
	day := time.Date(2026, 3, 1, 0, 0, 0, 0, time.UTC)
	last := day.Add(24*time.Hour - 1)
	var c QuotaCell

	d := c.Allow(q, day.Add(10*time.Hour))
	if want := (Decision{Allowed: true, Limit: 3, Remaining: 2, Reset: 14 * time.Hour, Quota: true}); d != want {
		t.Fatalf("first: %+v, want %+v", d, want)
	}
	c.Allow(q, day.Add(11*time.Hour))
	if d = c.Allow(q, last); !d.Allowed || d.Remaining != 0 || d.Reset != 1 {
		t.Fatalf("third, at the last ns: %+v", d)
	}
	if d = c.Allow(q, last); d.Allowed || d.RetryAfter != 1 || d.Reset != 1 || d.RetryAfterSeconds() != 1 {
		t.Fatalf("fourth, at the last ns: %+v", d)
	}
	next := day.Add(24 * time.Hour)
	if d = c.Allow(q, next); !d.Allowed || d.Remaining != 2 || d.Reset != 24*time.Hour {
		t.Fatalf("first ns of the next day: %+v", d)
	}
}

// TestQuotaRefusalRetryAfter: a refusal waits for the end of the window.
func TestQuotaRefusalRetryAfter(t *testing.T) {
	q := mustQuota(t, 1, time.Hour)
	var c QuotaCell
	now := time.Date(2026, 3, 1, 12, 15, 0, 0, time.UTC)
	c.Allow(q, now)
	d := c.Allow(q, now)
	if want := (Decision{Limit: 1, Reset: 45 * time.Minute, RetryAfter: 45 * time.Minute, Quota: true}); d != want {
		t.Fatalf("got %+v, want %+v", d, want)
	}
	if p := c.Peek(q, now.Add(45*time.Minute)); !p.Allowed || p.Remaining != 1 {
		t.Fatalf("peek in the next window: %+v", p)
	}
}

// TestQuotaBefore1970: floor division keeps windows aligned for negative
// Unix times too.
func TestQuotaBefore1970(t *testing.T) {
	q := mustQuota(t, 1, time.Hour)
	var c QuotaCell
	now := time.Unix(-1, 0)
	if d := c.Allow(q, now); !d.Allowed || d.Reset != time.Second {
		t.Fatalf("%+v", d)
	}
}

// TestQuotaPolicyChange: a cell counted under one window length starts
// afresh under another.
func TestQuotaPolicyChange(t *testing.T) {
	var c QuotaCell
	now := time.Date(2026, 3, 1, 12, 15, 0, 0, time.UTC)
	c.Allow(mustQuota(t, 1, time.Hour), now)
	if d := c.Allow(mustQuota(t, 1, 24*time.Hour), now); !d.Allowed {
		t.Fatalf("new policy inherited the old count: %+v", d)
	}
}

func TestQuotaConcurrentExact(t *testing.T) {
	const goroutines, each, n = 8, 300, 777
	q := mustQuota(t, n, time.Hour)
	var c QuotaCell
	var admitted atomic.Int64
	var wg sync.WaitGroup
	for range goroutines {
		wg.Go(func() {
			for range each {
				if c.Allow(q, t0).Allowed {
					admitted.Add(1)
				}
			}
		})
	}
	wg.Wait()
	if admitted.Load() != n {
		t.Fatalf("%d admitted, want exactly %d", admitted.Load(), n)
	}
}

// TestUsageQuota: rows and bytes charged with Take up to the quota; the
// charge that would cross it is refused and marks the count used up, so
// the key's next request is refused until the window ends, with
// Retry-After the window's end; a new window starts afresh.
func TestUsageQuota(t *testing.T) {
	q, err := NewUsageQuota(0, 5, 100, time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := NewUsageQuota(0, 0, 0, time.Minute); err == nil {
		t.Fatal("a quota with no count accepted")
	}
	if _, err := NewUsageQuota(0, -1, 0, time.Minute); err == nil {
		t.Fatal("rows -1 accepted")
	}
	var c QuotaCell
	t0 := time.Unix(600, 0)
	if d := c.Allow(q, t0); !d.Allowed || d.Limit != 5 || d.Remaining != 5 {
		t.Fatalf("first request: %+v", d)
	}
	for i := range 5 {
		if !c.Take(q, 1, 10, t0) {
			t.Fatalf("row %d refused", i+1)
		}
	}
	if c.Take(q, 1, 10, t0) {
		t.Fatal("row 6 of a 5-row quota taken")
	}
	if r, b := c.Used(q, t0); r != 5 || b != 50 {
		t.Fatalf("used %d rows %d bytes, want 5, 50", r, b)
	}
	d := c.Allow(q, t0.Add(10*time.Second))
	if d.Allowed || !d.Quota || d.RetryAfter != 50*time.Second {
		t.Fatalf("after the rows ran out: %+v, want a quota refusal retrying in 50s", d)
	}
	if d := c.Allow(q, t0.Add(time.Minute)); !d.Allowed {
		t.Fatalf("next window: %+v", d)
	}
	// Bytes: a charge that does not fit is refused and uses the count up.
	if !c.Take(q, 1, 95, t0.Add(time.Minute)) || c.Take(q, 1, 6, t0.Add(time.Minute)) {
		t.Fatal("bytes: 95 then 6 of 100")
	}
	if d := c.Allow(q, t0.Add(time.Minute)); d.Allowed {
		t.Fatalf("after the bytes ran out: %+v", d)
	}
	// Requests and rows together: either runs out.
	q2, _ := NewUsageQuota(2, 1000, 0, time.Minute)
	var c2 QuotaCell
	c2.Allow(q2, t0)
	c2.Allow(q2, t0)
	if d := c2.Allow(q2, t0); d.Allowed || d.Limit != 2 {
		t.Fatalf("third request of 2: %+v", d)
	}
	if s := (Policy{Quota: q}).Share(2).Quota; s.Rows() != 2 || s.Bytes() != 50 || s.Requests() != 0 {
		t.Fatalf("share of 2: rows %d bytes %d requests %d", s.Rows(), s.Bytes(), s.Requests())
	}
}
