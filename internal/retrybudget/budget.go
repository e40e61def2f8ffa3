// Package retrybudget caps the retries an upstream may receive as a share
// of its live traffic, so retries can repair the odd lost request but never
// multiply an outage (Finagle's RetryBudget, Envoy's retry budgets).
//
// Over a sliding window of Window, a retry is allowed while
//
//	retries < Ratio × requests + MinPerSecond × Window(seconds)
//
// where requests counts first attempts only. With Ratio 0.2 an upstream
// that fails everything sees at most 1.2× the offered requests, plus the
// fixed allowance that lets a quiet upstream still retry now and then.
//
// The window is a ring of bucketCount buckets, each Window/bucketCount wide;
// a bucket is reset when time moves past it, so memory is fixed and there
// is no goroutine or timer. Time is a parameter of every method: the caller
// passes now. Safe for concurrent use; each call holds one mutex for a few
// dozen instructions.
package retrybudget

import (
	"errors"
	"fmt"
	"sync"
	"time"
)

// bucketCount is the ring's resolution: the window slides in steps of
// Window/bucketCount.
const bucketCount = 50

// Options configure a Budget.
type Options struct {
	// Ratio is the share of first attempts that may be retried, 0..1.
	Ratio float64
	// MinPerSecond is a retry allowance per second of window that holds
	// even without traffic, >= 0.
	MinPerSecond float64
	// Window is the sliding window, > 0 (levee uses 10s).
	Window time.Duration
}

// Budget is one upstream's retry budget. The zero value is not usable; use
// New.
type Budget struct {
	ratio     float64
	allowance float64 // MinPerSecond × Window in seconds
	width     time.Duration

	mu struct {
		sync.Mutex
		buckets  [bucketCount]bucket
		requests int64 // sums over the live buckets
		retries  int64
	}
}

type bucket struct {
	epoch    int64 // which Window/bucketCount slice of time this bucket holds
	requests int64
	retries  int64
}

// New validates o and returns a Budget.
func New(o Options) (*Budget, error) {
	var errs []error
	if !(o.Ratio >= 0 && o.Ratio <= 1) {
		errs = append(errs, fmt.Errorf("ratio must be from 0 to 1, got %v", o.Ratio))
	}
	if !(o.MinPerSecond >= 0 && o.MinPerSecond < 1e9) {
		errs = append(errs, fmt.Errorf("min_per_second must be 0 or more, got %v", o.MinPerSecond))
	}
	if o.Window < bucketCount*time.Millisecond {
		errs = append(errs, fmt.Errorf("window must be at least %v, got %v", bucketCount*time.Millisecond, o.Window))
	}
	if len(errs) > 0 {
		return nil, errors.Join(errs...)
	}
	return &Budget{
		ratio:     o.Ratio,
		allowance: o.MinPerSecond * o.Window.Seconds(),
		width:     o.Window / bucketCount,
	}, nil
}

// Request records a first attempt at now.
func (b *Budget) Request(now time.Time) {
	b.mu.Lock()
	bk := b.advanceLocked(now)
	bk.requests++
	b.mu.requests++
	b.mu.Unlock()
}

// TryRetry reports whether a retry at now fits the budget, and if so
// records it.
func (b *Budget) TryRetry(now time.Time) bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	bk := b.advanceLocked(now)
	if float64(b.mu.retries) >= b.ratio*float64(b.mu.requests)+b.allowance {
		return false
	}
	bk.retries++
	b.mu.retries++
	return true
}

// Counts returns the first attempts and retries inside the window at now.
func (b *Budget) Counts(now time.Time) (requests, retries int64) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.advanceLocked(now)
	return b.mu.requests, b.mu.retries
}

// advanceLocked returns now's bucket, first clearing every bucket that now
// has left behind. Work: at most bucketCount buckets, however long the
// budget sat unused.
func (b *Budget) advanceLocked(now time.Time) *bucket {
	epoch := now.UnixNano() / int64(b.width)
	bk := &b.mu.buckets[epoch%bucketCount]
	if bk.epoch == epoch {
		return bk
	}
	for i := range b.mu.buckets {
		old := &b.mu.buckets[i]
		if old.epoch <= epoch-bucketCount || old.epoch > epoch || old == bk {
			b.mu.requests -= old.requests
			b.mu.retries -= old.retries
			*old = bucket{}
		}
	}
	bk.epoch = epoch
	return bk
}
