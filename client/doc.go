// Package client is levee's Go client: an http.RoundTripper that adds, to any
// http.Client, retries that cannot amplify an outage.
//
//	t, err := client.New(client.Options{})
//	if err != nil { ... }
//	c := &http.Client{Transport: t, Timeout: 10 * time.Second}
//
// A Transport retries a request only when all of these hold:
//
//   - the request is idempotent: its method is GET, HEAD, OPTIONS, TRACE, PUT
//     or DELETE, or it carries an Idempotency-Key (or X-Idempotency-Key)
//     header with a non-empty value (levee's proxy reads the same rule); a
//     POST without a key, or with an empty one, is sent exactly once;
//   - its body can be replayed: it has none, or req.GetBody is set
//     (http.NewRequest sets it for bytes, strings and bytes.Buffer readers);
//     a body is never buffered by this package;
//   - the attempt failed in a way worth retrying: a network error before a
//     response (connection refused or reset, a timeout of that attempt), or a
//     status in Options.RetryOn (default 429, 502, 503, 504);
//   - attempts remain (Options.MaxAttempts, first included, default 3);
//   - the server's Retry-After, if any, is at most Options.MaxRetryAfter and
//     the wait ends before the request context's deadline;
//   - the retry budget allows it, and adaptive throttling does not refuse it.
//
// Otherwise the last response (or error) is returned as it came, so the
// caller sees the server's own status, headers and body.
//
// Every attempt carries a Levee-Attempt header ("1", "2", ...) so that levee
// can shed retries before first attempts. The caller's request is never
// modified: each attempt is a clone.
//
// # Backoff
//
// Before retry n (n = 0 for the first retry) the Transport waits a duration
// drawn uniformly from [0, min(Backoff.Max, Backoff.Base·2^n)) ("full
// jitter"), or the server's Retry-After if that is longer. Waits select on the
// request's context: cancelling it returns at once with ctx.Err().
//
// # Retry budget
//
// A token bucket as in gRPC's retry throttling (proposal A6, "Throttling
// retry attempts"): it holds MaxTokens (default 10) tokens; every failed
// attempt takes one, every successful one gives back TokenRatio (default
// 0.1), and a retry is allowed only while tokens > MaxTokens/2. Against a
// service that fails everything, a client sends at most MaxTokens/2 retries
// in total until successes refill the bucket; in steady state retries are
// bounded by TokenRatio times the successes. Arithmetic is fixed point in
// thousandths of a token, as gRPC specifies, so thresholds are exact. O(1)
// per attempt, under the Transport's mutex.
//
// # Adaptive throttling
//
// Client-side throttling from the Google SRE book (chapter "Handling
// Overload"): over a sliding window (default 2 minutes) the Transport counts
// requests (attempts whose outcome is known, plus those it refused itself)
// and accepts (attempts the backend did not refuse), and before each attempt
// refuses locally with probability
//
//	p = max(0, (requests − K·accepts) / (requests + 1))      (K default 2)
//
// An attempt is refused by the backend when it ends in a network error or
// with status 429 or 503; anything else the backend answered (including 502,
// 504 and other 5xx) is an accept; an attempt its caller cancelled counts
// for neither. A sent attempt is counted when its outcome is known, so a
// burst of attempts in flight does not look like refusals. A first attempt
// refused locally returns ErrThrottled without touching the network; a retry
// refused locally is simply not made. The window is a ring of at most 120
// buckets (one second wide for windows up to 2 minutes, wider for longer
// windows) with running totals: bounded memory, amortised O(1) per attempt,
// no goroutine and no timer.
//
// One Transport holds one budget and one throttle: use one Transport per
// service (as gRPC does per channel), so that one failing service does not
// throttle calls to another.
//
// A Transport starts no goroutine. It is safe for concurrent use; its shared
// state is guarded by one mutex held only for a few arithmetic operations.
package client
