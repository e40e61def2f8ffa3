package ratelimit

import (
	"testing"
	"time"

	"pgregory.net/rapid"
)

// TestGCRANeverExceedsBurstPlusRate: for any policy and any non-decreasing
// sequence of request times, the requests admitted within any interval
// [t_i, t_j] number at most burst + ⌊(t_j − t_i)/T⌋.
func TestGCRANeverExceedsBurstPlusRate(t *testing.T) {
	rapid.Check(t, func(rt *rapid.T) {
		interval := rapid.Int64Range(1, int64(2*time.Second)).Draw(rt, "interval_ns")
		burst := rapid.Int64Range(1, 20).Draw(rt, "burst")
		r := mustRate(t, 1e9/float64(interval), burst)
		gaps := rapid.SliceOfN(rapid.Int64Range(0, 3*interval), 1, 200).Draw(rt, "gaps_ns")
		var c Cell
		now := t0.UnixNano()
		var admitted []int64
		for _, g := range gaps {
			now += g
			if c.allow(r, now).Allowed {
				admitted = append(admitted, now)
			}
		}
		for i := range admitted {
			for j := i; j < len(admitted); j++ {
				n := int64(j - i + 1)
				if bound := r.burst + (admitted[j]-admitted[i])/r.interval; n > bound {
					rt.Fatalf("%d admitted in [%d, %d], bound %d", n, admitted[i], admitted[j], bound)
				}
			}
		}
	})
}

// TestGCRAAdmitsWhatItPromises: a request made exactly RetryAfter after a
// refusal is admitted, and Remaining requests at the same instant are.
func TestGCRAAdmitsWhatItPromises(t *testing.T) {
	rapid.Check(t, func(rt *rapid.T) {
		r := mustRate(t, rapid.Float64Range(0.01, 1e5).Draw(rt, "rate"), rapid.Int64Range(1, 50).Draw(rt, "burst"))
		gaps := rapid.SliceOfN(rapid.Int64Range(0, 2*r.interval), 1, 100).Draw(rt, "gaps_ns")
		var c Cell
		now := t0.UnixNano()
		for _, g := range gaps {
			now += g
			d := c.allow(r, now)
			if d.Allowed {
				continue
			}
			if !c.Peek(r, time.Unix(0, now+int64(d.RetryAfter))).Allowed {
				rt.Fatalf("refused at RetryAfter %v", d.RetryAfter)
			}
		}
		d := c.Peek(r, time.Unix(0, now))
		for i := int64(0); i < d.Remaining; i++ {
			if !c.allow(r, now).Allowed {
				rt.Fatalf("only %d of Remaining %d admitted", i, d.Remaining)
			}
		}
	})
}
