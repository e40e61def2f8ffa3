package ratelimit

import (
	"testing"
	"time"
)

// TestShare: one node's share of a policy among n is rate / n, burst / n
// (at least 1) and quota / n (at least 1); n below 2 is the policy itself.
func TestShare(t *testing.T) {
	q, err := NewQuota(1000, time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	p := Policy{Rate: mustRate(t, 100, 100), Quota: q}
	if p.Share(1) != p || p.Share(0) != p {
		t.Fatal("Share(1) changed the policy")
	}
	s := p.Share(3)
	if s.Rate.Interval() != 30*time.Millisecond || s.Rate.Burst() != 33 || s.Quota.Requests() != 333 || s.Quota.Per() != time.Hour {
		t.Fatalf("Share(3) = interval %v burst %d quota %d/%v", s.Rate.Interval(), s.Rate.Burst(), s.Quota.Requests(), s.Quota.Per())
	}
	if iv, lim := s.Rate.Window(); lim != 33*iv {
		t.Fatalf("Share(3): L = %d, want burst × T = %d", lim, 33*iv)
	}
	tiny := Policy{Rate: mustRate(t, 1e-6, 1)}.Share(1000)
	if tiny.Rate.Interval() != time.Duration(maxInterval) || tiny.Rate.Burst() != 1 {
		t.Fatalf("Share of the slowest rate = %v / %d, want the slowest rate kept", tiny.Rate.Interval(), tiny.Rate.Burst())
	}
	var c Cell
	now := time.Unix(1_800_000_000, 0)
	n := 0
	for range 100 {
		if c.Allow(s.Rate, now).Allowed {
			n++
		}
	}
	if n != 33 {
		t.Fatalf("a node's share admitted %d at once, want 33", n)
	}
}
