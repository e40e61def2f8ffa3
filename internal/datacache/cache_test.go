package datacache

import (
	"bytes"
	"context"
	"errors"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/levee-gw/levee/internal/testkit"
)

var t0 = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)

var pol = Policy{TTL: 30 * time.Second, StaleIfError: 10 * time.Minute}

func newCache(t testing.TB, o Options) *Cache {
	t.Helper()
	c, err := New(o)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// fill stores body under key at now through a leader's flight.
func fill(t testing.TB, c *Cache, key string, p Policy, now time.Time, body string) {
	t.Helper()
	res, err := c.Begin(context.Background(), key, p, now)
	if err != nil || res.Status != Miss || !res.Flight.Leader() {
		t.Fatalf("Begin(%q) = %v, %v; want a leading miss", key, res.Status, err)
	}
	if _, err := res.Flight.Write([]byte(body)); err != nil {
		t.Fatal(err)
	}
	if err := res.Flight.Commit("application/json", now); err != nil {
		t.Fatalf("Commit(%q): %v", key, err)
	}
}

// waitFor polls cond until it holds, failing the test after 5 s.
func waitFor(t testing.TB, what string, cond func() bool) {
	t.Helper()
	testkit.Until(t, 5*time.Second, what, cond)
}

// noLeaks fails the test when goroutines it started outlive it.
func noLeaks(t *testing.T) {
	before := runtime.NumGoroutine()
	t.Cleanup(func() {
		deadline := time.Now().Add(5 * time.Second)
		for runtime.NumGoroutine() > before {
			if time.Now().After(deadline) {
				t.Errorf("goroutines: %d before, %d after", before, runtime.NumGoroutine())
				return
			}
			time.Sleep(100 * time.Microsecond)
		}
	})
}

func TestNewRefusesBadOptions(t *testing.T) {
	for _, tc := range []struct {
		name string
		o    Options
		want string
	}{
		{"zero bytes", Options{}, "max bytes must be positive, got 0"},
		{"negative bytes", Options{MaxBytes: -1}, "max bytes must be positive, got -1"},
		{"entry over total", Options{MaxBytes: 10, MaxEntryBytes: 11}, "max entry bytes must be between 0 and max bytes (10), got 11"},
		{"negative entry", Options{MaxBytes: 10, MaxEntryBytes: -1}, "got -1"},
		{"negative entries", Options{MaxBytes: 10, MaxEntries: -1}, "max entries must not be negative, got -1"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := New(tc.o)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("New(%+v) = %v, want an error containing %q", tc.o, err, tc.want)
			}
		})
	}
}

// TestFreshnessSteps walks one entry through fresh, stale and gone on a
// fake clock.
func TestFreshnessSteps(t *testing.T) {
	c := newCache(t, Options{MaxBytes: 1 << 20})
	fill(t, c, "k", pol, t0, "answer")
	for _, st := range []struct {
		at        time.Duration
		get       Status // Get's status
		stale     Status // Stale's status
		ageSecond int64
	}{
		{0, Hit, Hit, 0},
		{time.Second, Hit, Hit, 1},
		{30*time.Second - 1, Hit, Hit, 29},
		{30 * time.Second, None, Stale, 30},
		{10*time.Minute + 29*time.Second, None, Stale, 629},
		{10*time.Minute + 30*time.Second - 1, None, Stale, 629},
		{10*time.Minute + 30*time.Second, None, None, 0},
	} {
		now := t0.Add(st.at)
		if r := c.Get("k", pol, now); r.Status != st.get {
			t.Fatalf("at +%v: Get = %v, want %v", st.at, r.Status, st.get)
		}
		r := c.Stale("k", pol, now)
		if r.Status != st.stale {
			t.Fatalf("at +%v: Stale = %v, want %v", st.at, r.Status, st.stale)
		}
		if r.Entry != nil && (string(r.Entry.Body) != "answer" || r.AgeSeconds() != st.ageSecond || r.Age != st.at) {
			t.Fatalf("at +%v: Stale = %q age %v (%d s), want answer age %v", st.at, r.Entry.Body, r.Age, r.AgeSeconds(), st.at)
		}
	}
	// The lookup past the window dropped the entry.
	if s := c.Stats(); s.Entries != 0 || s.Bytes != 0 || s.Expired != 1 {
		t.Fatalf("after the window: %+v, want empty with one expired", s)
	}
}

// TestBeginAfterTTLLeads: a fresh entry is a hit; after the ttl the next
// request leads a refill (with the stale entry kept for its followers), and
// the new answer replaces the old.
func TestBeginAfterTTLLeads(t *testing.T) {
	c := newCache(t, Options{MaxBytes: 1 << 20})
	fill(t, c, "k", pol, t0, "v1")
	r, err := c.Begin(context.Background(), "k", pol, t0.Add(10*time.Second))
	if err != nil || r.Status != Hit || string(r.Entry.Body) != "v1" || r.AgeSeconds() != 10 {
		t.Fatalf("Begin at +10s = %+v, %v; want hit v1 age 10", r, err)
	}
	fill(t, c, "k", pol, t0.Add(31*time.Second), "v2")
	r = c.Get("k", pol, t0.Add(32*time.Second))
	if r.Status != Hit || string(r.Entry.Body) != "v2" || r.AgeSeconds() != 1 {
		t.Fatalf("Get after refill = %+v, want hit v2 age 1", r)
	}
	if s := c.Stats(); s.Entries != 1 || s.Bytes != entrySize("k", r.Entry) || s.Flights != 0 {
		t.Fatalf("stats after replacement: %+v", s)
	}
}

// TestPolicyOfTheLookupApplies: a shorter ttl after a reload applies to an
// entry stored under the longer one; a longer one cannot outlive the window
// the entry was stored with.
func TestPolicyOfTheLookupApplies(t *testing.T) {
	c := newCache(t, Options{MaxBytes: 1 << 20})
	fill(t, c, "k", pol, t0, "v")
	short := Policy{TTL: 5 * time.Second}
	if r := c.Get("k", short, t0.Add(5*time.Second)); r.Status != None {
		t.Fatalf("Get under a 5s ttl at +5s = %v, want none", r.Status)
	}
	if r := c.Stale("k", short, t0.Add(6*time.Second)); r.Status != None {
		t.Fatalf("Stale under a policy without stale_if_error = %v, want none", r.Status)
	}
	long := Policy{TTL: time.Hour, StaleIfError: time.Hour}
	if r := c.Stale("k", long, t0.Add(10*time.Minute+30*time.Second)); r.Status != None {
		t.Fatalf("Stale past the stored window = %v, want none", r.Status)
	}
}

func TestBypassKeysAndPolicies(t *testing.T) {
	c := newCache(t, Options{MaxBytes: 1 << 20})
	for _, tc := range []struct {
		name string
		key  string
		p    Policy
	}{
		{"key over 1 KiB", strings.Repeat("k", MaxKeyBytes+1), pol},
		{"zero ttl", "k", Policy{StaleIfError: time.Minute}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r, err := c.Begin(context.Background(), tc.key, tc.p, t0)
			if err != nil || r.Status != Bypass || r.Flight == nil || r.Flight.Leader() {
				t.Fatalf("Begin = %+v, %v; want bypass with a detached flight", r, err)
			}
			r.Flight.Write([]byte("body"))
			if err := r.Flight.Commit("text/csv", t0); !errors.Is(err, ErrNotCached) {
				t.Fatalf("Commit = %v, want ErrNotCached", err)
			}
			if s := c.Stats(); s.Entries != 0 || s.Flights != 0 {
				t.Fatalf("stats: %+v, want nothing stored or in flight", s)
			}
		})
	}
	// A key of exactly MaxKeyBytes is cached.
	key := strings.Repeat("k", MaxKeyBytes)
	fill(t, c, key, pol, t0, "v")
	if r := c.Get(key, pol, t0); r.Status != Hit {
		t.Fatalf("Get of a %d-byte key = %v, want hit", MaxKeyBytes, r.Status)
	}
}

func TestFlightEndsOnce(t *testing.T) {
	c := newCache(t, Options{MaxBytes: 1 << 20})
	r, _ := c.Begin(context.Background(), "k", pol, t0)
	r.Flight.Write([]byte("v"))
	if err := r.Flight.Commit("text/csv", t0); err != nil {
		t.Fatal(err)
	}
	r.Flight.Abandon(SourceFailure(errors.New("late"))) // no-op
	if err := r.Flight.Commit("text/csv", t0); !errors.Is(err, ErrFlightEnded) {
		t.Fatalf("second Commit = %v, want ErrFlightEnded", err)
	}
	if g := c.Get("k", pol, t0); g.Status != Hit || g.Entry.ContentType != "text/csv" {
		t.Fatalf("Get = %+v, want the committed hit", g)
	}
}

// TestMaxEntryBytesExact: an entry of exactly MaxEntryBytes is stored; the
// content type counts, so one more byte of it is not.
func TestMaxEntryBytesExact(t *testing.T) {
	const maxEntry = 1000
	c := newCache(t, Options{MaxBytes: 1 << 20, MaxEntryBytes: maxEntry})
	body := bytes.Repeat([]byte("a"), maxEntry-EntryOverhead-len("k")-len("ct"))
	for _, tc := range []struct {
		key, ct string
		want    error
	}{{"k", "ct", nil}, {"j", "ct+", ErrTooLarge}} {
		r, _ := c.Begin(context.Background(), tc.key, pol, t0)
		r.Flight.Write(body)
		if err := r.Flight.Commit(tc.ct, t0); !errors.Is(err, tc.want) {
			t.Fatalf("Commit with %q = %v, want %v", tc.ct, err, tc.want)
		}
	}
	if s := c.Stats(); s.Entries != 1 || s.Bytes != maxEntry {
		t.Fatalf("stats: %+v, want the one exact entry", s)
	}
}

// entryBytes is the charge of a one-letter key with body n bytes and the
// content type fill uses.
func entryBytes(n int) int64 { return int64(n) + int64(len("application/json")) + 1 + EntryOverhead }

// TestEvictionByBytesLRU: the least recently used entry goes first; a read
// one gets a second chance.
func TestEvictionByBytesLRU(t *testing.T) {
	body := strings.Repeat("x", 100)
	c := newCache(t, Options{MaxBytes: 3 * entryBytes(100)})
	now := t0
	for _, k := range []string{"a", "b", "c", "d"} {
		fill(t, c, k, pol, now, body)
	}
	wantKeys(t, c, now, "b", "c", "d")
	// Read b: c is now the least recently used.
	c.Get("b", pol, now)
	fill(t, c, "e", pol, now, body)
	wantKeys(t, c, now, "b", "d", "e")
	fill(t, c, "f", pol, now, body)
	wantKeys(t, c, now, "b", "e", "f")
	// b was passed over once (its bit cleared, moved to the head when e
	// came), so e, never read, goes before it: CLOCK's approximation of
	// LRU, where exact LRU would evict b.
	fill(t, c, "g", pol, now, body)
	wantKeys(t, c, now, "b", "f", "g")
	if s := c.Stats(); s.Bytes != 3*entryBytes(100) || s.Evictions != 4 {
		t.Fatalf("stats: %+v", s)
	}
	// One bigger entry evicts as many as it needs.
	fill(t, c, "h", pol, now, strings.Repeat("x", 250))
	wantKeys(t, c, now, "g", "h")
}

// TestEvictionPrefersExpired: an entry past its window is dropped before a
// live one, even when it was read.
func TestEvictionPrefersExpired(t *testing.T) {
	body := strings.Repeat("x", 100)
	c := newCache(t, Options{MaxBytes: 2*entryBytes(100) + 10}) // keys up to 4 bytes
	short := Policy{TTL: time.Second}
	fill(t, c, "old", short, t0, body)
	c.Get("old", short, t0)
	fill(t, c, "live", pol, t0, body)
	fill(t, c, "new", pol, t0.Add(2*time.Second), body)
	wantKeys(t, c, t0.Add(2*time.Second), "live", "new")
	if s := c.Stats(); s.Expired != 1 || s.Evictions != 0 {
		t.Fatalf("stats: %+v, want one expired, no eviction", s)
	}
}

func TestMaxEntries(t *testing.T) {
	c := newCache(t, Options{MaxBytes: 1 << 20, MaxEntries: 2})
	for _, k := range []string{"a", "b", "c"} {
		fill(t, c, k, pol, t0, "v")
	}
	wantKeys(t, c, t0, "b", "c")
	if s := c.Stats(); s.Entries != 2 || s.Evictions != 1 {
		t.Fatalf("stats: %+v", s)
	}
}

// wantKeys checks which of the keys a..h are held.
func wantKeys(t *testing.T, c *Cache, now time.Time, want ...string) {
	t.Helper()
	var got []string
	for _, k := range []string{"a", "b", "c", "d", "e", "f", "g", "h", "old", "live", "new"} {
		if v, ok := c.index.Load(k); ok && now.UnixNano() < v.(*node).until {
			got = append(got, k)
		}
	}
	if strings.Join(got, ",") != strings.Join(want, ",") {
		t.Fatalf("held %v, want %v", got, want)
	}
	if s := c.Stats(); s.Entries != len(want) {
		t.Fatalf("entries %d, want %d", s.Entries, len(want))
	}
}

func TestDo(t *testing.T) {
	c := newCache(t, Options{MaxBytes: 1 << 20})
	calls := 0
	ok := func(ctx context.Context) ([]byte, string, error) {
		calls++
		return []byte("v"), "text/csv", nil
	}
	down := errors.New("connection refused")
	failing := func(ctx context.Context) ([]byte, string, error) {
		calls++
		return nil, "", SourceFailure(down)
	}
	bad := errors.New("division by zero")
	broken := func(ctx context.Context) ([]byte, string, error) { calls++; return nil, "", bad }
	ctx := context.Background()
	for i, st := range []struct {
		at     time.Duration
		fill   Fill
		status Status
		err    error
		calls  int
	}{
		{0, failing, Miss, down, 1},
		{0, ok, Miss, nil, 2},
		{time.Second, ok, Hit, nil, 2},
		{time.Minute, failing, Stale, nil, 3},
		{time.Minute, broken, Miss, bad, 4},
		{time.Hour, failing, Miss, down, 5},
	} {
		r, err := c.Do(ctx, "k", pol, t0.Add(st.at), st.fill)
		if r.Status != st.status || !errors.Is(err, st.err) || calls != st.calls || r.Flight != nil {
			t.Fatalf("step %d: Do = %v, %v after %d fills; want %v, %v after %d", i, r.Status, err, calls, st.status, st.err, st.calls)
		}
		if err == nil && string(r.Entry.Body) != "v" {
			t.Fatalf("step %d: body %q", i, r.Entry.Body)
		}
	}
}

func TestStatusStrings(t *testing.T) {
	want := map[Status]string{None: "none", Hit: "hit", Stale: "stale", Shared: "shared", Miss: "miss", Bypass: "bypass", 99: "status(99)"}
	for s, w := range want {
		if s.String() != w {
			t.Errorf("%d.String() = %q, want %q", s, s.String(), w)
		}
	}
}

func TestStatusHeaders(t *testing.T) {
	want := map[Status]string{None: "", Hit: "hit", Shared: "hit", Stale: "stale", Miss: "miss", Bypass: "miss"}
	for s, w := range want {
		if s.Header() != w {
			t.Errorf("%v.Header() = %q, want %q", s, s.Header(), w)
		}
	}
}

func TestSourceFailure(t *testing.T) {
	base := errors.New("down")
	if SourceFailure(nil) != nil || IsSourceFailure(nil) || IsSourceFailure(base) {
		t.Fatal("nil or unmarked errors reported as source failures")
	}
	err := SourceFailure(base)
	if !IsSourceFailure(err) || !errors.Is(err, base) || err.Error() != "down" {
		t.Fatalf("SourceFailure(down) = %v", err)
	}
}
