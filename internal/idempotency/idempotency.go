// Package idempotency is levee's one rule for which requests may be sent
// more than once: the proxy's retry decision (internal/proxy), the fast
// path's resend on a stale pooled connection (internal/upstream) and the
// public client's retries (client) all read it here, so that the three
// cannot disagree.
//
// A request may be sent again when its method is idempotent (RFC 9110,
// section 9.2.2: GET, HEAD, OPTIONS, TRACE, PUT, DELETE), or when it
// carries an idempotency key: an Idempotency-Key (or the older
// X-Idempotency-Key) field whose value is not empty. An empty value is not
// a key (draft-ietf-httpapi-idempotency-key-header: the key is a
// non-empty string the client makes unique), so a POST with
// "Idempotency-Key:" is not retried once sent. Only the first field line
// of each name is read, as http.Header.Get reads it.
//
// Whether the body can be sent again is the caller's question (a buffered
// or rewindable body), not this package's.
package idempotency

import "net/http"

// Method reports whether method is idempotent (RFC 9110, section 9.2.2).
// The method is as sent, case-sensitive; "" is not a method here (net/http's
// client reads it as GET: its callers map it first).
func Method(method string) bool {
	switch method {
	case http.MethodGet, http.MethodHead, http.MethodOptions, http.MethodTrace, http.MethodPut, http.MethodDelete:
		return true
	}
	return false
}

// Key reports whether h carries an idempotency key: a first
// Idempotency-Key or X-Idempotency-Key value that is not empty (nor only
// blanks, which a field value cannot start or end with). h's names are
// canonical (as net/http parses and sets them). No allocation.
func Key(h http.Header) bool {
	return nonEmpty(h["Idempotency-Key"]) || nonEmpty(h["X-Idempotency-Key"])
}

func nonEmpty(v []string) bool {
	if len(v) == 0 {
		return false
	}
	for i := 0; i < len(v[0]); i++ {
		if c := v[0][i]; c != ' ' && c != '\t' {
			return true
		}
	}
	return false
}

// Request reports whether a request with method and header h may be sent
// more than once: an idempotent method, or an idempotency key.
func Request(method string, h http.Header) bool {
	return Method(method) || Key(h)
}
