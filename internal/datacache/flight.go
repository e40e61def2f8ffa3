package datacache

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"time"
)

// flight is one key's single flight, shared by its leader and followers.
// Its fields are written by the leader before done is closed and read by
// followers only after.
type flight struct {
	done     chan struct{}
	entry    *Entry // the answer, when the leader completed it
	err      error  // the leader's error, when it abandoned
	source   bool   // err is a SourceFailure
	tooLarge bool   // the answer overflowed: followers should not buffer
}

// Flight is the handle of a request that runs its query: the leader of its
// key's single flight (Miss) or a request on its own (Bypass). It is an
// io.Writer: what the request streams to its client is teed into it, and
// kept up to the cache's bound. It must be ended exactly once, with Commit
// or Abandon; both are no-ops after the first, so `defer f.Abandon(...)`
// is safe. Not safe for concurrent use.
type Flight struct {
	c      *Cache
	key    string
	pol    Policy
	shared *flight // the single flight this leader owns; nil when detached
	leader bool
	store  bool // the key and policy are cached at all
	buf    []byte
	limit  int64 // bound on len(buf)
	over   bool  // not buffering: over the bound, or told not to
	ended  bool
}

func (c *Cache) newFlight(key string, pol Policy, fl *flight, store, buffer bool) *Flight {
	f := &Flight{c: c, key: key, pol: pol, shared: fl, leader: fl != nil, store: store}
	f.limit = c.maxEntryBytes - int64(len(key)) - EntryOverhead
	f.over = !store || !buffer
	return f
}

// Leader reports whether f leads its key's single flight: other requests
// for the key are waiting for its Commit or Abandon.
func (f *Flight) Leader() bool { return f.leader }

// Write keeps p while the answer stays within the entry bound. It never
// fails, so an io.MultiWriter with the client's writer fails only for the
// client. Past the bound it drops what it kept and releases the followers
// at once (they run their own queries, without buffering).
func (f *Flight) Write(p []byte) (int, error) {
	if f.over || f.ended {
		return len(p), nil
	}
	if int64(len(f.buf))+int64(len(p)) > f.limit {
		f.over, f.buf = true, nil
		f.c.mu.Lock()
		f.c.mu.tooLarge++
		f.c.mu.Unlock()
		f.release(func(fl *flight) { fl.tooLarge = true })
		return len(p), nil
	}
	f.buf = append(f.buf, p...)
	return len(p), nil
}

// Commit stores what was written as the key's answer, with contentType,
// stored at now (when the answer was complete), and hands it to the
// followers. It returns ErrTooLarge when the answer went over the bound,
// ErrNotCached for a key or policy that is not cached, ErrFlightEnded after
// the flight ended; none of them is the request's failure.
func (f *Flight) Commit(contentType string, now time.Time) error {
	if f.ended {
		return ErrFlightEnded
	}
	if f.over && f.store {
		f.ended = true
		f.release(func(fl *flight) { fl.tooLarge = true })
		return ErrTooLarge
	}
	body := f.buf
	f.buf = nil
	if cap(body)-len(body) > len(body)/8 {
		// append's growth may have left up to twice the answer's size
		// allocated; the entry is charged its length, so give the rest
		// back (a copy's capacity is the length rounded to a size class).
		body = slices.Clone(body)
	}
	return f.commit(&Entry{Body: body, ContentType: contentType, Stored: now})
}

// commit stores e and ends the flight: the store and the removal of the
// single flight are one critical section, so a new request sees one or
// the other. Followers get e even when it was too large to store.
func (f *Flight) commit(e *Entry) error {
	f.ended = true
	if !f.store {
		return ErrNotCached
	}
	c := f.c
	fl := f.shared
	f.shared = nil
	c.mu.Lock()
	// A detached flight does not replace a newer answer stored meanwhile
	// by the key's next leader.
	err := c.storeLocked(f.key, e, f.pol, fl == nil)
	if fl != nil && c.mu.flights[f.key] == fl {
		delete(c.mu.flights, f.key)
	}
	c.mu.Unlock()
	if fl != nil {
		fl.entry = e
		close(fl.done)
	}
	return err
}

// Abandon ends the flight without storing anything: the query failed, the
// stream was cut short, the answer was too large. Mark err with
// SourceFailure when the data source failed (down, refusing, timing out):
// the followers then get the entry still within StaleIfError, or err; for
// any other error each follower runs its own query (Bypass). A no-op after
// the flight ended.
func (f *Flight) Abandon(err error) {
	if f.ended {
		return
	}
	f.ended, f.buf = true, nil
	f.release(func(fl *flight) { fl.err, fl.source = err, IsSourceFailure(err) })
}

// release ends the single flight f leads, if any, after set records the
// outcome for the followers.
func (f *Flight) release(set func(*flight)) {
	fl := f.shared
	if fl == nil {
		return
	}
	f.shared = nil
	c := f.c
	c.mu.Lock()
	if c.mu.flights[f.key] == fl {
		delete(c.mu.flights, f.key)
	}
	c.mu.Unlock()
	set(fl)
	close(fl.done)
}

// Begin answers a request for key at now under pol. It returns at once
// with a fresh entry (Hit), or a Flight for the caller to fill (Miss: it
// leads; Bypass: it runs alone). When another request leads the key's
// flight, Begin waits for it, bounded by ctx and pol.MaxWait, and returns
// its answer (Shared), the entry within StaleIfError after its source
// failure (Stale), its error after a source failure with nothing stale
// (IsSourceFailure holds), or a Flight of its own (Bypass). It returns
// ctx's cause when ctx ends first, leaving the leader unaffected.
//
// The stale window of a follower is judged at now, the time of its Begin.
func (c *Cache) Begin(ctx context.Context, key string, pol Policy, now time.Time) (Result, error) {
	if !c.cacheable(key, pol) {
		return Result{Status: Bypass, Flight: c.newFlight(key, pol, nil, false, false)}, nil
	}
	if r := c.lookup(key, pol.TTL, now, Hit); r.Entry != nil {
		return r, nil
	}
	c.mu.Lock()
	// A leader may have stored the key since the lookup.
	if v, ok := c.index.Load(key); ok {
		n := v.(*node)
		ns := now.UnixNano()
		if age := n.age(ns); age < pol.TTL && ns < n.until {
			c.mu.Unlock()
			n.referenced.Store(true)
			return Result{Status: Hit, Entry: n.entry, Age: age}, nil
		}
	}
	fl, ok := c.mu.flights[key]
	if !ok {
		fl = &flight{done: make(chan struct{})}
		c.mu.flights[key] = fl
		c.mu.Unlock()
		return Result{Status: Miss, Flight: c.newFlight(key, pol, fl, true, true)}, nil
	}
	c.waiting.Add(1)
	c.mu.Unlock()
	defer c.waiting.Add(-1)
	return c.follow(ctx, key, pol, now, fl)
}

// follow waits for fl's leader and turns its outcome into the follower's.
func (c *Cache) follow(ctx context.Context, key string, pol Policy, now time.Time, fl *flight) (Result, error) {
	var timeout <-chan time.Time
	if pol.MaxWait > 0 {
		t := time.NewTimer(pol.MaxWait)
		defer t.Stop()
		timeout = t.C
	}
	select {
	case <-fl.done:
	case <-ctx.Done():
		return Result{}, context.Cause(ctx)
	case <-timeout:
		return Result{Status: Bypass, Flight: c.newFlight(key, pol, nil, true, true)}, nil
	}
	switch {
	case fl.entry != nil:
		return Result{Status: Shared, Entry: fl.entry, Age: max(now.Sub(fl.entry.Stored), 0)}, nil
	case fl.source:
		if r := c.Stale(key, pol, now); r.Entry != nil {
			return r, nil
		}
		return Result{Status: Shared}, fmt.Errorf("datacache: the query this request waited for failed: %w", fl.err)
	default:
		return Result{Status: Bypass, Flight: c.newFlight(key, pol, nil, true, !fl.tooLarge)}, nil
	}
}

// Fill produces a complete answer, for Do.
type Fill func(ctx context.Context) (body []byte, contentType string, err error)

// Do is Begin for a caller that builds the whole answer before sending it:
// on Miss or Bypass it runs fill and returns its answer as the Entry
// (stored when it fits); when fill fails with a SourceFailure and an entry
// within StaleIfError exists, it returns that (Stale); otherwise fill's
// error. Data routes stream and use Begin; Do serves small answers.
func (c *Cache) Do(ctx context.Context, key string, pol Policy, now time.Time, fill Fill) (Result, error) {
	res, err := c.Begin(ctx, key, pol, now)
	if err != nil || res.Flight == nil {
		return res, err
	}
	f := res.Flight
	res.Flight = nil
	body, contentType, err := fill(ctx)
	if err != nil {
		f.Abandon(err)
		if IsSourceFailure(err) {
			if r := c.Stale(key, pol, now); r.Entry != nil {
				return r, nil
			}
		}
		return res, err
	}
	e := &Entry{Body: body, ContentType: contentType, Stored: now}
	_ = f.commit(e) // not storing it is not the caller's failure
	res.Entry = e
	return res, nil
}

// sourceFailure marks an error as the data source's.
type sourceFailure struct{ err error }

func (s *sourceFailure) Error() string { return s.err.Error() }
func (s *sourceFailure) Unwrap() error { return s.err }

// SourceFailure marks err as a failure of the data source itself (down,
// refusing connections, timing out): the failures stale_if_error covers.
// SourceFailure(nil) is nil.
func SourceFailure(err error) error {
	if err == nil {
		return nil
	}
	return &sourceFailure{err: err}
}

// IsSourceFailure reports whether err, or an error it wraps, was marked
// with SourceFailure.
func IsSourceFailure(err error) bool {
	var s *sourceFailure
	return errors.As(err, &s)
}
