package ratelimit

import "time"

// NewPolicy builds the policy of a consumer's limits: a rate per second
// with its burst (rate 0: no rate limit; burst at least 1) and a quota of
// requests per window (requests 0: no quota). Bounds as NewRate's and
// NewQuota's.
func NewPolicy(rate float64, burst int, quotaRequests int64, quotaPer time.Duration) (Policy, error) {
	var p Policy
	var err error
	if rate > 0 {
		if p.Rate, err = NewRate(rate, int64(max(burst, 1))); err != nil {
			return p, err
		}
	}
	if quotaRequests != 0 {
		if p.Quota, err = NewQuota(quotaRequests, quotaPer); err != nil {
			return p, err
		}
	}
	return p, nil
}
