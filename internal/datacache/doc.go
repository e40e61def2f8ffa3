// Package datacache keeps the complete encoded answers of data-API routes,
// bounded in bytes, with ttl freshness, stale_if_error and single flight:
// concurrent misses for one key run one query.
//
// It is pure: no I/O, no goroutine, no clock. Every decision takes now as a
// parameter (the request path reads the clock once); the only real-time
// waits are a follower's, bounded by its context and by Policy.MaxWait.
//
// # Keys
//
// A key is an opaque string the caller builds from the route, its version,
// the parameters, the format and the cursor. A key longer than MaxKeyBytes
// (1 KiB) is not cached: Begin answers Bypass, the caller runs its query
// with no single flight. Such keys come from long parameter lists; hashing
// them would cache them too, but a 1 KiB bound keeps memory accounting
// honest and a long key's answer is unlikely to be asked for again.
//
// # The flight contract
//
// A data route streams its rows to the client while the query runs; it never
// builds the answer first. So the caller that fills the cache is the request
// itself:
//
//	res, err := c.Begin(ctx, key, pol, now)
//	switch {
//	case err != nil:
//		// ctx ended while waiting for another request's query (499), or
//		// that query failed with a source failure and nothing stale is
//		// kept: IsSourceFailure(err) (503 data_source_unavailable).
//	case res.Entry != nil:
//		// Hit, Shared or Stale: write res.Entry.Body with its
//		// ContentType, Age: res.AgeSeconds(), Levee-Cache: res.Status.Header().
//	default:
//		// Miss (this request leads) or Bypass (run the query alone):
//		// res.Flight is set and must be ended exactly once.
//		f := res.Flight
//		defer f.Abandon(errCutShort) // no-op after Commit
//		err := stream(io.MultiWriter(client, f)) // tee into f's buffer
//		if err != nil {
//			f.Abandon(err) // wrap with SourceFailure when the database failed
//			return
//		}
//		f.Commit(contentType, now)
//	}
//
// The Flight is an io.Writer that keeps what is written, up to the entry's
// byte bound; past it the buffer is dropped and the followers are released
// at once (they run their own queries, without buffering) rather than wait
// for a stream they could not share. Commit stores the answer and hands it
// to the followers (Shared). Abandon hands them, when its error is marked
// SourceFailure, the entry still within TTL+StaleIfError (Stale) or else
// the leader's error; for any other error (client gone, answer too large,
// a query error) each follower gets Bypass with its own Flight and runs the
// query itself: no new queue forms behind a failed leader.
//
// With the source known unavailable, the caller may skip the query and call
// Stale(key, pol, now) to serve the last good answer directly.
//
// # Eviction: second-chance LRU
//
// Entries sit on one list, newest at the head. A hit only sets the entry's
// referenced bit (an atomic store, skipped when already set); it never moves
// the entry, so reads take no lock. When a store pushes the cache over
// MaxBytes or MaxEntries, the tail is examined: an entry past its stale
// window or unreferenced is evicted; a referenced one has its bit cleared
// and moves to the head (CLOCK, Corbató 1968: second chance). Each entry is
// examined at most twice per store, so a store's work is bounded by twice
// the number of entries; in practice it evicts the few it needs. Among
// entries not read since they were stored or last passed over, the order is
// exact LRU. Entries past their stale window are also dropped when a lookup
// finds them.
//
// The size of an entry is len(Body) + len(ContentType) + len(key) +
// EntryOverhead (a committed Body's capacity is within an eighth of its
// length, or copied to be), and an entry over MaxEntryBytes is never
// stored.
//
// # Locking
//
// The index is a sync.Map (a concurrent hash trie): a lookup takes no lock
// and allocates nothing, so parallel hits of one key or many do not
// serialise. Everything that changes state (a store, an eviction, a
// flight's start and end) takes the one mutex Cache.mu; each such change
// follows a database query, so the mutex is rare and its critical sections
// are short. A store and the end of its flight are one critical section, so
// a new request sees either the flight or the entry, never neither. The
// cache is not sharded: shards would split the byte budget and the LRU order
// for no gain on the read path, which is lock-free already.
//
// A Cache is safe for concurrent use. A Flight belongs to the request that
// got it and is not safe for concurrent use.
package datacache
