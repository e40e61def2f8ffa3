package datacache

import (
	"context"
	"errors"
	"strconv"
	"strings"
	"testing"
	"time"
)

// checkInvariants walks the list under the mutex: sizes and counts agree
// with the totals, the totals are within the bounds, and the index holds
// exactly the listed nodes.
func checkInvariants(t testing.TB, c *Cache) {
	t.Helper()
	c.mu.Lock()
	defer c.mu.Unlock()
	var bytes int64
	entries := 0
	for n := c.mu.head; n != nil; n = n.next {
		if entries > c.mu.entries {
			t.Fatal("list longer than the entry count (a cycle?)")
		}
		if n.next != nil && n.next.prev != n {
			t.Fatalf("broken links at %q", n.key)
		}
		if v, ok := c.index.Load(n.key); !ok || v.(*node) != n {
			t.Fatalf("listed %q not indexed", n.key)
		}
		if n.size != entrySize(n.key, n.entry) || n.size > c.maxEntryBytes {
			t.Fatalf("%q: size %d, computed %d, max entry %d", n.key, n.size, entrySize(n.key, n.entry), c.maxEntryBytes)
		}
		bytes += n.size
		entries++
	}
	indexed := 0
	c.index.Range(func(any, any) bool { indexed++; return true })
	if bytes != c.mu.bytes || entries != c.mu.entries || indexed != entries {
		t.Fatalf("list %d entries %d bytes, counted %d entries %d bytes, %d indexed", entries, bytes, c.mu.entries, c.mu.bytes, indexed)
	}
	if c.mu.bytes > c.maxBytes || (c.maxEntries > 0 && c.mu.entries > c.maxEntries) {
		t.Fatalf("%d entries %d bytes over the bounds (%d entries, %d bytes)", c.mu.entries, c.mu.bytes, c.maxEntries, c.maxBytes)
	}
}

// FuzzOps drives random sequences of Begin, Write, Commit, Abandon, Get,
// Stale and clock steps against a model that knows the newest stored
// answer of each key: the cache never exceeds its bounds, never answers
// with anything but that newest answer, never past its window, and its
// single flight admits one leader per key.
func FuzzOps(f *testing.F) {
	f.Add([]byte{10, 3, 1, 0, 1, 2, 0, 50, 3, 0, 0, 6, 0, 0, 7, 1, 0, 200, 7, 0})
	f.Add([]byte{1, 0, 1, 1, 1, 2, 0, 255, 2, 1, 255, 3, 1, 0, 3, 0, 0, 1, 1, 0, 4, 1, 0, 0, 0, 90, 7, 1})
	f.Add([]byte{255, 255, 1, 2, 2, 2, 200, 3, 2, 0, 1, 3, 3, 3, 3, 4, 1, 3, 0, 5, 3, 0})
	f.Fuzz(func(t *testing.T, ops []byte) {
		if len(ops) < 2 || len(ops) > 3000 {
			return
		}
		maxBytes := 1000 + int64(ops[0])*20
		opts := Options{MaxBytes: maxBytes, MaxEntryBytes: maxBytes / int64(1+ops[1]%4), MaxEntries: int(ops[1]/4) % 5}
		c := newCache(t, opts)
		p := Policy{TTL: 10 * time.Second, StaleIfError: 20 * time.Second}
		keys := []string{"a", strings.Repeat("b", 40), strings.Repeat("c", 300), strings.Repeat("d", MaxKeyBytes+1)}
		type held struct {
			body   string
			stored time.Time
		}
		newest := map[string]held{}
		open := map[string]*Flight{}
		written := map[string]string{}
		cancelled, cancel := context.WithCancel(context.Background())
		cancel()
		now := t0
		seq := 0

		// check verifies an answer against the model.
		check := func(op string, key string, r Result, within time.Duration) {
			if r.Entry == nil {
				return
			}
			want, ok := newest[key]
			if !ok || string(r.Entry.Body) != want.body || !r.Entry.Stored.Equal(want.stored) {
				t.Fatalf("%s %q: got %q stored %v, newest stored is %+v", op, key[:1], r.Entry.Body, r.Entry.Stored, want)
			}
			if r.Age != now.Sub(want.stored) || r.Age >= within {
				t.Fatalf("%s %q: age %v at %v, stored %v, window %v", op, key[:1], r.Age, now, want.stored, within)
			}
		}
		for i := 2; i+2 < len(ops); i += 3 {
			op, key, arg := ops[i]%8, keys[int(ops[i+1])%len(keys)], int(ops[i+2])
			switch op {
			case 0:
				now = now.Add(time.Duration(arg) * 250 * time.Millisecond)
			case 1:
				r, err := c.Begin(cancelled, key, p, now)
				_, leading := open[key]
				switch {
				case err != nil:
					if !errors.Is(err, context.Canceled) || !leading {
						t.Fatalf("Begin %q: %v with a flight open: %v", key[:1], err, leading)
					}
				case r.Status == Hit:
					check("Begin", key, r, p.TTL)
				case r.Status == Miss:
					if leading || !r.Flight.Leader() || len(key) > MaxKeyBytes {
						t.Fatalf("Begin %q: a second leader", key[:1])
					}
					open[key] = r.Flight
					written[key] = ""
				case r.Status == Bypass:
					if len(key) <= MaxKeyBytes && int64(len(key))+EntryOverhead <= opts.MaxEntryBytes {
						t.Fatalf("Begin %q: bypass for a cached key", key[:1])
					}
				default:
					t.Fatalf("Begin %q: %v", key[:1], r.Status)
				}
			case 2:
				if fl := open[key]; fl != nil {
					chunk := strings.Repeat("x", arg*4)
					if written[key] == "" {
						seq++
						chunk = strconv.Itoa(seq) + ":" + chunk
					}
					fl.Write([]byte(chunk))
					written[key] += chunk
					// Past the bound the flight is released at once (the
					// followers run alone); end it here, as the leader would
					// at the end of its stream.
					if int64(len(written[key])) > opts.MaxEntryBytes-int64(len(key))-EntryOverhead {
						if s := c.Stats(); s.Flights != len(open)-1 {
							t.Fatalf("overflow of %q did not release its flight: %+v", key[:1], s)
						}
						if err := fl.Commit("text/csv", now); !errors.Is(err, ErrTooLarge) {
							t.Fatalf("Commit after overflow: %v", err)
						}
						delete(open, key)
					}
				}
			case 3:
				if fl := open[key]; fl != nil {
					body, ct := written[key], "text/csv"
					err := fl.Commit(ct, now)
					tooLarge := int64(len(body)+len(ct)+len(key)+EntryOverhead) > opts.MaxEntryBytes
					if tooLarge != errors.Is(err, ErrTooLarge) || (err != nil && !tooLarge) {
						t.Fatalf("Commit %q of %d bytes: %v", key[:1], len(body), err)
					}
					if err == nil {
						newest[key] = held{body, now}
					}
					delete(open, key)
				}
			case 4, 5:
				if fl := open[key]; fl != nil {
					err := errors.New("query failed")
					if op == 4 {
						err = SourceFailure(err)
					}
					fl.Abandon(err)
					delete(open, key)
				}
			case 6:
				check("Get", key, c.Get(key, p, now), p.TTL)
			case 7:
				r := c.Stale(key, p, now)
				check("Stale", key, r, p.TTL+p.StaleIfError)
				if (r.Status == Hit) != (r.Entry != nil && r.Age < p.TTL) {
					t.Fatalf("Stale %q: %v at age %v", key[:1], r.Status, r.Age)
				}
			}
			checkInvariants(t, c)
			if s := c.Stats(); s.Flights != len(open) || s.Waiting != 0 {
				t.Fatalf("stats %+v with %d flights open", s, len(open))
			}
		}
	})
}
