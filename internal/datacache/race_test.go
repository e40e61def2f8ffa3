package datacache

import (
	"context"
	"errors"
	"math/rand/v2"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// TestConcurrentRequests runs goroutines that Begin, fill, fail and look up
// a few keys at once on a shared fake clock, small enough a cache to evict
// all along, then checks every answer against its key and its window and
// the structure against its bounds. Run with -race.
func TestConcurrentRequests(t *testing.T) {
	noLeaks(t)
	const goroutines, each = 8, 400
	c := newCache(t, Options{MaxBytes: 6000, MaxEntryBytes: 2000, MaxEntries: 8})
	p := Policy{TTL: 2 * time.Second, StaleIfError: 3 * time.Second, MaxWait: time.Second}
	var clock atomic.Int64 // nanoseconds after t0, only increasing
	var fills, shared atomic.Int64
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	var wg sync.WaitGroup
	errs := make(chan error, goroutines)
	for g := range goroutines {
		wg.Go(func() {
			rng := rand.New(rand.NewPCG(uint64(g), 7))
			for i := range each {
				if rng.IntN(4) == 0 {
					clock.Add(int64(rng.IntN(300)) * int64(time.Millisecond))
				}
				now := t0.Add(time.Duration(clock.Load()))
				key := "route-v1?id=" + strconv.Itoa(rng.IntN(12))
				clk := func() time.Time { return t0.Add(time.Duration(clock.Load())) }
				if err := oneRequest(c, ctx, rng, key, p, now, clk, &fills, &shared); err != nil {
					errs <- err
					return
				}
				if i%50 == 0 {
					if s := c.Stats(); s.Bytes > 6000 || s.Entries > 8 {
						errs <- errors.New("over bounds: " + strconv.FormatInt(s.Bytes, 10))
						return
					}
				}
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	checkInvariants(t, c)
	if s := c.Stats(); s.Flights != 0 || s.Waiting != 0 {
		t.Fatalf("stats after all requests ended: %+v", s)
	}
	t.Logf("%d fills, %d shared answers, stats %+v", fills.Load(), shared.Load(), c.Stats())
	if fills.Load() == 0 || fills.Load() == goroutines*each {
		t.Fatalf("%d fills of %d requests: the cache did not cache, or did nothing else", fills.Load(), goroutines*each)
	}
}

// oneRequest is one request as the data route makes it.
// now is the time of its Begin; clock reads the time again, at its end.
func oneRequest(c *Cache, ctx context.Context, rng *rand.Rand, key string, p Policy, now time.Time, clock func() time.Time, fills, shared *atomic.Int64) error {
	r, err := c.Begin(ctx, key, p, now)
	if err != nil {
		if IsSourceFailure(err) {
			return nil
		}
		return err
	}
	if r.Entry != nil {
		if r.Status == Shared {
			shared.Add(1)
		}
		return checkAnswer(key, r, p)
	}
	fills.Add(1)
	f := r.Flight
	defer f.Abandon(errors.New("stream cut short"))
	// The answer: the key, then rows; sometimes over MaxEntryBytes.
	f.Write([]byte(key + "|"))
	for range rng.IntN(30) {
		f.Write([]byte(strings.Repeat("r", 60)))
	}
	switch rng.IntN(6) {
	case 0:
		f.Abandon(SourceFailure(errors.New("connection refused")))
		if s := c.Stale(key, p, now); s.Entry != nil {
			return checkAnswer(key, s, p)
		}
	case 1:
		f.Abandon(errors.New("client went away"))
	default:
		if err := f.Commit("application/x-ndjson", clock()); err != nil && !errors.Is(err, ErrTooLarge) {
			return err
		}
	}
	return nil
}

func checkAnswer(key string, r Result, p Policy) error {
	if !strings.HasPrefix(string(r.Entry.Body), key+"|") {
		return errors.New("answer of another key: " + string(r.Entry.Body[:20]))
	}
	// A shared answer is the one its leader's query produced for the
	// follower's own request: it carries the leader's time, which the fake
	// clock (advanced by the other goroutines while the leader is not
	// scheduled) may put any distance before the follower's Begin. Its age
	// is no freshness rule, so only its sign is checked.
	if r.Status == Shared {
		if r.Age < 0 {
			return errors.New("shared answer aged " + r.Age.String())
		}
		return nil
	}
	limit := p.TTL
	if r.Status == Stale {
		limit += p.StaleIfError
	}
	if r.Age < 0 || r.Age >= limit {
		return errors.New(r.Status.String() + " answer aged " + r.Age.String())
	}
	return nil
}
