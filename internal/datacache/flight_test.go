package datacache

import (
	"bytes"
	"context"
	"errors"
	"sync/atomic"
	"testing"
	"time"
)

// startFollowers starts n Begin calls for key that must find a leader, and
// waits until all of them wait on it.
func startFollowers(t *testing.T, c *Cache, ctx context.Context, key string, p Policy, now time.Time, n int) <-chan outcome {
	t.Helper()
	out := make(chan outcome, n)
	base := c.Stats().Waiting
	for range n {
		go func() {
			r, err := c.Begin(ctx, key, p, now)
			out <- outcome{r, err}
		}()
	}
	waitFor(t, "followers waiting", func() bool { return c.Stats().Waiting == base+int64(n) })
	return out
}

type outcome struct {
	r   Result
	err error
}

// recv takes one outcome, failing the test when none comes within 5 s (a
// follower left waiting by a broken flight).
func recv(t *testing.T, out <-chan outcome) outcome {
	t.Helper()
	select {
	case o := <-out:
		return o
	case <-time.After(5 * time.Second):
		t.Fatal("no outcome within 5 s: a follower is still waiting")
		return outcome{}
	}
}

// TestSingleFlight: N concurrent requests for a missing key make exactly
// one query; the others get its answer.
func TestSingleFlight(t *testing.T) {
	noLeaks(t)
	const n = 32
	c := newCache(t, Options{MaxBytes: 1 << 20})
	start := make(chan struct{})
	leaders := make(chan *Flight, n)
	out := make(chan outcome, n)
	for range n {
		go func() {
			<-start
			r, err := c.Begin(context.Background(), "k", pol, t0)
			if r.Status == Miss {
				leaders <- r.Flight
			}
			out <- outcome{r, err}
		}()
	}
	close(start)
	var f *Flight
	select {
	case f = <-leaders:
	case <-time.After(5 * time.Second):
		t.Fatal("no leader")
	}
	waitFor(t, "31 followers waiting", func() bool { return c.Stats().Waiting == n-1 })
	if s := c.Stats(); s.Flights != 1 {
		t.Fatalf("flights = %d, want 1", s.Flights)
	}
	f.Write([]byte(`{"rows":[`))
	f.Write([]byte(`]}`))
	if err := f.Commit("application/json", t0); err != nil {
		t.Fatal(err)
	}
	counts := map[Status]int{}
	var shared *Entry
	for range n {
		o := recv(t, out)
		if o.err != nil {
			t.Fatalf("Begin: %v", o.err)
		}
		counts[o.r.Status]++
		if o.r.Status == Shared {
			if shared != nil && o.r.Entry != shared {
				t.Fatal("followers got different entries")
			}
			shared = o.r.Entry
		}
	}
	if counts[Miss] != 1 || counts[Shared] != n-1 || len(leaders) != 0 {
		t.Fatalf("results %v, want 1 miss and %d shared", counts, n-1)
	}
	if string(shared.Body) != `{"rows":[]}` {
		t.Fatalf("shared body %q", shared.Body)
	}
	if s := c.Stats(); s.Waiting != 0 || s.Flights != 0 || s.Entries != 1 {
		t.Fatalf("stats after the flight: %+v", s)
	}
}

// TestAbandonFollowersRunAlone: a leader cut short (not a source failure)
// sends each follower to its own query, without a new queue; their
// commits fill the cache.
func TestAbandonFollowersRunAlone(t *testing.T) {
	noLeaks(t)
	c := newCache(t, Options{MaxBytes: 1 << 20})
	lead, _ := c.Begin(context.Background(), "k", pol, t0)
	out := startFollowers(t, c, context.Background(), "k", pol, t0, 4)
	lead.Flight.Write([]byte("partial"))
	lead.Flight.Abandon(errors.New("client went away"))
	for i := range 4 {
		o := recv(t, out)
		if o.err != nil || o.r.Status != Bypass || o.r.Flight == nil || o.r.Flight.Leader() {
			t.Fatalf("follower: %+v, %v; want bypass with its own flight", o.r, o.err)
		}
		o.r.Flight.Write([]byte("full" + string(rune('0'+i))))
		if err := o.r.Flight.Commit("text/csv", t0.Add(time.Duration(i)*time.Second)); err != nil {
			t.Fatalf("follower commit: %v", err)
		}
	}
	// The newest of the followers' answers is kept.
	r := c.Get("k", pol, t0.Add(5*time.Second))
	if r.Status != Hit || string(r.Entry.Body) != "full3" {
		t.Fatalf("Get = %+v, want hit full3", r)
	}
	if s := c.Stats(); s.Flights != 0 || s.Entries != 1 {
		t.Fatalf("stats: %+v", s)
	}
}

// TestDetachedCommitKeepsNewer: a follower running alone does not replace
// an answer stored by a later query.
func TestDetachedCommitKeepsNewer(t *testing.T) {
	c := newCache(t, Options{MaxBytes: 1 << 20})
	lead, _ := c.Begin(context.Background(), "k", pol, t0)
	out := startFollowers(t, c, context.Background(), "k", pol, t0, 1)
	lead.Flight.Abandon(errors.New("cut short"))
	alone := recv(t, out).r.Flight
	fill(t, c, "k", pol, t0.Add(2*time.Second), "newer")
	alone.Write([]byte("older"))
	if err := alone.Commit("text/csv", t0.Add(time.Second)); err != nil {
		t.Fatal(err)
	}
	if r := c.Get("k", pol, t0.Add(3*time.Second)); string(r.Entry.Body) != "newer" {
		t.Fatalf("Get = %q, want newer", r.Entry.Body)
	}
}

// TestAbandonSourceFailureServesStale: the leader's database failure gives
// its followers the entry within stale_if_error, with its age.
func TestAbandonSourceFailureServesStale(t *testing.T) {
	noLeaks(t)
	c := newCache(t, Options{MaxBytes: 1 << 20})
	fill(t, c, "k", pol, t0, "last good")
	now := t0.Add(45 * time.Second)
	lead, err := c.Begin(context.Background(), "k", pol, now)
	if err != nil || lead.Status != Miss {
		t.Fatalf("Begin past the ttl = %+v, %v; want a leading miss", lead, err)
	}
	out := startFollowers(t, c, context.Background(), "k", pol, now, 3)
	lead.Flight.Abandon(SourceFailure(errors.New("connection refused")))
	for range 3 {
		o := recv(t, out)
		if o.err != nil || o.r.Status != Stale || string(o.r.Entry.Body) != "last good" || o.r.AgeSeconds() != 45 {
			t.Fatalf("follower: %+v, %v; want stale 'last good' age 45", o.r, o.err)
		}
	}
	// The leader serves the same by Stale.
	if r := c.Stale("k", pol, now); r.Status != Stale || r.AgeSeconds() != 45 {
		t.Fatalf("leader's Stale = %+v", r)
	}
}

// TestAbandonSourceFailureWithoutStale: nothing within the window, so the
// followers share the leader's failure instead of each querying a source
// that is down.
func TestAbandonSourceFailureWithoutStale(t *testing.T) {
	noLeaks(t)
	c := newCache(t, Options{MaxBytes: 1 << 20})
	fill(t, c, "k", pol, t0, "too old")
	now := t0.Add(pol.TTL + pol.StaleIfError)
	lead, _ := c.Begin(context.Background(), "k", pol, now)
	out := startFollowers(t, c, context.Background(), "k", pol, now, 3)
	down := errors.New("connection refused")
	lead.Flight.Abandon(SourceFailure(down))
	for range 3 {
		o := recv(t, out)
		if o.r.Entry != nil || !IsSourceFailure(o.err) || !errors.Is(o.err, down) {
			t.Fatalf("follower: %+v, %v; want the leader's source failure", o.r, o.err)
		}
	}
}

// TestFollowerCancel: a follower whose context ends stops waiting, leaves
// nothing behind, and the leader's flight completes for the others.
func TestFollowerCancel(t *testing.T) {
	noLeaks(t)
	c := newCache(t, Options{MaxBytes: 1 << 20})
	lead, _ := c.Begin(context.Background(), "k", pol, t0)
	ctx, cancel := context.WithCancel(context.Background())
	gone := startFollowers(t, c, ctx, "k", pol, t0, 2)
	stays := startFollowers(t, c, context.Background(), "k", pol, t0, 1)
	cancel()
	for range 2 {
		if o := recv(t, gone); !errors.Is(o.err, context.Canceled) || o.r.Status != None {
			t.Fatalf("cancelled follower: %+v, %v; want context.Canceled", o.r, o.err)
		}
	}
	waitFor(t, "one follower left", func() bool { return c.Stats().Waiting == 1 })
	lead.Flight.Write([]byte("v"))
	if err := lead.Flight.Commit("text/csv", t0); err != nil {
		t.Fatal(err)
	}
	if o := recv(t, stays); o.err != nil || o.r.Status != Shared {
		t.Fatalf("remaining follower: %+v, %v", o.r, o.err)
	}
	if s := c.Stats(); s.Waiting != 0 || s.Flights != 0 {
		t.Fatalf("stats: %+v", s)
	}
}

// TestFollowerMaxWait: a follower stops waiting for a slow leader after
// MaxWait and runs its own query; the leader still owns the flight.
func TestFollowerMaxWait(t *testing.T) {
	noLeaks(t)
	c := newCache(t, Options{MaxBytes: 1 << 20})
	p := pol
	p.MaxWait = time.Millisecond
	lead, _ := c.Begin(context.Background(), "k", p, t0)
	r, err := c.Begin(context.Background(), "k", p, t0)
	if err != nil || r.Status != Bypass || r.Flight.Leader() {
		t.Fatalf("follower after MaxWait: %+v, %v; want bypass", r, err)
	}
	if s := c.Stats(); s.Flights != 1 || s.Waiting != 0 {
		t.Fatalf("stats: %+v, want the leader's flight alone", s)
	}
	lead.Flight.Write([]byte("v"))
	if err := lead.Flight.Commit("text/csv", t0); err != nil {
		t.Fatal(err)
	}
}

// TestOverflowReleasesFollowers: past MaxEntryBytes the leader keeps
// streaming but stops buffering, and its followers are released at once
// to run their own queries, unbuffered.
func TestOverflowReleasesFollowers(t *testing.T) {
	noLeaks(t)
	const maxEntry = 1000
	c := newCache(t, Options{MaxBytes: 1 << 20, MaxEntryBytes: maxEntry})
	lead, _ := c.Begin(context.Background(), "k", pol, t0)
	out := startFollowers(t, c, context.Background(), "k", pol, t0, 2)
	room := maxEntry - EntryOverhead - len("k")
	lead.Flight.Write(bytes.Repeat([]byte("a"), room))
	select {
	case o := <-out:
		t.Fatalf("follower released within the bound: %+v", o.r)
	default:
	}
	lead.Flight.Write([]byte("b")) // one byte over
	for range 2 {
		o := recv(t, out)
		if o.err != nil || o.r.Status != Bypass {
			t.Fatalf("follower: %+v, %v; want bypass", o.r, o.err)
		}
		o.r.Flight.Write([]byte("x"))
		if err := o.r.Flight.Commit("text/csv", t0); !errors.Is(err, ErrTooLarge) {
			t.Fatalf("unbuffered follower's Commit = %v, want ErrTooLarge", err)
		}
	}
	if err := lead.Flight.Commit("text/csv", t0); !errors.Is(err, ErrTooLarge) {
		t.Fatalf("leader's Commit = %v, want ErrTooLarge", err)
	}
	if s := c.Stats(); s.Entries != 0 || s.Flights != 0 || s.TooLarge != 1 {
		t.Fatalf("stats: %+v", s)
	}
}

// TestDoSingleFlight: N concurrent Do calls for a missing key run fill
// once; the fill holds until every other caller waits on it.
func TestDoSingleFlight(t *testing.T) {
	noLeaks(t)
	const n = 16
	c := newCache(t, Options{MaxBytes: 1 << 20})
	var fills atomic.Int64
	fill := func(ctx context.Context) ([]byte, string, error) {
		fills.Add(1)
		// Not waitFor: this runs off the test goroutine.
		for deadline := time.Now().Add(5 * time.Second); c.Stats().Waiting != n-1; {
			if time.Now().After(deadline) {
				return nil, "", errors.New("followers never all waited")
			}
			time.Sleep(50 * time.Microsecond)
		}
		return []byte("rows"), "text/csv", nil
	}
	out := make(chan outcome, n)
	for range n {
		go func() {
			r, err := c.Do(context.Background(), "k", pol, t0, fill)
			out <- outcome{r, err}
		}()
	}
	counts := map[Status]int{}
	for range n {
		o := recv(t, out)
		if o.err != nil || string(o.r.Entry.Body) != "rows" {
			t.Fatalf("Do: %+v, %v", o.r, o.err)
		}
		counts[o.r.Status]++
	}
	if fills.Load() != 1 || counts[Miss] != 1 || counts[Shared] != n-1 {
		t.Fatalf("%d fills, results %v; want 1 fill, 1 miss, %d shared", fills.Load(), counts, n-1)
	}
}
