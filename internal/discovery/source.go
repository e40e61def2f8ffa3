package discovery

import (
	"context"
	"errors"
	"math/rand/v2"
	"time"
)

// Event is one complete view of an upstream's instances as a source sees
// it: never a delta. A caller applies each Event in full (through the
// Guard), so a lost or repeated Event cannot leave it with a wrong set.
type Event struct {
	// Update is the new state. It is valid when Err is nil. With an Err
	// wrapping ErrAllRejected it still lists the rejections (for counting
	// and logging) and holds no instances.
	Update Update
	// Err says the source's state was refused whole: unreadable, missing,
	// unparseable, too large, or every instance rejected. The caller keeps
	// serving its last good set. It is a *PayloadError (match with
	// errors.Is against ErrMalformed, ErrTooLarge, ErrAllRejected or
	// ErrUnavailable).
	Err error
	// Source names where the Event came from: "file:/path" or
	// "etcd:/prefix/".
	Source string
}

// Source watches one upstream's registry. Run blocks until ctx is done and
// calls deliver with each complete state, in order, from Run's own
// goroutine (never concurrently, never after Run returns). Run returns nil
// when ctx is cancelled and an error only for a configuration mistake; a
// registry that is down or sends bad data is reported through Events (or,
// for etcd, by not delivering), never by returning. Every goroutine Run
// starts has ended when it returns.
type Source interface {
	Run(ctx context.Context, deliver func(Event)) error
}

// ErrUnavailable: the source's data could not be read at all (a file that
// is missing or unreadable). It is wrapped by a *PayloadError with Code
// CodeUnavailable.
var ErrUnavailable = errors.New("registry data unavailable")

// CodeUnavailable is the PayloadError code for ErrUnavailable, a
// levee_discovery_updates_total{result} label value like the other codes.
const CodeUnavailable = "unavailable"

// backoff is a jittered exponential backoff: each wait is drawn uniformly
// from [cur/2, cur] (never below min), and cur doubles from min to max.
// Not safe for concurrent use; the zero value is not usable.
type backoff struct {
	min, max, cur time.Duration
}

// next returns the wait before the next attempt, between min and max.
func (b *backoff) next() time.Duration {
	if b.cur < b.min {
		b.cur = b.min
	}
	d := b.cur/2 + rand.N(b.cur/2+1)
	d = max(d, b.min)
	b.cur = min(b.cur*2, b.max)
	return d
}

// reset makes the next wait short again.
func (b *backoff) reset() { b.cur = 0 }

// sleep waits d on t (a stopped or fired timer owned by the caller) or until
// ctx is done, and reports whether the full wait elapsed.
func sleep(ctx context.Context, t *time.Timer, d time.Duration) bool {
	t.Reset(d)
	select {
	case <-ctx.Done():
		t.Stop()
		return false
	case <-t.C:
		return true
	}
}

// newStoppedTimer returns a timer that has not been started, for reuse with
// Reset (Go 1.23 timers: Stop and Reset leave no stale tick behind).
func newStoppedTimer() *time.Timer {
	t := time.NewTimer(time.Hour)
	t.Stop()
	return t
}
