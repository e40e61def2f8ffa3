package client

import "time"

// window counts requests and accepts over a sliding time window for the
// adaptive throttle (Google SRE book, "Handling Overload", client-side
// throttling):
//
//	p = max(0, (requests − K·accepts) / (requests + 1))
//
// It is a ring of n buckets of equal width; bucket i holds the counts of the
// slot s with s mod n = i, where slot = (now − epoch) / width. Running totals
// are kept, so reading them is O(1); moving to a later slot clears the
// buckets that fell out of the window, at most n of them (amortised O(1)).
// The window covers between (n−1)·width and n·width of time. A clock that
// goes backwards counts into the newest bucket. No goroutine, no timer; the
// caller holds the Transport's mutex.
type window struct {
	width    time.Duration
	epoch    time.Time
	slot     int64 // the newest bucket's slot
	buckets  []bucket
	requests uint64 // sums over buckets
	accepts  uint64
}

type bucket struct{ requests, accepts uint64 }

func newWindow(width time.Duration, n int, epoch time.Time) window {
	return window{width: width, epoch: epoch, buckets: make([]bucket, n)}
}

// advance moves the window so that its newest bucket is now's, forgetting
// the buckets that fell out.
func (w *window) advance(now time.Time) *bucket {
	n := int64(len(w.buckets))
	slot := int64(now.Sub(w.epoch) / w.width)
	if slot > w.slot {
		last := min(slot, w.slot+n)
		for s := w.slot + 1; s <= last; s++ {
			b := &w.buckets[s%n]
			w.requests -= b.requests
			w.accepts -= b.accepts
			*b = bucket{}
		}
		w.slot = slot
	}
	return &w.buckets[w.slot%n]
}

// add counts one request at now, and an accept unless it was refused.
func (w *window) add(now time.Time, refused bool) {
	b := w.advance(now)
	b.requests++
	w.requests++
	if !refused {
		b.accepts++
		w.accepts++
	}
}

// throttleProbability is the SRE book's client-side rejection probability
// max(0, (requests − k·accepts) / (requests + 1)).
func throttleProbability(requests, accepts uint64, k float64) float64 {
	p := (float64(requests) - k*float64(accepts)) / (float64(requests) + 1)
	return max(0, p)
}
