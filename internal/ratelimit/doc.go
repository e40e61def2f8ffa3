// Package ratelimit decides whether one request of a consumer (an app, an
// app on a route, an anonymous client address) fits its rate limit and its
// quota, and says what the IETF RateLimit headers should tell the client.
//
// It is pure: no I/O, no goroutine, no clock. Every decision takes now as a
// parameter, so tests are step tables at explicit instants and the request
// path reads the clock once per request.
//
// # Rate limits: GCRA
//
// A Rate (r requests per second, burst b ≥ 1) is enforced with the generic
// cell rate algorithm (ITU-T I.371; the "virtual scheduling" form, as in
// Brandur Leach's throttled and redis-cell). Let T = 1/r be the emission
// interval (in nanoseconds, rounded to the nearest) and L = b·T. Each key
// keeps one int64, its theoretical arrival time TAT. A request at now is
//
//	tat' = max(TAT, now) + T
//	admitted  when tat' − now ≤ L, and then TAT = tat'
//	refused   otherwise, and TAT is left alone
//
// so b requests pass at once from rest, then one every T. Over any interval
// [t1, t2] GCRA admits at most b + (t2−t1)/T requests (the property test
// checks it). A key with TAT ≤ now is exactly a fresh key, which is what
// makes eviction of idle keys lossless.
//
// A decision is one compare-and-swap loop on the key's TAT, so it is exact
// under concurrency without a lock: of N concurrent requests at a frozen
// instant, exactly b pass. A failed CAS means another request for the same
// key was admitted in between, so the loop always makes progress; it is
// still bounded at maxCASAttempts (128) tries, after which the request is
// refused (never admitted) with RetryAfter = T and counted as contended.
// Reaching that bound needs 128 admissions of the same key to land inside
// one decision's few nanoseconds.
//
// # Quotas: fixed windows
//
// A Quota (n requests per window of length p) counts requests in windows
// aligned to the Unix epoch: window k is [k·p, (k+1)·p) in Unix time, so a
// 24h quota resets at 00:00 UTC and every levee instance agrees on the
// window without coordination. A key keeps (window, count) under a small
// mutex: quotas are reached only by requests the rate limit admitted, the
// critical section is a comparison and two stores, and the mutex keeps the
// pair consistent without packing limits on n or p.
//
// # Header values
//
// A Decision carries Limit, Remaining, Reset and RetryAfter; see Decision
// for how each is computed and SetHeaders/AppendHeaders for the wire form.
//
// # Memory
//
// A Store keeps per-key state in a fixed number of shards, each a map with
// a cap; a new key in a full shard evicts one entry, chosen from a bounded
// sample of the shard: an idle one (nothing would be lost) when the sample
// has one, otherwise the one closest to idle. Memory is therefore bounded
// by the capacity, however many distinct keys arrive.
package ratelimit
